"""Issue 51, item 4: the ingest keeps to the run's memory budget (``--memory-gb``,
``analysis.memory_gb``): fewer reader processes where the default count would not fit, and a
budget too small for one refused with the figures before anything is lost.

The need's figures (docs/data-model.md, "Memory"): the writing process 256 MiB, and where the
logs' tables are spilled its row groups in the making, 16x the logs' bytes up to 768 MiB; a
reader 256 MiB; a log's tables 16x its bytes on disk. The expected needs below are those
figures summed by hand over the fixture's log sizes (read from the files)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from iosweep.cli import main as cli_main
from iosweep.memory import MemoryBudgetError
from iosweep.trace.ingest import ingest, parts, readlogs
from iosweep.trace.ingest.find import discover
from iosweep.trace.ingest.inparts import read_part
from iosweep.trace.ingest.need import estimate

GIB, MIB = 1 << 30, 1 << 20
BASE, HOLD = 256 * MIB, 768 * MIB
RUN = "horovod-pytorch-mnist/darshan-np4"  # 6 per-process Darshan logs (ranks and workers)


def _sizes(logs: Path) -> list[int]:
    return [p.stat().st_size for p in logs.rglob("*.darshan")]


def _gb(nbytes: int) -> float:
    return nbytes / GIB


def test_a_budget_below_one_reader_is_refused_and_the_store_kept(shared_data, tmp_path, capsys):
    logs = shared_data / RUN
    sizes = _sizes(logs)
    store = tmp_path / "store"
    assert cli_main(["ingest", str(logs), "-o", str(store)]) == 0
    before = (store / "segments.parquet").read_bytes()
    # held whole (a few MiB of logs): the writer and every log's tables, by hand
    need = BASE + 16 * sum(sizes)
    rc = cli_main(
        ["ingest", str(logs), "-o", str(store), "--force", "--memory-gb", str(_gb(need) - 0.01)]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert f"needs {need / GIB:.2f} GiB" in err
    assert f"the largest log {max(sizes) / MIB:.1f} MiB" in err
    assert "--memory-gb" in err
    assert (store / "segments.parquet").read_bytes() == before  # nothing lost
    # at the need itself, it is written
    assert (
        cli_main(
            ["ingest", str(logs), "-o", str(store), "--force", "--memory-gb", str(_gb(need) + 0.01)]
        )
        == 0
    )


def test_readers_are_fewer_where_the_default_count_would_not_fit(
    shared_data, tmp_path, monkeypatch
):
    logs = shared_data / RUN
    sizes = _sizes(logs)
    cores = min(len(os.sched_getaffinity(0)), 8, len(sizes))
    # the small fixture read as a large run is: spilled, by a reader a core
    monkeypatch.setattr(parts, "SPILL_MIN_BYTES", 0)
    monkeypatch.setattr(readlogs, "PARALLEL_MIN_BYTES", 0)
    largest = max(sizes)
    # by hand: one reader is the writer reading a log at a time; more add a process each
    groups = min(HOLD, 16 * sum(sizes))  # the writer's row groups in the making
    one = BASE + groups + 16 * largest
    many = BASE + groups + cores * (256 * MIB + 16 * largest)
    ingest([logs], tmp_path / "a", memory_gb=_gb(many) - 0.001)
    assert _readers(tmp_path / "a") == 1
    ingest([logs], tmp_path / "b", memory_gb=_gb(many + MIB))
    assert _readers(tmp_path / "b") == cores
    with pytest.raises(MemoryBudgetError, match=f"needs {one / GIB:.2f} GiB"):
        ingest([logs], tmp_path / "c", memory_gb=_gb(one) - 0.001)
    # readers asked for by hand are not cut: refused, naming --workers
    if cores >= 2:  # (CI and this machine have two cores)
        with pytest.raises(MemoryBudgetError, match="fewer --workers"):
            ingest([logs], tmp_path / "d", workers=2, memory_gb=_gb(many) - 0.001)


def _readers(store: Path) -> int:
    return json.loads((store / "inputs.json").read_text())["read_processes"]


def test_a_part_keeps_to_the_budget(shared_data, tmp_path):
    logs = shared_data / RUN
    with pytest.raises(MemoryBudgetError, match="ingesting these logs needs"):
        read_part([logs], tmp_path / "part", 0, 2, memory_gb=0.2)
    assert not (tmp_path / "part").exists()  # refused before the folder was made


def test_what_an_ingest_job_asks_the_scheduler_for(shared_data):
    """The workflow's ingest jobs ask for their need (mem_mb): by hand from the logs' sizes,
    at most the budget (over it, the job refuses with the figures rather than be killed)."""
    logs = shared_data / RUN
    entries, _ = discover([logs])
    sizes = _sizes(logs)
    held = BASE + 16 * sum(sizes)  # a few MiB of logs: held whole, one reader
    assert estimate(entries, None) == held
    assert estimate(entries, 0.125) == GIB // 8  # capped at the budget
    # putting parts together: the writer, taking a log's spilled tables at a time
    together = BASE + min(HOLD, 16 * sum(sizes)) + 16 * max(sizes)
    assert estimate(entries, None, writer_only=True) == together
