"""Darshan reader: the real logs in ../shared, byte-level damage, and the log writer."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import darshan
import numpy as np
import pyarrow as pa
import pytest
from conftest import pydarshan_records

from iosweep.trace.darshan.check import check_log
from iosweep.trace.darshan.head import _dxt_hosts, read_darshan_head
from iosweep.trace.darshan.read import SEGMENT_DTYPE, read_darshan_log, read_darshan_log_isolated
from iosweep.trace.darshan.write import DxtFile, write_darshan_log
from iosweep.trace.logs import LogError

PT_NP1 = "horovod-pytorch-mnist/darshan-np1/logs/0_python_id10942-10942_11-21-60800-16751588966123711645_4.darshan"
IDX_SIZES = {  # the synthetic MNIST in IDX format that every rank reads whole
    "train-images-idx3-ubyte": 47040016,
    "train-labels-idx1-ubyte": 60008,
    "t10k-images-idx3-ubyte": 7840016,
    "t10k-labels-idx1-ubyte": 10008,
}


def _kinds(log) -> list[str]:
    return [i.kind for i in log.issues]


# ---------------------------------------------------------------------------------------
# every log of the public darshan-logs collection: read, or a clear and expected error
# ---------------------------------------------------------------------------------------


def test_release_logs_every_format_version(shared_data: Path):
    """mpi-io-test as written by Darshan 3.1.8 ... 3.5.0 (formats 3.10, 3.21, 3.41)."""
    versions = {}
    for f in sorted((shared_data / "darshan-logs/release_logs").glob("*.darshan")):
        log = read_darshan_log(f)
        versions[f.name] = log.version
        assert log.mpi and log.nprocs == 4
        assert log.exe.startswith("/") and "mpi-io-test" in log.exe
        c = log.counters.to_pandas()
        posix = c[c.module == "POSIX"]
        # mpi-io-test: 4 ranks write then read 16 MiB blocks of one shared file
        assert (posix.bytes_written > 0).any() and (posix.bytes_read > 0).any()
        assert posix.path.str.endswith("mpi-io-test.tmp.dat").any()
        assert _kinds(log) == ["no-dxt"]  # these logs were written without DXT
        assert log.end >= log.start > 1.5e9
    assert set(versions.values()) == {"3.10", "3.21", "3.41"}, versions


def _as_format_3_00(src: bytes) -> bytes:
    """A format-3.10 log (16 module slots) rewritten as Darshan 3.0.x wrote its logs: the
    same header layout, version "3.00", and name records (uint64 id, uint32 length, path)
    instead of NUL-terminated paths (darshan-logutils.c, darshan_log_get_namerecs_3_00).
    The record formats keep their versions in the header's mod_ver, as libdarshan-util
    reads them; the public darshan-logs collection's 3.0.0/3.0.1 logs have no license to
    be copied here."""
    import zlib

    assert src[:4] == b"3.10"
    maps = [struct.unpack_from("<qq", src, 24 + 16 * i) for i in range(17)]  # names, slots
    job_off = 360  # 8 + 8 + 1 (+3) + 4 + 16 * 17 + 4 * 16
    job = src[job_off : maps[0][0]]
    names = zlib.decompress(src[maps[0][0] : maps[0][0] + maps[0][1]])
    old = b""
    pos = 0
    while pos < len(names):
        end = names.index(b"\0", pos + 8)
        path = names[pos + 8 : end]
        old += names[pos : pos + 8] + struct.pack("<I", len(path)) + path
        pos = end + 1
    packed = zlib.compress(old)
    out = bytearray(src[:job_off])
    out[:4] = b"3.00"
    body = job + packed
    struct.pack_into("<qq", out, 24, job_off + len(job), len(packed))
    for i in range(1, 17):
        off, ln = maps[i]
        if ln:
            struct.pack_into("<qq", out, 24 + 16 * i, job_off + len(body), ln)
            body += src[off : off + ln]
    return bytes(out) + body


def test_format_3_00_logs_are_read_as_pydarshan_reads_them(tmp_path: Path, shared_data: Path):
    src = (shared_data / "darshan-logs/release_logs/mpi-io-test-x86_64-3.1.8.darshan").read_bytes()
    path = _write(tmp_path, _as_format_3_00(src), "mpi-io-test-3.0.darshan")
    rep = darshan.DarshanReport(str(path), read_all=True)  # the independent reading
    assert rep.metadata["job"]["log_ver"] == "3.00"
    log = read_darshan_log(path)
    assert log.version == "3.00" and log.mpi and log.nprocs == 4
    c = log.counters.to_pandas().set_index("module")
    for module, prefix in (("POSIX", "POSIX"), ("MPIIO", "MPIIO")):
        theirs = rep.records["MPI-IO" if module == "MPIIO" else module].to_df()["counters"]
        (rid,) = theirs["id"]
        assert c.loc[module, "path"] == rep.name_records[rid] == "/tmp/test/mpi-io-test.tmp.dat"
        assert c.loc[module, "bytes_read"] == theirs[f"{prefix}_BYTES_READ"].sum() == 64 << 20
        assert c.loc[module, "bytes_written"] == theirs[f"{prefix}_BYTES_WRITTEN"].sum()


def test_mpi_log_with_dxt_keeps_real_ranks_and_hosts(shared_data: Path):
    log = read_darshan_log(
        next((shared_data / "darshan-logs/mpi_io_test_with_dxt").glob("*.darshan"))
    )
    seg = log.segments.to_pandas()
    assert log.mpi and log.nprocs == 32 and log.version == "3.21"
    assert sorted(seg["rank"].unique()) == list(range(32))
    assert set(seg["host"].astype(str)) == {"sn362.localdomain"}
    assert set(seg["module"].astype(str)) == {"POSIX", "MPIIO"}
    # one shared file; every rank wrote and read 16 MiB blocks of it
    shared = seg[seg.path.astype(str) == "/yellow/users/treddy/mpi_io_rough_work/test.out"]
    big = shared[(shared.module == "MPIIO") & (shared.length == 16777216)]
    assert big.groupby("op", observed=True)["rank"].nunique().to_dict() == {"read": 32, "write": 32}
    assert not log.issues


def test_matches_pydarshan_segment_for_segment(shared_data: Path):
    for rel in ("darshan-logs/nonmpi_dxt_anonymized/nonmpi_dxt_anonymized.darshan", PT_NP1):
        path = shared_data / rel
        ours = read_darshan_log(path).segments.to_pandas()
        rep = darshan.DarshanReport(str(path), read_all=False)
        rep.mod_read_all_dxt_records("DXT_POSIX", dtype="pandas")
        expected = []
        for rec in rep.records["DXT_POSIX"]:
            for op in ("write", "read"):
                for s in rec[f"{op}_segments"].itertuples():
                    name = rep.name_records[rec["id"]]
                    expected.append((name, op, s.offset, s.length, s.start_time, s.end_time))
        got = list(
            zip(
                ours.path.astype(str),
                ours.op.astype(str),
                ours.offset,
                ours.length,
                ours.start,
                ours.end,
                strict=True,
            )
        )
        assert got == expected, rel


def test_posix_counters_match_pydarshan_record_for_record(shared_data: Path):
    # PyDarshan's POSIX counters of the same log, per file: the timestamps Darshan leaves at
    # 0 (a file stat'ed and never opened, or never closed) are unknown here, not time 0
    path = shared_data / "darshan-logs/nonmpi_dxt_anonymized/nonmpi_dxt_anonymized.darshan"
    ours = read_darshan_log(path).counters.to_pandas()
    ours = ours[ours["module"] == "POSIX"].set_index("file_id")
    df = pydarshan_records(path)
    c = df["counters"].set_index("id")
    f = df["fcounters"].set_index("id")
    assert sorted(ours.index) == sorted(c.index)
    ours = ours.loc[c.index]
    for col, name in (("opens", "OPENS"), ("reads", "READS"), ("writes", "WRITES"),
                      ("stats", "STATS"), ("bytes_read", "BYTES_READ"),
                      ("bytes_written", "BYTES_WRITTEN"), ("seq_reads", "SEQ_READS"),
                      ("file_not_aligned", "FILE_NOT_ALIGNED")):  # fmt: skip
        assert ours[col].tolist() == c[f"POSIX_{name}"].tolist(), col
    for col, name in (("read_time", "READ_TIME"), ("meta_time", "META_TIME")):
        assert ours[col].to_numpy() == pytest.approx(f[f"POSIX_F_{name}"].to_numpy()), col
    never_opened = (c["POSIX_OPENS"] == 0).to_numpy()
    never_closed = (f["POSIX_F_CLOSE_END_TIMESTAMP"] <= 0).to_numpy()
    assert never_opened.sum() == 1 and never_closed.sum() == 6
    assert ours["open_start"].isna().to_numpy().tolist() == never_opened.tolist()
    assert ours["close_end"].isna().to_numpy().tolist() == never_closed.tolist()
    opened = ~never_opened
    assert ours["open_start"].to_numpy()[opened] == pytest.approx(
        f["POSIX_F_OPEN_START_TIMESTAMP"].to_numpy()[opened]
    )
    closed = ~never_closed
    assert ours["close_end"].to_numpy()[closed] == pytest.approx(
        f["POSIX_F_CLOSE_END_TIMESTAMP"].to_numpy()[closed]
    )


def test_fastest_and_slowest_rank_counters_only_on_a_reduced_record(shared_data: Path):
    # Darshan keeps them for a file shared by all ranks (rank -1): mpi-io-test's one POSIX
    # record, as PyDarshan reads it; a per-process record (rank >= 0) has none (null here)
    path = shared_data / "darshan-logs/release_logs/mpi-io-test-x86_64-3.5.0.darshan"
    ours = read_darshan_log(path).counters.to_pandas()
    (row,) = ours[ours["module"] == "POSIX"].to_dict("records")
    df = pydarshan_records(path)
    (c,) = df["counters"].to_dict("records")
    (f,) = df["fcounters"].to_dict("records")
    assert row["rank"] == c["rank"] == -1
    for col in ("fastest_rank", "fastest_rank_bytes", "slowest_rank", "slowest_rank_bytes"):
        assert row[col] == c[f"POSIX_{col.upper()}"], col
    for col in ("fastest_rank_time", "slowest_rank_time", "variance_rank_time"):
        assert row[col] == pytest.approx(f[f"POSIX_F_{col.upper()}"]), col
    assert row["variance_rank_bytes"] == f["POSIX_F_VARIANCE_RANK_BYTES"]
    per_process = read_darshan_log(shared_data / PT_NP1).counters.to_pandas()
    assert (per_process["rank"] >= 0).all()
    shared = [c for c in per_process if c.startswith(("fastest_", "slowest_", "variance_"))]
    assert len(shared) == 8 and per_process[shared].isna().all().all()


def test_partial_dxt_is_kept_and_flagged(shared_data: Path):
    log = read_darshan_log(shared_data / "darshan-logs/partial_data_dxt/partial_data_dxt.darshan")
    assert log.segments.num_rows > 100_000  # what DXT held before its buffer ran out
    assert sorted(log.incomplete) == ["DXT_MPIIO", "DXT_POSIX"]
    partial = [i for i in log.issues if i.kind == "partial-dxt"]
    assert len(partial) == 2 and all(i.severity == "error" for i in partial)
    assert "ran out of memory" in partial[0].message


def test_partial_stdio_counters_are_kept_and_flagged(shared_data: Path):
    log = read_darshan_log(
        shared_data / "darshan-logs/partial_data_stdio/partial_data_stdio.darshan"
    )
    c = log.counters.to_pandas()
    assert (c.module == "STDIO").sum() > 1000  # ~1024 files fopen'ed before the limit
    assert log.incomplete == ["STDIO"]
    assert "partial-counters" in _kinds(log)


def test_stdio_only_log(shared_data: Path):
    log = read_darshan_log(next((shared_data / "darshan-logs/stdio_no_posix").glob("*.darshan")))
    assert set(log.counters.column("module").to_pylist()) == {"STDIO"}
    assert log.segments.num_rows == 0
    (issue,) = log.issues
    assert issue.kind == "no-dxt" and issue.severity == "warning" and "STDIO" in issue.message


def test_stdio_writes_without_sizes_are_not_denied(shared_data: Path, tmp_path: Path):
    # the log's STDIO writes (PyDarshan's counters) have no size histogram and no DXT: the
    # small-requests check cannot be made, and says so; it said "not applicable: no writes"
    from iosweep.analysis import analyze_run
    from iosweep.trace.ingest import ingest

    log_dir = shared_data / "darshan-logs/stdio_no_posix"
    rep = darshan.DarshanReport(str(next(log_dir.glob("*.darshan"))), read_all=True)
    writes = int(rep.records["STDIO"].to_df()["counters"]["STDIO_WRITES"].sum())
    assert writes > 0
    ingest([log_dir], tmp_path / "store")
    sm = analyze_run(tmp_path / "store", tmp_path / "a")
    check = next(c for c in sm["checks"] if c["id"] == "small_requests.write")
    assert check["outcome"] == "not-checked"
    assert check["reason"].startswith(f"{writes:,} writes without their sizes")


def test_empty_log_says_no_io_recorded(shared_data: Path):
    path = shared_data / "darshan-logs/empty_log/empty_log.darshan"
    with pytest.raises(LogError) as e:
        read_darshan_log(path)
    assert e.value.kind == "empty" and "no I/O recorded" in e.value.message
    assert e.value.path == str(path)


def test_an_empty_log_is_ingested_and_analysed_as_empty_not_failed(shared_data, tmp_path, capsys):
    # the log is read (job metadata only: its README): ingest writes the store and says there
    # is no I/O, exit 0 (it wrote the store, then said "no log could be ingested", exit 1);
    # the analysis says empty; nodes unknown, not 0 (the log names no host)
    from iosweep.cli import main

    log_dir, store = shared_data / "darshan-logs/empty_log", tmp_path / "store"
    assert main(["ingest", str(log_dir), "-o", str(store)]) == 0
    said = capsys.readouterr()
    assert "no I/O recorded in the 1 log read" in said.out
    assert "no log could be ingested" not in said.err
    assert main(["analyze", str(store), "-o", str(tmp_path / "a")]) == 0
    assert "empty_log: empty, 0 processes" in capsys.readouterr().out
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["analysis_status"] == "empty" and summary["ranks"]["nodes"] is None


def test_a_logs_run_time_is_darshans_own_at_its_resolution(shared_data: Path):
    # logs before Darshan 3.4.7 hold whole seconds: a job that started and ended in one
    # second ran for Darshan's (and PyDarshan's) 1 s, not 0 s beside records that took
    # longer; logs with nanoseconds keep them. Expected: PyDarshan's own run_time.
    logs = sorted((shared_data / "darshan-logs").glob("*/*.darshan"))
    logs = [f for f in logs if "dlio_logs" not in f.parts and "empty_log" not in f.parts]
    assert len(logs) >= 9
    for f in logs:
        theirs = darshan.DarshanReport(str(f), read_all=False).metadata["job"]["run_time"]
        log = read_darshan_log(f)
        assert log.end - log.start == pytest.approx(theirs, abs=1e-6), f.name


def test_dlio_logs_are_non_mpi_processes_without_dxt(shared_data: Path):
    logs = [
        read_darshan_log(f)
        for f in sorted((shared_data / "darshan-logs/dlio_logs").glob("*.darshan"))
    ]
    assert len(logs) == 24
    assert all(not log.mpi and log.nprocs == 1 for log in logs)
    assert len({log.pid for log in logs}) == 24  # the pid comes from the log's file name
    assert {log.jobid for log in logs} == {3116902}  # the Slurm job, not the process
    assert all(_kinds(log) == ["no-dxt"] for log in logs)
    assert all(log.counters.num_rows > 0 for log in logs)


# ---------------------------------------------------------------------------------------
# the Horovod fixtures: the expected facts of shared/README.md
# ---------------------------------------------------------------------------------------


def test_pytorch_log_reads_each_idx_file_whole(shared_data: Path):
    log = read_darshan_log(shared_data / PT_NP1)
    assert (log.pid, log.host, log.mpi, log.version) == (10942, "vm", False, "3.41")
    assert log.start == pytest.approx(1795280000, abs=1e5)  # ns precision kept
    assert log.start % 1 != 0
    seg = log.segments.to_pandas()
    seg["name"] = seg.path.astype(str).str.rsplit("/", n=1).str[-1]
    for name, size in IDX_SIZES.items():
        reads = seg[(seg.name == name) & (seg.op == "read")].sort_values("start")
        assert list(zip(reads.offset, reads.length, strict=True)) == [(0, size), (size, 0)], name
    # rank 0 writes two checkpoints of about 60 KB
    ckpt = seg[seg.name.str.startswith("checkpoint-") & (seg.op == "write")]
    per_file = ckpt.groupby("name")["length"].sum()
    assert len(per_file) == 2 and per_file.between(55_000, 65_000).all()
    assert (seg.start >= 0).all() and (seg.end >= seg.start).all()
    assert seg.end.max() <= log.end - log.start + 1
    c = log.counters.to_pandas()
    imgs = c[c.path.astype(str).str.endswith("train-images-idx3-ubyte") & (c.module == "POSIX")]
    assert imgs.bytes_read.tolist() == [IDX_SIZES["train-images-idx3-ubyte"]]


def test_two_node_logs_name_their_hosts(shared_data: Path):
    d = shared_data / "horovod-pytorch-mnist/darshan-2nodes-np4"
    ranks = [json.loads(f.read_text()) for f in sorted((d / "ranks").glob("rank-*.json"))]
    host_of_pid = {r["pid"]: r["host"] for r in ranks}
    for f in sorted((d / "logs").glob("*.darshan")):
        log = read_darshan_log(f)
        assert log.host == host_of_pid[log.pid]
        assert set(log.segments.column("host").to_pylist()) == {log.host}


# ---------------------------------------------------------------------------------------
# damaged logs: byte-level corruptions of a real log
# ---------------------------------------------------------------------------------------


@pytest.fixture
def real_log(shared_data: Path) -> bytes:
    return (shared_data / PT_NP1).read_bytes()


def _write(tmp_path: Path, data: bytes, name: str = "damaged.darshan") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _error(path: Path) -> LogError:
    with pytest.raises(LogError) as e:
        read_darshan_log(path)
    assert e.value.path == str(path)  # every error names the culprit file
    return e.value


def test_zero_length_file(tmp_path: Path):
    e = _error(_write(tmp_path, b""))
    assert (e.kind, e.message) == ("unreadable", "empty file (0 bytes), not a Darshan log")


def test_a_path_that_cannot_be_read(tmp_path: Path):
    e = _error(tmp_path / "missing.darshan")
    assert (e.kind, e.message) == ("unreadable", "cannot read the file (No such file or directory)")
    e = _error(tmp_path)  # a directory
    assert (e.kind, e.message) == ("unreadable", "cannot read the file (Is a directory)")


def test_not_a_darshan_log(tmp_path: Path, real_log: bytes):
    e = _error(_write(tmp_path, b"# a DXT text dump, not a log\n" * 40))
    assert e.kind == "unreadable" and "not a Darshan log" in e.message
    flipped = bytearray(real_log)
    flipped[8] ^= 0xFF  # the magic number
    assert _error(_write(tmp_path, bytes(flipped))).kind == "unreadable"


def test_unsupported_versions(tmp_path: Path, real_log: bytes):
    for version, word in ((b"2.06", "older"), (b"9.99", "newer")):
        e = _error(_write(tmp_path, version + real_log[4:]))
        assert e.kind == "unsupported" and word in e.message and version.decode() in e.message


def test_truncated_inside_header(tmp_path: Path, real_log: bytes):
    e = _error(_write(tmp_path, real_log[:100]))
    assert e.kind == "truncated" and "header" in e.message


@pytest.mark.parametrize("region, what", [("job", "job record is"), ("names", "file-name records are")])  # fmt: skip
def test_truncated_in_the_job_or_name_records(tmp_path: Path, real_log: bytes, region, what):
    layout = check_log(_write(tmp_path, real_log, "ok.darshan"))
    off, _ = layout.regions[region]
    mapped = max(o + n for o, n in layout.regions.values())
    e = _error(_write(tmp_path, real_log[: off + 50]))
    assert e.kind == "truncated"
    assert e.message == f"file is {off + 50} bytes but its header maps {mapped}: the {what} cut off"


def test_unknown_compression_type(tmp_path: Path, real_log: bytes):
    # darshan_header: version string (8 bytes), magic number (8), then the compression type
    data = bytearray(real_log)
    data[16] = 7
    e = _error(_write(tmp_path, bytes(data)))
    assert (e.kind, e.message) == ("corrupt", "unknown compression type 7 in the header")


def test_truncated_in_dxt_keeps_counters_and_flags_the_loss(tmp_path: Path, real_log: bytes):
    layout = check_log(_write(tmp_path, real_log, "ok.darshan"))
    off, ln = layout.regions["slot10"]  # DXT_POSIX in format 3.41
    log = read_darshan_log(_write(tmp_path, real_log[: off + ln // 2]))
    assert log.segments.num_rows == 0
    assert log.counters.num_rows == read_darshan_log(tmp_path / "ok.darshan").counters.num_rows
    assert "DXT_POSIX" in log.incomplete
    (issue,) = [i for i in log.issues if i.kind == "truncated"]
    assert issue.severity == "error" and "DXT_POSIX" in issue.message
    assert f"file is {off + ln // 2} bytes" in issue.message


def test_flipped_bytes_in_dxt_drop_the_module_and_keep_the_rest(tmp_path: Path, real_log: bytes):
    off, ln = check_log(_write(tmp_path, real_log, "ok.darshan")).regions["slot10"]
    data = bytearray(real_log)
    data[off + ln // 2 : off + ln // 2 + 16] = b"\xff" * 16
    log = read_darshan_log(_write(tmp_path, bytes(data)))
    assert log.segments.num_rows == 0 and log.counters.num_rows > 0
    assert log.incomplete == ["DXT_POSIX"]
    assert [(i.kind, i.severity) for i in log.issues] == [("corrupt", "error")]


def test_flipped_bytes_in_posix_keep_the_other_modules(tmp_path: Path, real_log: bytes):
    off, ln = check_log(_write(tmp_path, real_log, "ok.darshan")).regions["slot1"]
    data = bytearray(real_log)
    data[off + ln // 2 : off + ln // 2 + 16] = b"\x00" * 16
    log = read_darshan_log(_write(tmp_path, bytes(data)))
    assert log.incomplete == ["POSIX"]
    assert log.segments.num_rows == 17  # DXT, read after the damaged POSIX region
    assert set(log.counters.column("module").to_pylist()) == {"STDIO"}


def test_flipped_bytes_in_job_and_names(tmp_path: Path, real_log: bytes):
    layout = check_log(_write(tmp_path, real_log, "ok.darshan"))
    for region in ("job", "names"):
        off, ln = layout.regions[region]
        data = bytearray(real_log)
        data[off + ln // 2 : off + ln // 2 + 16] = b"\xaa" * 16
        e = _error(_write(tmp_path, bytes(data)))
        assert e.kind == "corrupt" and "decompress" in e.message, region


def test_damaged_region_map(tmp_path: Path, real_log: bytes):
    data = bytearray(real_log)
    struct.pack_into("<Q", data, 48 + 16 * 1, 1500)  # POSIX offset inside the name records
    e = _error(_write(tmp_path, bytes(data)))
    assert e.kind == "corrupt" and "region map" in e.message


def test_no_corruption_crashes_the_process(tmp_path: Path, real_log: bytes):
    """Random truncations and byte runs, read in one child: it must survive them all.

    Unvalidated, libdarshan-util segfaults or aborts on some of these (PyDarshan's
    DarshanReport(read_all=True) crashed on ~3% of such cases here).
    """
    rng = np.random.default_rng(7)
    n = len(real_log)
    cases = []
    for i in range(40):
        cases.append(_write(tmp_path, real_log[: int(rng.integers(0, n))], f"cut{i}.darshan"))
    for i in range(80):
        data = bytearray(real_log)
        pos, k = int(rng.integers(0, n)), int(rng.choice([1, 4, 16]))
        data[pos : pos + k] = rng.integers(0, 256, min(k, n - pos), dtype=np.uint8).tobytes()
        cases.append(_write(tmp_path, bytes(data), f"flip{i}.darshan"))
    code = (
        "import sys\n"
        "from iosweep.trace.darshan.read import read_darshan_log\n"
        "from iosweep.trace.logs import LogError\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        log = read_darshan_log(p)\n"
        "        print(p, 'read', len(log.issues), flush=True)\n"
        "    except LogError as e:\n"
        "        print(p, e.kind, flush=True)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, *map(str, cases)], capture_output=True, text=True
    )
    done = res.stdout.splitlines()
    assert res.returncode == 0, f"reader died (code {res.returncode}) on {cases[len(done)]}"
    assert len(done) == len(cases)
    kinds = {line.split()[1] for line in done}
    assert kinds <= {"read", "unreadable", "truncated", "corrupt", "unsupported", "empty"}
    # every truncation is caught: a cut log never reads as complete
    for line in done[:40]:
        path, kind, *rest = line.split()
        if kind == "read" and Path(path).stat().st_size < n:
            assert int(rest[0]) > 0, line


def test_isolated_reader_gives_the_same_answer(tmp_path: Path, shared_data: Path):
    path = shared_data / PT_NP1
    assert read_darshan_log_isolated(path).segments.equals(read_darshan_log(path).segments)
    with pytest.raises(LogError) as e:
        read_darshan_log_isolated(_write(tmp_path, b""))
    assert e.value.kind == "unreadable"


_HEAD_FIELDS = ("pid", "exe", "start", "end", "jobid", "nprocs", "mpi", "version", "ppid", "header")


def test_a_logs_head_says_what_reading_it_whole_says(shared_data: Path):
    # issue 51: ingest ties large runs' logs to ranks from their heads alone, then reads
    # their records; what the head says must be what the whole log says (every log here)
    logs = sorted(shared_data.rglob("*.darshan"))
    assert len(logs) >= 90
    for path in logs:
        try:
            whole = read_darshan_log(path)
        except LogError as e:
            if e.kind == "empty":  # a header-level error: the head says the same
                with pytest.raises(LogError, match="no I/O recorded"):
                    read_darshan_head(path)
            continue
        h = read_darshan_head(path)
        assert h.head and h.segments is None and h.counters is None and not h.issues
        for f in _HEAD_FIELDS:
            assert getattr(h, f) == getattr(whole, f), (path.name, f)
        if not whole.mpi:  # an MPI log's ranks' hosts come from all its records
            assert h.host == whole.host, path.name


def _dxt_record(rank: int, host: bytes, segments: bytes) -> bytes:
    n = len(segments) // 32
    return struct.pack("<Qqq64sqq", 7, rank, 0, host, 0, n) + segments


def test_a_heads_host_is_rank_0s_first_record_with_operations(tmp_path: Path):
    # by hand: a shared record (rank -1) of 3,000 incompressible segments first (its 96 KB
    # span more than one piece inflated), rank 0's record without operations, then rank 0's
    rng = np.random.default_rng(1)
    region = zlib.compress(
        _dxt_record(-1, b"shared-host", rng.bytes(32 * 3000))
        + _dxt_record(0, b"idle-host", b"")
        + _dxt_record(0, b"rank0-host", rng.bytes(32))
        + _dxt_record(0, b"later-host", rng.bytes(32))
    )
    f = tmp_path / "region"
    f.write_bytes(b"pad" + region)
    assert len(region) > 1 << 16
    assert _dxt_hosts(f, (3, len(region)), 0, "<") == {-1: "shared-host", 0: "rank0-host"}
    # damaged after the first record: what came before
    f.write_bytes(b"pad" + region[: len(region) // 2])
    assert _dxt_hosts(f, (3, len(region) // 2), 0, "<") == {-1: "shared-host"}


def _plain(table):
    """A table's values, dictionary columns decoded (their dictionaries' order aside)."""
    if table is None:
        return None
    return table.cast(
        pa.schema([pa.field(f.name, getattr(f.type, "value_type", f.type)) for f in table.schema])
    ).to_pylist()


def test_bulk_reader_gives_what_libdarshan_util_hands_out(shared_data: Path, monkeypatch):
    """Module regions read in bulk (bulk.py: inflated by Python, turned into columns by numpy)
    against libdarshan-util's record-by-record reader on every real log of the fixtures:
    the same segments, counters, issues and flags (POSIX, STDIO, MPI-IO, DXT_POSIX and
    DXT_MPIIO among them; older module versions, which libdarshan-util upgrades, are left
    to it)."""
    from iosweep.trace.darshan import bulk, read

    logs = sorted(shared_data.rglob("*.darshan"))
    assert len(logs) >= 80
    seen: list[tuple[str, int, bool]] = []

    def spy(module: str, version: int, lib: str, size: int) -> bool:
        seen.append((module, version, bulk.bulk_readable(module, version, lib, size)))
        return seen[-1][2]

    def outcome(path: Path):
        try:
            log = read_darshan_log(path)
        except LogError as e:
            return ("error", e.kind, e.message)
        issues = [(i.kind, i.severity, i.message) for i in log.issues]
        return (_plain(log.segments), _plain(log.counters), issues, log.incomplete, log.host)

    monkeypatch.setattr(read, "bulk_readable", spy)
    got = {p: outcome(p) for p in logs}
    monkeypatch.setattr(read, "bulk_readable", lambda *_: False)
    for p in logs:
        assert got[p] == outcome(p), p
    # a huge region is left to libdarshan-util, which holds a record at a time
    big = bulk.BULK_MAX_REGION + 1
    assert not bulk.bulk_readable("DXT_POSIX", 1, "3.5.0", big)
    assert bulk.bulk_readable("DXT_POSIX", 1, "3.5.0", big - 1)
    assert not bulk.bulk_readable("DXT_POSIX", 1, "3.4.7", 0)  # another library's structs
    in_bulk = {(m, v) for m, v, b in seen if b}
    assert {m for m, _ in in_bulk} == {"POSIX", "STDIO", "MPI-IO", "DXT_POSIX", "DXT_MPIIO"}


def test_bulk_reader_over_runs_of_same_sized_records(tmp_path: Path, monkeypatch):
    """Records of one size are checked a run at a time (bulk._run_of): runs broken by records
    of other sizes, short runs and a last record of the run's size all read as
    libdarshan-util reads them, record by record."""
    from iosweep.trace.darshan import read

    rng = np.random.default_rng(3)
    sizes = [4] * 300 + [1, 7, 7, 2] + [2] * 5 + [3] * 70 + [5, 1] * 40 + [4] * 2000 + [6]
    files = []
    for i, k in enumerate(sizes):
        seg = np.zeros(k, SEGMENT_DTYPE)
        seg["offset"] = np.arange(k) * 4096
        seg["length"] = rng.integers(1, 4096, k)
        seg["start"] = np.sort(rng.random(k)) * 5
        seg["end"] = seg["start"] + 0.001
        files.append(DxtFile(f"/data/f{i}", seg, writes=int(rng.integers(0, k + 1))))
    kw = dict(start=1_700_000_000.0, end=1_700_000_006.0, exe="x", jobid=1)
    path = write_darshan_log(tmp_path / "runs.darshan", files, **kw)
    bulk = read_darshan_log(path)
    monkeypatch.setattr(read, "bulk_readable", lambda *_: False)
    one_by_one = read_darshan_log(path)
    assert bulk.segments.num_rows == sum(sizes)
    assert _plain(bulk.segments) == _plain(one_by_one.segments)
    assert _plain(bulk.counters) == _plain(one_by_one.counters)


def _with_dxt_region(path: Path, edit) -> Path:
    """``path`` rewritten with its DXT_POSIX region (the last one) inflated, changed by
    ``edit`` and compressed again; the header's region map follows the new length."""
    data = bytearray(path.read_bytes())
    layout = check_log(path)
    off, ln = layout.regions["slot10"]
    assert off + ln == len(data)  # the writer puts DXT_POSIX last
    raw = bytearray(zlib.decompress(bytes(data[off : off + ln])))
    edit(raw)
    packed = zlib.compress(bytes(raw))
    struct.pack_into("<QQ", data, 48 + 16 * 10, off, len(packed))
    path.write_bytes(bytes(data[:off]) + packed)
    return path


def test_a_dxt_record_counting_more_than_its_region_holds_is_named(tmp_path: Path):
    seg = np.zeros(3, SEGMENT_DTYPE)
    seg["length"], seg["start"] = 10, [0.1, 0.2, 0.3]
    seg["end"] = seg["start"] + 0.01
    files = [DxtFile("/data/a", seg), DxtFile("/data/b", seg)]
    kw = dict(start=1_700_000_000.0, end=1_700_000_002.0, exe="x", jobid=1)
    for name, count, word in (("big", 10**6, "more than the region holds"), ("neg", -5, "-5")):
        path = write_darshan_log(tmp_path / f"{name}.darshan", files, **kw)
        # the second record's read count (after the first record: header 104 + 3 segments)
        _with_dxt_region(path, lambda raw, c=count: struct.pack_into("<q", raw, 200 + 96, c))
        log = read_darshan_log(path)
        assert log.incomplete == ["DXT_POSIX"] and log.segments.num_rows == 0
        (issue,) = [i for i in log.issues if i.kind == "corrupt"]
        assert "DXT_POSIX record" in issue.message and word in issue.message, issue.message
        assert log.counters.num_rows == 2  # the POSIX counters are intact


# ---------------------------------------------------------------------------------------
# the writer (benchmark logs, synthetic test runs)
# ---------------------------------------------------------------------------------------


def test_written_log_reads_back_in_pydarshan_and_here(tmp_path: Path):
    seg = np.zeros(5, SEGMENT_DTYPE)
    seg["offset"] = np.arange(5) * 4096
    seg["length"] = 4096
    seg["start"] = np.linspace(0.5, 2.5, 5)
    seg["end"] = seg["start"] + 0.001
    path = write_darshan_log(
        tmp_path / "w.darshan",
        [DxtFile("/data/x.bin", seg, writes=2, host="node7"), DxtFile("/data/y", seg[:1])],
        start=1_700_000_000.125,
        end=1_700_000_003.5,
        exe="python train.py",
        jobid=4321,
        metadata={"fork_parent": "4321"},
    )
    log = read_darshan_log(path)
    assert (log.jobid, log.ppid, log.exe) == (4321, 4321, "python train.py")
    assert log.start == pytest.approx(1_700_000_000.125, abs=1e-6)
    t = log.segments.to_pandas()
    assert t.op.astype(str).tolist() == ["write", "write", "read", "read", "read", "read"]
    assert t.offset.tolist()[:5] == seg["offset"].tolist()
    rep = darshan.DarshanReport(str(path), read_all=True)
    recs = {rep.name_records[r["id"]]: r for r in rep.records["DXT_POSIX"].to_df()}
    assert recs["/data/x.bin"]["write_segments"]["offset"].tolist() == [0, 4096]
    assert recs["/data/x.bin"]["hostname"] == "node7"
    posix = rep.records["POSIX"].to_df()["counters"]
    assert sorted(posix["POSIX_READS"].tolist()) == [1, 3]


@pytest.mark.parametrize("writes", [0, 1, 2, 5])
def test_one_record_of_writes_then_reads_keeps_its_split(tmp_path: Path, writes: int):
    # A log of one DXT record: `writes` writes then reads, as PyDarshan reads the same log.
    seg = np.zeros(5, SEGMENT_DTYPE)
    seg["offset"] = np.arange(5) * 4096
    seg["length"] = [4096, 4096, 100, 200, 300]
    seg["start"] = np.linspace(0.5, 2.5, 5)
    seg["end"] = seg["start"] + 0.001
    path = write_darshan_log(
        tmp_path / "one.darshan",
        [DxtFile("/data/x.bin", seg, writes=writes)],
        start=1_700_000_000.0,
        end=1_700_000_003.25,
        exe="python train.py",
        jobid=7,
    )
    t = read_darshan_log(path).segments.to_pandas()
    assert t.op.astype(str).tolist() == ["write"] * writes + ["read"] * (5 - writes)
    assert t.length.tolist() == [4096, 4096, 100, 200, 300]
    rep = darshan.DarshanReport(str(path), read_all=True)
    (rec,) = rep.records["DXT_POSIX"].to_df()
    for side, want in (("write", seg["offset"][:writes]), ("read", seg["offset"][writes:])):
        got = rec[f"{side}_segments"]
        assert (got["offset"].tolist() if len(got) else []) == want.tolist()
    # the counters the writer derives: last bytes, counts, first open (0.5 s after start)
    posix = rep.records["POSIX"].to_df()
    c, fc = posix["counters"].iloc[0], posix["fcounters"].iloc[0]
    ends = seg["offset"] + seg["length"]
    assert c["POSIX_MAX_BYTE_WRITTEN"] == (int(ends[:writes].max()) - 1 if writes else 0)
    assert c["POSIX_MAX_BYTE_READ"] == (int(ends[writes:].max()) - 1 if writes < 5 else 0)
    assert (c["POSIX_WRITES"], c["POSIX_READS"]) == (writes, 5 - writes)
    assert fc["POSIX_F_OPEN_START_TIMESTAMP"] == pytest.approx(0.5)
    job = rep.metadata["job"]
    assert (job["end_time_sec"], job["end_time_nsec"]) == (1_700_000_003, 250_000_000)


def test_a_log_whose_name_is_not_utf8_is_read_and_reported(shared_data, tmp_path):
    # a file name with a byte that is not UTF-8 (0xff): it was refused ("surrogates not
    # allowed") and `iosweep report` raised; now read, analysed and reported, the name shown
    # as job\xff.darshan
    import os

    from iosweep.cli import main

    logs = tmp_path / "logs"
    logs.mkdir()
    src = shared_data / "darshan-logs/release_logs/mpi-io-test-x86_64-3.4.7.darshan"
    (logs / os.fsdecode(b"job\xff.darshan")).write_bytes(src.read_bytes())
    assert main(["ingest", str(logs), "-o", str(tmp_path / "store")]) == 0
    meta = json.loads((tmp_path / "store" / "run.json").read_text())
    assert not [i for i in meta["issues"] if i["severity"] == "error"]
    assert {p["source"] for p in meta["processes"]} == {"job\\xff.darshan"}
    assert main(["analyze", str(tmp_path / "store"), "-o", str(tmp_path / "a")]) == 0
    assert main(["report", str(tmp_path / "a"), "-o", str(tmp_path / "r.html")]) == 0
    assert "job\\xff.darshan" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_adding_at_sorted_places_is_numpys_add_at():
    # the op column's edges: records' starts and where their writes end, ascending, equal
    # where a record of writes alone is followed by one of reads alone (or empty records)
    from iosweep.trace.darshan.dxt import _add_sorted

    rng = np.random.default_rng(0)
    for _ in range(300):
        at = np.sort(rng.integers(0, 50, rng.integers(0, 40)))
        expected, got = np.zeros(51, np.int8), np.zeros(51, np.int8)
        np.add.at(expected, at, -1)
        _add_sorted(got, at, -1)
        assert (expected == got).all()
