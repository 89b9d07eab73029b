"""The analysis's memory budget: the need counted from a store, a run over the budget refused
with its figures (and the others analysed), the setting's checks, the workflow's request."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from factories import make_store, steps_table, synthetic_store

from iosweep.analysis import AnalysisSettings, budget, subset
from iosweep.cli import main as iosweep_main
from iosweep.trace.store import open_store

GIB = 1 << 30


def test_the_need_is_counted_from_the_stores_row_counts(tmp_path):
    st = synthetic_store(tmp_path / "s", 1000, ["/data/a", "/data/b"])
    need = budget.need_of(st)
    # synthetic_store: n reads plus 2 checkpoint writes, no counters, no app events
    assert (need.segments, need.counter_records, need.app_events) == (1002, 0, 0)
    assert need.segments == pq.ParquetFile(st / "segments.parquet").metadata.num_rows
    assert need.bytes == budget.BASE + 1002 * budget.PER_SEGMENT
    assert budget.mem_mb(st) == -(-need.bytes // 2**20)
    # not a store (yet): FileNotFoundError naming the run.json Snakemake waits for
    with pytest.raises(FileNotFoundError) as e:
        budget.need_of(tmp_path / "none")
    assert e.value.filename == str(tmp_path / "none" / "run.json")


def test_a_run_over_the_budget_is_refused_with_its_figures(tmp_path, capsys):
    # a run over the budget is cut into parts of whole ranks: here rank 0 alone does not fit
    # (1,000 reads over 4 ranks, and rank 0's 2 checkpoint writes: 252 segments, 0.5 GiB)
    st = synthetic_store(tmp_path / "s", 1000, ["/data/a", "/data/b"])
    out = tmp_path / "out"
    assert iosweep_main(["analyze", str(st), "-o", str(out), "--memory-gb", "0.25"]) == 1
    err = capsys.readouterr().err
    assert "rank 0: 252 segments" in err and "0.25 GiB" in err and "--memory-gb" in err
    assert "Traceback" not in err  # a refusal, not a crash
    assert not out.exists()  # nothing read, nothing written
    # with room, the same run is analysed and its summary records the budget
    assert iosweep_main(["analyze", str(st), "-o", str(out), "--memory-gb", "2"]) == 0
    assert json.loads((out / "summary.json").read_text())["settings"]["memory_gb"] == 2.0


def test_in_a_sweep_the_run_over_the_budget_fails_alone(tmp_path, capsys):
    small = synthetic_store(tmp_path / "small", 1000, ["/data/a"], run_id="small")
    big = synthetic_store(tmp_path / "big", 2_000_000, ["/data/a"], run_id="big")
    # 0.5 GiB + 250 B x 1,002 fits 0.6 GiB; 0.5 GiB + 250 B x 2,000,002 (0.47 GiB) does not
    rc = iosweep_main(["analyze", str(small), str(big), "-o", str(tmp_path / "out"),
                       "--memory-gb", "0.6"])  # fmt: skip
    assert rc == 1
    assert "rank 0: 500,002 segments" in capsys.readouterr().err
    sweep = pd.read_csv(tmp_path / "out" / "sweep.csv")
    status = dict(zip(sweep["run_id"], sweep["analysis_status"], strict=True))
    assert status[str(big)] == "error" and status["small"] != "error"


@pytest.mark.parametrize("bad", [0, -1, "lots"])
def test_the_budget_must_be_a_positive_number(bad):
    with pytest.raises(ValueError, match="memory_gb"):
        AnalysisSettings.from_dict({"memory_gb": bad})


def test_a_bad_memory_gb_option_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        iosweep_main(["analyze", str(tmp_path), "-o", str(tmp_path / "o"), "--memory-gb", "0"])
    assert "--memory-gb" in capsys.readouterr().err


def test_the_default_budget_is_the_machines():
    machine = budget.machine_bytes()
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < machine <= physical
    cgroup = Path("/sys/fs/cgroup/memory.max")
    if cgroup.exists() and cgroup.read_text().strip().isdigit():
        assert machine <= int(cgroup.read_text())
    assert budget.budget_bytes(None) == int(machine * budget.MACHINE_SHARE)
    assert budget.budget_bytes(3) == 3 * GIB


# --- some ranks at a time (--ranks) ----------------------------------------------------------


def test_ranks_parse_and_print():
    assert subset.parse_ranks("0-3,8, 10") == [0, 1, 2, 3, 8, 10]
    assert subset.ranks_text([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    for bad in ("3-1", "a", "1,,2", "-1"):
        with pytest.raises(ValueError, match="--ranks"):
            subset.parse_ranks(bad)


def test_some_ranks_give_those_ranks_figures_exactly(tmp_path, capsys):
    """Ranks 1 and 3 of a 4-rank run: their rows of every per-rank and per-(rank, file) table
    are the whole run's; totals are theirs; the limitation says so."""
    # every rank: an epoch over the run, a step every 10 s (2 s waiting, 8 s computing)
    steps = steps_table(
        [(r, 0, -1, 0.0, 100.0) for r in range(4)]
        + [(r, 0, k, 10.0 * k + 2, 10.0 * k + 10) for r in range(4) for k in range(10)]
    )
    st = synthetic_store(tmp_path / "s", 1000, [f"/data/f{i}" for i in range(20)], steps=steps)
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert iosweep_main(["analyze", str(st), "-o", str(whole)]) == 0
    capsys.readouterr()
    assert iosweep_main(["analyze", str(st), "-o", str(part), "--ranks", "1,3"]) == 0
    assert "warning: only ranks 1, 3 of 4 were analysed" in capsys.readouterr().out
    # the size of a file all ranks read comes from the chosen ranks' reads alone, and so
    # does a rank's coverage of it (a file-level fact, named in the limitation)
    from_the_file = ["file_size", "read_coverage_frac"]
    for table in ("ranks", "file_ranks", "pipeline"):
        w = pd.read_parquet(whole / f"{table}.parquet")
        p = pd.read_parquet(part / f"{table}.parquet")
        assert sorted(p["rank"].unique()) == [1, 3] and len(p)
        w = w[w["rank"].isin([1, 3])]
        key = [c for c in ("rank", "epoch", "file") if c in p]
        w, p = (x.sort_values(key).reset_index(drop=True) for x in (w, p))
        other = [c for c in p.columns if c not in from_the_file]
        pd.testing.assert_frame_equal(p[other], w[other])
    assert json.loads((part / "summary.json").read_text())["pipeline"]["available"]
    sw = json.loads((whole / "summary.json").read_text())
    sp = json.loads((part / "summary.json").read_text())
    assert sp["ranks"]["count"] == 2 and sw["ranks"]["count"] == 4
    # synthetic_store: read i goes to rank i % 4, the 2 checkpoint writes to rank 0
    assert sp["trace"]["segments"] == 500 and sp["headline"]["writes"] == 0
    ranks = pd.read_parquet(whole / "ranks.parquet").set_index("rank")
    assert sp["headline"]["bytes_read"] == int(ranks.loc[[1, 3], "bytes_read"].sum())
    assert any("only ranks 1, 3 of 4 were analysed" in x for x in sp["limitations"])
    assert not any("ranks" in x for x in sw["limitations"])
    # the need counted is that of the two ranks' rows
    assert budget.need_of(st, subset.select(open_store(st), [1, 3])).segments == 500


def test_ranks_the_run_does_not_have_are_named(tmp_path, capsys):
    st = synthetic_store(tmp_path / "s", 100, ["/data/a"])
    assert iosweep_main(["analyze", str(st), "-o", str(tmp_path / "o"), "--ranks", "2-5"]) == 1
    err = capsys.readouterr().err
    assert "the run has no rank 4-5 (its ranks: 0-3)" in err and "Traceback" not in err
    with pytest.raises(SystemExit, match="one trace store"):
        iosweep_main(["analyze", str(st), str(st), "-o", str(tmp_path / "o"), "--ranks", "1"])


def test_ranks_of_records_shared_by_all_ranks_or_of_a_store_without_ranks_are_refused(
    tmp_path, capsys
):
    # an MPI job's file shared by all 4 ranks, which Darshan reduced to one record (rank -1,
    # its fastest rank kept): it cannot be split by rank
    shared = make_store(
        tmp_path / "mpi",
        n_ranks=4,
        counters=[{"rank": -1, "path": "/data/shared.h5", "reads": 8, "bytes_read": 8 << 20,
                   "fastest_rank": 2, "fastest_rank_bytes": 2 << 20}],
    )  # fmt: skip
    assert iosweep_main(["analyze", str(shared), "-o", str(tmp_path / "o1"), "--ranks", "0"]) == 1
    err = capsys.readouterr().err
    assert "Darshan reduced 1 record(s) of files shared by all ranks to one each" in err
    assert "Traceback" not in err
    # logs whose run names no ranks: nothing to choose among
    bare = make_store(tmp_path / "bare", [(-1, "/data/a", "read", 0, 4096, 1.0, 1.1)], n_ranks=0)
    assert iosweep_main(["analyze", str(bare), "-o", str(tmp_path / "o2"), "--ranks", "0"]) == 1
    assert "the store names no ranks (run.json has none)" in capsys.readouterr().err


def test_the_budget_is_the_limit_of_the_process_own_cgroup(tmp_path):
    # a SLURM job's cgroup is nested: v1 (memory controller) and v2 (one hierarchy), the
    # tightest limit on the path up counts; the root's file says nothing of the job's
    root = tmp_path / "cgroup"
    v1 = root / "memory" / "slurm" / "uid_0" / "job_12"
    (v1 / "step_0").mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (v1 / "memory.limit_in_bytes").write_text(f"{4 << 30}\n")
    (v1 / "step_0" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    proc = tmp_path / "cgroup.txt"
    proc.write_text("5:cpu,cpuacct:/slurm/uid_0/job_12/step_0\n"
                    "4:memory:/slurm/uid_0/job_12/step_0\n")  # fmt: skip
    assert budget.cgroup_limit(proc, root) == 4 << 30
    v2 = root / "user.slice" / "job"
    v2.mkdir(parents=True)
    (v2 / "memory.max").write_text("max\n")  # unlimited here, limited above
    (root / "user.slice" / "memory.max").write_text(f"{3 << 30}\n")
    proc.write_text("0::/user.slice/job\n")
    assert budget.cgroup_limit(proc, root) == 3 << 30
    proc.write_text("0::/\n")
    assert budget.cgroup_limit(proc, root) is None  # no limit: the machine's memory


def test_a_steps_peak_over_a_budget_given_by_hand_is_said_with_the_request_it_needs():
    gib = budget.GIB
    assert budget.over_peak("step", 2 * gib, None) is None  # no budget asked for
    assert budget.over_peak("step", gib, 1.0) is None  # within it
    said = budget.over_peak("putting the parts together", 1_700_000_000, 1.0)
    # 1.7e9 B = 1.58 GiB; 1,621.25 MiB asked for whole: 1,622 MB
    assert said == (
        "putting the parts together peaked at 1.58 GiB, over the budget of 1 GiB "
        "(--memory-gb, analysis.memory_gb): a job analysing this run needs 1,622 MB"
    )


@pytest.mark.parametrize(
    "rows, memory_gb, measured_gib",
    [
        # issue 51, measured (docs/analysis.md, "Memory"): the ImageNet-shaped 10.2 M run
        # (1.28 M files) analysed in 8 parts at --memory-gb 1 (their path lists: 2,402,137
        # rows) put together at a peak of 1.63 GiB; in 4 parts at 1.6 (2,241,853 rows), 1.82
        ([300_268] * 7 + [300_261], 1.0, 1.63),
        ([560_464] * 3 + [560_461], 1.6, 1.82),
    ],
)
def test_what_putting_parts_together_needs_is_counted_before_and_bounds_what_it_took(
    tmp_path, rows, memory_gb, measured_gib
):
    # counted from the parts' path lists' footers, before the step runs: what the workflow's
    # put-together job asks the scheduler for (it asked for the budget, below the step's
    # peak, and would have been killed), and what `iosweep analyze` warns of beforehand
    import pyarrow as pa

    from iosweep.analysis.parts.combine import put_together_need
    from iosweep.analysis.parts.results import PATHS

    dirs = []
    for i, n in enumerate(rows):
        d = tmp_path / f"part-{i:04d}"
        d.mkdir()
        pq.write_table(pa.table({"path": pa.array(["/d/x"] * n)}), d / PATHS)
        dirs.append(d)
    need = put_together_need(dirs, memory_gb)
    assert need >= measured_gib * budget.GIB  # an upper bound of what it took
    assert need <= (measured_gib + 0.5) * budget.GIB  # not the machine
    said = budget.over_peak("putting the parts together", need, memory_gb, "may take up to")
    assert said is not None and said.startswith("putting the parts together may take up to ")
    assert said.endswith(f"a job analysing this run needs {-(-need // 2**20):,} MB")


def test_the_peak_starts_again_from_what_is_held_now():
    import numpy as np

    block = np.ones(64 << 20, np.uint8)  # 64 MiB touched, then let go
    before = budget.own_memory("VmHWM")
    del block
    assert budget.reset_peak()
    after = budget.own_memory("VmHWM")
    assert after <= before - (48 << 20), (before, after)
