"""The HTML report, rendered from the shared Horovod MNIST traces: ingest -> analyze -> report.

What it must say: PyTorch reads shared files whole on every rank, TensorFlow one file per
rank, rank 0 alone writes checkpoints, failed and skipped runs with their reason, how it was
made; escaping, anonymization, the size budget at millions of segments, the browser check.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import markupsafe
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from browser import CDP, chromium
from factories import synthetic_store

from iosweep import analysis
from iosweep.notebook import find_analyses
from iosweep.report import ReportSettings, render_report
from iosweep.report.anonymize import Anonymizer
from iosweep.report.data import slugify
from iosweep.report.plots import ops_sample
from iosweep.sampling import allocate
from iosweep.trace import ingest as ingest_mod

# The user and prefixes the test manifests mention, which --anonymize must hide.
USER = "alice"
HOME = f"/home/{USER}/iosweep"

# (framework, fixture folder, traces, nodes, ppn)
RUNS = [
    ("pytorch", "horovod-pytorch-mnist", "darshan-np1", 1, 1),
    ("pytorch", "horovod-pytorch-mnist", "darshan-np2", 1, 2),
    ("pytorch", "horovod-pytorch-mnist", "darshan-np4", 1, 4),
    ("pytorch", "horovod-pytorch-mnist", "darshan-2nodes-np4", 2, 2),
    ("tensorflow", "horovod-tf2-mnist", "darshan-np2", 1, 2),
    ("tensorflow", "horovod-tf2-mnist", "darshan-np4", 1, 4),
]
SKIP_REASON = "no Horovod tensorflow stack found (run `tools/setup.sh --with-tensorflow`)"
FAIL_REASON = "launcher exited with code 1; failed ranks: [5]; see log_tail"


def _manifest(framework: str, nodes: int, ppn: int, status: str = "ok", reason: str = "") -> dict:
    """A run manifest as iosweep.run.runner writes it (the shared traces came without one)."""
    run_id = f"framework~{framework}/nodes~{nodes}/ppn~{ppn}/rep~0"
    py = f"{HOME}/.venv/bin/python"
    module = {
        "pytorch": "iosweep.run.training.pytorch_mnist",
        "tensorflow": "iosweep.run.training.tensorflow2_mnist",
    }
    return {
        "run_id": run_id,
        "params": {
            "framework": framework,
            "tracer": "darshan",
            "nodes": nodes,
            "ppn": ppn,
            "epochs": 2,
            "steps": 60,
            "batch_size": 64,
            "rep": 0,
            "ranks": nodes * ppn,
        },
        "status": status,
        "reason": reason,
        "host": "vm",
        "start_time": None,
        "launcher": "mpirun",
        "tracer": {
            "name": "darshan",
            "version": "3.5.0",
            "library": f"{HOME}/darshan/lib/libdarshan.so",
            "env": {"DARSHAN_ENABLE_NONMPI": "1", "DXT_ENABLE_IO_TRACE": "1"},
        },
        "versions": {
            "iosweep": "0.1.0",
            "horovod": "0.28.1",
            "darshan": "3.5.0",
            ("torch" if framework == "pytorch" else "tensorflow"): "2.13.0"
            if framework == "pytorch"
            else "2.15.1",
        },
        "command": [
            "mpirun",
            "-np",
            str(nodes * ppn),
            py,
            "-m",
            "iosweep.run.rank_wrapper",
            "--run-dir",
            f"{HOME}/results/runs/{run_id}",
            "--",
            py,
            "-m",
            module[framework],
            "--data",
            "/scratch/hvd-mnist/data",
        ],
        "dataset": "/scratch/hvd-mnist/data",
        # what explains the numbers (iosweep.run.hostinfo): a 2-core host, the data on ext4,
        # a quarter of it cached before the 1-process runs, all of it before the others
        "host_info": {
            "cpus": 2,
            "memory_bytes": 24 * 2**30,
            "data_fs": "ext4",
            "data_page_cache_share": 0.25 if ppn == 1 else 1.0,
        },
        "data": {
            "workload": "mnist",
            "source": "synthetic",
            "status": "ok",
            "files": 4,
            "bytes": 55_000_000,
        },
    }


@pytest.fixture(scope="module")
def sweep(shared_data: Path, tmp_path_factory) -> dict:
    """Every run ingested and analysed as the workflow does, plus a failed and a skipped point."""
    root = tmp_path_factory.mktemp("sweep")
    summaries = []
    for framework, folder, traces, nodes, ppn in RUNS:
        src = shared_data / folder / traces
        man = _manifest(framework, nodes, ppn)
        run = root / "runs" / man["run_id"]
        run.mkdir(parents=True)
        (run / "manifest.json").write_text(json.dumps(man))
        ingest_mod.ingest(
            [src], run / "store", manifest=run / "manifest.json", run_id=man["run_id"]
        )
        analysis.analyze_run(run / "store", run / "analysis")
        summaries.append(run / "analysis" / "summary.json")
    for framework, ppn, status, reason in (
        ("tensorflow", 1, "skipped", SKIP_REASON),
        ("pytorch", 8, "failed", FAIL_REASON),
    ):
        man = _manifest(framework, 1, ppn, status, reason)
        run = root / "runs" / man["run_id"]
        run.mkdir(parents=True)
        (run / "manifest.json").write_text(json.dumps(man))
        ingest_mod.ingest(
            [run], run / "store", manifest=run / "manifest.json", run_id=man["run_id"]
        )
        analysis.analyze_run(run / "store", run / "analysis")
        summaries.append(run / "analysis" / "summary.json")
    analysis.analyze_sweep(summaries, root / "sweep")
    config = {
        "results": f"{HOME}/results",
        "sweep": {"frameworks": ["pytorch", "tensorflow"]},
        "report": {},
    }
    out = render_report(
        [s.parent for s in summaries],
        root / "sweep",
        root / "report" / "report.html",
        ReportSettings(title="Horovod MNIST <I/O> test"),
        config=config,
    )
    return {
        "root": root,
        "html": out,
        "text": out.read_text(),
        "dirs": [s.parent for s in summaries],
        "config": config,
    }


def _text(page: str) -> str:
    """The report's visible text, tags stripped and entities decoded."""
    t = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    t = re.sub(r'src="data:[^"]*"', "", t)
    t = re.sub(r"<[^>]+>", " ", t)
    return re.sub(r"\s+", " ", html.unescape(t))


def _section(page: str, sid: str) -> str:
    """The element with id ``sid``, up to its own closing tag (nested ones included)."""
    m = re.search(rf'<(section|details)[^>]*id="{re.escape(sid)}"', page)
    assert m, f"no section {sid}"
    tag, depth = m.group(1), 1
    for t in re.finditer(rf"<(/?){tag}\b", page[m.end() :]):
        depth += -1 if t.group(1) else 1
        if depth == 0:
            return page[m.start() : m.end() + t.start()]
    return page[m.start() :]


# --- what the report says ------------------------------------------------------------------
def test_overview_names_runs_failures_and_findings(sweep):
    page = sweep["text"]
    ov = _text(_section(page, "overview"))
    assert "Horovod MNIST <I/O> test" in _text(page[: page.find("</header>")])
    assert "frameworks pytorch, tensorflow" in ov
    assert "nodes 1, 2" in ov and "ranks 1, 2, 4, 8" in ov
    # failed and skipped runs, each with the reason its manifest gave
    assert "failed" in ov and FAIL_REASON in ov
    assert "skipped" in ov and SKIP_REASON in ov
    # headline findings carry their numbers
    assert "Only rank 0 writes checkpoints" in ov
    assert "The same bytes are read by many ranks" in ov
    assert re.search(r"in \d+ of 6 analysed runs", ov)
    assert "mpirun -np 4" in ov  # the commands


def test_pytorch_shared_files_and_rank0_checkpoints(sweep):
    run = _text(_section(sweep["text"], "run-" + slugify("framework~pytorch/nodes~1/ppn~4/rep~0")))
    assert "dataset reads: shared-whole" in run
    assert "4 of 4 ranks, up to 4 ranks per file" in run
    assert "Checkpoints written by rank 0 only: 2 files" in run
    assert "Only rank 0 writes checkpoints" in run
    # the per-file table lists the four IDX files, each read by all four ranks
    for name in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        assert re.search(rf"/scratch/hvd-mnist/data/{name} dataset [\d.]+ [kM]B", run), name
    assert "train-images-idx3-ubyte dataset 47.0 MB 188.2 MB 0 B 8 0 4 0 shared-whole" in run
    # spatial and temporal plots, request sizes
    for fig in ("spatial", "temporal", "sizes"):
        assert f"figures/runs/{slugify('framework~pytorch/nodes~1/ppn~4/rep~0')}/{fig}.png" in run


def test_tensorflow_file_per_process(sweep):
    run = _text(
        _section(sweep["text"], "run-" + slugify("framework~tensorflow/nodes~1/ppn~4/rep~0"))
    )
    assert "dataset reads: file-per-process" in run
    assert "up to 1 rank per file, up to 1 file per rank" in run
    for r in range(4):
        assert f"/scratch/hvd-mnist/data/mnist-{r}.npz" in run
    fw = _text(_section(sweep["text"], "frameworks"))
    assert "dataset: shared-whole" in fw and "dataset: file-per-process" in fw
    assert "figures/frameworks/frameworks.png" in fw


def test_sweep_comparison_and_nodes(sweep):
    sw = _text(_section(sweep["text"], "sweep"))
    assert "figures/sweep/scaling_ranks.png" in sw and "figures/sweep/scaling_nodes.png" in sw
    # bytes read per rank stay the same for PyTorch: the sampler splits indices, not I/O;
    # with one run per point the report shows the values, and fits no trend word to them
    m = re.search(r"Bytes read, busiest rank (.*?) Bytes read in total", sw)
    assert m and "55.0 MB → 55.0 MB → 55.0 MB" in m.group(1), sw[:3000]
    assert "one run per point: no trend fitted" in m.group(1) and "flat" not in m.group(1)
    # the two-node run: rank labels name the nodes; per-node figure
    two = _section(sweep["text"], "run-" + slugify("framework~pytorch/nodes~2/ppn~2/rep~0"))
    assert "simnode1" in two and "simnode2" in two
    assert "nodes.png" in two
    index = json.loads((sweep["html"].parent / "figures" / "figures.json").read_text())
    spatial2 = next(
        f
        for f in index
        if f["file"].endswith(slugify("framework~pytorch/nodes~2/ppn~2/rep~0") + "/spatial.png")
    )
    assert any("simnode2" in t for t in spatial2["texts"])


def test_the_report_tells_the_truth(sweep):
    page = sweep["text"]
    tf4 = _text(_section(page, "run-" + slugify("framework~tensorflow/nodes~1/ppn~4/rep~0")))
    # the TF np4 imbalance: a share and a list of ranks, in the analysis' own units
    assert "io time spread: 78.6%; stragglers: 0; threshold share: 30.0%" in tf4
    assert not re.search(r"io_time=\d", page)
    # no run is said to be "traced completely" while some lack a manifest's steps etc.
    fw = _text(_section(page, "frameworks"))
    m = re.search(r"median read size (.*?) small read share", fw)
    assert m and "0 B" not in m.group(1).split()
    # empty scaling panels are named, not drawn (these runs have no steps: no AU)
    sw = _text(_section(page, "sweep"))
    assert "Left out of the figure, with no value or zero in every run:" in sw
    assert "Accelerator utilisation (MLPerf-Storage-style)" in sw.split("Left out of the figure")[1]
    # the largest run with I/O is the one open
    assert re.search(r'<details class="run" id="run-pytorch_nodes2_ppn2_rep0" open>', page)
    assert len(re.findall(r'<details class="run"[^>]* open>', page)) == 1
    # the verdict comes first; these logs carry no steps, so it says what it cannot know
    first = _text(page[page.find('id="overview"') : page.find("What was run")])
    assert "Whether training waits for its data: not known" in first
    assert "Where the I/O happens:" in first


def test_provenance(sweep):
    prov = _text(_section(sweep["text"], "provenance"))
    assert "iosweep 0.1.0" in prov
    assert re.search(r"commit [0-9a-f]{40}|not a git checkout", prov)
    assert "horovod 0.28.1" in prov
    assert "DXT_ENABLE_IO_TRACE" in prov  # tracer settings
    assert f"results: {HOME}/results" in prov  # the config as given
    assert "iosweep.run.training.pytorch_mnist" in prov  # exact commands
    assert "max_points_per_plot: 200000" in prov


def test_an_mpi_jobs_report_speaks_its_own_language(shared_data, tmp_path):
    # mpi_io_test: 32 MPI ranks, no framework, no training steps (README of the fixture)
    src = shared_data / "darshan-logs" / "mpi_io_test_with_dxt"
    ingest_mod.ingest([src], tmp_path / "store")
    analysis.analyze_run(tmp_path / "store", tmp_path / "analysis")
    raw = render_report([tmp_path / "analysis"], None, tmp_path / "r.html").read_text()
    page, first = _text(raw), _text(_section(raw, "overview"))
    assert "The I/O only: these logs record no compute phases" in first
    assert "GB written over the run; I/O in progress" in first
    for dl in ("before training", "DataLoader", "TFRecord", "prefetch", "(unknown)", "AU:"):
        assert dl not in page, dl
    # the advice of its field instead
    assert "collective MPI-IO" in first
    # nothing to compare frameworks on: no such section (test_mpi checks every word)
    assert 'id="frameworks"' not in raw and "training" not in page
    # every rule's outcome under the verdict, with its reason: the independent writes under
    # the 1,000-call floor (128 of 128, the README's 32 ranks x 4) are said, not left out
    sm = json.loads((tmp_path / "analysis" / "summary.json").read_text())
    assert "Checks:" in page and len(sm["checks"]) >= 20
    for c in sm["checks"]:
        assert str(markupsafe.escape(c["reason"])) in raw, c["id"]  # as jinja2 escapes
    assert (
        "128 of 128 MPI-IO writes (100.0%) are independent calls: too few to matter "
        "(floor: more than 1,000)" in page
    )


def test_what_was_run_says_what_explains_the_numbers(sweep):
    # figures from the manifests above: at most 8 ranks per node on 2 cores = 4.0 per core
    ov = _text(_section(sweep["text"], "overview"))
    run = ov[ov.index("What was run") :]
    assert "host cores 2 " in run
    assert "processes per core up to 4.0 (ranks x (1 + loader workers) per node / cores); " \
        "oversubscribed: ranks and workers share cores" in run  # fmt: skip
    assert "datasets mnist: synthetic, 4 files, 55.0 MB" in run
    assert "data file system ext4" in run
    assert "data in the page cache before a run 25% to 100% of a sample of the files" in run


def test_figures_written_and_embedded(sweep):
    figdir = sweep["html"].parent / "figures"
    index = json.loads((figdir / "figures.json").read_text())
    assert len(index) >= 6 * 3 + 2
    page = sweep["text"]
    for f in index:
        png = (sweep["html"].parent / f["file"]).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert f["embedded"]
        assert base64.b64encode(png).decode() in page  # the same image, embedded
    # self-contained: nothing to fetch, no script
    assert not re.search(r"""(src|href)=["'](https?:)?//""", page)
    assert "<script" not in page.lower()
    assert sweep["html"].stat().st_size < 20e6


@pytest.mark.slow
def test_size_budget_links_what_does_not_fit(sweep, tmp_path):
    out = render_report(
        sweep["dirs"],
        sweep["root"] / "sweep",
        tmp_path / "small.html",
        ReportSettings(max_html_mb=1),
    )
    assert out.stat().st_size <= 1e6
    index = json.loads((tmp_path / "figures" / "figures.json").read_text())
    linked = [f for f in index if not f["embedded"]]
    assert linked and len(linked) < len(index)
    # the sweep's figures come first and stay; linked ones are still there as files
    assert all(f["embedded"] for f in index if f["file"].startswith("figures/sweep/"))
    page = out.read_text()
    assert f"{len(linked)} figures are linked rather than embedded" in page
    for f in linked:
        assert (tmp_path / f["file"]).stat().st_size > 1000
        assert f'<a href="{f["file"]}">' in page


# --- anonymization and escaping -------------------------------------------------------------
@pytest.mark.slow
def test_anonymize_hides_user_and_prefixes(sweep, tmp_path):
    out = render_report(
        sweep["dirs"],
        sweep["root"] / "sweep",
        tmp_path / "anon.html",
        ReportSettings(anonymize=True),
        config=sweep["config"],
    )
    page = out.read_text()
    index = (tmp_path / "figures" / "figures.json").read_text()
    for secret in (USER, "/home/", "/scratch/hvd-mnist"):
        assert secret not in page, secret
        assert secret not in index, secret
    # the macros' output (figures, tables) is HTML, not text: anonymizing must not escape it
    assert "&lt;figure" not in page and "&lt;td" not in page
    assert page.count("<figure>") == json.loads(index).__len__()
    txt = _text(page)
    assert "<data>/train-images-idx3-ubyte" in txt or "<dataset>/train-images-idx3-ubyte" in txt
    assert "~/iosweep/.venv/bin/python" in txt or "<repo>" in txt
    # figures' own texts (titles, tick labels) went through it too: file names keep their base
    assert "read shared-whole" in index


def test_series_names_say_unset_parameters_and_whole_numbers():
    # the fixture logs (no parameters) beside a workflow run (batch 64, 2 epochs): pandas
    # carried the numbers as floats and the missing ones as None or NaN
    from iosweep.report.sections.overview import series_name

    logs = {"framework": None, "batch_size": None, "epochs": float("nan"), "tracer": "darshan"}
    run = {"framework": "pytorch", "batch_size": 64.0, "epochs": 2.0, "tracer": "darshan"}
    keys = [logs, run]
    assert series_name(logs, keys) == "batch_size=unset epochs=unset"
    assert series_name(run, keys) == "pytorch batch_size=64 epochs=2"
    assert series_name({"framework": None}, [{"framework": None}]) == "all runs"


def test_anonymizer_unit():
    a = Anonymizer(
        users=["bob", "root"], prefixes={"/home/bob": "~", "/gpfs/proj/bob/data": "<data>"}
    )
    assert a("/gpfs/proj/bob/data/x.bin and /home/bob/.venv") == "<data>/x.bin and ~/.venv"
    assert a("bob@host: --user=bob, bobby") == "user@host: --user=user, bobby"
    assert a("--allow-run-as-root /root") == "--allow-run-as-root /root"  # root is nobody's name
    assert (
        a("/gpfs/proj/bob/database") == "/gpfs/proj/user/database"
    )  # a prefix ends at a separator


EVIL = "<script>alert(1)</script>"


def test_names_from_traces_are_escaped(tmp_path):
    evil_path = f"/data/{EVIL}"
    store = synthetic_store(
        tmp_path / "store",
        2000,
        [evil_path, "/data/$x$ and 'q' \"dq\".bin"],
        host='<img src=x onerror="alert(2)">',
        command=["mpirun", "-np", "4", "python", f"--data={EVIL}"],
        manifest={"reason": EVIL, "host": EVIL},
    )
    analysis.analyze_run(store, tmp_path / "analysis")
    # an analysis that is not there is listed, not a crash
    out = render_report(
        [tmp_path / "analysis", tmp_path / "gone"],
        None,
        tmp_path / "r.html",
        ReportSettings(title=EVIL),
    )
    page = out.read_text()
    assert re.search(r"gone</td><td><span class=\"badge failed\">unreadable", page)
    assert "<script" not in page.lower()
    assert "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert f"/data/{EVIL}" in _text(page)  # shown, as text, in the file table and elsewhere
    # the '$' of a file name did not trip matplotlib's math text: the figures were drawn
    index = json.loads((tmp_path / "figures" / "figures.json").read_text())
    assert {Path(f["file"]).name for f in index} >= {"spatial.png", "temporal.png", "sizes.png"}


def test_epochs_and_overlap_with_compute(tmp_path):
    # Two epochs of 5 steps per rank, as the runner's manifest records them; the checkpoint
    # writes (t = 50 s) fall between the epochs.
    rows = [
        (r, e, k, e * 50.0 + 1 + max(k, 0) * 9, e * 50.0 + (49 if k < 0 else 9 + k * 9))
        for r in range(4)
        for e in range(2)
        for k in range(-1, 5)
    ]
    cols = list(zip(*rows, strict=True))
    steps = pa.table(
        {
            "rank": pa.array(cols[0], pa.int32()),
            "epoch": pa.array(cols[1], pa.int32()),
            "step": pa.array(cols[2], pa.int32()),
            "start": pa.array(cols[3], pa.float64()),
            "end": pa.array(cols[4], pa.float64()),
        }
    )
    store = synthetic_store(tmp_path / "store", 3000, ["/data/a.bin", "/data/b.bin"], steps=steps)
    analysis.analyze_run(store, tmp_path / "analysis")
    out = render_report([tmp_path / "analysis"], None, tmp_path / "r.html")
    run = _text(
        _section(out.read_text(), "run-" + slugify("framework~pytorch/nodes~1/ppn~4/rep~0"))
    )
    assert "I/O and compute Compute known from steps." in run
    assert re.search(r"epoch duration \(longest rank\).* 0 48.00 s .* 1 48.00 s ", run)
    assert not re.search(r"; 0 s of I/O fell outside the epochs", run)  # reads run from t = 0
    index = json.loads((tmp_path / "figures" / "figures.json").read_text())
    texts = {Path(f["file"]).name: f["texts"] for f in index}
    assert {"epoch 0", "epoch 1", "checkpoint"} <= set(texts["temporal.png"])
    assert "exposed (in epochs, no compute)" in texts["overlap.png"]


def test_checkpoints_the_tracer_missed(tmp_path):
    zero = 1.7e9  # the synthetic store's clock_zero
    manifest = {
        "phases": {
            "0": {"load-train": [zero + 1, zero + 2], "checkpoint-0": [zero + 40.0, zero + 40.2],
                  "checkpoint-1": [zero + 80.0, zero + 80.3]},
            "1": {"load-train": [zero + 1, zero + 2]},
        },
        "outputs": [{"path": "/r/checkpoints/checkpoint-0.pt", "size": 61135},
                    {"path": "/r/checkpoints/checkpoint-1.pt", "size": 61135}],
    }  # fmt: skip
    store = synthetic_store(
        tmp_path / "store", 2000, ["/data/a.bin"], checkpoint_writes=False, manifest=manifest
    )
    analysis.analyze_run(store, tmp_path / "analysis")
    out = render_report([tmp_path / "analysis"], None, tmp_path / "r.html")
    run = _text(
        _section(out.read_text(), "run-" + slugify("framework~pytorch/nodes~1/ppn~4/rep~0"))
    )
    assert (
        "Checkpoints saved by rank 0 only (by the training script's own record, not in the trace): "
        "2 saves at 40.0 s, 80.0 s from the run start; 2 files, 122.3 kB on disk"
    ) in run
    assert "the trace holds 0 B of checkpoint writes: the tracer missed writes" in run
    index = json.loads((tmp_path / "figures" / "figures.json").read_text())
    temporal = next(f for f in index if f["file"].endswith("temporal.png"))
    assert "checkpoint" in temporal["texts"]


# --- scale ------------------------------------------------------------------------------------
def test_sampling_keeps_rare_strata():
    q = allocate(np.array([1_999_000, 2, 998]), 200_000)
    assert q.sum() <= 200_000 and q[1] == 2 and q[2] == 998
    assert allocate(np.array([10, 20]), 100).tolist() == [10, 20]


@pytest.mark.slow
def test_two_million_segments_stay_under_20_mb(tmp_path):
    n = 2_000_000
    paths = [f"/data/shard-{i:03d}.bin" for i in range(64)]
    store = synthetic_store(tmp_path / "store", n, paths)
    sm = analysis.analyze_run(store, tmp_path / "analysis")
    settings = ReportSettings(max_points_per_plot=100_000)
    # the analysis keeps plot_sample_ops (200,000) operations; the report draws 100,000 of them
    info = sm["ops_sample"]
    assert info["shown"] == 200_000 and info["total"] == n + 2
    sample = ops_sample(
        pd.read_parquet(tmp_path / "analysis" / "ops_sample.parquet"),
        info["total"],
        info["excluded"],
        settings.max_points_per_plot,
    )
    assert sample.total == n + 2 and sample.shown <= 100_000
    assert int(sample.write.sum()) == 2  # rank 0's checkpoint writes survive sampling
    out = render_report([tmp_path / "analysis"], None, tmp_path / "big.html", settings)
    size = out.stat().st_size
    assert size < 20e6, size
    page = _text(out.read_text())
    assert "Sampled: 100,000 of 2,000,002 operations shown" in page or re.search(
        r"Sampled: [\d,]+ of 2,000,002 operations", page
    )


# --- command line -----------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_finds_analyses_and_prints_the_path(sweep, tmp_path, capsys):
    from iosweep.cli import main

    out = tmp_path / "cli" / "report.html"
    rc = main(
        [
            "report",
            str(sweep["root"] / "runs" / "framework~pytorch"),
            "--sweep",
            str(sweep["root"] / "sweep"),
            "-o",
            str(out),
            "--title",
            "CLI report",
        ]
    )
    assert rc == 0
    assert capsys.readouterr().out.strip() == str(out.resolve())
    page = out.read_text()
    assert "CLI report" in page and "tensorflow 4 ranks" not in page
    dirs, found = find_analyses([sweep["root"]])
    assert len(dirs) == 8 and found is None


# --- the browser --------------------------------------------------------------------------------
@pytest.mark.browser
def test_report_loads_in_chromium_without_errors(sweep, tmp_path):
    cdp = CDP(chromium(), tmp_path / "profile")
    try:
        target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            cdp.call(f"{domain}.enable", session=s)
        cdp.call("Page.navigate", {"url": sweep["html"].resolve().as_uri()}, session=s)
        cdp.wait_event("Page.loadEventFired")
        # Every figure decodes (lazy ones included: made eager first) to a real image.
        images = cdp.call(
            "Runtime.evaluate",
            {
                "expression": "Promise.all(Array.from(document.images).map(i => { i.loading = 'eager'; "
                "return i.decode().then(() => [i.naturalWidth, i.naturalHeight, i.alt], "
                "e => [0, 0, i.alt + ': ' + e]); }))",
                "awaitPromise": True,
                "returnByValue": True,
            },
            session=s,
        )["result"]["value"]
        headings = cdp.call(
            "Runtime.evaluate",
            {
                "expression": "Array.from(document.querySelectorAll('h2')).map(h => h.textContent)",
                "returnByValue": True,
            },
            session=s,
        )["result"]["value"]
        shot = cdp.call("Page.captureScreenshot", {"format": "png"}, session=s)["data"]
    finally:
        cdp.close()
    (tmp_path / "report.png").write_bytes(base64.b64decode(shot))
    print(f"screenshot: {tmp_path / 'report.png'}")
    errors = [
        e["params"]
        for e in cdp.events
        if e.get("method") == "Runtime.exceptionThrown"
        or (
            e.get("method") == "Runtime.consoleAPICalled"
            and e["params"].get("type") in ("error", "assert")
        )
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
    ]
    assert not errors, errors
    index = json.loads((sweep["html"].parent / "figures" / "figures.json").read_text())
    assert len(images) == len(index)
    assert all(w > 300 and h > 150 for w, h, _alt in images), images
    assert headings == [
        "Overview",
        "Sweep comparison",
        "Frameworks side by side",
        "Runs",
        "Provenance",
    ]


def test_plot_size_colours_follow_darshans_bins():
    # grey for zero-byte reads, then Darshan's bins, each holding its upper bound
    sizes = [0, 1, 100, 101, 1024, 1025, 1 << 20, (1 << 20) + 1, 1 << 30, (1 << 30) + 1]
    assert ops_sample.__module__ == "iosweep.report.plots.ops"
    from iosweep.report.plots import size_bin

    assert size_bin(np.array(sizes)).tolist() == [0, 1, 1, 2, 2, 3, 5, 6, 9, 10]


# Hostile text without a '/': a base name, a directory, a host, a run id, a config value
BASE = "<img src=x onerror=alert(7)>"
DIR = "<b onmouseover=alert(8)>"
HOST = "<svg onload=alert(9)>"
RUN = "<i onclick=alert(10)>"
CONF = "<u onclick=alert(11)>"


def test_hostile_text_reaches_every_cell_escaped(tmp_path):
    store = synthetic_store(
        tmp_path / "store",
        3000,
        [f"/data/{BASE}.bin", f"/data/{DIR}/shard.bin", f"/data/{DIR}/{BASE}"],
        host=HOST,
        run_id=f"framework~pytorch/{RUN}/rep~0",
        manifest={"reason": RUN, "host": HOST, "params": {"label": CONF}},
    )
    analysis.analyze_run(store, tmp_path / "analysis")
    config = {"report": {"title": CONF}, "sweep": {"frameworks": [CONF]}, "note": CONF}
    page = render_report(
        [tmp_path / "analysis"], None, tmp_path / "r.html", ReportSettings(title=CONF), config
    ).read_text()
    for raw in (BASE, DIR, HOST, RUN, CONF):
        assert raw not in page, raw
        assert html.escape(raw, quote=False) in page or html.escape(raw) in page, raw
    text = _text(page)
    # each reached the page as text: the file table and signatures (base names), the
    # directories, the hosts, the run's label, the config as given
    assert f"{BASE}.bin" in text and f"{DIR}" in text and HOST in text and CONF in text
    sig = _text(_section(page, "runs"))
    assert f"{BASE}.bin" in sig


def test_labels_name_what_tells_runs_apart(tmp_path):
    # four runs alike but for their loader workers and a job's own parameter (lr): labels
    # that said only "pytorch 4 ranks (1 node x 4)" could not be told apart
    from iosweep.report.data import label_runs, load_runs

    dirs = []
    for i, (workers, lr) in enumerate([(0, 0.05), (0, 0.2), (2, 0.05), (2, 0.2)]):
        store = synthetic_store(tmp_path / f"s{i}", 200, ["/data/a.bin"], run_id=f"r{i}")
        analysis.analyze_run(store, tmp_path / f"a{i}")
        sm = json.loads((tmp_path / f"a{i}" / "summary.json").read_text())
        sm["params"] |= {"workload": "mine", "loader_workers": workers, "lr": lr, "epochs": None}
        (tmp_path / f"a{i}" / "summary.json").write_text(json.dumps(sm))
        dirs.append(tmp_path / f"a{i}")
    runs, _ = load_runs(dirs)
    assert sorted(r.label for r in runs) == [
        "pytorch 4 ranks (1 node x 4) · workers 0, lr 0.05",
        "pytorch 4 ranks (1 node x 4) · workers 0, lr 0.2",
        "pytorch 4 ranks (1 node x 4) · workers 2, lr 0.05",
        "pytorch 4 ranks (1 node x 4) · workers 2, lr 0.2",
    ]
    label_runs(runs[:1])  # one run alone: nothing to tell apart
    assert runs[0].label == "pytorch 4 ranks (1 node x 4)"
    # parameters all alike (logs given without them): the differing part of the run ids
    for r, run_id in zip(runs[:2], ["h100_darshan8", "h100_darshan8shm"], strict=True):
        r.summary.run_id, r.summary.params = run_id, dict(runs[0].summary.params)
    label_runs(runs[:2])
    assert [r.label for r in runs[:2]] == [
        "pytorch 4 ranks (1 node x 4) · darshan8",
        "pytorch 4 ranks (1 node x 4) · darshan8shm",
    ]


def test_anonymize_hides_a_users_work_folder_and_interpreter(tmp_path):
    workload = {"name": "mine", "builtin": False, "launch": "mpi", "timing": "hooks",
                "template": "{python} train.py --data {data}", "workdir": "/scratch/proj42/job",
                "python": "/scratch/proj42/venv/bin/python", "env": []}  # fmt: skip
    store = synthetic_store(
        tmp_path / "store", 500, ["/data/a.bin"],
        command=["mpirun", "/scratch/proj42/venv/bin/python", "train.py"],
        manifest={"workload": workload},
    )  # fmt: skip
    analysis.analyze_run(store, tmp_path / "analysis")
    out = render_report([tmp_path / "analysis"], None, tmp_path / "r.html",
                        ReportSettings(anonymize=True))  # fmt: skip
    txt = _text(out.read_text())
    assert "/scratch/proj42" not in txt
    assert "workdir: <workdir>" in txt and "python: <python-env>/bin/python" in txt
    plain = render_report([tmp_path / "analysis"], None, tmp_path / "p.html")
    assert "workdir: /scratch/proj42/job" in _text(plain.read_text())


def test_the_configured_sweep_is_what_the_sweep_ran(tmp_path):
    # issue 50 (item 18): a user's config with one framework and whole epochs, merged over
    # config/config.yaml as Snakemake merges --configfile: the report listed the defaults'
    # "frameworks: pytorch, tensorflow ... steps_per_epoch: 60", values that never applied
    import yaml
    from snakemake.utils import update_config

    from iosweep.config import expand_sweep, validate_config
    from iosweep.report.sections.overview import configured_sweep

    repo = Path(__file__).resolve().parents[1]
    merged = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    # the user's own PyTorch job, in whole epochs (its command takes no steps per epoch)
    (tmp_path / "train.py").write_text("print('a training script')\n")
    job = {"workdir": str(tmp_path), "framework": "pytorch",
           "command": "{python} train.py --epochs {epochs}"}  # fmt: skip
    update_config(merged, {"workloads": {"myjob": job},
                           "sweep": {"workloads": ["myjob"], "include": []}})  # fmt: skip
    validate_config(merged)
    assert merged["sweep"]["frameworks"] == ["pytorch", "tensorflow"]  # (the defaults')
    assert merged["sweep"]["steps_per_epoch"] == [60]
    said = configured_sweep(merged)
    n = len(expand_sweep(merged))
    assert said.startswith(f"{n} points x 1 repeat; frameworks: pytorch; workloads: myjob; ")
    assert "tensorflow" not in said and "steps" not in said
