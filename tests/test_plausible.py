"""Impossible values in a trace (issue 50): a named ``corrupt`` or ``implausible`` issue that
names the log, the counter and the record; the value read as unknown, never as 0 or as
given; the statements resting on it withheld; the rest of the analysis goes on.

The logs are written with libdarshan-util's own writer holding the value stated in each
case; PyDarshan reads the same value back, the independent check that the log holds it."""

from __future__ import annotations

import math
from pathlib import Path

import darshan
import pytest
from factories import make_store

from iosweep.analysis import AnalysisSettings, analyze_run
from iosweep.trace.darshan.read import read_darshan_log
from iosweep.trace.darshan.write import CounterRecord, DxtFile, write_darshan_log
from iosweep.trace.ingest import ingest

MiB = 1 << 20
START = 1_700_000_000.0


def _posix(counters: dict, fcounters: dict | None = None, rank: int = 0, path: str = "/d/a"):
    base = {"POSIX_OPENS": 1, "POSIX_READS": 10, "POSIX_BYTES_READ": 10 * MiB,
            "POSIX_MAX_BYTE_READ": 10 * MiB - 1}  # fmt: skip
    return CounterRecord(
        "POSIX", path, {**base, **counters}, {"POSIX_F_READ_TIME": 2.0, **(fcounters or {})}, rank
    )


def _log(
    tmp_path: Path,
    records: list[CounterRecord],
    nprocs: int = 1,
    start: float = START,
    end: float = START + 100,
    files: list[DxtFile] | None = None,
) -> Path:
    (tmp_path / "logs").mkdir(exist_ok=True)
    return write_darshan_log(
        tmp_path / "logs" / "job.darshan", files or [], exe="./app", jobid=7, nprocs=nprocs,
        records=records, start=start, end=end,
    )  # fmt: skip


def _analysed(tmp_path: Path, log: Path) -> dict:
    ingest([log.parent], tmp_path / "store")
    return analyze_run(tmp_path / "store", tmp_path / "out", AnalysisSettings())


def _check(sm: dict, cid: str) -> dict:
    return next(c for c in sm["checks"] if c["id"] == cid)


# a counter of every kind the analysis reads (counts, bytes, extents, seconds), each with a
# value no runtime writes: below -1 (the -1 of a counter not collected is no damage), a
# negative time, a time that is not a number
IMPOSSIBLE = [
    ("POSIX_READS", -7, "reads"),
    ("POSIX_WRITES", -2, "writes"),
    ("POSIX_OPENS", -3, "opens"),
    ("POSIX_SEEKS", -100, "seeks"),
    ("POSIX_STATS", -9, "stats"),
    ("POSIX_BYTES_READ", -(5 << 30), "bytes_read"),
    ("POSIX_BYTES_WRITTEN", -1024, "bytes_written"),
    ("POSIX_MAX_BYTE_READ", -5, "max_byte_read"),
    ("POSIX_MAX_BYTE_WRITTEN", -(1 << 40), "max_byte_written"),
    ("POSIX_CONSEC_READS", -4, "consec_reads"),
    ("POSIX_SEQ_WRITES", -4, "seq_writes"),
    ("POSIX_FILE_NOT_ALIGNED", -8, "file_not_aligned"),
    ("POSIX_SIZE_READ_0_100", -3, "size_read_0_100"),
    ("POSIX_F_READ_TIME", -30.0, "read_time"),
    ("POSIX_F_WRITE_TIME", -0.5, "write_time"),
    ("POSIX_F_META_TIME", -2.0, "meta_time"),
    ("POSIX_F_READ_TIME", math.nan, "read_time"),
    ("POSIX_F_META_TIME", math.inf, "meta_time"),
    ("POSIX_F_OPEN_START_TIMESTAMP", -12.0, "open_start"),
    ("POSIX_F_CLOSE_END_TIMESTAMP", -3.5, "close_end"),
]


@pytest.mark.parametrize("counter, value, column", IMPOSSIBLE)
def test_an_impossible_counter_is_named_and_read_as_unknown(tmp_path, counter, value, column):
    is_time = "_F_" in counter
    rec = _posix({} if is_time else {counter: value}, {counter: value} if is_time else None)
    log = _log(tmp_path, [rec])
    with darshan.DarshanReport(str(log)) as rep:  # the log holds the value as written
        df = rep.records["POSIX"].to_df()["fcounters" if is_time else "counters"]
        held = df[counter].iloc[0]
        assert (math.isnan(held) and math.isnan(value)) or held == value
    plog = read_darshan_log(log)
    (issue,) = [i for i in plog.issues if i.kind == "corrupt"]
    assert counter in issue.message and "/d/a" in issue.message and "rank 0" in issue.message
    assert issue.severity == "error"  # the value is lost
    assert plog.counters.column(column).null_count == 1  # unknown, not 0 or as given


def test_a_counter_an_older_runtime_did_not_collect_is_no_damage(tmp_path):
    # -1 is how Darshan marks a counter not collected (and libdarshan-util upgrades old
    # records with it): no issue
    log = _log(tmp_path, [_posix({"POSIX_SEEKS": -1, "POSIX_STATS": -1})])
    assert not [i for i in read_darshan_log(log).issues if i.kind == "corrupt"]


def test_a_rank_with_an_impossible_byte_count_is_left_out_of_the_balance(tmp_path):
    # issue 50 (item 9): rank 0's bytes read are -5 GiB, rank 1 read 10 MiB: rank 0's bytes
    # are unknown, so the balance of the two cannot be judged (it was "imbalance: bytes
    # 100%", counting the unknown as 0)
    log = _log(
        tmp_path,
        [_posix({"POSIX_BYTES_READ": -(5 << 30)}), _posix({}, rank=1, path="/d/b")],
        nprocs=2,
    )
    sm = _analysed(tmp_path, log)
    assert sm["ranks"]["unknown"] == [0]
    assert sm["analysis_status"] == "partial"
    im = _check(sm, "imbalance")
    assert im["outcome"] == "not-checked" and "rank 0 left out" in im["reason"], im
    assert "imbalance" not in {i["id"] for i in sm["insights"]}


def test_an_unknown_read_time_is_no_0_percent_of_the_run(tmp_path):
    sm = _analysed(tmp_path, _log(tmp_path, [_posix({}, {"POSIX_F_READ_TIME": -30.0})]))
    io = _check(sm, "io_bound")
    assert io["outcome"] == "not-checked", io
    assert "the figures of 1 rank are not known" in io["reason"]


@pytest.mark.parametrize(
    "start, end, kind, said",
    [
        (START + 100, START, "corrupt", "ends before it starts"),
        (START, START + 1000 * 366 * 86400, "implausible", "a run of 1,002 years"),
        (1.7e6, 1.7e12, "implausible", "before 1990"),  # epoch seconds read as ms and us
        (3600.0, 3700.0, "implausible", "before 1990"),  # a clock never set
    ],
)
def test_a_job_record_s_impossible_times_make_the_run_s_length_unknown(
    tmp_path, start, end, kind, said
):
    # issue 50 (items 12, 13): a job that ends before it starts, or runs for millennia;
    # the run's length is unknown, not 0 s or 56,800 years, and no share of it is stated
    seg_log = [DxtFile("/d/a", _segments(), rank=0)]
    log = _log(tmp_path, [], files=seg_log, start=start, end=end)
    (issue,) = [i for i in read_darshan_log(log).issues if i.kind == kind]
    assert said in issue.message and issue.field == "run_time"
    sm = _analysed(tmp_path, log)
    assert sm["run"]["run_time"] is None and sm["headline"]["run_time"] is None
    assert sm["headline"]["io_share_max"] is None
    assert _check(sm, "io_bound")["outcome"] == "not-checked"
    assert sm["analysis_status"] == "partial"


def _segments():
    import numpy as np

    from iosweep.trace.darshan.libutil import SEGMENT_DTYPE

    seg = np.zeros(10, SEGMENT_DTYPE)
    seg["offset"], seg["length"] = np.arange(10) * MiB, MiB
    seg["start"] = 1.0 + np.arange(10) * 0.01
    seg["end"] = seg["start"] + 0.005
    return seg


def test_io_calls_that_add_up_past_the_run_are_no_share_of_it(tmp_path):
    # one process's reads add up to 5,000 s in a 101 s run (Darshan sums call times: calls
    # at once on several threads can do that, and so can a damaged log): it was "the
    # busiest rank spends 4950.5% of the run time in I/O"
    sm = _analysed(tmp_path, _log(tmp_path, [_posix({}, {"POSIX_F_READ_TIME": 5000.0})]))
    io = _check(sm, "io_bound")
    assert io["outcome"] == "not-checked", io
    assert "49.5 times the run's 101.0 s" in io["reason"]
    assert "%" not in io["reason"]


def test_a_rank_that_left_no_trace_is_not_a_rank_of_0_bytes(tmp_path):
    # issue 50 (item 15): 3 ranks, rank 2's log lost; ranks 0 and 1 read 10 and 8 MiB
    # (spread (10 - 8) / 10 = 20%): balanced over the ranks that are known, rank 2 said
    # left out (it was "imbalance: bytes 100%", rank 2 counted as 0)
    segs = [
        (r, f"/data/{r}.bin", "read", k * MiB, MiB, 1.0 + k * 0.01, 1.005 + k * 0.01)
        for r, n in ((0, 10), (1, 8))
        for k in range(n)
    ]
    store = make_store(tmp_path / "s", segs, n_ranks=3, processes=False)
    sm = analyze_run(store, tmp_path / "o", AnalysisSettings())
    assert sm["ranks"]["unknown"] == [2]
    assert any(i["kind"] == "missing-log" and i["source"] == "rank 2" for i in sm["issues"])
    im = _check(sm, "imbalance")
    assert im["outcome"] == "passed", im
    assert "rank 2 left out" in im["reason"] and "bytes 20.0%" in im["reason"]


def test_a_dxt_trace_holding_more_operations_than_the_counters_count_is_named(tmp_path):
    # the trace's own bookkeeping: rank 0's DXT holds 10 reads of /d/a while the file's
    # reduced record counts 3 for every rank together; DXT loses operations but never adds
    # any, so one of the two is damaged: an implausible issue naming the file
    rec = CounterRecord("POSIX", "/d/a", {"POSIX_OPENS": 2, "POSIX_READS": 3,
                                          "POSIX_BYTES_READ": 3 * MiB}, rank=-1)  # fmt: skip
    log = _log(tmp_path, [rec], nprocs=2, files=[DxtFile("/d/a", _segments(), rank=0)])
    with darshan.DarshanReport(str(log), read_all=True) as rep:
        counters = rep.records["POSIX"].to_df()["counters"]
        assert int(counters.loc[counters["rank"] == -1, "POSIX_READS"].iloc[0]) == 3
        assert int(rep.records["DXT_POSIX"].to_df()[0]["read_count"]) == 10
    (issue,) = [i for i in read_darshan_log(log).issues if i.kind == "implausible"]
    assert "/d/a, rank -1: 10 traced, 3 counted" in issue.message


@pytest.mark.parametrize("order", ["same", "reversed"])
def test_dxt_beyond_counters_in_a_per_process_log_by_hand(order):
    # a per-process log (every record rank 0, a record a file): files 1..4 counted 5, 2, 7
    # and (masked: unknown) operations, traced 5, 3, 1 and 9; file 5 traced 4 with no counter
    # record. Only file 2 holds more than it counts (3 > 2); unknown and missing are not
    # judged. "same": DXT's records in the counters' order (file 5 left out); "reversed":
    # another order
    import numpy as np

    from iosweep.trace.darshan.bulk import DxtColumns
    from iosweep.trace.darshan.counters import Known
    from iosweep.trace.darshan.plausible import dxt_beyond_counters

    ids = np.array([3, 1, 4, 2], np.uint64)  # (not sorted)
    unknown = np.array([False, False, True, False])
    posix = {"module": ["POSIX"], "file_id": ids, "rank": np.zeros(4, np.int64),
             "reads": Known(np.array([7, 5, 0, 2]), unknown),
             "writes": Known(np.zeros(4, np.int64), unknown)}  # fmt: skip
    rid = np.array([3, 1, 4, 2, 5], np.uint64)
    count = np.array([1, 5, 9, 3, 4], np.int64)
    rid, count = (rid[:4], count[:4]) if order == "same" else (rid[::-1], count[::-1])
    z, n = np.zeros(int(count.sum())), len(rid)
    dxt = DxtColumns("POSIX", rid, np.zeros(n, np.int64), np.zeros(n, np.int32), ["h"],
                     np.zeros(n, np.int64), count, z.astype(np.int64), z.astype(np.int64), z, z)  # fmt: skip
    names = {1: "/d/1", 2: "/d/2", 3: "/d/3", 4: "/d/4", 5: "/d/5"}
    issue = dxt_beyond_counters(Path("p.darshan"), [dxt], [posix], names)
    assert issue is not None and issue.message.startswith("1 file record holds more DXT")
    assert "/d/2, rank 0: 3 traced, 2 counted" in issue.message
    posix["reads"] = Known(np.array([7, 5, 0, 3]), unknown)
    assert dxt_beyond_counters(Path("p.darshan"), [dxt], [posix], names) is None


def test_a_record_moving_data_faster_than_any_process_can_is_named(tmp_path):
    # 10 TiB read in 1 s (10.99 TB/s, over the stated 1 TB/s ceiling): a byte count or a
    # time is wrong (item 11's 119 TB/s); 1 TiB in 2 s (0.55 TB/s) is not judged so
    fast = _posix({"POSIX_BYTES_READ": 10 << 40, "POSIX_MAX_BYTE_READ": (10 << 40) - 1},
                  {"POSIX_F_READ_TIME": 1.0})  # fmt: skip
    (issue,) = [i for i in read_darshan_log(_log(tmp_path, [fast])).issues
                if i.kind == "implausible"]  # fmt: skip
    assert "faster than 1 TB/s" in issue.message and "10,995,116,277,760 bytes in 1 s" in (
        issue.message
    )
    ok = _posix({"POSIX_BYTES_READ": 1 << 40}, {"POSIX_F_READ_TIME": 2.0})
    (tmp_path / "b").mkdir()
    assert not [
        i for i in read_darshan_log(_log(tmp_path / "b", [ok])).issues if i.kind == "implausible"
    ]


@pytest.mark.parametrize(
    "field, value, why",
    [
        ("start", math.nan, "non-finite timestamps"),
        ("length", -4096, "negative offsets or lengths"),
        ("end", 5e6, "timestamps outside the run"),
    ],
)
def test_a_dxt_record_with_impossible_segments_is_named(tmp_path, field, value, why):
    # the 7th of 10 segments of the second file's record holds what no trace can: the DXT
    # module is refused, naming that record (the counters are kept)
    bad = _segments()
    bad[6][field] = value
    files = [DxtFile("/d/a", _segments()), DxtFile("/d/b", bad)]
    plog = read_darshan_log(_log(tmp_path, [], files=files))
    # (a NaN start is in the counters the writer derived from the segments too: named apart)
    (issue,) = [i for i in plog.issues if i.message.startswith("DXT_POSIX record ")]
    assert issue.kind == "corrupt" and f"is damaged: {why}" in issue.message, issue
    assert plog.counters.num_rows == 2 and plog.segments.num_rows == 0
