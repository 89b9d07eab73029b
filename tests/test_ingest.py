"""Ingest and merge: real fixture runs, the workflow's run layout, attribution, bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import darshan
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from iosweep.cli import main as cli_main
from iosweep.trace.darshan.read import SEGMENT_DTYPE, read_darshan_log
from iosweep.trace.darshan.write import DxtFile, write_darshan_log
from iosweep.trace.ingest import MERGED_DARSHAN, ingest, ingest_jobs, write_merged_darshan
from iosweep.trace.schema import RunMeta
from iosweep.trace.store import open_store, write_store

IDX_SIZES = {
    "train-images-idx3-ubyte": 47040016,
    "train-labels-idx1-ubyte": 60008,
    "t10k-images-idx3-ubyte": 7840016,
    "t10k-labels-idx1-ubyte": 10008,
}


def _segments(store_dir: Path) -> pd.DataFrame:
    seg = open_store(store_dir).segments.to_pandas()
    for c in ("path", "op", "host", "module", "source"):
        seg[c] = seg[c].astype(str)
    seg["name"] = seg.path.str.rsplit("/", n=1).str[-1]
    return seg


def _kinds(meta) -> list[str]:
    return sorted(i.kind for i in meta.issues)


# ---------------------------------------------------------------------------------------
# the shared Horovod fixtures (flat layout: <run>/logs/*.darshan + <run>/ranks/rank-R.json)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 4])
def test_pytorch_runs_recover_ranks_and_whole_file_reads(shared_data: Path, tmp_path: Path, n):
    run = shared_data / f"horovod-pytorch-mnist/darshan-np{n}"
    meta = ingest([run], tmp_path / "store")
    ranks = {
        json.loads(f.read_text())["pid"]: json.loads(f.read_text())["rank"]
        for f in (run / "ranks").glob("rank-*.json")
    }
    assert [r.rank for r in meta.ranks] == list(range(n))
    assert [(p.rank, p.role, p.attributed_by) for p in meta.processes] == [
        (r, "rank", "rank-file") for r in range(n)
    ]
    assert all(ranks[p.pid] == p.rank for p in meta.processes)
    assert not meta.issues and not meta.incomplete and meta.status == "ok"
    seg = _segments(tmp_path / "store")
    for r in range(n):
        mine = seg[seg["rank"] == r]
        for name, size in IDX_SIZES.items():
            reads = mine[(mine.name == name) & (mine.op == "read")].sort_values("start")
            assert list(zip(reads.offset, reads.length, strict=True)) == [(0, size), (size, 0)]
    writes = seg[(seg.op == "write") & seg.name.str.startswith("checkpoint-")]
    assert set(writes["rank"]) == {0}
    assert writes.groupby("name")["length"].sum().between(55_000, 65_000).all()
    assert writes.name.nunique() == 2
    # one clock: the earliest log starts at 0, every time is on the run's clock
    starts = [p.start for p in meta.processes]
    assert min(starts) == 0.0 and meta.clock_zero > 1.7e9
    assert (seg.start >= 0).all() and (seg.end >= seg.start).all()


def test_np4_stray_files_are_ignored(shared_data: Path, tmp_path: Path):
    run = shared_data / "horovod-pytorch-mnist/darshan-np4"
    assert list((run / "logs").glob("*.dxt"))  # the stray DXT text dumps are there ...
    meta = ingest([run / "logs"], tmp_path / "store")  # ranks/ one level up is found
    assert len(meta.processes) == 4 and not meta.issues  # ... and neither read nor fatal


def test_times_are_each_logs_times_shifted_to_the_run_clock(shared_data: Path, tmp_path: Path):
    run = shared_data / "horovod-pytorch-mnist/darshan-np2"
    meta = ingest([run], tmp_path / "store")
    seg = _segments(tmp_path / "store")
    for f in (run / "logs").glob("*.darshan"):
        log = read_darshan_log(f)
        own = log.segments.to_pandas()
        mine = seg[seg.source == f.name]
        shift = log.start - meta.clock_zero
        assert np.allclose(mine.start.to_numpy(), own.start.to_numpy() + shift, atol=1e-9)
        assert np.allclose(mine.end.to_numpy(), own.end.to_numpy() + shift, atol=1e-9)
        assert set(mine.pid) == {log.pid}


def test_two_nodes_every_rank_on_its_host(shared_data: Path, tmp_path: Path):
    run = shared_data / "horovod-pytorch-mnist/darshan-2nodes-np4"
    meta = ingest([run], tmp_path / "store")
    expected = {0: "simnode1", 1: "simnode1", 2: "simnode2", 3: "simnode2"}
    assert {r.rank: r.host for r in meta.ranks} == expected
    assert {p.rank: p.host for p in meta.processes} == expected
    seg = _segments(tmp_path / "store")
    assert seg.groupby("rank")["host"].unique().map(list).to_dict() == {
        r: [h] for r, h in expected.items()
    }


def test_tf2_uname_children_and_file_per_process(shared_data: Path, tmp_path: Path):
    run = shared_data / "horovod-tf2-mnist/darshan-np4"
    meta = ingest([run], tmp_path / "store")
    assert cli_main(["merge", str(tmp_path / "store")]) == 0
    meta = RunMeta.read(tmp_path / "store" / "run.json")  # with the merge's warning
    roles = [(p.rank, p.role) for p in meta.processes]
    assert roles[:4] == [(r, "rank") for r in range(4)]
    children = [p for p in meta.processes if p.role == "child"]
    assert len(children) == 4 and all(p.rank == -1 and "uname" in p.exe for p in children)
    warned = {Path(i.source).name for i in meta.issues if i.kind == "unattributed"}
    assert warned == {p.source for p in children}
    assert all(i.severity == "warning" for i in meta.issues) and not meta.incomplete
    # the merged log is the 4 ranks' job; the children's logs, with no rank, are named as left out
    (part,) = [i for i in meta.issues if i.kind == "merge-partial"]
    left = sorted(re.findall(r"(\S+\.darshan): no rank", part.message))
    assert left == sorted(p.source for p in children)
    rep = darshan.DarshanReport(str(tmp_path / "store" / MERGED_DARSHAN), read_all=False)
    assert rep.metadata["job"]["nprocs"] == 4
    seg = _segments(tmp_path / "store")
    npz = seg[seg.name.str.endswith(".npz")]
    assert npz.groupby("rank")["name"].unique().map(list).to_dict() == {
        r: [f"mnist-{r}.npz"] for r in range(4)
    }


def test_a_childs_counter_rows_keep_its_rank_minus_one(shared_data: Path, tmp_path: Path):
    """The rows of the stored counters table, against PyDarshan's records of each log: the
    4 uname children's rows stay rank -1 with their own pids, never folded into rank 0."""
    run = shared_data / "horovod-tf2-mnist/darshan-np4"
    meta = ingest([run], tmp_path / "store")
    rows = pd.read_parquet(tmp_path / "store" / "counters.parquet")

    def records(source: str) -> dict[str, int]:
        (log,) = run.rglob(source)
        rep = darshan.DarshanReport(str(log), read_all=True)
        return {m: len(rep.records[m]) for m in ("POSIX", "STDIO") if m in rep.records}

    children = [p for p in meta.processes if p.role == "child"]
    minus_one = rows[rows["rank"] == -1]
    assert sorted(minus_one["pid"]) == sorted(
        p.pid for p in children for _ in range(sum(records(p.source).values()))
    )
    (rank0,) = [p for p in meta.processes if p.rank == 0 and p.role == "rank"]
    mine = rows[rows["rank"] == 0]
    assert mine.groupby("module").size().to_dict() == records(rank0.source)
    assert set(mine["pid"]) == {rank0.pid}


def test_dlio_processes_are_numbered_with_a_warning(shared_data: Path, tmp_path: Path):
    meta = ingest([shared_data / "darshan-logs/dlio_logs"], tmp_path / "store")
    assert [p.rank for p in meta.processes] == list(range(24))
    assert {p.attributed_by for p in meta.processes} == {"numbered"}
    starts = [p.start for p in meta.processes]
    assert starts == sorted(starts)
    (numbered,) = [i for i in meta.issues if i.kind == "numbered-ranks"]
    assert numbered.severity == "warning" and "24 processes" in numbered.message
    assert open_store(tmp_path / "store").counters.num_rows > 0


def test_every_collection_log_ingests_or_says_why(shared_data: Path, tmp_path: Path):
    expected_errors = {
        "empty_log.darshan": ("empty", "no I/O recorded"),
    }
    expected_kinds = {
        "partial_data_dxt.darshan": {"partial-dxt"},
        "partial_data_stdio.darshan": {"partial-counters", "no-dxt"},
    }
    logs = sorted((shared_data / "darshan-logs").rglob("*.darshan"))
    assert len(logs) >= 35
    for i, f in enumerate(logs):
        meta = ingest([f], tmp_path / f"s{i}")
        kinds = {x.kind for x in meta.issues} - {"numbered-ranks", "no-dxt"}
        if f.name in expected_errors:
            kind, text = expected_errors[f.name]
            (issue,) = meta.issues
            assert (issue.kind, issue.source) == (kind, str(f)) and text in issue.message
            assert not meta.processes
            continue
        assert meta.processes, f
        assert kinds == expected_kinds.get(f.name, set()) - {"no-dxt"}, f
        assert meta.incomplete == bool(kinds), f


def test_mpi_log_keeps_its_ranks(shared_data: Path, tmp_path: Path):
    src = shared_data / "darshan-logs/mpi_io_test_with_dxt"
    meta = ingest([src], tmp_path / "store")
    assert [r.rank for r in meta.ranks] == list(range(32))
    assert {p.attributed_by for p in meta.processes} == {"mpi"} and len(meta.processes) == 32
    assert sorted(_segments(tmp_path / "store")["rank"].unique()) == list(range(32))
    # its name (Darshan before 3.2) holds the job id and no pid: rank 0's pid is not the job
    # id (4373053, the scheduler's, as PyDarshan reads it); no rank's pid is known
    rep = darshan.DarshanReport(str(next(src.glob("*.darshan"))), read_all=False)
    assert rep.metadata["job"]["jobid"] == 4373053
    assert {p.pid for p in meta.processes} == {-1}
    # the log's format version: its header's first 8 bytes (darshan-logutils), "3.21"
    version = next(src.glob("*.darshan")).read_bytes()[:8].rstrip(b"\0").decode()
    assert version == "3.21" and {p.log_version for p in meta.processes} == {version}
    assert _segments(tmp_path / "store")["pid"].isna().all()


def test_one_bad_log_does_not_stop_the_others(shared_data: Path, tmp_path: Path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    src = shared_data / "horovod-pytorch-mnist/darshan-np2"
    (run / "ranks").symlink_to(src / "ranks")
    logs = sorted((src / "logs").glob("*.darshan"))
    (run / "logs" / logs[0].name).symlink_to(logs[0])
    bad = run / "logs" / logs[1].name
    bad.write_bytes(logs[1].read_bytes()[:2000])  # rank 1's log, cut short
    meta = ingest([run], tmp_path / "store")
    assert [(p.rank, p.role) for p in meta.processes] == [(0, "rank")]
    kinds = {i.kind: i for i in meta.issues}
    assert kinds["truncated"].source == str(bad) and kinds["truncated"].severity == "error"
    # the rank file: rank 1, pid 10973 on vm; its log is the one cut short
    assert kinds["missing-log"].source == "rank 1"
    assert kinds["missing-log"].message == (
        "rank 1 (pid 10973 on vm) has no readable trace log (1 log(s) could not be read)"
    )
    assert [(r.rank, r.local_rank, r.size, r.pid, r.host) for r in meta.ranks] == [
        (0, 0, 2, 10972, "vm"),
        (1, 1, 2, 10973, "vm"),
    ]
    assert meta.incomplete and meta.status == "partial"


# ---------------------------------------------------------------------------------------
# the workflow's run layout, with forked workers, children and unfinished logs
# ---------------------------------------------------------------------------------------


def _synthetic(
    path: Path,
    *,
    pid: int,
    jobid: int,
    start: float,
    host: str,
    exe: str,
    reads: int = 3,
    fork_parent: int | None = None,
) -> Path:
    seg = np.zeros(reads, SEGMENT_DTYPE)
    seg["offset"] = np.arange(reads) * 4096
    seg["length"] = 4096
    seg["start"] = 0.5 + np.arange(reads) * 0.1
    seg["end"] = seg["start"] + 0.01
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_darshan_log(
        path.parent / f"0_python_id{jobid}-{pid}_11-21-1-1_1.darshan",
        [DxtFile("/data/shard.bin", seg, host=host)],
        start=start,
        end=start + 2,
        exe=exe,
        jobid=jobid,
        metadata={"fork_parent": str(fork_parent)} if fork_parent else None,
    )


def test_workflow_run_layout(shared_data: Path, tmp_path: Path):
    src = shared_data / "horovod-pytorch-mnist/darshan-np2"
    ranks = [json.loads(f.read_text()) for f in sorted((src / "ranks").glob("rank-*.json"))]
    run = tmp_path / "results/runs/framework~pytorch/nodes~1/ppn~2/rep~0"
    logs = {read_darshan_log(f).pid: f for f in (src / "logs").glob("*.darshan")}
    t0 = min(read_darshan_log(f).start for f in logs.values()) - 3.0
    for r in ranks:  # Darshan writes to LOGPATH/YYYY/M/D/
        d = run / "traces" / f"rank-{r['rank']}" / "2026/11/21"
        d.mkdir(parents=True)
        (d / logs[r["pid"]].name).symlink_to(logs[r["pid"]])
    rank1 = ranks[1]
    # a DataLoader worker forked by rank 1: Darshan keeps the parent's pid as job id
    worker = _synthetic(
        run / "traces/rank-1/2026/11/21/x",
        pid=rank1["pid"] + 50,
        jobid=rank1["pid"],
        start=t0 + 10,
        host="vm",
        exe="python train_pt.py",
        fork_parent=rank1["pid"],
    )
    # a child of rank 0 running another program
    child = _synthetic(
        run / "traces/rank-0/2026/11/21/x",
        pid=99999,
        jobid=99999,
        start=t0 + 20,
        host="vm",
        exe="/usr/bin/uname -p",
    )
    (run / "traces/rank-0/2026/11/21/0_python_id1-1_x.darshan_partial").write_bytes(b"\0" * 64)
    manifest = {
        "run_id": "framework~pytorch/nodes~1/ppn~2/rep~0",
        "params": {"framework": "pytorch", "nodes": 1, "ppn": 2, "rep": 0},
        "status": "ok",
        "start_time": t0,
        "end_time": t0 + 100,
        "tracer": {"name": "darshan"},
        "ranks": [*ranks, {"rank": 2, "local_rank": 2, "size": 3, "pid": 4242, "host": "vm"}],
        "steps": [{"rank": 0, "epoch": 0, "step": -1, "start": t0 + 5, "end": t0 + 25}],
        "versions": {"horovod": "0.28.1"},
        "command": ["mpirun", "-np", "2"],
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    store = run / "store"
    meta = ingest([run], store, manifest=run / "manifest.json", run_id="r1")

    assert meta.run_id == "r1" and meta.clock_zero == t0
    assert meta.params["ppn"] == 2 and meta.versions == {"horovod": "0.28.1"}
    by_source = {p.source: p for p in meta.processes}
    w = by_source[worker.name]
    assert (w.rank, w.role, w.attributed_by, w.pid) == (
        1,
        "worker",
        "parent-pid",
        rank1["pid"] + 50,
    )
    c = by_source[child.name]
    assert (c.rank, c.role, c.attributed_by) == (0, "child", "log-dir")
    assert [p.rank for p in meta.processes if p.role == "rank"] == [0, 1]
    kinds = {i.kind for i in meta.issues}
    assert {"missing-log", "truncated", "child-process"} <= kinds
    (missing,) = [i for i in meta.issues if i.kind == "missing-log"]
    assert missing.source == "rank 2"
    # rank 2 left no log at all (every log found was read; the partial one is rank 0's)
    assert missing.message == (
        "rank 2 (pid 4242 on vm) has no readable trace log; Darshan writes a log only when the "
        "process exits"
    )
    # a child process is kept under its rank and said (a warning, not an error); the host of
    # every process is its log's
    (ch,) = [i for i in meta.issues if i.kind == "child-process"]
    assert ch.severity == "warning" and ch.source == str(child)
    assert {p.host for p in meta.processes} == {"vm"}
    assert meta.incomplete and meta.status == "partial"

    seg = _segments(store)
    wseg = seg[seg.source == worker.name]
    assert set(wseg["rank"]) == {1} and set(wseg.pid) == {rank1["pid"] + 50}
    assert np.allclose(wseg.start.sort_values().to_numpy(), 10 + 0.5 + np.arange(3) * 0.1)
    steps = open_store(store).steps.to_pandas()
    assert steps[["rank", "epoch", "step", "start", "end"]].values.tolist() == [
        [0, 0, -1, 5.0, 25.0]
    ]
    # the merged log, on demand, holds the processes tied to a rank (test_merged_log.py
    # opens it)
    assert not (store / MERGED_DARSHAN).exists()
    write_merged_darshan(store)
    assert (store / MERGED_DARSHAN).exists()


def test_forked_worker_follows_its_parent_without_rank_info(tmp_path: Path):
    d = tmp_path / "logs"
    parent = _synthetic(d / "a", pid=100, jobid=100, start=1e9, host="n1", exe="python t.py")
    worker = _synthetic(
        d / "b", pid=101, jobid=100, start=1e9 + 1, host="n1", exe="python t.py", fork_parent=100
    )
    other = _synthetic(d / "c", pid=200, jobid=200, start=1e9 + 0.5, host="n1", exe="python t.py")
    meta = ingest([d], tmp_path / "store")
    got = {p.source: (p.rank, p.role, p.attributed_by) for p in meta.processes}
    assert got == {
        parent.name: (0, "rank", "numbered"),
        other.name: (1, "rank", "numbered"),
        worker.name: (0, "worker", "parent-pid"),
    }


def test_same_pid_on_two_hosts_is_told_apart_by_host(tmp_path: Path):
    d = tmp_path / "run"
    a = _synthetic(d / "logs/a/x", pid=500, jobid=500, start=1e9, host="nodeA", exe="python t.py")
    _synthetic(
        d / "logs/b/x", pid=500, jobid=500, start=1e9, host="nodeB", exe="python t.py", reads=5
    )
    (d / "ranks").mkdir()
    for rank, host in ((0, "nodeB"), (1, "nodeA")):
        (d / "ranks" / f"rank-{rank}.json").write_text(
            json.dumps({"rank": rank, "local_rank": 0, "size": 2, "pid": 500, "host": host})
        )
    meta = ingest([d], tmp_path / "store")
    got = {p.source: (p.rank, p.host) for p in meta.processes if p.source in (a.name,)}
    assert got == {a.name: (1, "nodeA")}
    seg = _segments(tmp_path / "store")
    assert seg.groupby("rank").size().to_dict() == {0: 5, 1: 3}  # nodeB's log has 5 reads
    assert not meta.issues


def test_bad_rank_file_and_bad_manifest(tmp_path: Path, shared_data: Path):
    d = tmp_path / "run"
    _synthetic(d / "logs/x", pid=300, jobid=300, start=1e9, host="n", exe="python t.py")
    (d / "ranks").mkdir()
    (d / "ranks/rank-0.json").write_text("{not json")
    meta = ingest([d], tmp_path / "s1")
    (bad,) = [i for i in meta.issues if i.kind == "bad-rank-file"]
    assert bad.source.endswith("rank-0.json")
    assert [p.attributed_by for p in meta.processes] == ["numbered"]
    (d / "m.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"m\.json"):
        ingest([d], tmp_path / "s2", manifest=d / "m.json")
    with pytest.raises(FileNotFoundError, match="nope"):
        ingest([d / "nope"], tmp_path / "s3")


def test_two_logs_of_one_rank_and_a_bad_step_record_are_said(tmp_path: Path):
    # pid 300 on host n wrote two logs (a restarted job reusing the pid): both are rank 0's;
    # of the manifest's three step records, one has a start that is no time, one no end
    d = tmp_path / "run"
    for jobid in (300, 301):
        _synthetic(d / "logs/x", pid=300, jobid=jobid, start=1e9, host="n", exe="python t.py")
    (d / "ranks").mkdir()
    (d / "ranks/rank-0.json").write_text(json.dumps({"rank": 0, "pid": 300, "host": "n"}))
    steps = [
        {"rank": 0, "epoch": 0, "step": 0, "start": 1e9 + 0.5, "end": 1e9 + 0.6},
        {"rank": 0, "epoch": 0, "step": 1, "start": "soon", "end": 1e9 + 0.8},
        {"rank": 0, "epoch": 0, "step": 2, "start": 1e9 + 0.9},
    ]
    (d / "manifest.json").write_text(json.dumps({"steps": steps}))
    meta = ingest([d], tmp_path / "store", manifest=d / "manifest.json")
    got = {(i.kind, i.source): (i.severity, i.message) for i in meta.issues}
    assert got == {
        ("duplicate-rank", "rank 0"): (
            "warning", "2 logs claim to be rank 0: their I/O is all counted under rank 0"
        ),
        ("bad-step", "manifest steps[1]"): (
            "warning", "not a step record (could not convert string to float: 'soon')"
        ),
        ("bad-step", "manifest steps[2]"): ("warning", "not a step record ('end')"),
    }  # fmt: skip
    assert [(p.rank, p.role) for p in meta.processes] == [(0, "rank"), (0, "rank")]
    st = open_store(tmp_path / "store").table("steps").to_pandas()
    assert st["step"].tolist() == [0] and st["start"].tolist() == pytest.approx([0.5])


# ---------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------


def test_cli_ingest(shared_data: Path, tmp_path: Path, capsys):
    run = shared_data / "horovod-tf2-mnist/darshan-np2"
    assert cli_main(["ingest", str(run), "-o", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "processes: 4 (2 child, 2 rank)" in out and "ranks: 0,1 (from rank-file)" in out
    assert "2 unattributed" in out
    # a log read that holds job metadata only: the store is written and said so, exit 0
    # (issue 50: it was written, then "no log could be ingested", exit 1)
    empty = shared_data / "darshan-logs/empty_log"
    assert cli_main(["ingest", str(empty), "-o", str(tmp_path / "e")]) == 0
    captured = capsys.readouterr()
    assert "no I/O recorded in the 1 log read" in captured.out
    assert "no log could be ingested" not in captured.err
    # no log that could be read at all: exit 1, said
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "job.darshan").write_bytes(b"not a darshan log" * 64)
    assert cli_main(["ingest", str(bad), "-o", str(tmp_path / "b")]) == 1
    assert "no log could be ingested" in capsys.readouterr().err
    assert cli_main(["ingest", str(tmp_path / "missing"), "-o", str(tmp_path / "x")]) == 2


def test_rank_directories_name_ranks_without_rank_files(shared_data: Path, tmp_path: Path):
    src = shared_data / "horovod-pytorch-mnist/darshan-np2"
    ranks = {
        json.loads(f.read_text())["pid"]: json.loads(f.read_text())["rank"]
        for f in (src / "ranks").glob("rank-*.json")
    }
    run = tmp_path / "run"
    for f in (src / "logs").glob("*.darshan"):
        pid = read_darshan_log(f).pid
        d = run / "traces" / f"rank-{ranks[pid]}"
        d.mkdir(parents=True)
        (d / f.name).symlink_to(f)
    rank0 = next(p for p, r in ranks.items() if r == 0)
    start = read_darshan_log(next((run / "traces/rank-0").iterdir())).start
    worker = _synthetic(
        run / "traces/rank-0/x",
        pid=rank0 + 7,
        jobid=rank0,
        start=start + 5,
        host="vm",
        exe="python train_pt.py",
        fork_parent=rank0,
    )
    meta = ingest([run], tmp_path / "store")
    got = {(p.pid, p.rank, p.role, p.attributed_by) for p in meta.processes}
    assert got == {
        *((pid, r, "rank", "log-dir") for pid, r in ranks.items()),
        (rank0 + 7, 0, "worker", "parent-pid"),
    }
    assert worker.name in {p.source for p in meta.processes}
    assert not [i for i in meta.issues if i.kind == "numbered-ranks"]


def test_a_second_ingest_of_unchanged_logs_reuses_the_store(shared_data: Path, tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(shared_data / "horovod-pytorch-mnist" / "dftracer-np2", run)
    store = tmp_path / "store"
    first = ingest([run], store)
    built = (store / "run.json").stat().st_mtime_ns, (store / "segments.parquet").stat().st_mtime_ns

    def stamp():
        return (store / "run.json").stat().st_mtime_ns, (
            store / "segments.parquet"
        ).stat().st_mtime_ns

    again = ingest([run], store)
    assert stamp() == built and again.to_json() == first.to_json()
    # what changes the store rebuilds it: a log touched, other labels, or asked to
    log = sorted((run / "logs").glob("*.pfw.gz"))[0]
    os.utime(log, ns=(log.stat().st_atime_ns, log.stat().st_mtime_ns + 1_000_000_000))
    ingest([run], store)
    assert stamp() != built
    built = stamp()
    ingest([run], store, params={"staging": "node-local"})
    assert stamp() != built and open_store(store).meta.params["staging"] == "node-local"
    built = stamp()
    ingest([run], store, params={"staging": "node-local"}, reuse=False)
    assert stamp() != built
    assert json.loads((store / "inputs.json").read_text())["files"][0][0].startswith(str(run))


@pytest.mark.parametrize(
    "run, logs",
    [
        ("horovod-pytorch-mnist/dftracer-np2", 2),  # two ranks' traces: a second, not slow
        pytest.param("imagenet-style-resnet50-h100/darshan16", 17, marks=pytest.mark.slow),
        pytest.param("imagenet-style-resnet50-h100/dftracer8", 9, marks=pytest.mark.slow),
    ],
)
def test_logs_read_in_parallel_give_the_same_store(shared_data: Path, tmp_path: Path, run, logs):
    # independent per-process logs (ranks, or a rank and its loader workers) read by one
    # process, then by two
    src = shared_data / run
    one = ingest([src], tmp_path / "one", workers=1)
    two = ingest([src], tmp_path / "two", workers=2)
    assert one.to_json() == two.to_json() and len(one.processes) == logs
    for name in ("segments", "counters", "steps", "app_events"):
        a, b = open_store(tmp_path / "one").table(name), open_store(tmp_path / "two").table(name)
        assert a.equals(b), name
    used = [json.loads((tmp_path / s / "inputs.json").read_text()) for s in ("one", "two")]
    assert [u["read_processes"] for u in used] == [1, 2] and used[0]["logs"] == logs


def test_a_store_builds_each_table_only_when_its_turn_comes(tmp_path: Path):
    """``write_store`` calls a table's builder after the tables before it are on disk, so
    ingest holds one large table at a time; the store reads back as if tables were given."""
    store = tmp_path / "store"
    seen: list[tuple[str, list[str]]] = []

    def builder(name: str, rows: dict):
        def build() -> pa.Table:
            seen.append((name, sorted(p.name for p in store.glob("*.parquet"))))
            return pa.table(rows)

        return build

    segs = {"rank": pa.array([0, 1], pa.int32()), "op": ["read", "write"], "length": [10, 20]}
    app = {"rank": pa.array([0], pa.int32()), "name": ["open64"], "start": [0.5]}
    meta = RunMeta.from_dict({"run_id": "r", "tracer": "dftracer", "clock_zero": 0.0})
    write_store(
        store,
        meta,
        {"segments": builder("segments", segs), "app_events": builder("app_events", app)},
    )
    assert seen == [
        ("segments", []),
        ("app_events", ["counters.parquet", "segments.parquet", "steps.parquet"]),
    ]
    s = open_store(store)
    assert s.table("segments", columns=["length"])["length"].to_pylist() == [10, 20]
    assert s.table("app_events", columns=["name"])["name"].cast(pa.string()).to_pylist() == [
        "open64"
    ]
    assert s.table("counters").num_rows == 0


def test_a_log_is_tied_to_a_rank_by_host_and_pid():
    # rank files: pid 100 on hosts a and b (two nodes), pid 200 on a, pid 300 with no host
    from iosweep.trace.ingest.attribute import _RankIndex
    from iosweep.trace.schema import RankInfo

    ranks = [RankInfo(0, 0, 4, 100, "a"), RankInfo(1, 0, 4, 100, "b"),
             RankInfo(2, 1, 4, 200, "a"), RankInfo(3, 1, 4, 300, "")]  # fmt: skip
    find = _RankIndex(ranks).find
    assert find(100, "b").rank == 1 and find(100, "a").rank == 0
    assert find(100, None) is None  # which node's pid 100? unknown
    assert find(200, None).rank == 2  # a log without a host: the only pid 200
    assert find(200, "c") is None  # pid 200 of another host
    assert find(300, "c").rank == 3  # the rank file names no host: the pid decides
    assert find(None, "a") is None and find(400, "a") is None


def test_non_mpi_jobs_that_never_overlapped_are_separate_runs(tmp_path):
    # issue 50 (item 8): two local runs in one folder, their processes' own pids as job ids:
    # the first two processes overlap (one run of two), the third began 31 s after both
    # ended (another run): two stores, never one 3-rank run compared rank by rank
    logs = tmp_path / "logs"
    t0 = 1_700_000_000.0
    _synthetic(logs / "a", pid=101, jobid=101, start=t0, host="n0", exe="python a.py")
    _synthetic(logs / "b", pid=102, jobid=102, start=t0 + 0.5, host="n0", exe="python a.py")
    _synthetic(logs / "c", pid=203, jobid=203, start=t0 + 2.5 + 31, host="n0", exe="python b.py")
    stores = ingest_jobs([logs], tmp_path / "out")
    assert [len(meta.processes) for _, meta in stores] == [2, 1]
    assert [s.name for s, _ in stores] == ["processes", "processes-2"]
    # logs of one scheduler job (one job id) stay one run however far apart
    far = tmp_path / "far"
    _synthetic(far / "a", pid=11, jobid=77, start=t0, host="n0", exe="python a.py")
    _synthetic(far / "b", pid=12, jobid=77, start=t0 + 100, host="n0", exe="python a.py")
    ((_, meta),) = ingest_jobs([far], tmp_path / "out-far")
    assert len(meta.processes) == 2


def test_a_log_given_twice_is_read_once(tmp_path):
    # the same log under two names (copied into the folder): one process, read once and
    # named; counted twice, every figure of its ranks doubled, with no word
    from conftest import shared_fixture

    from iosweep.trace.store import open_store

    src = shared_fixture("darshan-logs/release_logs") / "mpi-io-test-x86_64-3.4.7.darshan"
    (tmp_path / "one").mkdir()
    shutil.copy(src, tmp_path / "one" / src.name)
    (tmp_path / "two").mkdir()
    shutil.copy(src, tmp_path / "two" / src.name)
    shutil.copy(src, tmp_path / "two" / "copy.darshan")
    ((once, _),) = ingest_jobs([tmp_path / "one"], tmp_path / "s1")
    ((twice, meta),) = ingest_jobs([tmp_path / "two"], tmp_path / "s2")
    (dup,) = [i for i in meta.issues if i.kind == "duplicate-log"]
    assert dup.source.endswith("mpi-io-test-x86_64-3.4.7.darshan") or dup.source.endswith(
        "copy.darshan"
    )
    for table in ("segments", "counters"):
        assert open_store(twice).table(table).num_rows == open_store(once).table(table).num_rows


def test_run_json_read_again_is_its_own_and_a_changed_file_is_read_anew(tmp_path):
    # run.json is parsed once while unchanged (a run in parts opens its store many times):
    # each read still gives a RunMeta of its own, and a file written again is read again
    path = tmp_path / "run.json"
    man = {"steps": [{"rank": 0, "epoch": 0, "step": 0}], "params": {"epochs": 1}}
    RunMeta.from_dict(
        {"run_id": "r", "tracer": "darshan", "clock_zero": 0.0, "manifest": man}
    ).write(path)
    first = RunMeta.read(path)
    first.manifest["reason"] = "changed by a reader"
    first.command.append("--changed")
    again = RunMeta.read(path)
    assert "reason" not in again.manifest and again.command == []
    assert again.manifest["steps"] == man["steps"]
    RunMeta.from_dict(
        {"run_id": "r2", "tracer": "darshan", "clock_zero": 0.0, "manifest": man}
    ).write(path)
    assert RunMeta.read(path).run_id == "r2"


def test_the_summary_states_the_manifest_but_not_its_step_records():
    # the steps are the store's steps table; copied into summary.json they made it 16 MB at
    # 100 M segments (every reader of it paid for them)
    from iosweep.analysis.findings.sections import run_meta_summary

    man = {"steps": [{"rank": 0, "epoch": 0, "step": s} for s in range(3)], "reason": "ok"}
    meta = RunMeta.from_dict(
        {"run_id": "r", "tracer": "darshan", "clock_zero": 0.0, "manifest": man}
    )
    assert run_meta_summary(meta)["manifest"] == {"reason": "ok"}
    assert len(meta.manifest["steps"]) == 3  # the store's own record keeps them
