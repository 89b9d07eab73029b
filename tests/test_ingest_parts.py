"""Ingest in bounded memory: the logs' tables spilled to disk as they are read and written back
a log at a time in row groups of their own, or (Darshan logs) read in two passes, heads first
and then records as the store is written, make the same store as tables held in memory."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pyarrow.parquet as pq
import pytest
from factories import store_frames

from iosweep.trace import store as trace_store
from iosweep.trace.darshan import head
from iosweep.trace.darshan.check import check_log
from iosweep.trace.ingest import ingest, parts, readlogs, stream
from iosweep.trace.logs import LogError
from iosweep.trace.schema import STORE_TABLES

RUNS = [
    "horovod-pytorch-mnist/darshan-np4",  # per-process Darshan logs, workers among them
    "horovod-tf2-mnist/dftracer-np4",  # DFTracer traces: application events too
    "darshan-logs/mpi_io_test_with_dxt",  # one MPI log of 32 ranks
]


@pytest.mark.parametrize("run", RUNS)
def test_spilled_logs_make_the_same_store(shared_data, tmp_path, monkeypatch, run):
    held = ingest([shared_data / run], tmp_path / "held")
    spilled, heads = [], []

    def spill(log, where, key):
        spilled.append(key)
        parts.spill(log, where, key)

    def read_head(path):
        heads.append(path)
        return head.read_darshan_head(path)

    monkeypatch.setattr(parts, "SPILL_MIN_BYTES", 0)
    monkeypatch.setattr(readlogs, "spill", spill)
    monkeypatch.setattr(stream, "read_darshan_head", read_head)
    # row groups of 1 KiB: a group or more a rank, each with the dictionaries of its own rows
    monkeypatch.setattr(trace_store, "GROUP_BYTES", 1024)
    out = tmp_path / "spilled"
    meta = ingest([shared_data / run], out)
    # per-process Darshan logs: heads, then each log's records as the store is written (one
    # reader: nothing spilled); DFTracer traces spilled; an MPI log's head read, then it whole
    n = len(meta.processes)
    expected = {RUNS[0]: (n, 0), RUNS[1]: (0, n), RUNS[2]: (1, 1)}[run]
    assert (len(heads), len(spilled)) == expected
    assert not (out / parts.SPILL_DIR).exists()  # removed once the store is written
    segments = pq.ParquetFile(out / "segments.parquet")
    assert segments.metadata.num_row_groups >= 4
    for g in range(segments.metadata.num_row_groups):
        # a group's path dictionary holds its own paths only (Parquet writes it whole in
        # every group: the run's every path would be written again and again)
        path = segments.read_row_group(g, ["path"])["path"].combine_chunks()
        assert len(path.dictionary) == len(set(path.to_pylist()) - {None})
    a, b = store_frames(tmp_path / "held"), store_frames(out)
    for name in STORE_TABLES:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)
    ja = json.loads((tmp_path / "held" / "run.json").read_text())
    jb = json.loads((out / "run.json").read_text())
    assert ja == jb and held.processes == meta.processes


def test_a_failed_ingest_leaves_no_spilledstore_frames(shared_data, tmp_path, monkeypatch):
    monkeypatch.setattr(parts, "SPILL_MIN_BYTES", 0)

    def no_room(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(trace_store, "_write_parts", no_room)
    monkeypatch.setattr(trace_store, "_write_joint", no_room)  # the two-pass ingest's
    out = tmp_path / "store"
    with pytest.raises(OSError):
        ingest([shared_data / RUNS[0]], out)
    assert not (out / parts.SPILL_DIR).exists() and not (out / "run.json").exists()


def test_spilled_darshan_logs_are_read_by_a_pool_and_make_the_same_store(
    shared_data, tmp_path, monkeypatch
):
    # issue 51: Darshan logs whose tables the readers spill (nothing travels between the
    # processes) are read by one process a core by default; held ones by one
    import os

    run = shared_data / "horovod-pytorch-mnist/darshan-np4"
    held = ingest([run], tmp_path / "held")
    monkeypatch.setattr(parts, "SPILL_MIN_BYTES", 0)
    monkeypatch.setattr(readlogs, "PARALLEL_MIN_BYTES", 0)
    out = tmp_path / "pooled"
    pooled = ingest([run], out)
    cores = min(len(os.sched_getaffinity(0)), 8)
    listed = json.loads((out / "inputs.json").read_text())["read_processes"]
    assert (
        listed == cores
        and json.loads((tmp_path / "held" / "inputs.json").read_text())["read_processes"] == 1
    )
    a, b = store_frames(tmp_path / "held"), store_frames(out)
    for name in STORE_TABLES:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)
    assert held.processes == pooled.processes


def test_a_log_whose_records_fail_after_its_head_is_left_out_and_said(
    shared_data, tmp_path, monkeypatch
):
    # issue 51: in the two-pass ingest a log's head is read first; damage past it (here its
    # file-name records) shows only when its records are read, as the store is written
    run = tmp_path / "run"
    shutil.copytree(shared_data / RUNS[0], run)
    logs = sorted(run.rglob("*.darshan"))
    damaged = logs[-1]
    off, ln = check_log(damaged).regions["names"]
    data = bytearray(damaged.read_bytes())
    data[off + ln // 2] ^= 0xFF  # the deflate stream's checksum fails
    damaged.write_bytes(bytes(data))
    with pytest.raises(LogError):
        check_log(damaged)
    head.read_darshan_head(damaged)  # its head is intact

    monkeypatch.setattr(parts, "SPILL_MIN_BYTES", 0)
    meta = ingest([run], tmp_path / "streamed")
    monkeypatch.setattr(parts, "SPILL_MIN_BYTES", 1 << 60)
    whole = ingest([run], tmp_path / "whole")
    said = [i for i in meta.issues if i.source == str(damaged)]
    assert [(i.kind, i.severity) for i in said] == [("corrupt", "error")]
    assert meta.incomplete and meta.status == "partial"
    # its rows and its process are left out; every other log's are as read in one pass
    assert damaged.name not in {p.source for p in meta.processes}
    others = [p for p in whole.processes if p.source != damaged.name]
    assert meta.processes == others and len(others) == len(logs) - 1
    a, b = store_frames(tmp_path / "whole"), store_frames(tmp_path / "streamed")
    for name in ("segments", "counters"):
        assert not (b[name]["source"] == damaged.name).any()
        pd.testing.assert_frame_equal(
            a[name][a[name]["source"] != damaged.name].reset_index(drop=True), b[name], obj=name
        )


def test_a_log_whose_dxt_records_fail_after_its_head_keeps_its_head_s_host_and_says_so(
    tmp_path, monkeypatch
):
    # issue 51: the head reads the host of a log's first DXT record (the first KiBs of the
    # region); damage further on shows only when the records are read: the log keeps the host
    # its head found (its rank was tied by it), and a warning says the records named another
    # (none: the DXT module is lost, its counters kept)
    import numpy as np

    from iosweep.trace.darshan.libutil import SEGMENT_DTYPE
    from iosweep.trace.darshan.write import DxtFile, write_darshan_log

    run = tmp_path / "run"
    run.mkdir()
    rng = np.random.default_rng(51)
    files = []
    for i in range(400):  # random offsets and sizes: a DXT region of tens of KiB compressed
        seg = np.zeros(16, SEGMENT_DTYPE)
        seg["offset"], seg["length"] = rng.integers(0, 1 << 40, 16), rng.integers(1, 1 << 20, 16)
        seg["start"] = np.sort(rng.random(16)) * 5
        seg["end"] = seg["start"] + 0.001
        files.append(DxtFile(f"/data/f{i}.bin", seg, host="alpha"))
    common = {"end": 1.7e9 + 10, "exe": "python t.py"}
    damaged = write_darshan_log(run / "a.darshan", files, start=1.7e9, jobid=1, **common)
    write_darshan_log(run / "b.darshan", files[:2], start=1.7e9 + 1, jobid=2, **common)
    layout = check_log(damaged)
    (off, ln) = max(
        (v for k, v in layout.regions.items() if k.startswith("slot")), key=lambda s: s[1]
    )
    assert ln > 16 << 10, ln  # the DXT region, the largest
    data = bytearray(damaged.read_bytes())
    data[off + ln - 64] ^= 0xFF  # near the stream's end: far past its first record
    damaged.write_bytes(bytes(data))
    assert head.read_darshan_head(damaged).host == "alpha"

    monkeypatch.setattr(parts, "SPILL_MIN_BYTES", 0)  # the two-pass ingest
    meta = ingest([run], tmp_path / "store")
    said = {i.kind: i for i in meta.issues if i.source == str(damaged)}
    assert said["corrupt"].severity == "error" and "DXT_POSIX" in said["corrupt"].message
    assert said["host"].severity == "warning"
    assert "its records name host None, its first DXT record 'alpha'" in said["host"].message
    (proc,) = [p for p in meta.processes if p.source == damaged.name]
    assert proc.host == "alpha"
    segs = pq.read_table(tmp_path / "store" / "segments.parquet").to_pandas()
    assert set(segs["source"].astype(str)) == {"b.darshan"}  # a's DXT lost, its counters kept
    counters = pq.read_table(tmp_path / "store" / "counters.parquet").to_pandas()
    assert (counters["source"].astype(str) == "a.darshan").sum() == 400
