"""The whole workflow, end to end, through Snakemake on the tiny test config."""

import json
import subprocess

import darshan
import pyarrow.parquet as pq
import pytest
from conftest import REPO, snakemake
from factories import one_rank_budget_gb

from iosweep.analysis import analyze_run
from iosweep.analysis.parts.plan import plan
from iosweep.trace.ingest import ingest
from iosweep.trace.schema import STORE_TABLES

pytestmark = pytest.mark.integration


def test_wrong_config_key_stops_with_the_key_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("sweep:\n  procs_per_nodes: [2]\n")
    proc = snakemake("--configfile", str(bad), "-n", check=False)
    assert proc.returncode != 0
    assert "unknown config key 'sweep.procs_per_nodes'" in proc.stdout + proc.stderr


def _untracked() -> set[str]:
    """Files in the checkout that git would see (neither tracked nor ignored)."""
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return {ln[3:] for ln in out.splitlines() if ln.startswith("??")}


def test_tiny_sweep_end_to_end(tmp_path):
    before = _untracked()
    results = tmp_path / "results"
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text((REPO / "tests" / "configs" / "tiny.yaml").read_text() + f"results: {results}\n")
    snakemake("--cores", "2", "--configfile", str(cfg))

    runs = sorted((results / "runs").glob("framework~pytorch/nodes~1/ppn~*/rep~0"))
    assert [r.parent.name for r in runs] == ["ppn~1", "ppn~2"]
    for run in runs:
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["status"] == "ok", manifest["reason"]
        ppn = manifest["params"]["ppn"]
        assert len(manifest["ranks"]) == ppn
        assert len(list((run / "traces").glob("rank-*"))) == ppn
        meta = json.loads((run / "store" / "run.json").read_text())
        assert sorted(r["rank"] for r in meta["ranks"]) == list(range(ppn))
        assert (run / "analysis" / "summary.json").exists()
    assert (results / "sweep" / "sweep.csv").exists()
    report = results / "report" / "report.html"
    assert report.exists() and report.stat().st_size > 10_000
    # every rule left a benchmark file
    assert list((results / "benchmarks").rglob("*.tsv"))
    # a second run has nothing to do
    proc = snakemake("--cores", "2", "--configfile", str(cfg), "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    # the run wrote nothing into the checkout that .gitignore does not cover
    assert _untracked() == before


def test_existing_logs_through_the_workflow(tmp_path, shared_data):
    """ingest.enabled: Darshan logs the workflow did not produce go through ingest, analysis, report."""
    results = tmp_path / "results"
    pt = shared_data / "horovod-pytorch-mnist"
    tf = shared_data / "horovod-tf2-mnist"
    cfg = tmp_path / "ingest.yaml"
    cfg.write_text(
        f"results: {results}\n"
        "ingest:\n"
        "  enabled: true\n"
        "  merged_log: true\n"
        "  runs:\n"
        f"    pytorch-np4: {{logs: [{pt / 'darshan-np4'}], params: {{framework: pytorch, nodes: 1, ppn: 4}}}}\n"
        f"    tf2-np4: {{logs: [{tf / 'darshan-np4'}], params: {{framework: tensorflow, nodes: 1, ppn: 4}}}}\n"
        f"    dlio: {{logs: [{shared_data / 'darshan-logs' / 'dlio_logs'}]}}\n"
    )
    proc = snakemake("--cores", "2", "--configfile", str(cfg))
    # the end of the sweep: each run's answer on the terminal, with its timeline
    said = proc.stdout + proc.stderr
    for run in ("external~pytorch-np4", "external~tf2-np4", "external~dlio"):
        assert f"{run}: complete" in said
        assert f"{results / 'runs' / run / 'analysis' / 'timeline.json.gz'}" in said
    meta = json.loads(
        (results / "runs" / "external~pytorch-np4" / "store" / "run.json").read_text()
    )
    assert sorted(r["rank"] for r in meta["ranks"]) == [0, 1, 2, 3]  # from ranks/rank-R.json
    # ingest.merged_log: the per-process logs' merged log, by a rule of its own
    store = results / "runs" / "external~pytorch-np4" / "store"
    assert (store / "merged-log.txt").read_text().splitlines()[0] == str(store / "merged.darshan")
    with darshan.DarshanReport(str(store / "merged.darshan"), read_all=False) as rep:
        assert rep.metadata["job"]["nprocs"] == 4
    dlio = json.loads(
        (results / "runs" / "external~dlio" / "analysis" / "summary.json").read_text()
    )
    assert dlio["access"]["dataset"]["read"] is not None
    assert not (
        results / "runs" / "external~dlio" / "manifest.json"
    ).exists()  # nothing was trained
    html = (results / "report" / "report.html").read_text()
    assert "pytorch-np4" in html and "dlio" in html
    # labelled runs are placed by framework: shared file against file-per-process
    assert meta["params"] == {"framework": "pytorch", "nodes": 1, "ppn": 4}
    assert "file-per-process" in html and "shared-whole" in html
    assert (results / "report" / "report.html").stat().st_size < 20_000_000


def test_a_run_over_the_budget_is_analysed_in_parts_as_jobs(tmp_path, shared_data):
    """analysis.memory_gb below a run's need: the workflow cuts it into parts of whole ranks
    (checkpoint plan_analysis), analyses each as its own job (rule analyze_part) and puts
    them together (rule analyze_run) into the summary the run analysed whole has. Its logs
    are read in parts too (ingest.parts: rule ingest_part), into the store one job makes."""
    logs = shared_data / "horovod-pytorch-mnist" / "darshan-np4"
    store = tmp_path / "store"
    ingest([logs], store)
    memory_gb = one_rank_budget_gb(store)  # one rank fits, two do not
    assert [p.ranks for p in plan(store, memory_gb)] == [[0], [1], [2], [3]]
    results = tmp_path / "results"
    cfg = tmp_path / "parts.yaml"
    cfg.write_text(
        f"results: {results}\n"
        f"analysis: {{memory_gb: {memory_gb!r}}}\n"
        "ingest:\n"
        "  enabled: true\n"
        "  merged_log: true\n"
        "  parts: 2\n"
        "  runs:\n"
        f"    pytorch-np4: {{logs: [{logs}], params: {{framework: pytorch, nodes: 1, ppn: 4}}}}\n"
    )
    snakemake("--cores", "2", "--configfile", str(cfg))
    run = results / "runs" / "external~pytorch-np4"
    read = sorted(p.name for p in (results / "benchmarks" / "ingest").glob("*.tsv"))
    assert read == [f"external~pytorch-np4{n}.tsv" for n in (".part-0000", ".part-0001", "")]
    assert not (run / "ingest-parts" / "part-0000").exists()  # temp(): gone once put together
    assert json.loads((run / "store" / "inputs.json").read_text())["parts"] == 2
    for name in STORE_TABLES:  # the store one job made of the same logs
        assert pq.read_table(run / "store" / f"{name}.parquet").equals(
            pq.read_table(store / f"{name}.parquet")
        ), name
    benchmarks = sorted(p.name for p in (results / "benchmarks" / "analyze").glob("*.tsv"))
    assert benchmarks == [f"external~pytorch-np4.{n}.tsv"
                          for n in ("part-0000", "part-0001", "part-0002", "part-0003", "plan")
                          ] + ["external~pytorch-np4.tsv"]  # fmt: skip
    assert not (run / "analysis-parts" / "part-0000").exists()  # temp(): gone once put together
    parts = json.loads((run / "analysis" / "summary.json").read_text())
    whole = analyze_run(run / "store", tmp_path / "whole")  # the same store, analysed whole
    for key in ("headline", "classes", "pipeline", "checkpoints", "sizes"):
        assert json.dumps(parts[key], sort_keys=True) == json.dumps(whole[key], sort_keys=True), key
    assert (
        parts["timeline"] == whole["timeline"]
        and (run / "analysis" / parts["timeline"]["file"]).is_file()
    )
    assert (results / "report" / "report.html").exists()
