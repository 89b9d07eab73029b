"""The workflow through `snakemake --profile slurm` against a real SLURM cluster on this machine.

One node (issue 6), and two emulated nodes - network, UTS and mount namespaces with private
/tmp - so that ranks really live on different hosts (issue 7).
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import unavailable
from factories import one_rank_budget_gb

from iosweep.analysis import budget

try:
    from slurm_cluster import skip_reason, slurm_cluster
except ImportError:  # run from the repository root as a package
    from tests.slurm_cluster import skip_reason, slurm_cluster

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"

pytestmark = [pytest.mark.slurm, pytest.mark.integration]


def _tiny_config(tmp_path, extra: dict | None = None, **sweep):
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["sweep"].update(sweep)
    config.update(extra or {})
    config["results"] = str(tmp_path / "results")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, tmp_path / "results"


# Emulated nodes have a private /tmp (node-local, as on a real cluster); the repository (its
# .venv, .snakemake) and the results must stay visible to them even when they live under /tmp,
# as in a CI clone. Shares outside /tmp are visible anyway.


def _run_profile(cluster, config_path):
    """`snakemake --profile slurm` from the repository root, as a user runs it."""
    cmd = [
        str(SNAKEMAKE),
        "--profile",
        "slurm",
        "--slurm-no-account",
        "--configfile",
        str(config_path),
    ]
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=REPO, env=cluster.client_env(), capture_output=True, text=True, timeout=2400
    )
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        raise AssertionError(
            f"snakemake --profile slurm failed after {elapsed:.0f} s:\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-6000:]}\n--- cluster log ---\n{cluster.log_tail()}"
        )
    return proc.stdout + proc.stderr


def _submitted_jobs(output: str) -> dict[str, list[str]]:
    """rule -> SLURM job ids, from Snakemake's 'submitted with SLURM jobid' lines."""
    jobs: dict[str, list[str]] = {}
    for m in re.finditer(r"SLURM jobid (\d+) \(log: \S*/rule_([a-z_]+)/", output):
        jobs.setdefault(m.group(2), []).append(m.group(1))
    return jobs


def _jobcomp(cluster) -> dict[str, dict[str, str]]:
    """SLURM's record of every finished job (jobcomp/filetxt): id -> its fields."""
    text = (cluster.state_dir / "log" / "jobcomp.txt").read_text()
    jobs = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in text.splitlines()]
    return {j["JobId"]: j for j in jobs if "JobId" in j}


def _memory_mb(job: dict[str, str]) -> int:
    """The memory SLURM gave a job (its Tres field: cpu=1,mem=513M,node=1,...), in MB."""
    mem = dict(kv.split("=") for kv in job["Tres"].split(","))["mem"]
    return int(float(mem[:-1]) * (1024 if mem.endswith("G") else 1))


def _check_own_jobs(manifests: list[dict], jobs: dict[str, dict[str, str]]) -> None:
    """Every point ran in a SLURM job of its own, with its nodes, and that job completed."""
    ids = [m["slurm_job_id"] for m in manifests]
    assert all(ids) and len(set(ids)) == len(ids), ids
    for m in manifests:
        job = jobs[m["slurm_job_id"]]
        assert job["JobState"] == "COMPLETED" and job["Name"].startswith("iosweep-"), job
        assert int(job["NodeCnt"]) == m["params"]["nodes"], job


def _manifests(results: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((results / "runs").rglob("manifest.json"))]


def _runs(results: Path) -> list[Path]:
    return sorted((results / "runs").rglob("manifest.json"))


def _is_log(f: Path) -> bool:
    """A log of the run that its ingest reads (not one in its store)."""
    return f.name.endswith((".darshan", ".pfw", ".pfw.gz")) and "store" not in f.parts


def _check_staged_on_each_node(m: dict, run_dir: Path) -> None:
    """One copy per node, into that node's own /tmp, and the ranks read their node's copy."""
    import pandas as pd

    st = m["staging"]
    assert [n["host"] for n in st["nodes"]] == ["simnode1", "simnode2"]
    assert st["dir"].startswith("/tmp/iosweep-") and all(
        n["dest"] == st["dir"] for n in st["nodes"]
    )
    assert all(n["files"] == 32 for n in st["nodes"])
    seg = pd.read_parquet(run_dir / "store" / "segments.parquet")
    jpeg = seg[seg["path"].astype(str).str.endswith(".JPEG")]
    assert len(jpeg) and jpeg["path"].astype(str).str.startswith(st["dir"] + "/").all()
    host_of = {r["rank"]: r["host"] for r in m["ranks"]}
    assert {host_of[r] for r in jpeg["rank"].unique()} == {"simnode1", "simnode2"}
    # the copies lived in the nodes' private /tmp, not in this host's
    assert not Path(st["dir"]).exists()


def _check_memory_asked(results: Path, jobs: dict[str, list[str]], done: dict) -> None:
    """Each run's analysis job was given the memory its store needs (rule analyze_run's mem_mb,
    counted from the store after ingest), not the profile's default; and each ingest job what
    its logs need (a few MiB of logs, held whole: the writer's 256 MiB and 16x the logs'
    bytes, docs/data-model.md "Memory"), summed by hand."""
    needs = sorted(budget.mem_mb(p.parent) for p in (results / "runs").rglob("store/run.json"))
    given = sorted(_memory_mb(done[j]) for j in jobs["analyze_run"])
    assert given == needs and len(needs) == len(_runs(results)), (given, needs)
    logs = [
        sum(f.stat().st_size for f in m.parent.rglob("*") if _is_log(f)) for m in _runs(results)
    ]
    needs = sorted(-(-((256 << 20) + 16 * n) // 2**20) for n in logs)
    given = sorted(_memory_mb(done[j]) for j in jobs["ingest_run"])
    assert given == needs, (given, needs)


def test_a_tune_under_profile_slurm_runs_its_points_as_slurm_jobs(tmp_path):
    """iosweep tune -- --profile slurm: each step is a SLURM job, each point's runner holds its
    node with salloc as any sweep point's does (tests/configs/tune.yaml, 1 run a point)."""
    if reason := skip_reason(nodes=1):
        unavailable(reason)
    config = yaml.safe_load((REPO / "tests" / "configs" / "tune.yaml").read_text())
    config["results"] = str(tmp_path / "results")
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(config))
    with slurm_cluster(
        nodes=1, cpus=2, state_dir=Path("/var/tmp/iosweep-t3"), shared=[tmp_path, REPO]
    ) as cluster:
        cmd = [sys.executable, "-m", "iosweep", "tune", "--configfile", str(path), "--repeats"]
        cmd += ["1", "--budget", "1", "--", "--profile", "slurm", "--slurm-no-account"]
        proc = subprocess.run(
            cmd, cwd=REPO, env=cluster.client_env(), capture_output=True, text=True, timeout=2400
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output[-6000:] + cluster.log_tail()
        jobs = _submitted_jobs(output)
        ledger = json.loads((tmp_path / "results" / "tune" / "ledger.json").read_text())
        assert len(jobs["tune_step"]) == len(ledger["steps"]) and "tune_ledger" in jobs
        manifests = _manifests(tmp_path / "results")
        assert len(manifests) == len(ledger["steps"])
        _check_own_jobs(manifests, _jobcomp(cluster))
        assert all(m["status"] == "ok" and m["launcher"] == "srun" for m in manifests)


@dataclass
class SlurmSweep:
    """One sweep through `snakemake --profile slurm` on a two-node cluster, and what SLURM and
    Snakemake said of it: the rule -> job ids Snakemake submitted, SLURM's record of each job,
    the cluster's daemons left after it stopped (none, if it stopped)."""

    results: Path
    jobs: dict[str, list[str]]
    done: dict[str, dict[str, str]]
    leftover: str


@pytest.fixture(scope="module")
def slurm_sweep(tmp_path_factory) -> SlurmSweep:
    """The tiny sweep at 1 and 2 nodes x 1 and 2 ranks a node, a staged ImageNet-style point
    and a torchrun job on both nodes, through the profile on two emulated nodes: made once, read
    by the one-node and the two-node tests."""
    if reason := skip_reason(nodes=2):
        unavailable(reason)
    tmp_path = tmp_path_factory.mktemp("slurm-sweep")
    # ... and a staged ImageNet-style point on both nodes: each stages into its private /tmp
    staged = {
        "workloads": ["imagenet"],
        "nodes": [2],
        "procs_per_node": [1],
        "steps_per_epoch": [0],
        "batch_size": [8],
        "staging": ["node-local"],
    }
    extra = {
        "dataset": {
            "train_size": 2048,
            "test_size": 256,
            "imagenet": {"classes": 4, "images_per_class": 8},
        },
        "training": {"collect_wait": 20, "timeout": 600, "imagenet": {"image_size": 32}},
        "staging": {"dir": "/tmp"},
        # a job that is not iosweep's, under torchrun: one agent per node, c10d rendezvous
        # on the first node (tests/jobs/tar_ddp.py: DDP over tar shards)
        "workloads": {
            "tars": {
                "framework": "pytorch", "launch": "torchrun", "workdir": str(REPO / "tests" / "jobs"),
                "prepare": "{python} make_tars.py {data} -n 4 -k 16",
                "command": "{python} tar_ddp.py --shards-glob '{data}/*.tar' --micro-batch 8 "
                "--epochs-total {epochs} --decode-ms 2 --fwd-ms 2",
            }
        },
    }  # fmt: skip
    torchrun = {"workloads": ["tars"], "nodes": [2], "procs_per_node": [1]}
    config_path, results = _tiny_config(
        tmp_path, extra, nodes=[1, 2], procs_per_node=[1, 2], epochs=[1], steps_per_epoch=[3],
        include=[staged, torchrun],
    )  # fmt: skip
    with slurm_cluster(
        nodes=2, cpus=2, state_dir=Path("/var/tmp/iosweep-t2"), shared=[tmp_path, REPO]
    ) as cluster:
        jobs = _submitted_jobs(_run_profile(cluster, config_path))
        done = _jobcomp(cluster)
    leftover = subprocess.run(["pgrep", "-af", "iosweep-t2"], capture_output=True, text=True).stdout
    return SlurmSweep(results, jobs, done, leftover)


def test_profile_slurm_one_node(slurm_sweep):
    """Issue 6's checks, on the sweep's points of one node (and on all): each point a SLURM job
    of its own, its ranks started by srun inside it, each job given the memory its step needs,
    the report a job too, and no daemon left once the cluster stopped. (A one-node cluster of
    its own is tests/test_slurm_cluster.py's.)"""
    results, jobs, done = slurm_sweep.results, slurm_sweep.jobs, slurm_sweep.done
    assert "slurmd" not in slurm_sweep.leftover and "slurmctld" not in slurm_sweep.leftover
    _check_own_jobs(_manifests(results), done)
    assert "train_pytorch" not in jobs  # its runner holds the job with salloc
    one = [m for m in _manifests(results) if m["params"]["nodes"] == 1]
    assert sorted(m["params"]["ppn"] for m in one) == [1, 2]
    for m in one:
        assert m["status"] == "ok", (m["reason"], m["log_tail"])
        assert m["launcher"] == "srun" and "--overlap" in m["command"]
        assert len(m["ranks"]) == m["params"]["ppn"]
        hosts = {r["host"] for r in m["ranks"]}
        assert len(hosts) == 1 and hosts <= {"simnode1", "simnode2"}, hosts
    assert "report" in jobs
    assert (results / "report" / "report.html").stat().st_size > 10_000
    _check_memory_asked(results, jobs, done)


def test_profile_slurm_two_emulated_nodes(slurm_sweep):
    """The points of two nodes: each ran on as many distinct hosts as it asked nodes, its logs
    tied to their ranks across the nodes, a staged point read each node's own copy, and the
    torchrun job had an agent a node."""
    results = slurm_sweep.results
    _check_own_jobs(_manifests(results), slurm_sweep.done)
    assert len(_manifests(results)) == 6
    for m in _manifests(results):
        p = m["params"]
        assert m["status"] == "ok", (m["run_id"], m["reason"], m["log_tail"])
        if m["workload"]["name"] == "tars":  # a torchrun agent per node, started by srun
            assert m["launcher"] == "torchrun (srun)" and "--rdzv-endpoint" in " ".join(
                m["command"]
            )
            assert m["timing"]["source"] == "hooks" and m["steps"]
        hosts = {r["host"] for r in m["ranks"]}
        assert len(m["ranks"]) == p["nodes"] * p["ppn"]
        # each point ran on as many distinct hosts as it asked nodes
        assert len(hosts) == p["nodes"] and hosts <= {"simnode1", "simnode2"}, hosts

        run_dir = results / "runs" / m["run_id"]
        meta = json.loads((run_dir / "store" / "run.json").read_text())
        # the merge ties every log to its rank by (host, pid): pids may repeat across nodes
        rank_of = {(r["host"], r["pid"]): r["rank"] for r in m["ranks"]}
        for proc in meta["processes"]:
            if proc["role"] == "rank":
                assert rank_of[(proc["host"], proc["pid"])] == proc["rank"]
        assert sorted(r["rank"] for r in meta["ranks"]) == list(range(p["ranks"]))

        summary = json.loads((run_dir / "analysis" / "summary.json").read_text())
        assert summary["ranks"]["nodes"] == p["nodes"]
        per_node = {n["host"]: n for n in summary["nodes"]}
        assert set(per_node) == hosts
        assert all(n["ranks"] == p["ppn"] and n["bytes_read"] > 0 for n in per_node.values())
        if p["ppn"] == 2:
            # every rank reads the whole shared dataset: once per rank, not once per node
            assert {n["read_once_per"] for n in per_node.values()} == {"rank"}
        if p["staging"] == "node-local":
            _check_staged_on_each_node(m, run_dir)

    html = (results / "report" / "report.html").read_text()
    assert "simnode1" in html and "simnode2" in html


def _wait(cond, timeout: float, what: str, proc=None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"snakemake ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.25)


def _lose_a_node(cluster, runs: Path, proc) -> tuple[Path, float]:
    """Once the one-node point is done and both ranks of the two-node point train, kill
    simnode2; (the two-node point's directory, seconds until its manifest was written)."""
    two = lambda: [p.parent for p in runs.glob("*/nodes~2/**/runner.json")]  # noqa: E731
    _wait(lambda: two() and len(list((two()[0] / "ranks").glob("rank-*.json"))) == 2
          and list(runs.glob("*/nodes~1/**/manifest.json")),
          600, "both ranks of the 2-node point started", proc)  # fmt: skip
    time.sleep(3)
    killed_at = time.monotonic()
    cluster.fail_node("simnode2")
    lost_dir = two()[0]
    _wait(lambda: (lost_dir / "manifest.json").exists(), 300,
          "the 2-node point's manifest after its node was lost", proc)  # fmt: skip
    return lost_dir, time.monotonic() - killed_at


def test_profile_slurm_lost_node(tmp_path):
    """A node dies mid-job (issue 16): SLURM ends the job with NODE_FAIL, the point gets a
    manifest saying so, the rest of the sweep and the report go on."""
    if reason := skip_reason(nodes=2):
        unavailable(reason)
    long_2_nodes = {"nodes": [2], "procs_per_node": [1], "epochs": [3000]}
    config_path, results = _tiny_config(tmp_path, procs_per_node=[1], include=[long_2_nodes])
    cmd = [str(SNAKEMAKE), "--profile", "slurm", "--slurm-no-account", "--configfile",
           str(config_path)]  # fmt: skip
    with slurm_cluster(
        nodes=2, cpus=2, state_dir=Path("/var/tmp/iosweep-t3"), shared=[tmp_path, REPO],
        slurmd_timeout=15,
    ) as cluster:  # fmt: skip
        with open(tmp_path / "snakemake.out", "w") as out:
            proc = subprocess.Popen(cmd, cwd=REPO, env=cluster.client_env(), stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
            try:
                lost_dir, ended_after = _lose_a_node(cluster, results / "runs", proc)
                rc = proc.wait(timeout=900)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
        log = (tmp_path / "snakemake.out").read_text()
        assert rc == 0, log[-6000:] + "\n--- cluster log ---\n" + cluster.log_tail()
        jobcomp = (cluster.state_dir / "log" / "jobcomp.txt").read_text()
    lost = json.loads((lost_dir / "manifest.json").read_text())
    print(f"lost node: the point ended {ended_after:.1f} s after the node was killed")
    assert lost["status"] == "lost", (lost["reason"], lost["log_tail"])
    job = lost["slurm_job_id"]
    assert lost["slurm"]["state"] == "NODE_FAIL"
    assert [n["node"] for n in lost["slurm"]["lost_nodes"]] == ["simnode2"]
    assert f"JobId={job} " in jobcomp and "JobState=NODE_FAIL" in jobcomp.split(f"JobId={job} ")[1]
    assert "simnode2" in lost["reason"] and "NODE_FAIL" in lost["reason"]
    assert shlex.split(lost["rerun"])[-2:] == ["--forcerun", str(lost_dir / "manifest.json")]
    (one,) = (results / "runs").glob("*/nodes~1/**/manifest.json")
    ok = json.loads(one.read_text())
    assert ok["status"] == "ok", ok["reason"]
    # the report came out, with the lost point, SLURM's word and the command to redo it
    html = (results / "report" / "report.html").read_text()
    assert 'badge lost">lost' in html and f"SLURM ended job {job} with state NODE_FAIL" in html
    assert "To redo just this run" in html and "--forcerun" in html
    # ... and that command redoes exactly that point and what depends on it
    dry = subprocess.run([*shlex.split(lost["rerun"]), "--dry-run", "--quiet", "rules"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert dry.returncode == 0, dry.stderr[-3000:]
    planned = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert planned.pop("train_pytorch") == "1" and "train_tensorflow" not in planned, dry.stdout
    assert planned.get("ingest_run") == "1" and planned.get("analyze_run") == "1", dry.stdout


def test_profile_slurm_a_run_in_parts_spread_over_two_nodes(tmp_path, shared_data):
    """A run over analysis.memory_gb analysed in parts through `--profile slurm`: each part a
    SLURM job of its own asking the memory the plan counts for it, the parts on both nodes
    (one CPU each: two jobs cannot share one), put together into the whole run's summary.
    Its logs are read in two parts (ingest.parts), a job on each node, into the same store."""
    if reason := skip_reason(nodes=2):
        unavailable(reason)
    import pyarrow.parquet as pq

    from iosweep.analysis import analyze_run
    from iosweep.analysis.parts.combine import PASS_ROW_BYTES, PER_PART_PATH, SIDE_SHARE
    from iosweep.analysis.parts.plan import plan
    from iosweep.trace.ingest import ingest
    from iosweep.trace.schema import STORE_TABLES

    logs = shared_data / "horovod-pytorch-mnist" / "darshan-np4"
    store = tmp_path / "store"
    ingest([logs], store)
    memory_gb = one_rank_budget_gb(store)  # one rank fits, two do not: four parts
    parts = plan(store, memory_gb)
    assert [p.ranks for p in parts] == [[0], [1], [2], [3]]
    run = {"logs": [str(logs)], "params": {"framework": "pytorch", "nodes": 1, "ppn": 4}}
    config_path, results = _tiny_config(
        tmp_path,
        {
            "analysis": {"memory_gb": memory_gb},
            # its logs read in two parts, a job each (issue 51)
            "ingest": {"enabled": True, "parts": 2, "runs": {"np4": run}},
        },
    )
    with slurm_cluster(
        nodes=2, cpus=1, state_dir=Path("/var/tmp/iosweep-t4"), shared=[tmp_path, REPO]
    ) as cluster:
        jobs = _submitted_jobs(_run_profile(cluster, config_path))
        done = _jobcomp(cluster)
    read_jobs = [done[j] for j in jobs["ingest_part"]]
    assert len(read_jobs) == 2 and {j["JobState"] for j in read_jobs} == {"COMPLETED"}
    assert {j["NodeList"] for j in read_jobs} == {"simnode1", "simnode2"}
    part_jobs = [done[j] for j in jobs["analyze_part"]]
    assert len(part_jobs) == 4 and {j["JobState"] for j in part_jobs} == {"COMPLETED"}
    assert {j["NodeList"] for j in part_jobs} == {"simnode1", "simnode2"}
    assert sorted(_memory_mb(j) for j in part_jobs) == sorted(
        -(-p.need.bytes // 2**20) for p in parts
    )
    (put_together,) = [done[j] for j in jobs["analyze_run"]]
    # it asks what putting the parts together may take, counted from the parts' results: the
    # span union's share of the budget and its files' rows (each rank's, a part each), not the
    # budget, which its peak can pass (issue 51)
    share = budget.budget_bytes(memory_gb)
    least = budget.BASE + int(share * SIDE_SHARE)
    files = pq.read_table(store / "counters.parquet", columns=["rank", "path"]).to_pandas()
    rows = 2 * len(files.drop_duplicates())  # (segments may name a file counters do not)
    most = least + rows * (PER_PART_PATH + PASS_ROW_BYTES)
    assert -(-least // 2**20) <= _memory_mb(put_together) <= -(-most // 2**20)
    out = results / "runs" / "external~np4"
    summary = json.loads((out / "analysis" / "summary.json").read_text())
    for name in STORE_TABLES:  # the store one job made of the same logs
        made = pq.read_table(out / "store" / f"{name}.parquet")
        assert made.equals(pq.read_table(store / f"{name}.parquet")), name
    whole = analyze_run(out / "store", tmp_path / "whole")
    for key in ("headline", "classes", "pipeline", "checkpoints", "sizes", "placement"):
        assert json.dumps(summary[key], sort_keys=True) == json.dumps(whole[key], sort_keys=True)
