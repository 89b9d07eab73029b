"""DFTracer reader: the real Horovod traces in ../shared, byte-level damage, the position model."""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from collections import defaultdict
from datetime import datetime
from functools import cache
from pathlib import Path

import darshan
import pytest
from conftest import shared_dir, shared_fixture
from factories import pfw_events

from iosweep.trace.dftracer.read import INCOMPLETE_TRACE, read_dftracer_trace
from iosweep.trace.logs import LogError, ProcessLog

SHARED = shared_dir()
DATA = SHARED / "data"
PT = DATA / "horovod-pytorch-mnist"
TF = DATA / "horovod-tf2-mnist"
IDX_FILES = {
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
}


@pytest.fixture
def mnist_dftracer_fixtures() -> None:
    for rel in ("horovod-pytorch-mnist/dftracer-np1", "horovod-tf2-mnist/dftracer-np1"):
        shared_fixture(rel)


needs_shared = pytest.mark.usefixtures("mnist_dftracer_fixtures")


def _logs(run: Path) -> list[Path]:
    return sorted((run / "logs").glob("*.pfw*"))


def _rank_of_pid(run: Path) -> dict[int, int]:
    out = {}
    for f in (run / "ranks").glob("rank-*.json"):
        r = json.loads(f.read_text())
        out[r["pid"]] = r["rank"]
    return out


@cache
def _read(path: Path) -> ProcessLog:
    return read_dftracer_trace(path)


def _reads(pl: ProcessLog) -> dict[str, list[tuple[int, int]]]:
    """(offset, length) of each read, per file basename, in time order."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for row in pl.segments.select(["path", "op", "offset", "length"]).to_pylist():
        assert row["op"] == "read"
        out[Path(row["path"]).name].append((row["offset"], row["length"]))
    return dict(out)


# --------------------------------------------------------------------------- real traces


@needs_shared
@pytest.mark.parametrize("n", [1, 2, 4])
def test_pytorch_every_rank_reads_each_idx_file_whole(n):
    run = PT / f"dftracer-np{n}"
    ranks = _rank_of_pid(run)
    logs = _logs(run)
    assert len(logs) == n
    seen_ranks = set()
    for log in logs:
        pl = _read(log)
        assert pl.tracer == "dftracer" and pl.issues == [] and pl.incomplete == []
        seen_ranks.add(ranks[pl.pid])  # the trace's pid is the rank's pid
        assert pl.host == "vm"
        assert "train_pt.py" in pl.exe
        reads = _reads(pl)
        assert set(reads) == IDX_FILES
        for name, seq in reads.items():
            # one read of the whole file at offset 0, then a zero-length read at end of file
            (off0, size), (off1, zero) = seq
            assert (off0, off1, zero) == (0, size, 0), name
            header = 16 if "images" in name else 8  # IDX: magic + dims, then one record each
            record = 28 * 28 if "images" in name else 1
            assert (size - header) % record == 0, name
        # DFTracer did not see rank 0's checkpoint writes (Darshan did): no write at all
        assert set(pl.segments.column("op").to_pylist()) == {"read"}
        # open/lseek/close are kept as metadata events, each naming its file
        meta = pl.app_events.to_pylist()
        opens = [e for e in meta if e["name"] == "open64"]
        assert {Path(e["path"]).name for e in opens} == IDX_FILES
        assert all(e["cat"] == "POSIX" and e["rank"] == -1 for e in meta)
    assert seen_ranks == set(range(n))


@needs_shared
def test_pytorch_bytes_per_rank_do_not_shrink_with_ranks():
    per_rank = {
        n: {
            sum(_read(log).segments.column("length").to_pylist())
            for log in _logs(PT / f"dftracer-np{n}")
        }
        for n in (1, 2, 4)
    }
    assert per_rank[1] == per_rank[2] == per_rank[4]
    assert len(per_rank[1]) == 1


@needs_shared
@pytest.mark.parametrize("n", [1, 2, 4])
def test_tf2_each_rank_reads_only_its_own_npz(n):
    run = TF / f"dftracer-np{n}"
    ranks = _rank_of_pid(run)
    assert len(_logs(run)) == n
    for log in _logs(run):
        pl = _read(log)
        rank = ranks[pl.pid]
        reads = _reads(pl)
        assert set(reads) == {f"mnist-{rank}.npz"}
        seq = reads[f"mnist-{rank}.npz"]
        size = max(o + ln for o, ln in seq)
        assert seq[0] == (0, 4096)  # zip local header first
        # then the end-of-central-directory and central directory, near the end of the file
        assert all(size - 64 * 1024 <= o for o, _ in seq[1:5])
        # members are read in large chunks: they carry most of the bytes
        big = [ln for _, ln in seq if ln >= 128 * 1024]
        assert max(big) <= 256 * 1024
        assert sum(big) > 0.9 * sum(ln for _, ln in seq)
        # TF's short-lived `uname` child (vforked, so still under the rank's pid) shows
        # up as execv calls on another thread id
        execs = [e for e in pl.app_events.to_pylist() if e["name"] == "execv"]
        assert execs and all(e["pid"] == pl.pid and e["thread"] != pl.pid for e in execs)


@needs_shared
@pytest.mark.parametrize("framework", ["horovod-pytorch-mnist", "horovod-tf2-mnist"])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_rebuilt_offsets_equal_darshan_dxt(framework, n):
    """DFTracer logs no offsets for read(); the rebuilt ones must match what Darshan's DXT
    recorded for the same program on the same files (same access sequence, another run)."""
    dxt = []
    for f in sorted((DATA / framework / f"darshan-np{n}" / "logs").glob("*.darshan")):
        rep = darshan.DarshanReport(str(f), read_all=True)
        if "DXT_POSIX" not in rep.records:
            continue
        per_file = {}
        for rec in rep.records["DXT_POSIX"].to_df():
            name = rep.name_records[rec["id"]]
            if "/data/" in name:
                df = rec["read_segments"]
                per_file[Path(name).name] = list(
                    zip(df["offset"].tolist(), df["length"].tolist(), strict=True)
                )
        if per_file:
            dxt.append(sorted(per_file.items()))
    ours = [
        sorted(_reads(_read(log)).items()) for log in _logs(DATA / framework / f"dftracer-np{n}")
    ]
    assert len(dxt) == n
    assert sorted(ours) == sorted(dxt)


@needs_shared
def test_times_are_epoch_seconds_and_tables_relative():
    log = _logs(TF / "dftracer-np1")[0]
    pl = _read(log)
    # the start event's wall-clock date (local time, zone unknown) agrees within a day:
    # ts is in microseconds since the epoch
    start_line = next(
        ln for ln in gzip.decompress(log.read_bytes()).splitlines() if b'"start"' in ln
    )
    date = json.loads(start_line)["args"]["date"]
    assert abs(pl.start - datetime.strptime(date, "%a %b %d %H:%M:%S %Y").timestamp()) < 86400
    for t in (pl.segments, pl.app_events):
        starts, ends = t.column("start").to_pylist(), t.column("end").to_pylist()
        assert min(starts) >= 0 and all(e >= s for s, e in zip(starts, ends, strict=True))
        assert starts == sorted(starts)
        assert pl.start + max(ends) <= pl.end + 1e-6
    # the log's span: the first event's ts to the last event's ts + dur, microseconds (raw)
    timed = [e for e in pfw_events(log) if "ts" in e]
    assert pl.start == pytest.approx(min(e["ts"] for e in timed) / 1e6, abs=1e-6)
    assert pl.end == pytest.approx(max(e["ts"] + e.get("dur", 0) for e in timed) / 1e6, abs=1e-6)


# --------------------------------------------------------------------------- damaged files


@pytest.fixture
def tf_trace(tmp_path) -> tuple[Path, bytes]:
    shared_fixture("horovod-tf2-mnist/dftracer-np1")
    src = _logs(TF / "dftracer-np1")[0]
    return src, src.read_bytes()


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _error(path: Path) -> LogError:
    with pytest.raises(LogError) as exc:
        read_dftracer_trace(path)
    assert exc.value.path == str(path) and str(path) in str(exc.value)
    return exc.value


def _seg_rows(pl: ProcessLog) -> list[tuple]:
    return [
        (r["path"], r["offset"], r["length"], r["start"])
        for r in pl.segments.select(["path", "offset", "length", "start"]).to_pylist()
    ]


def test_truncated_gzip_keeps_the_events_before_the_cut(tmp_path, tf_trace):
    src, data = tf_trace
    full = _seg_rows(read_dftracer_trace(src))
    pl = read_dftracer_trace(_write(tmp_path, "cut.pfw.gz", data[: len(data) // 2]))
    assert pl.incomplete == [INCOMPLETE_TRACE]
    kinds = {i.kind for i in pl.issues if i.severity == "error"}
    assert kinds == {"truncated"}
    assert all(i.source.endswith("cut.pfw.gz") for i in pl.issues)
    got = _seg_rows(pl)
    assert 0 < len(got) < len(full)
    assert got == full[: len(got)]  # same events, same rebuilt offsets, nothing invented


def test_gzip_cut_before_any_event_is_an_error(tmp_path, tf_trace):
    e = _error(_write(tmp_path, "head.pfw.gz", tf_trace[1][:10]))
    assert e.kind == "truncated"


def test_flipped_byte_in_compressed_data_is_flagged(tmp_path, tf_trace):
    data = bytearray(tf_trace[1])
    data[len(data) // 2] ^= 0xFF
    path = _write(tmp_path, "flip.pfw.gz", bytes(data))
    try:
        pl = read_dftracer_trace(path)
    except LogError as e:
        assert e.kind == "corrupt"
        return
    assert pl.incomplete == [INCOMPLETE_TRACE]
    assert "corrupt" in {i.kind for i in pl.issues if i.severity == "error"}


def test_flipped_byte_in_gzip_trailer_is_flagged(tmp_path, tf_trace):
    data = bytearray(tf_trace[1])
    data[-6] ^= 0x01  # inside the CRC32: every event decodes, but the checksum fails
    pl = read_dftracer_trace(_write(tmp_path, "crc.pfw.gz", bytes(data)))
    assert pl.segments.num_rows == read_dftracer_trace(tf_trace[0]).segments.num_rows
    assert pl.incomplete == [INCOMPLETE_TRACE]
    assert any(i.kind == "corrupt" and "gzip" in i.message for i in pl.issues)


def test_flipped_gzip_magic_is_corrupt(tmp_path, tf_trace):
    data = bytearray(tf_trace[1])
    data[1] ^= 0xFF
    assert _error(_write(tmp_path, "magic.pfw.gz", bytes(data))).kind == "corrupt"


def test_zero_length_file_is_empty(tmp_path):
    assert _error(_write(tmp_path, "zero.pfw.gz", b"")).kind == "empty"
    assert _error(_write(tmp_path, "zero.pfw", b"")).kind == "empty"


def test_a_trace_of_metadata_records_only_is_empty(tmp_path):
    # a process that ended before its first traced call: the file and host records, no event
    t = _Trace()
    t.file("/d/a")
    meta = [ln for ln in t.lines if '"ph": 4' in ln]
    assert len(meta) == 3  # host, command, file
    e = _error(_write(tmp_path, "meta.pfw", "\n".join(meta).encode() + b"\n"))
    assert (e.kind, e.message) == (
        "empty",
        "DFTracer trace holds metadata records but no timed event",
    )


def test_plain_text_is_not_a_trace(tmp_path):
    e = _error(_write(tmp_path, "notes.pfw", b"hello, this is not a trace\nsecond line\n"))
    assert e.kind == "corrupt" and "line 1" in e.message
    e = _error(_write(tmp_path, "notes2.pfw.gz", gzip.compress(b"just text\n")))
    assert e.kind == "corrupt"
    e = _error(_write(tmp_path, "other.pfw", b'{"a": 1}\n{"b": 2}\n'))
    assert e.kind == "corrupt"


def test_unreadable_path(tmp_path):
    assert _error(tmp_path / "missing.pfw.gz").kind == "unreadable"
    assert _error(tmp_path).kind == "unreadable"


def test_plain_and_gzip_and_multi_member_and_old_style_read_the_same(tmp_path, tf_trace):
    src, data = tf_trace
    text = gzip.decompress(data)
    ref = read_dftracer_trace(src)
    lines = text.splitlines()
    third = len(lines) // 3
    members = b"".join(
        gzip.compress(b"\n".join(part) + b"\n")
        for part in (lines[:third], lines[third : 2 * third], lines[2 * third :])
    )
    old_style = b"[\n" + b",\n".join(lines) + b"\n]\n"  # DFTracer 1.x framing
    for name, blob in [
        ("plain.pfw", text),
        ("members.pfw.gz", members),
        ("old.pfw", old_style),
        ("crlf.pfw", text.replace(b"\n", b"\r\n")),
        ("no_final_newline.pfw", text.rstrip(b"\n")),
    ]:
        pl = read_dftracer_trace(_write(tmp_path, name, blob))
        assert pl.issues == [], name
        assert pl.segments.drop_columns(["source"]).equals(ref.segments.drop_columns(["source"]))
        assert pl.app_events.num_rows == ref.app_events.num_rows
        assert (pl.pid, pl.start, pl.end, pl.exe) == (ref.pid, ref.start, ref.end, ref.exe)


def test_plain_trace_cut_mid_line(tmp_path, tf_trace):
    text = gzip.decompress(tf_trace[1])
    pl = read_dftracer_trace(_write(tmp_path, "cut.pfw", text[: len(text) // 2]))
    assert [i.kind for i in pl.issues] == ["truncated"]
    assert "ends mid-event" in pl.issues[0].message
    assert pl.incomplete == [INCOMPLETE_TRACE]


def test_one_damaged_line_costs_only_itself(tmp_path, tf_trace):
    text = gzip.decompress(tf_trace[1])
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if b'"name":"lseek64"' in ln)
    lines[i] = lines[i][:40] + b"\x00@@" + lines[i][43:]
    pl = read_dftracer_trace(_write(tmp_path, "bad_line.pfw", b"\n".join(lines) + b"\n"))
    ref = read_dftracer_trace(tf_trace[0])
    assert pl.segments.num_rows == ref.segments.num_rows
    assert pl.app_events.num_rows == ref.app_events.num_rows - 1
    (issue,) = [x for x in pl.issues if x.severity == "error"]
    assert issue.kind == "corrupt" and f"line {i + 1}" in issue.message
    assert pl.incomplete == [INCOMPLETE_TRACE]


def test_a_raw_newline_in_a_file_name_splits_no_event(tmp_path, tf_trace):
    # DFTracer writes file names as they are: Stormer's trace (traces-from-elsewhere) holds an
    # open of "/dev/shm/FI_NAMED_AV_0\n" over two lines. Here a file-name record split so
    text = gzip.decompress(tf_trace[1])
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if b'"name":"FH"' in ln and b".npz" in ln)
    cut = lines[i].index(b".npz")
    lines[i : i + 1] = [lines[i][:cut], lines[i][cut:]]
    pl = read_dftracer_trace(_write(tmp_path, "newline.pfw", b"\n".join(lines) + b"\n"))
    ref = read_dftracer_trace(tf_trace[0])
    assert [x for x in pl.issues if x.severity == "error"] == [] and pl.incomplete == []
    assert pl.segments.num_rows == ref.segments.num_rows
    split = [p for p in set(pl.segments.column("path").to_pylist()) if "\n" in p]
    assert len(split) == 1 and split[0].endswith("\n.npz"), split


def test_missing_end_event_is_flagged(tmp_path, tf_trace):
    lines = [ln for ln in gzip.decompress(tf_trace[1]).splitlines() if b'"name":"end"' not in ln]
    pl = read_dftracer_trace(_write(tmp_path, "noend.pfw", b"\n".join(lines) + b"\n"))
    assert [(i.kind, i.severity) for i in pl.issues] == [("truncated", "error")]
    assert pl.issues[0].message.startswith("no 'end' event: the process stopped before")


def test_lost_events_are_counted_against_the_end_event(tmp_path, tf_trace):
    lines = gzip.decompress(tf_trace[1]).splitlines()
    reads = [k for k, ln in enumerate(lines) if b'"name":"read"' in ln][:3]
    kept = [ln for k, ln in enumerate(lines) if k not in reads]
    pl = read_dftracer_trace(_write(tmp_path, "lost.pfw", b"\n".join(kept) + b"\n"))
    (issue,) = pl.issues
    assert (issue.kind, issue.severity) == ("missing-events", "error")
    assert issue.message == "DFTracer logged 591 events but 588 are in the file"


# --------------------------------------------------------------------------- position model
# Small traces in DFTracer 2.x's exact line format, for rules the real runs do not exercise.

_HH = "00000000000000aa"


class _Trace:
    def __init__(self, pid: int = 100):
        self.pid, self.ts, self.id = pid, 1_700_000_000_000_000, 0
        self.lines = [
            self._meta("HH", "node7", _HH),
            self._meta("SH", "python;train.py", "00000000000000c1"),
        ]
        self.event("start", "dftracer", cmd_hash="00000000000000c1", ppid=1, version=20003)

    def _meta(self, rec: str, name: str, value: str) -> str:
        args = {"hhash": _HH, "name": name, "value": value}
        return json.dumps(
            {
                "name": rec,
                "cat": "dftracer",
                "pid": self.pid,
                "tid": self.pid,
                "ph": 4,
                "args": args,
            }
        )

    def file(self, path: str) -> str:
        h = f"{zlib.crc32(path.encode()):016x}"
        self.lines.append(self._meta("FH", path, h))
        return h

    def event(self, name: str, cat: str = "POSIX", tid: int | None = None, **args) -> None:
        self.id += 1
        self.ts += 10
        ev = {"id": self.id, "name": name, "cat": cat, "pid": self.pid, "tid": tid or self.pid}
        ev |= {"ts": self.ts, "dur": 5, "ph": 1, "args": {"hhash": _HH, **args}}
        self.lines.append(json.dumps(ev))

    def write(self, path: Path) -> Path:
        self.event("end", "dftracer", num_events=self.id)
        path.write_bytes(gzip.compress("\n".join(self.lines).encode() + b"\n"))
        return path


def _segs(pl: ProcessLog) -> list[tuple]:
    return [
        (Path(r["path"]).name, r["module"], r["op"], r["offset"], r["length"])
        for r in pl.segments.to_pylist()
    ]


def test_position_rules_posix(tmp_path):
    t = _Trace()
    a = t.file("/d/a")
    t.event("open64", fhash=a, flags=0)
    t.event("read", fhash=a, count=100, ret=100)  # 0
    t.event("pread64", fhash=a, count=50, offset=1000, ret=50)  # explicit, position stays 100
    t.event("read", fhash=a, count=10, ret=10)  # 100
    t.event("lseek64", fhash=a, offset=-20, whence=2, ret=4980)  # SEEK_END: ret is absolute
    t.event("read", fhash=a, count=100, ret=20)  # 4980, short read
    t.event("read", fhash=a, count=100, ret=0)  # 5000, EOF
    t.event("read", fhash=a, count=100, ret=-1)  # failed: no segment, kept as app event
    t.event("write", fhash=a, count=7, ret=7)  # 5000
    t.event("close", fhash=a, ret=0)
    t.event("read", fhash=a, count=10, ret=10)  # no open seen: position unknown
    t.event("open64", fhash=a, flags=0o2000 | 1)  # O_APPEND: writes land at an unknown end
    t.event("write", fhash=a, count=3, ret=3)
    t.event("lseek64", fhash=a, offset=0, whence=0, ret=0)
    t.event("read", fhash=a, count=4, ret=4)  # known again after an absolute seek
    pl = read_dftracer_trace(t.write(tmp_path / "posix.pfw.gz"))
    assert _segs(pl) == [
        ("a", "POSIX", "read", 0, 100),
        ("a", "POSIX", "read", 1000, 50),
        ("a", "POSIX", "read", 100, 10),
        ("a", "POSIX", "read", 4980, 20),
        ("a", "POSIX", "read", 5000, 0),
        ("a", "POSIX", "write", 5000, 7),
        ("a", "POSIX", "read", -1, 10),
        ("a", "POSIX", "write", -1, 3),
        ("a", "POSIX", "read", 0, 4),
    ]
    names = [e["name"] for e in pl.app_events.to_pylist()]
    assert names.count("read") == 1  # the failed one
    for table in (pl.segments, pl.app_events):
        assert set(table.column("source").to_pylist()) == {"posix.pfw.gz"}
    assert pl.issues == []
    assert (pl.host, pl.exe, pl.ppid, pl.version) == ("node7", "python train.py", 1, "20003")


def test_position_rules_stdio(tmp_path):
    t = _Trace()
    b = t.file("/d/b")
    t.event("fopen", cat="STDIO", fhash=b, mode="r")
    t.event("fread", cat="STDIO", fhash=b, size=8, count=10, ret=10)  # 80 bytes at 0
    t.event("fseek", cat="STDIO", fhash=b, offset=20, whence=1, ret=0)  # SEEK_CUR: 100
    t.event("fread", cat="STDIO", fhash=b, size=4, count=5, ret=3)  # 12 bytes at 100
    t.event("fseek", cat="STDIO", fhash=b, offset=0, whence=2, ret=0)  # SEEK_END: unknown
    t.event("fread", cat="STDIO", fhash=b, size=1, count=9, ret=0)
    t.event("ftell", cat="STDIO", fhash=b, ret=4096)  # ftell resynchronises
    t.event("fgets", cat="STDIO", fhash=b, num=64, ret_len=11)
    t.event("fclose", cat="STDIO", fhash=b)
    t.event("fopen", cat="STDIO", fhash=b, mode="a+")
    t.event("fwrite", cat="STDIO", fhash=b, size=1, count=5, ret=5)  # append: unknown
    pl = read_dftracer_trace(t.write(tmp_path / "stdio.pfw.gz"))
    assert _segs(pl) == [
        ("b", "STDIO", "read", 0, 80),
        ("b", "STDIO", "read", 100, 12),
        ("b", "STDIO", "read", -1, 0),
        ("b", "STDIO", "read", 4096, 11),
        ("b", "STDIO", "write", -1, 5),
    ]


def test_two_open_handles_on_one_file_give_unknown_offsets(tmp_path):
    t = _Trace()
    c = t.file("/d/c")
    t.event("open64", fhash=c, flags=0)
    t.event("read", fhash=c, count=10, ret=10)  # one handle: offset 0
    t.event("open64", fhash=c, flags=0)
    t.event("read", fhash=c, count=10, ret=10)  # which handle? unknown
    t.event("close", fhash=c, ret=0)
    t.event("read", fhash=c, count=10, ret=10)  # still unknown: which one was closed?
    t.event("pread", fhash=c, count=10, offset=30, ret=10)  # explicit offsets stay known
    pl = read_dftracer_trace(t.write(tmp_path / "two.pfw.gz"))
    assert [s[3] for s in _segs(pl)] == [0, -1, -1, 30]
    assert [i.kind for i in pl.issues] == ["ambiguous-offsets"]


def test_a_close_of_a_handle_opened_before_tracing_is_not_counted(tmp_path):
    # the trace starts with a close (its open came before DFTracer ran): the open depth stays
    # at 0, so one open later is one handle (known offsets) and a second open makes two
    t = _Trace()
    e = t.file("/d/e")
    t.event("close", fhash=e, ret=0)
    t.event("close", fhash=e, ret=0)
    t.event("open64", fhash=e, flags=0)
    t.event("read", fhash=e, count=10, ret=10)  # 0
    t.event("read", fhash=e, count=10, ret=10)  # 10
    t.event("open64", fhash=e, flags=0)
    t.event("read", fhash=e, count=10, ret=10)  # two handles: unknown
    t.event("close", fhash=e, ret=0)
    t.event("close", fhash=e, ret=0)
    t.event("open64", fhash=e, flags=0)
    t.event("read", fhash=e, count=10, ret=10)  # one handle again: 0
    pl = read_dftracer_trace(t.write(tmp_path / "orphan.pfw.gz"))
    assert [s[3] for s in _segs(pl)] == [0, 10, -1, 0]


def test_closes_before_tracing_on_one_file_leave_another_file_alone(tmp_path):
    # three closes of handles opened before tracing on f, then one handle on g: g's depth is
    # its own (one handle, known offsets), whatever came before it on f
    t = _Trace()
    f, g = t.file("/d/f"), t.file("/d/g")
    for _ in range(3):
        t.event("close", fhash=f, ret=0)
    t.event("open64", fhash=g, flags=0)
    t.event("read", fhash=g, count=10, ret=10)
    t.event("read", fhash=g, count=10, ret=10)
    pl = read_dftracer_trace(t.write(tmp_path / "two-files.pfw.gz"))
    assert [(s[0], s[3]) for s in _segs(pl)] == [("g", 0), ("g", 10)]
    assert pl.issues == []


def test_positions_are_per_process_and_module(tmp_path):
    t = _Trace(pid=100)
    d = t.file("/d/d")
    t.event("open64", fhash=d, flags=0)
    t.event("fopen", cat="STDIO", fhash=d, mode="r")
    t.event("read", fhash=d, count=10, ret=10)
    t.event("fread", cat="STDIO", fhash=d, size=1, count=3, ret=3)
    t.event("read", fhash=d, count=10, ret=10)
    t.event("fread", cat="STDIO", fhash=d, size=1, count=3, ret=3)
    pl = read_dftracer_trace(t.write(tmp_path / "mods.pfw.gz"))
    assert [(s[1], s[3]) for s in _segs(pl)] == [
        ("POSIX", 0),
        ("STDIO", 0),
        ("POSIX", 10),
        ("STDIO", 3),
    ]


def _issues(pl: ProcessLog) -> list[tuple[str, str, str]]:
    return [(i.kind, i.severity, i.message) for i in pl.issues]


def _one_read(ts: int | None = None) -> tuple[_Trace, str]:
    """A trace of one 1-byte read of /d/a (no open seen: offset unknown), and a's hash;
    ``ts``: the clock before the first event."""
    t = _Trace()
    if ts is not None:
        t.ts = ts
    a = t.file("/d/a")
    t.event("read", fhash=a, count=1, ret=1)
    return t, a


def test_an_unknown_time_unit_is_read_as_microseconds_with_a_warning(tmp_path):
    t, _ = _one_read()
    t.lines.append(t._meta("CM", "time_metric", "fortnight"))
    pl = read_dftracer_trace(t.write(tmp_path / "unit.pfw.gz"))
    assert _issues(pl) == [
        ("bad-time-unit", "warning", "unknown time_metric 'FORTNIGHT'; read as µs")
    ]
    assert pl.start == pytest.approx(1_700_000_000.00001)  # the first event, in µs


def test_times_that_are_no_unix_time_are_said(tmp_path):
    t, _ = _one_read(ts=1000)  # µs after boot, say: not after 2000-01-01
    pl = read_dftracer_trace(t.write(tmp_path / "boot.pfw.gz"))
    # (the tracer's own start event is at 2023's clock: 54 years between the two, which no
    # run lasts)
    assert _issues(pl) == [
        ("implausible", "error", "the events span 54 years (first 1010, last "
         "1700000000000015, in US): timestamps in another unit or damaged, so the run's "
         "length is not known"),
        ("bad-timestamps", "warning", "first event time 1010 (US) is not a Unix epoch time "
         "between 2000 and 2100: this trace cannot be put on the run's clock"),
    ]  # fmt: skip


def test_calls_without_arguments_stay_app_events(tmp_path):
    # a read with no file hash or sizes (DFTracer's metadata option off): no segment
    t, _ = _one_read()
    t.event("read")
    pl = read_dftracer_trace(t.write(tmp_path / "noargs.pfw.gz"))
    assert _issues(pl) == [
        ("no-args", "warning", "1 read/write calls carry no file hash or sizes "
         "(DFTRACER_INC_METADATA off?); they are kept as app events only"),
    ]  # fmt: skip
    assert _segs(pl) == [("a", "POSIX", "read", -1, 1)]
    assert [e["name"] for e in pl.app_events.to_pylist()].count("read") == 1


def test_an_app_trace_that_took_over_from_the_preloaded_tracer(tmp_path):
    # hybrid mode: the Python API's -app trace numbers its events on from the preloaded
    # library's; its first 5 (the tracer's start record among them) are in the -preload file
    t = _Trace()
    t.lines = [ln for ln in t.lines if '"start"' not in ln]
    t.id = 5
    a = t.file("/d/a")
    t.event("open64", fhash=a, flags=0)
    t.event("read", fhash=a, count=1, ret=1)
    pl = read_dftracer_trace(t.write(tmp_path / "trace-1-app.pfw.gz"))
    assert _issues(pl) == [
        ("hybrid-start", "warning", "DFTracer's Python API took this process's trace over (an "
         "-app trace): the 5 events logged before that (the tracer's own start record, calls "
         "before the training script's first line) are not in it"),
    ]  # fmt: skip
    # the same numbering in a trace that is not an -app trace: events were lost
    pl = read_dftracer_trace(t.write(tmp_path / "trace-1-preload.pfw.gz"))
    assert [(i.kind, i.severity) for i in pl.issues] == [("missing-events", "error")]


def test_aggregated_events_are_app_events_with_a_warning(tmp_path):
    # DFTracer's aggregation mode writes a summary event (ph 3) instead of each call
    t, a = _one_read()
    t.event("read", fhash=a, count=10, ret=10)
    ev = json.loads(t.lines[-1])
    t.lines[-1] = json.dumps(ev | {"ph": 3})
    pl = read_dftracer_trace(t.write(tmp_path / "agg.pfw.gz"))
    assert _issues(pl) == [
        ("aggregated", "warning", "1 aggregated events (DFTRACER aggregation on): per-call "
         "I/O is not in the trace; they are kept as app events"),
    ]  # fmt: skip
    assert _segs(pl) == [("a", "POSIX", "read", -1, 1)]
    assert [e["name"] for e in pl.app_events.to_pylist()] == ["read"]


def test_zero_padding_after_the_last_gzip_member_is_a_warning(tmp_path):
    t, _ = _one_read()
    p = t.write(tmp_path / "pad.pfw.gz")
    p.write_bytes(p.read_bytes() + bytes(4096))
    pl = read_dftracer_trace(p)
    assert _issues(pl) == [
        ("trailing-bytes", "warning", "4096 zero bytes after the last gzip member")
    ]
    assert _segs(pl) == [("a", "POSIX", "read", -1, 1)]


def test_annotations_hosts_and_mpi_rank(tmp_path):
    t = _Trace(pid=300)
    t.lines.append(
        json.dumps(
            {
                "name": "PR",
                "cat": "dftracer",
                "pid": 300,
                "tid": 300,
                "ph": 4,
                "args": {"hhash": _HH, "name": "rank", "value": "5"},
            }
        )
    )
    e = t.file("/d/e")
    t.event("forward", cat="compute", epoch=1, step=3)
    t.event("fetch", cat="dataloader", tid=301, epoch=1, step=3)
    t.event("open64", fhash=e, flags=0)
    t.event("read", fhash=e, count=1, ret=1)
    t.event("__xstat64", fhash=e)
    pl = read_dftracer_trace(t.write(tmp_path / "app.pfw.gz"))
    events = [(x["cat"], x["name"], x["path"], x["thread"]) for x in pl.app_events.to_pylist()]
    assert events == [
        ("compute", "forward", None, 300),
        ("dataloader", "fetch", None, 301),
        ("POSIX", "open64", "/d/e", 300),
        ("POSIX", "__xstat64", "/d/e", 300),
    ]
    assert not pl.mpi  # one process per trace, whatever rank it names
    assert set(pl.segments.column("rank").to_pylist()) == {5}
    assert set(pl.app_events.column("rank").to_pylist()) == {5}
    assert set(pl.segments.column("host").to_pylist()) == {"node7"}


def test_file_hash_without_path_record(tmp_path):
    t = _Trace()
    t.event("open64", fhash="00000000deadbeef", flags=0)
    t.event("read", fhash="00000000deadbeef", count=5, ret=5)
    pl = read_dftracer_trace(t.write(tmp_path / "nofh.pfw.gz"))
    (row,) = pl.segments.to_pylist()
    assert row["path"] is None and row["file_id"] == 0xDEADBEEF and row["offset"] == 0
    assert [i.kind for i in pl.issues] == ["unknown-file"]


def test_counter_records_are_app_events_not_lost_events(tmp_path):
    t = _Trace()
    f = t.file("/d/f")
    t.event("open64", fhash=f, flags=0)
    # a telemetry series record: no id, no dur, a number where FH/HH records have strings
    t.ts += 10
    series = {"name": "cpu", "cat": "sys", "type": 7, "ts": t.ts, "ph": 2, "pid": t.pid}
    t.lines.append(json.dumps(series | {"tid": t.pid, "args": {"hhash": _HH, "value": 12.5}}))
    t.event("read", fhash=f, count=8, ret=8)
    pl = read_dftracer_trace(t.write(tmp_path / "series.pfw.gz"))
    assert pl.issues == []
    assert [(e["cat"], e["name"]) for e in pl.app_events.to_pylist()] == [
        ("POSIX", "open64"),
        ("sys", "cpu"),
    ]
    assert _segs(pl) == [("f", "POSIX", "read", 0, 8)]


@pytest.mark.slow
def test_benchmark_traces_read_as_their_real_templates(tmp_path):
    # benchmarks/bench_dftracer.py replays the real H100 traces under new pids and file
    # names: a generated trace must read exactly as the one it was made from
    shared_fixture("imagenet-style-resnet50-h100/dftracer8")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_dftracer import FIXTURE, generate

    made = generate(tmp_path, 1, ranks=1, workers=8)
    assert made["reps"] == 1 and made["traces"] == 9

    def counts(path: Path) -> tuple:
        log = read_dftracer_trace(path)
        ops = log.segments.column("op").to_pylist()
        paths = {Path(p).name for p in log.segments.column("path").to_pylist()}
        n_app = log.app_events.num_rows if log.app_events is not None else 0
        return len(ops), ops.count("read"), ops.count("write"), n_app, len(paths)

    real = sorted((FIXTURE / "traces").glob("*.pfw.gz"))
    forks = [p for p in real if "fork" in p.name]
    gen = sorted((tmp_path / "traces").glob("*.pfw.gz"))
    preload = next(p for p in real if "preload" in p.name)
    assert counts(next(p for p in gen if "preload" in p.name)) == counts(preload)
    gen_forks = [p for p in gen if "fork" in p.name]
    assert [counts(p) for p in gen_forks] == [counts(p) for p in forks]
    # new names, new pids, the rank's pid as the workers' parent
    log = read_dftracer_trace(gen_forks[0])
    assert log.pid == 100_001 and log.ppid == 100_000
    assert all("/g" in p for p in set(log.segments.column("path").to_pylist()))


# --- impossible values (issue 50: items 10-12) -----------------------------------------------
def _edited(tmp_path: Path, data: bytes, name: str, edit) -> Path:
    """The trace with its lines changed by ``edit`` (a list of lines in, a list out)."""
    lines = gzip.decompress(data).decode().splitlines()
    return _write(tmp_path, name, gzip.compress(("\n".join(edit(lines)) + "\n").encode()))


def _read_lines(lines: list[str]) -> list[int]:
    return [i for i, ln in enumerate(lines) if '"name":"read"' in ln and '"cat":"POSIX"' in ln]


def test_a_negative_duration_is_no_end_and_the_trace_not_complete(tmp_path, tf_trace):
    # three reads with a negative duration: their end is unknown (left out as untimed), a
    # named corrupt issue, and the trace is not called complete (it was "imbalance: io time
    # 100%", complete)
    _, data = tf_trace

    def negate(lines):
        for i in _read_lines(lines)[:3]:
            o = json.loads(lines[i])
            o["dur"] = -o["dur"] - 5000
            lines[i] = json.dumps(o)
        return lines

    pl = read_dftracer_trace(_edited(tmp_path, data, "neg.pfw.gz", negate))
    (issue,) = [i for i in pl.issues if i.kind == "corrupt"]
    assert issue.message.startswith("3 events have a negative duration")
    assert pl.incomplete == [INCOMPLETE_TRACE]
    end = pl.segments.column("end").to_numpy(zero_copy_only=False)
    assert int(sum(e != e for e in end)) == 3  # NaN: unknown, not a time before the start


def test_an_event_repeated_under_its_id_is_read_once(tmp_path, tf_trace):
    # one read written 20,001 times (the trace's own end event counts 591 events): read once,
    # the repeats named (it was "47.0 TB read" at 10^6 repeats, 119 TB/s, no warning)
    src, data = tf_trace
    once = read_dftracer_trace(src)

    def repeat(lines):
        i = _read_lines(lines)[5]
        return lines[: i + 1] + [lines[i]] * 20_000 + lines[i + 1 :]

    pl = read_dftracer_trace(_edited(tmp_path, data, "rep.pfw.gz", repeat))
    (issue,) = [i for i in pl.issues if i.kind == "corrupt"]
    assert issue.message.startswith("20,000 events repeat the id of an event already read")
    assert pl.segments.num_rows == once.segments.num_rows
    length = pl.segments.column("length").to_numpy()
    assert int(length.sum()) == int(once.segments.column("length").to_numpy().sum())


def test_timestamps_a_thousand_times_off_make_the_run_s_length_unknown(tmp_path, tf_trace):
    # one read's ts in ns where the trace says us: the events span 56,832 years; an
    # implausible issue, the run's length unknown (it was a run of ~56,800 years)
    _, data = tf_trace

    def shift(lines):
        i = _read_lines(lines)[7]
        o = json.loads(lines[i])
        o["ts"] *= 1000
        lines[i] = json.dumps(o)
        return lines

    pl = read_dftracer_trace(_edited(tmp_path, data, "ns.pfw.gz", shift))
    (issue,) = [i for i in pl.issues if i.kind == "implausible"]
    assert "years" in issue.message and issue.field == "run_time"


@pytest.mark.parametrize(
    "text, numbers, whole",
    [
        # every line one event: the buffer as it is, lines 1..3
        (b'{"a":1}\n{"b":2}\n{"c":3}\n', [1, 2, 3], True),
        # a blank line and a trailing comma (older DFTracer): cleaned, lines 1 and 3 kept
        (b'{"a":1}\n\n{"b":2},\n', [1, 3], False),
        # a line that does not start with "{" (indented): cleaned
        (b'{"a":1}\n  {"b":2}\n', [1, 2], False),
        # a line that does not end with "}" (a comma after it): cleaned
        (b'{"a":1},\n{"b":2}\n', [1, 2], False),
    ],
)
def test_which_traces_go_to_the_bulk_parser_as_they_are(text, numbers, whole):
    # issue 51: whether every line is one event "{...}" is looked at around each newline;
    # any other line (blank, indented, a trailing comma) sends the trace through the cleaning
    from iosweep.trace.dftracer.decode import split_lines

    lines, cut = split_lines(text)
    assert cut is None and lines.numbers.tolist() == numbers
    assert (lines.joined() == text) is whole
    assert lines.joined().split(b"\n")[0] == b'{"a":1}'
