"""The run's merged Darshan log (STORE/merged.darshan), opened by Darshan's own tools.

The expected figures come from outside the writer: PyDarshan's reading of the per-process
input logs, the rank files of the fixture, and bins worked out by hand."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import darshan
import numpy as np
import pandas as pd
import pytest
from conftest import shared_fixture, unavailable

from iosweep.trace.darshan.merge import _rebin
from iosweep.trace.ingest import MERGED_DARSHAN, ingest, write_merged_darshan

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / ".venv-tools" / "bin"  # tools/setup.sh: drishti-io, dxt-explorer


def report(path: Path) -> darshan.DarshanReport:
    return darshan.DarshanReport(str(path), read_all=True)


def light(path: Path) -> darshan.DarshanReport:
    """POSIX and DXT_POSIX records only (reading every module of 17 logs takes a minute)."""
    rep = darshan.DarshanReport(str(path), read_all=False)
    rep.mod_read_all_records("POSIX")
    rep.mod_read_all_dxt_records("DXT_POSIX")
    return rep


def dxt_count(rep: darshan.DarshanReport) -> int:
    return sum(r["write_count"] + r["read_count"] for r in rep.records["DXT_POSIX"])


def posix(rep: darshan.DarshanReport) -> pd.DataFrame:
    return rep.records["POSIX"].to_df()["counters"]


def dxt_segments(rep: darshan.DarshanReport) -> pd.DataFrame:
    rows = []
    for rec in rep.records["DXT_POSIX"]:
        for op in ("read_segments", "write_segments"):
            seg = pd.DataFrame(rec[op], columns=["offset", "length", "start_time", "end_time"])
            seg = seg.assign(rank=rec["rank"], id=rec["id"], host=rec["hostname"], op=op)
            rows.append(seg)
    return pd.concat(rows, ignore_index=True)


@pytest.fixture(scope="module")
def np4(tmp_path_factory) -> tuple[Path, dict[int, Path]]:
    """The 4-rank PyTorch MNIST run ingested, and each rank's own log (by its rank file)."""
    run = shared_fixture("horovod-pytorch-mnist/darshan-np4")
    store = tmp_path_factory.mktemp("np4") / "store"
    ingest([run], store)
    assert not (store / MERGED_DARSHAN).exists()  # on demand only: the store does not wait
    assert write_merged_darshan(store) == []
    logs = {}
    for rf in (run / "ranks").glob("rank-*.json"):
        info = json.loads(rf.read_text())
        (logs[info["rank"]],) = (run / "logs").glob(f"*_id{info['pid']}-*.darshan")
    return store / MERGED_DARSHAN, logs


def test_the_merged_log_is_a_4_rank_job_with_each_rank_s_own_records(np4):
    merged, logs = np4
    rep = report(merged)
    assert rep.metadata["job"]["nprocs"] == 4
    assert not any(m["partial_flag"] for m in rep.data["modules"].values())
    starts = {}
    for rank, log in logs.items():
        own = report(log)
        starts[rank] = (
            own.metadata["job"]["start_time_sec"] + own.metadata["job"]["start_time_nsec"] * 1e-9
        )
        mine = posix(rep)[posix(rep)["rank"] == rank]
        theirs = posix(own)
        # every input record is rank 0 (non-MPI); in the merged log, the rank file's rank
        assert set(theirs["rank"]) == {0}
        assert sorted(mine["id"]) == sorted(theirs["id"])
        for col in ("POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN", "POSIX_READS", "POSIX_OPENS"):
            assert mine[col].sum() == theirs[col].sum(), (rank, col)
    job = rep.metadata["job"]
    start = job["start_time_sec"] + job["start_time_nsec"] * 1e-9
    assert start == pytest.approx(min(starts.values()), abs=1e-6)

    # DXT: each rank's segments, with its host, moved onto the merged job's clock
    seg = dxt_segments(rep)
    assert sorted(seg["rank"].unique()) == [0, 1, 2, 3] and set(seg["host"]) == {"vm"}
    for rank, log in logs.items():
        own = dxt_segments(report(log))
        mine = seg[seg["rank"] == rank]
        assert len(mine) == len(own) and mine["length"].sum() == own["length"].sum()
        for col in ("start_time", "end_time"):
            moved = np.sort(own[col].to_numpy(float) + (starts[rank] - start))
            assert np.allclose(np.sort(mine[col].to_numpy(float)), moved, atol=1e-6), col


def test_the_merged_heatmap_is_one_grid_that_keeps_every_byte(np4):
    merged, logs = np4
    heat = report(merged).heatmaps["POSIX"]  # PyDarshan fails on inconsistent bins
    read = heat.to_df(ops=["read"])
    assert sorted(read.index) == [0, 1, 2, 3]
    for rank, log in logs.items():
        own = report(log).heatmaps["POSIX"]
        for op in ("read", "write"):
            assert heat.to_df(ops=[op]).loc[rank].sum() == own.to_df(ops=[op]).sum().sum()


def test_drishti_reads_the_merged_log_as_4_processes(np4, tmp_path):
    merged, _ = np4
    drishti = TOOLS / "drishti"
    if not drishti.exists():
        unavailable(f"{drishti} not found (tools/setup.sh installs it)")
    res = subprocess.run(
        [str(drishti), "--csv", "--export_dir", str(tmp_path), str(merged)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert re.search(r"PROCESSES\s+4\b", res.stdout)
    assert re.search(r"FILES:\s+\d+ files", res.stdout)


@pytest.mark.slow
def test_dxt_explorer_sees_every_rank_read_the_training_images(np4, tmp_path):
    merged, _ = np4
    explorer = TOOLS / "dxt-explorer"
    if not explorer.exists():
        unavailable(f"{explorer} not found (tools/setup.sh installs it)")
    log = tmp_path / "merged.darshan"
    shutil.copy(merged, log)  # DXT Explorer writes its tables beside the log
    env = {**os.environ, "PATH": f"{TOOLS}{os.pathsep}{os.environ['PATH']}"}
    res = subprocess.run(
        [str(explorer), "-csv", "-o", str(tmp_path / "index.html"), str(log)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    rep = report(log)
    (fid,) = [i for i, n in rep.name_records.items() if n.endswith("/train-images-idx3-ubyte")]
    ops = pd.read_feather(tmp_path / f"merged.darshan.{fid}.dxt")
    # the fixture's README: every rank reads each IDX file whole, then a zero-length read
    assert ops.groupby("rank").size().to_dict() == {0: 2, 1: 2, 2: 2, 3: 2}


def test_darshan_parser_reads_the_merged_log_where_it_is_installed(np4):
    merged, _ = np4
    parser = shutil.which("darshan-parser")
    if parser is None:  # darshan-util is in no registry: nothing to run here
        return
    res = subprocess.run([parser, str(merged)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "# nprocs: 4" in res.stdout


@pytest.mark.slow
def test_workers_are_folded_into_their_rank(tmp_path):
    """ImageNet-style run: rank 0 and its 16 DataLoader workers, 17 logs, one rank."""
    run = shared_fixture("imagenet-style-resnet50-h100/darshan16")
    meta = ingest([run], tmp_path / "store")
    assert sorted({p.role for p in meta.processes}) == ["rank", "worker"]
    write_merged_darshan(tmp_path / "store")
    rep = light(tmp_path / "store" / MERGED_DARSHAN)
    assert rep.metadata["job"]["nprocs"] == 1
    logs = sorted(run.rglob("*.darshan"))
    assert len(logs) == 17
    inputs = [light(p) for p in logs]
    merged = posix(rep)
    assert set(merged["rank"]) == {0}
    assert merged["id"].is_unique  # one record per file: the workers' folded into rank 0's
    for col in ("POSIX_BYTES_READ", "POSIX_READS", "POSIX_OPENS"):
        assert merged[col].sum() == sum(posix(r)[col].sum() for r in inputs), col
    assert dxt_count(rep) == sum(dxt_count(r) for r in inputs) == 80_156


def test_merging_by_hand_ranks_hosts_and_a_log_left_out(tmp_path):
    # the two logs of the 2-rank run placed as ranks 0 and 2 on two hosts (a rank between them
    # has no log): a 3-rank job; a third input without a rank is named as left out
    from iosweep.trace.darshan.merge import MergeInput, write_merged_log

    logs = sorted(shared_fixture("horovod-pytorch-mnist/darshan-np2/logs").glob("*.darshan"))
    out = tmp_path / "m.darshan"
    res = write_merged_log(
        [MergeInput(logs[0], 0, "a"), MergeInput(logs[1], 2, "b"), MergeInput(logs[1], -1)],
        out,
        jobid=77,
    )
    assert (res.path, res.nprocs, res.processes) == (out, 3, 2)
    assert res.left_out == [f"{logs[1].name}: no rank"]
    rep = report(out)
    assert (rep.metadata["job"]["nprocs"], rep.metadata["job"]["jobid"]) == (3, 77)
    assert set(posix(rep)["rank"]) == {0, 2}
    seg = dxt_segments(rep)
    assert seg.groupby("rank")["host"].unique().map(list).to_dict() == {0: ["a"], 2: ["b"]}
    with pytest.raises(ValueError) as err:
        write_merged_log([MergeInput(logs[0], -1)], out)
    assert str(err.value) == "write_merged_log: no log with a rank"


def test_the_merged_job_header_is_the_earliest_process_s(tmp_path):
    # rank 0 started 10 s after rank 1 (job ids differ, as a restarted job's can): the merged
    # job starts with rank 1, and its job id and executable are rank 1's
    from iosweep.trace.darshan.libutil import SEGMENT_DTYPE
    from iosweep.trace.darshan.merge import MergeInput, write_merged_log
    from iosweep.trace.darshan.write import DxtFile, write_darshan_log

    seg = np.zeros(1, SEGMENT_DTYPE)
    seg["length"], seg["start"], seg["end"] = 100, 1.0, 1.5
    late = write_darshan_log(tmp_path / "late.darshan", [DxtFile("/d/a", seg)],
                             start=1_700_000_100, end=1_700_000_200, exe="./late", jobid=5)  # fmt: skip
    early = write_darshan_log(tmp_path / "early.darshan", [DxtFile("/d/b", seg)],
                              start=1_700_000_090, end=1_700_000_150, exe="./early", jobid=4)  # fmt: skip
    out = write_merged_log([MergeInput(late, 0), MergeInput(early, 1)], tmp_path / "m.darshan")
    job = report(out.path).metadata
    assert (job["job"]["start_time_sec"], job["job"]["end_time_sec"]) == (
        1_700_000_090,
        1_700_000_200,
    )
    assert job["job"]["jobid"] == 4 and job["exe"].startswith("./early")


def test_rebinning_a_heatmap_by_hand():
    # bins of 1 s from 0.5 s onto bins of 2 s from 0: [0.5, 1.5) lies in [0, 2); [1.5, 2.5)
    # (empty) across 2 s; [2.5, 3.5) in [2, 4)
    assert _rebin(np.array([10, 0, 6]), 0.5, 1.0, 2.0, 3).tolist() == [10, 6, 0]
    # [1.5, 2.5): half in [0, 2), half in [2, 4); odd bytes: the first bin rounds down
    assert _rebin(np.array([10]), 1.5, 1.0, 2.0, 2).tolist() == [5, 5]
    assert _rebin(np.array([7]), 1.5, 1.0, 2.0, 2).tolist() == [3, 4]
    # past the grid's end: the last bin keeps the bytes
    assert _rebin(np.array([4]), 5.0, 1.0, 2.0, 2).tolist() == [0, 4]


MANY_LOGS = r"""
import resource, sys
from pathlib import Path
import numpy as np
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
from iosweep.trace.darshan.libutil import SEGMENT_DTYPE
from iosweep.cli import main
from iosweep.trace.darshan.write import DxtFile, write_darshan_log

root = Path(sys.argv[1])
(root / "logs").mkdir()
seg = np.zeros(2, SEGMENT_DTYPE)
seg["length"], seg["offset"] = 4096, [0, 4096]
seg["start"], seg["end"] = [0.1, 0.2], [0.15, 0.25]
for r in range(300):
    write_darshan_log(root / "logs" / f"r{r}.darshan", [DxtFile(f"/data/{r}.bin", seg)],
                      start=1.7e9 + r * 0.01, end=1.7e9 + 5, exe="python t.py", jobid=1000 + r)
# no manifest: the ranks are numbered by process start (a warning says so)
sys.exit(main(["ingest", str(root / "logs"), "-o", str(root / "store"), "--merged-log"]))
"""


def test_a_run_of_more_logs_than_open_files_allowed_merges(tmp_path):
    # issue 51: 300 logs ingested and merged (`iosweep ingest --merged-log`) where a process
    # may hold 256 files open (a common default is 1,024; the 30 M and 100 M runs have 1,500
    # and 5,152 logs): the merged log is written, every rank in it, and PyDarshan reads it
    # back (it failed with "Too many open files" after ~250, lost with an empty warning)
    res = subprocess.run(
        [sys.executable, "-c", MANY_LOGS, str(tmp_path)], capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"merged log: {tmp_path / 'store' / 'merged.darshan'}" in res.stdout
    meta = json.loads((tmp_path / "store" / "run.json").read_text())
    assert len(meta["processes"]) == 300
    assert not [i for i in meta["issues"] if i["kind"].startswith("merge")]
    with darshan.DarshanReport(str(tmp_path / "store" / "merged.darshan"), read_all=True) as rep:
        assert rep.metadata["job"]["nprocs"] == 300
        dxt = rep.records["DXT_POSIX"].to_df()
        assert sorted(int(d["rank"]) for d in dxt) == list(range(300))


def test_merge_on_demand_and_what_it_says(shared_data, tmp_path, capsys):
    """`iosweep merge STORE` after the ingest; a store whose inputs are not listed is named;
    an MPI job's store has nothing to merge (its own log already is one job)."""
    from iosweep.cli import main

    run = shared_data / "horovod-pytorch-mnist/darshan-np2"
    store = tmp_path / "np2"
    assert main(["ingest", str(run), "-o", str(store)]) == 0
    assert not (store / MERGED_DARSHAN).exists()
    assert main(["merge", str(store)]) == 0
    assert f"wrote {store / MERGED_DARSHAN}" in capsys.readouterr().out
    assert light(store / MERGED_DARSHAN).metadata["job"]["nprocs"] == 2

    (store / "inputs.json").unlink()
    assert main(["merge", str(store)]) == 1
    err = capsys.readouterr().err
    assert f"{store}: no readable inputs.json" in err and "--merged-log" in err
    assert not (store / MERGED_DARSHAN).exists()  # a stale merged log does not stay

    mpi = tmp_path / "mpi"
    log = shared_data / "darshan-logs/mpi_io_test_with_dxt"
    assert main(["ingest", str(log), "-o", str(mpi), "--merged-log"]) == 0
    assert "no per-process Darshan log" not in capsys.readouterr().out
    assert main(["merge", str(mpi)]) == 0
    assert "no per-process Darshan log to merge" in capsys.readouterr().out
    assert not (mpi / MERGED_DARSHAN).exists()
    assert main(["merge", str(tmp_path / "nowhere")]) == 1
    assert "not a trace store" in capsys.readouterr().err


def every_record(path: Path) -> dict:
    """Every module's records as PyDarshan reads them, in the log's order: counters and
    fcounters as bytes, DXT records whole (segments as numpy-mode dicts: pandas frames a record
    take seconds for a few thousand), heatmaps' bins."""
    out: dict = {}
    with darshan.DarshanReport(str(path), read_all=False) as rep:
        rep.read_all_generic_records()
        rep.read_all_heatmap_records()
        rep.read_all_dxt_records(dtype="numpy")
        out["job"], out["names"] = rep.metadata, rep.name_records
        for m, recs in rep.records.items():
            if m.startswith("DXT"):
                out[m] = recs.to_numpy()  # (the records as read: a list of dicts)
            elif m != "HEATMAP":
                d = recs.to_df()
                out[m] = [d[k].to_numpy().tobytes() for k in ("counters", "fcounters") if k in d]
        out["heat"] = {k: h.to_df(ops=["read", "write"]).to_numpy().tobytes()
                       for k, h in rep.heatmaps.items()}  # fmt: skip
    return out


@pytest.mark.parametrize(
    "run",
    [
        "horovod-pytorch-mnist/darshan-np4",
        "horovod-tf2-mnist/darshan-np2",
        # a rank and its 2 DataLoader workers (darshan16, 16 workers, takes 30 s record by record)
        "imagenet-style-resnet50-h100/darshan2",
    ],
)
def test_the_bulk_merge_writes_what_libdarshan_util_writes_record_by_record(run, tmp_path):
    # issue 51: the merged log's counter and DXT records are made with numpy and handed to
    # libdarshan-util's writer a rank at a time; the reference is the same log written a
    # record at a time through libdarshan-util (its own aggregation folding a rank's
    # processes), compared by PyDarshan's reading of every record
    from iosweep.trace.darshan.merge import MergeInput, write_merged_log

    logs = sorted(shared_fixture(run).rglob("*.darshan"))
    inputs = [MergeInput(p, i % 2, "" if i % 3 else f"h{i}") for i, p in enumerate(logs)]
    if "imagenet" in run:  # one rank
        inputs = [MergeInput(p, 0, "") for p in logs]
    bulk = write_merged_log(inputs, tmp_path / "bulk.darshan")
    one_by_one = write_merged_log(inputs, tmp_path / "one.darshan", bulk=False)
    assert (bulk.nprocs, bulk.processes) == (one_by_one.nprocs, one_by_one.processes)
    a, b = every_record(bulk.path), every_record(one_by_one.path)
    assert sorted(a) == sorted(b) and "POSIX" in a and "DXT_POSIX" in a
    for k in a:
        assert a[k] == b[k], k
