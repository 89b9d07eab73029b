"""``iosweep analyze --in-parts``: one trace store analysed in parts of whole ranks within the
budget, written as :func:`iosweep.analysis.analyze_run` writes a run's analysis."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from iosweep import memory
from iosweep.analysis import budget
from iosweep.analysis.findings.run import write_parquet
from iosweep.analysis.parts.combine import combine
from iosweep.analysis.parts.plan import Part, plan, plan_jobs
from iosweep.analysis.parts.run import analyze_part
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.subset import ranks_text
from iosweep.analysis.summary import to_dict, validate, write_summary
from iosweep.analysis.timeline import export
from iosweep.files import json_safe
from iosweep.trace.store import open_store

WORK = ".parts"  # the parts' results, under the output directory until the run's are written


def analyze_in_parts(
    store_path: Path | str,
    out_dir: Path | str,
    settings: AnalysisSettings | None = None,
    phases: dict[str, list] | None = None,
    jobs: int | None = None,
) -> dict[str, Any]:
    """Analyse one store in parts whose need fits ``settings.memory_gb`` (each part's figures
    put together as the run's: docs/analysis.md, "Memory"); write ``summary.json`` and the
    tables (and the timeline) into ``out_dir``; return the summary. ``jobs`` parts
    (default: one a CPU) are analysed at a time, each in its own process within an equal
    share of the budget; fewer where a rank does not fit a share."""
    settings = settings or AnalysisSettings()
    store, out = Path(store_path), Path(out_dir)
    asked = jobs or budget.cpus()
    parts, jobs = plan_jobs(store, settings.memory_gb, asked, budget.own_memory())
    why = ""
    if jobs < min(asked, len(parts)):
        why = (
            f" (not {asked}: a rank needs more than 1/{asked} of the budget less this "
            "process's own memory; a larger --memory-gb runs more at a time)"
        )
    print(f"parts: {len(parts)}, {jobs} at a time{why}", file=sys.stderr, flush=True)
    work = out / WORK
    shutil.rmtree(work, ignore_errors=True)
    dirs = [work / p.name for p in parts]
    if jobs == 1:
        for p, d in zip(parts, dirs, strict=True):
            _said(p, len(parts), *_analyze_part(store, p, d, settings, phases))
    else:
        _parts_at_once(store, parts, dirs, settings, phases, jobs)
    t0 = time.monotonic()
    summary = write_combined(store, out, dirs, settings, phases, asked)
    print(f"put together from {len(parts)} parts in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    return summary


def _parts_at_once(
    store: Path,
    parts: list[Part],
    dirs: list[Path],
    settings: AnalysisSettings,
    phases: dict[str, list] | None,
    jobs: int,
) -> None:
    """The parts analysed ``jobs`` at a time, each in a fresh process (its memory returned
    when it ends: a reused one would keep its peak); the first failure stops the rest."""
    ctx = multiprocessing.get_context("spawn")  # fork would copy Arrow's threads' locks
    with ProcessPoolExecutor(jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
        running = {
            pool.submit(_analyze_part, store, p, d, settings, phases): p
            for p, d in zip(parts, dirs, strict=True)
        }
        try:
            for f in as_completed(running):
                _said(running[f], len(parts), *f.result())
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise


def _analyze_part(
    store: Path, p: Part, d: Path, settings: AnalysisSettings, phases: dict[str, list] | None
) -> tuple[float, int]:
    """:func:`analyze_part`; its seconds and the process's peak memory."""
    t0 = time.monotonic()
    analyze_part(store, p, d, settings, phases)
    return time.monotonic() - t0, budget.own_memory("VmHWM")


def _said(p: Part, n: int, seconds: float, peak: int) -> None:
    print(
        f"part {p.index + 1}/{n}: ranks {ranks_text(p.ranks)} ({p.need.segments:,} segments) "
        f"in {seconds:.1f} s, peak {peak / budget.GIB:.2f} GiB",
        file=sys.stderr,
        flush=True,
    )


def write_combined(
    store: Path,
    out: Path,
    dirs: list[Path],
    settings: AnalysisSettings,
    phases: dict[str, list] | None = None,
    jobs: int = 1,
) -> dict[str, Any]:
    """The run's summary and tables, put together from its parts' folders ``dirs`` (with
    ``jobs`` CPUs), written into ``out`` as :func:`iosweep.analysis.analyze_run` writes them;
    the summary."""
    memory.map_large_arrays()  # as the whole run's analysis: freed arrays go back at once
    c = combine(store, dirs, settings, phases, jobs)
    summary = c.summary
    summary["timeline"] = export.Timeline.record_of(c.timeline)
    summary["store_relative"] = os.path.relpath(store.resolve(), out.resolve())
    tables = {
        "ops_sample": c.ops_sample,
        "files": c.files,
        "file_ranks": c.file_ranks,
        "ranks": c.tables.ranks,
        "nodes": c.tables.nodes,
        "sizes": c.sizes[0],
        "phases": c.phases,
        "overlap": c.overlap[0],
        "pipeline": c.pipeline[0],
        "unoverlapped": c.unoverlapped,
        "heatmap": c.heatmap,
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        write_parquet(df, out / f"{name}.parquet")
    summary["tables"] = {name: f"{name}.parquet" for name in tables}
    model = validate(json_safe(summary), str(out))
    if c.timeline:
        export.write(open_store(store).meta, c.timeline, to_dict(model), out / export.FILE)
    write_summary(model, out)  # last: its presence means done
    return to_dict(model)


def write_plan(store: Path | str, path: Path | str, memory_gb: float | None) -> list[Part]:
    """How the workflow analyses a run (``path``, JSON): in the parts of :func:`plan` where
    its need is over ``memory_gb``, else whole (no parts; also without a budget: the
    scheduler is asked for the whole run's need); the parts."""
    over = memory_gb is not None and budget.need_of(store).bytes > budget.budget_bytes(memory_gb)
    parts = plan(store, memory_gb) if over else []
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"parts": [p.to_json() for p in parts]}, indent=1))
    return parts


def read_plan(path: Path | str) -> list[Part]:
    """The parts of a plan (:func:`write_plan`; none: the run is analysed whole)."""
    return [Part.from_json(p) for p in json.loads(Path(path).read_text())["parts"]]
