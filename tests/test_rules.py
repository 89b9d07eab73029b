"""The rules one at a time, each on both sides of its threshold, and the checklist they make.

Expected values are worked out by hand in the comments (thresholds are the schema's
defaults); whole-run cases are hand-built stores or logs written with libdarshan-util."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from factories import make_store

from iosweep.analysis import AnalysisSettings, analyze_run
from iosweep.analysis.findings.rules import RULES, Context
from iosweep.analysis.findings.rules.interfaces import (
    mpiio_independent,
    mpiio_nonblocking,
    mpiio_overhead,
    mpiio_use,
    stdio_share,
)
from iosweep.analysis.findings.rules.ranks import (
    file_per_process_at_scale,
    imbalance,
    metadata_heavy,
    mpiio_aggregators,
    single_rank_checkpoint,
)
from iosweep.analysis.findings.rules.requests import misaligned_requests, small_requests
from iosweep.analysis.findings.rules.time import exposed_io
from iosweep.analysis.findings.rules.trace import no_io_or_truncated

OUTCOMES = {"found", "passed", "not-applicable", "not-checked"}


def _ctx(ranks: pd.DataFrame | None = None, files: pd.DataFrame | None = None, **sections):
    summary = {"ranks": {"count": 4, "kind": "rank"}, "analysis_status": "complete", **sections}
    return Context(summary, pd.DataFrame() if files is None else files,
                   pd.DataFrame() if ranks is None else ranks, AnalysisSettings())  # fmt: skip


def _fired(outcomes):
    return [o.insight for o in outcomes if o.insight is not None]


def _outcome(outcomes, check_id: str) -> str:
    (o,) = [o for o in outcomes if o.check.id == check_id]
    return o.check.outcome


def _ranks(bytes_: list[float], io_time: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": range(len(bytes_)),
            "bytes_read": bytes_,
            "bytes_written": [0.0] * len(bytes_),
            "io_time": io_time,
        }
    )


# --- the checklist ---------------------------------------------------------------------------
def test_every_rule_says_something_on_a_run_with_no_io():
    # an empty run: every rule gives at least one outcome, and none of them is silent
    trace = {"completeness": None, "segments": 0, "counter_records": 0}
    ctx = _ctx(trace=trace, issues=[], analysis_status="empty", headline={})
    for rule in RULES:
        got = rule(ctx)
        assert got, rule.__name__
        assert all(o.check.outcome in OUTCOMES and o.check.reason for o in got), rule.__name__


def test_a_whole_run_has_every_rule_in_its_checklist(tmp_path):
    # 4 ranks each reading its own 1 MiB file in 256 KiB reads: nothing to find but the
    # small reads' floor (16 reads, under 1,000) and no MPI-IO
    segs = [
        (r, f"/data/f{r}", "read", k << 18, 1 << 18, 1 + k * 0.1, 1.05 + k * 0.1)
        for r in range(4)
        for k in range(4)
    ]
    sm = analyze_run(
        make_store(tmp_path / "s", segs, n_ranks=4), tmp_path / "o", AnalysisSettings()
    )
    checks = {c["id"]: c for c in sm["checks"]}
    # each rule's checks are named after it, but the trace's two rules (one check each)
    named = {c["id"].split(".")[0] for c in sm["checks"]}
    trace = {"trace_missed_dataset_reads", "trace_missed_checkpoint_writes", "trace_whole"}
    assert named == {r.__name__ for r in RULES} - {"trace_incomplete", "no_io_or_truncated"} | trace
    assert checks["small_requests.read"]["outcome"] == "not-applicable"
    assert "16 of 16 reads (100.0%)" in checks["small_requests.read"]["reason"]
    assert "floor: 1,000 requests" in checks["small_requests.read"]["reason"]
    assert checks["small_requests.write"]["outcome"] == "not-applicable"  # no writes
    assert checks["mpiio_independent.read"]["outcome"] == "not-applicable"
    assert checks["imbalance"]["outcome"] == "passed"
    assert sum(c["outcome"] == "found" for c in sm["checks"]) == len(sm["insights"])


# --- imbalance and aggregators ---------------------------------------------------------------
def test_imbalance_rule_fires_on_the_spread_it_reports():
    # bytes per rank 10, 10, 10, 4 MB: (max - min) / max = 6 / 10 = 0.6 > 0.3 (the default)
    got = imbalance(_ctx(_ranks([10e6, 10e6, 10e6, 4e6], [0.05] * 4)))
    (ins,) = _fired(got)
    assert ins.id == "imbalance"
    assert ins.numbers == {"bytes_spread": 0.6, "stragglers": [], "threshold_share": 0.3}
    assert ins.units == {"bytes_spread": "share", "stragglers": "ranks", "threshold_share": "share"}
    # 10, 10, 10, 7: a spread of exactly 0.3 passes, and the check says so with the figure
    (o,) = imbalance(_ctx(_ranks([10e6, 10e6, 10e6, 7e6], [0.05] * 4)))
    assert o.check.outcome == "passed" and "of bytes 30.0%" in o.check.reason


@pytest.mark.parametrize("busiest, fires", [(1048575, False), (1048576, True)])
def test_imbalance_of_bytes_needs_a_mebibyte_on_the_busiest_rank(busiest, fires):
    # imbalance_min_bytes = 1 MiB on the busiest rank (12.9 kB of terminal output is noise)
    got = imbalance(_ctx(_ranks([busiest, 0, 0, 0], [0.0] * 4)))
    assert bool(_fired(got)) is fires


@pytest.mark.parametrize("slowest, fires", [(0.09, False), (0.1, True), (0.11, True)])
def test_imbalance_of_io_time_needs_a_tenth_of_a_second_on_the_slowest_rank(slowest, fires):
    # I/O times slowest, 0.5 x slowest, 0.5 x, 0.5 x: a spread of 50% fires from a slowest
    # rank of 0.1 s on (imbalance_min_io_time_s); the straggler (above the median by
    # straggler_excess) needs straggler_min_io_time_s too
    half = slowest / 2
    got = imbalance(_ctx(_ranks([1e3] * 4, [slowest, half, half, half])))
    assert bool(_fired(got)) is fires
    if fires:
        (ins,) = _fired(got)
        assert "(max - min) / max of io time per rank is 50.0%" in ins.message
        assert ins.numbers["io_time_spread"] == pytest.approx(0.5)


def test_collective_io_through_aggregators_is_judged_among_the_aggregators():
    # 8 ranks, ranks 0 and 1 moving 99.9% of the bytes under 64 collective MPI-IO writes:
    # MPI-IO's aggregators (the fewest ranks moving 99%, under half the ranks); the spread
    # between them and the others is the design. Between the two: 100 vs 50 MB = 50%, found.
    mpiio = {"read": {"collective": 0}, "write": {"collective": 64, "ops": 64}}
    b = [100e6, 50e6] + [1e3] * 6
    ctx = _ctx(_ranks(b, [1.0, 1.0] + [0.01] * 6), mpiio=mpiio, headline={"io_share_max": 0.05})
    ctx.summary["ranks"]["count"] = 8
    (agg,) = _fired(mpiio_aggregators(ctx))
    assert (agg.id, agg.severity) == ("mpiio_aggregators", "info")
    assert agg.message.startswith("2 of 8 ranks do 99% of the file I/O under 64 collective")
    (imb,) = _fired(imbalance(ctx))
    assert imb.title == "I/O imbalance across ranks (among MPI-IO's aggregators)"
    assert imb.numbers["bytes_spread"] == pytest.approx(0.5)
    # equal aggregators: nothing to say about balance, whatever the other six do
    ctx2 = _ctx(_ranks([100e6, 100e6] + [0] * 6, [1.0, 1.0] + [0.0] * 6), mpiio=mpiio,
                headline={"io_share_max": 0.05})  # fmt: skip
    ctx2.summary["ranks"]["count"] = 8
    assert _outcome(imbalance(ctx2), "imbalance") == "passed"
    # one aggregator (skew-app's rank 0): not applicable, and said so
    ctx3 = _ctx(_ranks([100e6] + [0] * 7, [1.0] + [0.0] * 7), mpiio=mpiio,
                headline={"io_share_max": 0.5})  # fmt: skip
    ctx3.summary["ranks"]["count"] = 8
    (o,) = imbalance(ctx3)
    assert o.check.outcome == "not-applicable" and "one aggregator (rank 0)" in o.check.reason
    # ... and a warning when the aggregators' I/O takes half the run (io_time_share 0.2)
    assert _fired(mpiio_aggregators(ctx3))[0].severity == "warn"
    # every rank writes its share: no aggregators, the spread is an imbalance again
    ctx4 = _ctx(_ranks([100e6, 50e6, 100e6, 100e6], [1.0] * 4), mpiio=mpiio)
    assert _outcome(mpiio_aggregators(ctx4), "mpiio_aggregators") == "passed"
    assert [i.id for i in _fired(imbalance(ctx4))] == ["imbalance"]


# --- MPI-IO ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "mean, gap, fires",
    [(4.0, 2.0, False), (4.0, 2.0625, True), (1.5, 0.9921875, False), (1.5, 1.0, True)],
)
def test_mpiio_overhead_boundary(mean, gap, fires):
    # more than mpiio_overhead_share (0.5) of the MPI-IO time, and at least 1 s a rank
    t = {"min": mean, "mean": mean, "max": mean}
    got = mpiio_overhead(_ctx(mpiio={"write": {"ops": 10, "time": t, "gap_mean": gap}}))
    assert [i.id for i in _fired(got)] == (["mpiio_overhead"] if fires else [])
    assert _outcome(got, "mpiio_overhead.write") == ("found" if fires else "passed")
    assert _outcome(got, "mpiio_overhead.read") == "not-applicable"


@pytest.mark.parametrize(
    "independent, ops, outcome",
    [
        (1000, 1000, "not-applicable"),  # 100% but not more than 1000: the floor, said
        (1001, 2002, "passed"),  # exactly half
        (1001, 2001, "found"),
        (1001, 1001, "found"),
    ],
)
def test_independent_mpiio_boundary(independent, ops, outcome):
    # Drishti's: more than half of a direction's MPI-IO calls independent, and more than 1000
    mpiio = {"write": {"ops": ops, "independent": independent, "collective": ops - independent}}
    got = mpiio_independent(_ctx(mpiio=mpiio))
    assert _outcome(got, "mpiio_independent.write") == outcome
    if outcome == "found":
        assert f"{independent:,} of {ops:,} MPI-IO writes" in _fired(got)[0].message


@pytest.mark.parametrize(
    "mean, run_time, outcome",
    [
        (20.0, 100.0, "passed"),  # a rank's MPI-IO reads: 20% of the run, not above it
        (21.0, 100.0, "found"),
        (0.5, 1.0, "not-applicable"),  # half of a 1 s run: under the 1 s floor
    ],
)
def test_blocking_mpiio_is_said_only_where_it_takes_the_run(mean, run_time, outcome):
    # Drishti's M06/M07 fire on any blocking call; iosweep only where a rank's blocking
    # calls of a direction take more than io_time_share (0.2) of the run and at least
    # mpiio_overhead_min_s (1 s), so that overlapping them could win time back
    t = {"min": mean, "mean": mean, "max": mean}
    mpiio = {"read": {"ops": 36, "nonblocking": 0, "time": t}, "write": {"ops": 0}}
    got = mpiio_nonblocking(_ctx(mpiio=mpiio, headline={"run_time": run_time}))
    assert _outcome(got, "mpiio_nonblocking.read") == outcome
    assert _outcome(got, "mpiio_nonblocking.write") == "not-applicable"  # no MPI-IO writes
    mpiio["read"]["nonblocking"] = 1  # some overlapped: passed whatever the time
    assert _outcome(mpiio_nonblocking(_ctx(mpiio=mpiio, headline={"run_time": run_time})),
                    "mpiio_nonblocking.read") == "passed"  # fmt: skip


@pytest.mark.parametrize(
    "writers, written, outcome",
    [(2, 1 << 20, "found"), (1, 1 << 30, "passed"), (2, (1 << 20) - 1, "passed")],
)
def test_mpiio_use_for_files_ranks_write_together(writers, written, outcome):
    # an MPI job (4 ranks, no framework) writing one file from 2 ranks through POSIX, 1 MiB
    # (imbalance_min_bytes) or more: found; one writer, or under the floor: passed
    f = pd.DataFrame({"n_writers": [writers], "bytes_written": [written], "bytes_read": [0]})
    got = mpiio_use(_ctx(files=f))
    assert _outcome(got, "mpiio_use") == outcome
    # a training job reads its shared input through POSIX: MPI-IO does not apply
    train = _ctx(files=f, params={"framework": "pytorch"})
    assert _outcome(mpiio_use(train), "mpiio_use") == "not-applicable"


# --- requests --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "misaligned, ops, io_share, outcome",
    [
        (999, 999, 0.1, "not-applicable"),  # under the 1,000 floor, I/O 10% of the run
        (55, 59, 0.245, "found"),  # IOR-HDF5: 55 of 59, but I/O is 24.5% of the run
        (1000, 10_000, 0.1, "passed"),  # 10%: not above it
        (1000, 9_999, 0.1, "found"),
    ],
)
def test_misaligned_requests_boundary(misaligned, ops, io_share, outcome):
    # more than misaligned_share (0.1) of the POSIX requests, and at least 1000 of them or
    # the busiest rank's I/O above io_time_share (0.2) of the run
    a = {"ops": ops, "file_not_aligned": misaligned, "file_share": misaligned / ops}
    ctx = _ctx(alignment={**a, "mem_not_aligned": 0, "mem_share": 0.0},
               headline={"io_share_max": io_share})  # fmt: skip
    got = misaligned_requests(ctx)
    assert _outcome(got, "misaligned_requests.file") == outcome
    assert _outcome(got, "misaligned_requests.mem") == "passed"
    if outcome == "not-applicable":
        (o,) = [o for o in got if o.check.id == "misaligned_requests.file"]
        assert "floor: 1,000 requests" in o.check.reason and "is 10.0%" in o.check.reason
    # a training job's data loader picks its offsets: not applicable, said why
    ctx.summary["params"] = {"framework": "pytorch"}
    assert {o.check.outcome for o in misaligned_requests(ctx)} == {"not-applicable"}


def test_small_writes_alone_are_said():
    # a job that only writes: 2,000 of 2,000 writes under 1 MiB, all to checkpoint files
    w = {"ops": 2000, "small": 2000, "small_share": 1.0, "median": 4096}
    sizes = {"by_class": {"all": {"write": w}, "checkpoint": {"write": w}}}
    got = small_requests(_ctx(sizes=sizes))
    (ins,) = _fired(got)
    assert (ins.id, ins.title) == ("small_requests", "Many small write requests")
    assert ins.message == (
        "2,000 of 2,000 write requests (100.0%) are smaller than 1.0 MB; most go to checkpoint files"
    )
    assert _outcome(got, "small_requests.read") == "not-applicable"


def test_the_class_of_unnamed_files_is_no_kind_of_file_to_name():
    # issue 50 (item 7): "most go to other files" read a class name as a sentence
    w = {"ops": 2000, "small": 2000, "small_share": 1.0, "median": 4096}
    alone = {"by_class": {"all": {"read": w}, "other": {"read": w}}}
    (ins,) = _fired(small_requests(_ctx(sizes=alone)))
    assert ins.message == "2,000 of 2,000 read requests (100.0%) are smaller than 1.0 MB"
    few = {"ops": 10, "small": 10, "small_share": 1.0, "median": 4096}
    both = {"by_class": {"all": {"read": w}, "other": {"read": w}, "dataset": {"read": few}}}
    (ins,) = _fired(small_requests(_ctx(sizes=both)))
    assert ins.message.endswith("; most go to files outside the named classes")


@pytest.mark.parametrize(
    "small, undecided, outcome",
    [
        (0, 150, "passed"),  # at most 150 of 2,000 (7.5%): under 10% whatever they are
        (0, 1500, "not-checked"),  # 0 to 1,500: cannot be decided, and said
        (1500, 0, "found"),
    ],
)
def test_small_requests_that_counters_cannot_decide_are_not_checked(small, undecided, outcome):
    w = {"ops": 2000, "small": small, "small_undecided": undecided, "small_share": small / 2000}
    got = small_requests(_ctx(sizes={"by_class": {"all": {"write": w}}}))
    assert _outcome(got, "small_requests.write") == outcome


def _counter_store(tmp_path: Path, rows: list[dict], n_ranks: int = 1) -> dict:
    store = make_store(tmp_path / "s", n_ranks=n_ranks, counters=rows)
    return analyze_run(store, tmp_path / "o", AnalysisSettings())


def test_1_mib_bin_is_decided_with_the_common_access_sizes(tmp_path):
    # e3sm's case: 2,000 writes in Darshan's 100K_1M bin, ACCESS1 = 800,964 B x 1,500 and
    # ACCESS2 = 1,048,576 B x 500: 1,500 small (75%), none undecided
    row = {"rank": 0, "path": "/out/e3sm.nc", "writes": 2000, "bytes_written": 2_000 << 20,
           "size_write_100K_1M": 2000, "access1_size": 800_964, "access1_count": 1500,
           "access2_size": 1 << 20, "access2_count": 500, "opens": 1}  # fmt: skip
    sm = _counter_store(tmp_path, [row])
    w = sm["sizes"]["by_class"]["all"]["write"]
    assert (w["small"], w["small_undecided"]) == (1500, 0)
    (c,) = [c for c in sm["checks"] if c["id"] == "small_requests.write"]
    assert c["outcome"] == "found" and c["numbers"]["small"] == 1500


def test_1_mib_bin_without_telling_access_sizes_is_undecided(tmp_path):
    # 2,000 reads and 2,000 writes in 100K_1M, ACCESS1 = 800,964 B x 2,000: reads or writes?
    # writes: at least max(0, 2,000 - 2,000 reads) = 0 small, at most 2,000: not checked
    row = {"rank": 0, "path": "/out/f", "reads": 2000, "writes": 2000,
           "bytes_read": 2_000 << 20, "bytes_written": 2_000 << 20,
           "size_read_100K_1M": 2000, "size_write_100K_1M": 2000,
           "access1_size": 800_964, "access1_count": 2000, "opens": 1}  # fmt: skip
    sm = _counter_store(tmp_path, [row])
    w = sm["sizes"]["by_class"]["all"]["write"]
    assert (w["small"], w["small_undecided"]) == (0, 2000)
    (c,) = [c for c in sm["checks"] if c["id"] == "small_requests.write"]
    assert c["outcome"] == "not-checked" and "0 to 2,000 of 2,000 writes" in c["reason"]


@pytest.mark.parametrize("written, outcome", [(1.5, "passed"), (3, "found")])
def test_redundant_writes_from_the_counters(tmp_path, written, outcome):
    # a 1 MiB file (max byte written 2^20 - 1) with 1.5 or 3 MiB written: 0.5 MiB or 2 MiB
    # written again; found from redundant_write_min_bytes (1 MiB)
    row = {"rank": 0, "path": "/out/restart.dat", "writes": 3, "opens": 1,
           "bytes_written": int(written * (1 << 20)), "max_byte_written": (1 << 20) - 1}  # fmt: skip
    sm = _counter_store(tmp_path, [row])
    (c,) = [c for c in sm["checks"] if c["id"] == "redundant_writes"]
    assert c["outcome"] == outcome
    assert c["numbers"]["redundant_bytes"] == int((written - 1) * (1 << 20))


# --- metadata, STDIO, checkpoints, scale ------------------------------------------------------
@pytest.mark.parametrize("rank_s, outcome", [(30.0, "passed"), (30.5, "found")])
def test_metadata_time_on_one_rank_above_30_s(rank_s, outcome):
    # 10% of the I/O time (under metadata_time_share 0.3), but one rank above 30 s (Drishti)
    md = {"meta_time_share": 0.1, "max_rank_meta_time": rank_s,
          "totals": {"opens": 10, "stats": 0, "seeks": 0}}  # fmt: skip
    assert _outcome(metadata_heavy(_ctx(metadata=md)), "metadata_heavy") == outcome


@pytest.mark.parametrize("stdio, outcome", [(10, "passed"), (11, "found")])
def test_stdio_share(stdio, outcome):
    # STDIO moving 10 or 11 of 100 bytes: found above stdio_share (0.1)
    layers = [
        {"module": "POSIX", "analysed": True, "bytes_read": 100 - stdio, "bytes_written": 0},
        {"module": "STDIO", "analysed": True, "bytes_read": stdio, "bytes_written": 0},
    ]
    assert _outcome(stdio_share(_ctx(layers=layers)), "stdio_share") == outcome


def test_single_rank_checkpoint_rule_names_the_writer():
    ck = {"available": True, "n_writers": 1, "writers": [0], "bytes_written": 122_270}
    (ins,) = _fired(single_rank_checkpoint(_ctx(checkpoints=ck)))
    assert ins.title == "Only rank 0 writes checkpoints" and ins.class_ == "checkpoint"
    assert "122.3 kB" in ins.message and "the other 3 ranks write none" in ins.message
    one_rank = _ctx(checkpoints=ck)
    one_rank.summary["ranks"]["count"] = 1
    assert _outcome(single_rank_checkpoint(one_rank), "single_rank_checkpoint") == "not-applicable"


def test_no_checkpoint_facts_when_no_rank_writes_one(tmp_path):
    # 2 ranks reading only: no checkpoint, no writer named, the check says why
    segs = [(r, f"/data/f{r}", "read", 0, 4096, 1.0 + r, 1.1 + r) for r in range(2)]
    sm = analyze_run(
        make_store(tmp_path / "s", segs, n_ranks=2), tmp_path / "o", AnalysisSettings()
    )
    ck = sm["checkpoints"]
    assert (ck["n_writers"], ck["writers"], ck.get("bytes_written", 0)) == (0, [], 0)
    assert not ck.get("n_checkpoints")
    (c,) = [c for c in sm["checks"] if c["id"] == "single_rank_checkpoint"]
    assert (c["outcome"], c["reason"]) == ("not-applicable", "no rank writes restart files")
    assert not [i for i in sm["insights"] if i["class"] == "checkpoint"]


@pytest.mark.parametrize("ranks, fires", [(63, False), (64, True)])
def test_file_per_process_at_scale_boundary(ranks, fires):
    # fpp_min_ranks = 64: 64 ranks each opening their own files load the metadata servers
    acc = {"read": {"strategy": "file-per-process", "evidence": {"files": 128}}, "write": None}
    ctx = _ctx(classes={"dataset": {"access": acc}})
    ctx.summary["ranks"]["count"] = ranks
    got = file_per_process_at_scale(ctx)
    assert len(_fired(got)) == int(fires)
    if fires:
        (ins,) = _fired(got)
        assert (ins.severity, ins.class_) == ("warn", "dataset")
        assert ins.title == "File-per-process dataset reads at 64 ranks"
        assert ins.message == "128 dataset files, one set per rank, opened by 64 ranks"
        assert ins.numbers == {"ranks": 64, "files": 128, "op": "read", "threshold_ranks": 64}
    else:
        assert got[0].check.outcome == "not-applicable" and "under the 64" in got[0].check.reason


@pytest.mark.parametrize("share, fires", [(0.1, False), (0.11, True)])
def test_exposed_io_boundary(share, fires):
    # exposed_io_share = 0.1, strictly above it; not applicable once the input pipeline has
    # a verdict (it says whether and why the ranks wait)
    ov = {"available": True, "exposed_share_of_epochs_max": share,
          "exposed_io_time_in_epochs_max": 2.5}  # fmt: skip
    got = exposed_io(_ctx(overlap=ov))
    assert len(_fired(got)) == int(fires)
    if fires:
        (ins,) = _fired(got)
        assert ins.message == "Up to 11.0% of a rank's epoch time is I/O with no compute running"
    verdict = _ctx(overlap=ov, pipeline={"verdict": {"kind": "compute-bound"}})
    assert _outcome(exposed_io(verdict), "exposed_io") == "not-applicable"


# --- the trace --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "issues, completeness, fires",
    [
        ([{"kind": "no-dxt", "severity": "warning"}], None, False),
        ([{"kind": "truncated", "severity": "error"}], None, True),
        ([{"kind": "truncated"}], None, True),  # an issue without a severity is an error
        ([], 0.99, False),  # trace_completeness_min 0.99 (schema default)
        ([], 0.98, True),
    ],
)
def test_incomplete_trace_rule(issues, completeness, fires):
    trace = {"completeness": completeness, "segments": 10, "counter_records": 2}
    got = no_io_or_truncated(_ctx(trace=trace, issues=issues, analysis_status="partial"))
    assert [i.id for i in _fired(got)] == (["truncated_trace"] if fires else [])
    assert _outcome(got, "trace_whole") == ("found" if fires else "passed")
    if fires:
        (ins,) = _fired(got)
        tail = (
            "" if completeness is None else "; DXT holds 98.0% of the operations the counters saw"
        )
        assert ins.message == (
            "Some traces are missing, truncated or partial, so every figure here is a lower bound"
            + tail
        )
        errors = sum(i.get("severity", "error") == "error" for i in issues)
        assert (ins.numbers["issues"], ins.numbers["error_issues"]) == (len(issues), errors)


def test_only_excluded_paths_names_three_of_them():
    paths = ["<STDOUT>", "<STDERR>", "/proc/self/maps", "/etc/hosts"]
    trace = {"completeness": None, "segments": 0, "counter_records": 0, "excluded_records": 4,
             "excluded_ops": 9, "excluded_paths": paths}  # fmt: skip
    (ins,) = _fired(no_io_or_truncated(_ctx(trace=trace, issues=[], analysis_status="empty")))
    assert (ins.id, ins.severity) == ("only_excluded_paths", "info")
    assert ins.message == (
        "The tracer worked, but every file it recorded is one the analysis leaves out "
        "(exclude_pattern), e.g. <STDOUT>, <STDERR>, /proc/self/maps: the job did no other file I/O"
    )
    trace["excluded_paths"] = []
    (ins,) = _fired(no_io_or_truncated(_ctx(trace=trace, issues=[], analysis_status="empty")))
    assert "e.g. terminal streams: the job" in ins.message


def test_no_io_recorded_rule():
    trace = {"completeness": None, "segments": 0, "counter_records": 0}
    (ins,) = _fired(no_io_or_truncated(_ctx(trace=trace, issues=[], analysis_status="empty")))
    assert (ins.id, ins.severity, ins.title) == ("no_io_recorded", "high", "No I/O was recorded")
    assert ins.numbers == {"segments": 0, "counter_records": 0, "issues": 0}


# --- a file shared by every rank, as Darshan reduces it ----------------------------------------
def _shared_record(**kw) -> dict:
    return {"rank": -1, "path": "/out/shared.dat", "opens": 8, **kw}


def test_a_shared_record_s_only_writer_keeps_its_write_time(tmp_path):
    # skew-app's shape on 8 ranks: rank 0 (the slowest, 264.24 s on the file) wrote all
    # 1,000 MiB in 264.0 s of writes; rank 2 (the fastest) spent 0.09 s; the record's
    # metadata time is 35,282 s. Rank 0 keeps all the write time and 264.24 - 264.0 =
    # 0.24 s of metadata: its own time less its writes (before the fix: 1.96 s of writes
    # and 262 s of metadata, the record's proportions)
    row = _shared_record(writes=100, bytes_written=1000 << 20, write_time=264.0,
                         meta_time=35282.0, fastest_rank=2, fastest_rank_bytes=0,
                         fastest_rank_time=0.09, slowest_rank=0, slowest_rank_bytes=1000 << 20,
                         slowest_rank_time=264.24)  # fmt: skip
    store = make_store(tmp_path / "s", n_ranks=8, counters=[row])
    sm = analyze_run(store, tmp_path / "o", AnalysisSettings())
    r = pd.read_parquet(tmp_path / "o" / "ranks.parquet").set_index("rank")
    assert r.loc[0, "write_time"] == pytest.approx(264.0)
    assert r.loc[0, "meta_time"] == pytest.approx(0.24, abs=1e-6)
    assert r.loc[2, "meta_time"] == pytest.approx(0.09, abs=1e-6)
    assert r["meta_time"].sum() == pytest.approx(35282.0)
    assert r.drop(index=0)["write_time"].sum() == 0
    # the rest is the six others' by iosweep's split: (35,282 - 0.24 - 0.09) / 6 = 5,880.28 s
    # each in the table, but no rank's metadata time is measured: the check states the
    # bounds (the mean, 35,282 / 8 = 4,410.25 s, and the sum), not the split as a figure
    (c,) = [c for c in sm["checks"] if c["id"] == "metadata_heavy"]
    assert r.loc[5, "meta_time"] == pytest.approx(5880.278333, abs=1e-4)
    assert c["numbers"]["max_rank_meta_time"] is None
    assert c["numbers"]["max_rank_meta_time_low"] == pytest.approx(35282.0 / 8)
    assert c["numbers"]["max_rank_meta_time_high"] == pytest.approx(35282.0)
    assert c["outcome"] == "found" and "spends at least 4,410 s" in c["reason"]


def test_a_shared_record_s_metadata_split_is_not_stated_as_measured(tmp_path):
    # issue 50 (skew-autobench-ior's shape, on 64 ranks): one reduced record, 40 s of
    # metadata summed over the ranks, 2.4% of the I/O time: under 30%, but whether one rank
    # passed 30 s cannot be told (between 40 / 64 = 0.625 s and 40 s): not checked, said
    # why; it "passed" with a figure of iosweep's split
    row = _shared_record(reads=64, bytes_read=64 << 30, read_time=1626.0, meta_time=40.0,
                         fastest_rank=3, fastest_rank_bytes=1 << 30, fastest_rank_time=20.0,
                         slowest_rank=9, slowest_rank_bytes=1 << 30, slowest_rank_time=30.0)  # fmt: skip
    store = make_store(tmp_path / "s", n_ranks=64, counters=[row])
    sm = analyze_run(store, tmp_path / "o", AnalysisSettings())
    (c,) = [c for c in sm["checks"] if c["id"] == "metadata_heavy"]
    assert c["outcome"] == "not-checked", c
    assert c["numbers"]["meta_time_share"] == pytest.approx(40.0 / 1666.0)
    assert "Darshan reduced 1 shared file to one record" in c["reason"]
    assert c["numbers"]["max_rank_meta_time_low"] == pytest.approx(40.0 / 64)
    assert "s (the mean) and 40 s" in c["reason"] and c["numbers"]["max_rank_meta_time"] is None
    # 20 s of metadata in all: no rank can pass 30 s, so it passes on the bounds
    row["meta_time"] = 20.0
    store = make_store(tmp_path / "t", n_ranks=64, counters=[row])
    sm = analyze_run(store, tmp_path / "p", AnalysisSettings())
    (c,) = [c for c in sm["checks"] if c["id"] == "metadata_heavy"]
    assert c["outcome"] == "passed", c


def test_mpiio_time_per_rank_mean_never_above_max(tmp_path):
    # three MPI-IO records reduced over 4 ranks (imbalanced-io's shape): rank 0 the slowest
    # on each, 100 s of its 160 s writes on each; the others 20 s each. A rank's time is its
    # sum over the files: rank 0 3 x 100 = 300 s, the others 3 x 20 = 60 s; mean 120 s.
    rows = [
        {"rank": -1, "path": f"/out/f{i}", "module": "MPIIO", "writes": 40, "opens": 4,
         "collective_writes": 40, "bytes_written": 4 << 20, "write_time": 160.0,
         "fastest_rank": 1, "fastest_rank_bytes": 1 << 20, "fastest_rank_time": 20.0,
         "slowest_rank": 0, "slowest_rank_bytes": 1 << 20, "slowest_rank_time": 100.0}
        for i in range(3)
    ]  # fmt: skip
    sm = _counter_store(tmp_path, rows, n_ranks=4)
    t = sm["mpiio"]["write"]["time"]
    assert t["max"] == pytest.approx(300.0) and t["mean"] == pytest.approx(120.0)
    assert t["min"] == pytest.approx(60.0)


def test_rank_minus_1_records_of_a_log_stay_shared(tmp_path):
    # an MPI log whose shared file is a rank -1 record with DXT segments at rank -1 (as a
    # log written without per-rank DXT): the store keeps them at rank -1, never rank 0
    from iosweep.trace.darshan.libutil import SEGMENT_DTYPE
    from iosweep.trace.darshan.write import DxtFile, write_darshan_log
    from iosweep.trace.ingest import ingest_jobs
    from iosweep.trace.store import open_store

    seg = np.zeros(2, SEGMENT_DTYPE)
    seg["offset"], seg["length"] = [0, 4096], [4096, 4096]
    seg["start"], seg["end"] = [1.0, 2.0], [1.5, 2.5]
    own = np.zeros(1, SEGMENT_DTYPE)
    own["length"], own["start"], own["end"] = 100, 3.0, 3.1
    log = write_darshan_log(
        tmp_path / "mpi.darshan",
        [DxtFile("/out/shared", seg, rank=-1), DxtFile("/out/rank0", own, rank=0)],
        start=1.7e9, end=1.7e9 + 10, exe="./app", jobid=9, nprocs=4,
    )  # fmt: skip
    ((store, _),) = ingest_jobs([log], tmp_path / "store")
    ts = open_store(store)
    s = ts.table("segments").to_pandas()
    c = ts.table("counters").to_pandas()
    assert set(s.loc[s["path"] == "/out/shared", "rank"]) == {-1}
    assert set(s.loc[s["path"] == "/out/rank0", "rank"]) == {0}
    assert set(c.loc[c["path"] == "/out/shared", "rank"]) == {-1}


def test_bytes_read_beyond_a_shared_record_s_extent_are_re_reads(tmp_path):
    # issue 50 (e3sm_io_heatmap_only's i_case_1344p.nc): one shared POSIX record (rank -1,
    # no DXT) with 25,722,216 bytes read and a highest byte of 11,727,455: at least
    # 25,722,216 - 11,727,456 = 13,994,760 bytes were read more than once (it "passed")
    import darshan

    from iosweep.trace.darshan.write import CounterRecord, write_darshan_log

    rec = CounterRecord(
        "POSIX",
        "/inputs/i_case.nc",
        {"POSIX_OPENS": 8, "POSIX_READS": 7682, "POSIX_BYTES_READ": 25_722_216,
         "POSIX_MAX_BYTE_READ": 11_727_455, "POSIX_FASTEST_RANK": 3,
         "POSIX_FASTEST_RANK_BYTES": 49_713, "POSIX_SLOWEST_RANK": 5,
         "POSIX_SLOWEST_RANK_BYTES": 316_072},
        {"POSIX_F_READ_TIME": 2.0},
        rank=-1,
    )  # fmt: skip
    (tmp_path / "logs").mkdir()
    log = write_darshan_log(
        tmp_path / "logs" / "e3sm.darshan", [], start=1.7e9, end=1.7e9 + 100,
        exe="./e3sm_io", jobid=7, nprocs=8, records=[rec],
    )  # fmt: skip
    with darshan.DarshanReport(str(log)) as rep:
        c = rep.records["POSIX"].to_df()["counters"].iloc[0]
    expected = int(c["POSIX_BYTES_READ"] - (c["POSIX_MAX_BYTE_READ"] + 1))
    assert expected == 13_994_760
    from iosweep.trace.ingest import ingest

    ingest([log.parent], tmp_path / "store")
    sm = analyze_run(tmp_path / "store", tmp_path / "out", AnalysisSettings())
    check = next(c for c in sm["checks"] if c["id"] == "redundant_reads")
    assert check["outcome"] == "found", check
    assert check["numbers"]["redundant_bytes"] == expected
    assert "at least 14.0 MB of the 25.7 MB" in check["reason"]
    assert "1 file is read by 8 ranks" in check["reason"]
    assert "partly-redundant" not in check["reason"]  # (item 7: a value read as a sentence)


def test_collective_buffering_is_counted_from_the_variance_not_called_imbalance(tmp_path):
    # issue 50 (skew-autobench-ior, its counters as PyDarshan reads them): 2,048 ranks read
    # 512 GiB of one shared file through collective MPI-IO. At the POSIX layer the record
    # keeps rank 14 (fastest, 0 B) and rank 1024 (slowest, 9,816,768,512 B), and a byte
    # variance of 2.563e18: exactly 56 ranks of 9.82 GB and the rest none (MPI-IO's
    # aggregators). At the MPI-IO layer every rank asked for 256 MiB (variance 0), in
    # 598.9 s to 651.5 s. It was "imbalance: bytes 100%, stragglers [1024]", with 2,046
    # ranks said to read 263.9 MB each
    from iosweep.trace.darshan.write import CounterRecord, write_darshan_log
    from iosweep.trace.ingest import ingest

    total, agg = 549_755_813_888, 9_816_768_512
    posix = CounterRecord(
        "POSIX", "/scratch/ior.dat",
        {"POSIX_OPENS": 4098, "POSIX_READS": 524_288, "POSIX_BYTES_READ": total,
         "POSIX_MAX_BYTE_READ": total - 1, "POSIX_FASTEST_RANK": 14,
         "POSIX_FASTEST_RANK_BYTES": 0, "POSIX_SLOWEST_RANK": 1024,
         "POSIX_SLOWEST_RANK_BYTES": agg},
        {"POSIX_F_READ_TIME": 9033.43, "POSIX_F_META_TIME": 212.57,
         "POSIX_F_FASTEST_RANK_TIME": 0.0137, "POSIX_F_SLOWEST_RANK_TIME": 337.16,
         "POSIX_F_VARIANCE_RANK_BYTES": 2.5631915654848184e18},
        rank=-1,
    )  # fmt: skip
    mpiio = CounterRecord(
        "MPI-IO", "/scratch/ior.dat",
        {"MPIIO_COLL_OPENS": 2048, "MPIIO_COLL_READS": 131_072, "MPIIO_BYTES_READ": total,
         "MPIIO_FASTEST_RANK": 33, "MPIIO_FASTEST_RANK_BYTES": 1 << 28,
         "MPIIO_SLOWEST_RANK": 128, "MPIIO_SLOWEST_RANK_BYTES": 1 << 28},
        {"MPIIO_F_READ_TIME": 1_244_094.9, "MPIIO_F_FASTEST_RANK_TIME": 598.88,
         "MPIIO_F_SLOWEST_RANK_TIME": 651.46, "MPIIO_F_VARIANCE_RANK_BYTES": 0.0},
        rank=-1,
    )  # fmt: skip
    (tmp_path / "logs").mkdir()
    write_darshan_log(
        tmp_path / "logs" / "ior.darshan", [], start=1_601_583_191, end=1_601_583_849,
        exe="./ior -a MPIIO -c", jobid=4211020700, nprocs=2048, records=[posix, mpiio],
    )  # fmt: skip
    ingest([tmp_path / "logs"], tmp_path / "store")
    sm = analyze_run(tmp_path / "store", tmp_path / "out", AnalysisSettings())
    checks = {c["id"]: c for c in sm["checks"]}
    assert sm["trace"]["shared_records"]["movers"] == 56
    agg_check = checks["mpiio_aggregators"]
    assert agg_check["outcome"] == "found" and agg_check["numbers"]["aggregators"] == 56
    assert "about 56 of 2048 ranks" in agg_check["reason"]
    im = checks["imbalance"]
    assert im["outcome"] == "passed", im
    assert "judged at the MPI-IO layer" in im["reason"]
    assert im["numbers"]["read_bytes_spread"] == 0.0
    assert im["numbers"]["read_time_spread"] == pytest.approx((651.46 - 598.88) / 651.46, 0.01)
    sf = checks["shared_file_imbalance.read"]
    assert sf["outcome"] == "not-checked" and "about 56 of 2048" in sf["reason"], sf
    assert "imbalance" not in {i["id"] for i in sm["insights"]}


# --- the real logs ----------------------------------------------------------------------------
def test_every_rule_appears_in_every_real_log_s_checklist(tmp_path):
    # each log of shared/data/darshan-logs (the 24 DLIO logs as one job): every rule of
    # RULES gives at least one check, each with one of the four outcomes and a reason;
    # exactly the found checks are insights
    from conftest import shared_fixture

    from iosweep.trace.ingest import ingest_jobs

    root = shared_fixture("darshan-logs")
    groups = [sorted(d.glob("*.darshan")) for d in sorted(root.iterdir()) if d.is_dir()]
    rules = {r.__name__ for r in RULES}
    n = 0
    for i, logs in enumerate(g for g in groups if g):
        for k, (store, _) in enumerate(ingest_jobs(logs, tmp_path / f"s{i}")):
            sm = analyze_run(store, tmp_path / f"o{i}-{k}", AnalysisSettings())
            assert {c["rule"] for c in sm["checks"]} == rules, store
            assert all(c["outcome"] in OUTCOMES and c["reason"] for c in sm["checks"]), store
            found = [c for c in sm["checks"] if c["outcome"] == "found"]
            assert len(found) == len(sm["insights"]), store
            n += 1
    # 8 folders: the 5 release logs are 5 jobs, the others one each
    assert n == 12


def test_a_shared_files_spread_under_its_floor_is_not_judged_not_a_false_zero(tmp_path):
    # two ranks read one shared file: 2 MiB and 1 MiB (bytes over the 1 MiB floor: spread
    # (2 - 1) / 2 = 50%), in 0.02 s and 0.01 s (time under the 0.1 s floor: not judged, where
    # it was printed as "0.0% of time"); then a file of 2 KiB and 1 KiB: neither over
    mib = 1 << 20
    segs = [
        (0, "/data/shared.bin", "read", 0, 2 * mib, 1.0, 1.02),
        (1, "/data/shared.bin", "read", 0, mib, 1.0, 1.01),
    ]
    sm = analyze_run(make_store(tmp_path / "s", segs, n_ranks=2), tmp_path / "o")
    check = next(c for c in sm["checks"] if c["id"] == "shared_file_imbalance.read")
    assert check["outcome"] == "found"
    (ins,) = [i for i in sm["insights"] if i["id"] == "shared_file_imbalance"]
    assert "time spread not judged (under the floor)" in ins["message"]
    assert ins["numbers"]["bytes_spread_max"] == pytest.approx(0.5)
    assert ins["numbers"]["time_spread_max"] is None  # unknown, not 0
    small = [(r, "/data/tiny.bin", "read", 0, (2 - r) << 10, 1.0, 1.01) for r in range(2)]
    sm = analyze_run(make_store(tmp_path / "t", small, n_ranks=2), tmp_path / "p")
    check = next(c for c in sm["checks"] if c["id"] == "shared_file_imbalance.read")
    assert check["outcome"] == "not-applicable"
    assert "none enough to judge" in check["reason"] and "%" not in check["reason"]
