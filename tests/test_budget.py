"""The analysis's memory budget: the need counted from a store, a run over the budget refused
with its figures (and the others analysed), the setting's checks, the workflow's request."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from factories import synthetic_store

from iosweep.analysis import AnalysisSettings, budget
from iosweep.cli import main as iosweep_main

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
    st = synthetic_store(tmp_path / "s", 1000, ["/data/a", "/data/b"])
    out = tmp_path / "out"
    assert iosweep_main(["analyze", str(st), "-o", str(out), "--memory-gb", "0.25"]) == 1
    err = capsys.readouterr().err
    assert "1,002 segments" in err and "0.25 GiB" in err and "--memory-gb" in err
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
    assert "2,000,002 segments" in capsys.readouterr().err
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
