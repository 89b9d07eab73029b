"""analyze_run: one trace store in, ``summary.json`` and Parquet tables out (see
docs/analysis.md): planned (one part, or parts of whole ranks within the memory budget),
each part analysed (:mod:`.run`), put together (:mod:`.combine`) and written."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
import time
from collections.abc import Collection
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pandas as pd

from iosweep import memory
from iosweep.analysis import budget
from iosweep.analysis.parts.combine import combine, put_together_need
from iosweep.analysis.parts.plan import Part, of_ranks, plan, plan_jobs
from iosweep.analysis.parts.results import PartResults
from iosweep.analysis.parts.run import analyze_part
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.subset import ranks_text
from iosweep.analysis.summary import ANALYSIS_TABLES, to_dict, write_summary
from iosweep.analysis.timeline import export
from iosweep.files import atomic_write
from iosweep.trace.store import open_store

WORK = ".parts"  # the parts' results, under the output directory until the run's are written


def analyze_run(
    store_path: Path | str,
    out_dir: Path | str,
    settings: AnalysisSettings | None = None,
    phases: dict[str, list] | None = None,
    ranks: Collection[int] | None = None,
    jobs: int | None = None,
    parts: list[Part] | None = None,
) -> dict[str, Any]:
    """Analyse one trace store; write ``out_dir/summary.json``, the tables (and the timeline);
    return the summary. The run is one part where its need fits ``settings.memory_gb``, else
    parts of whole ranks that fit (:func:`plan_jobs`), ``jobs`` at a time (default: one a
    CPU), each in its own process within an equal share of the budget; each part's figures
    are put together as the run's (docs/analysis.md, "Memory"). ``phases``: phase rules that
    replace, kind by kind, those the store was ingested with and the settings'
    (``iosweep analyze --phase``); ``ranks``: only these ranks, as one part (``--ranks``,
    :mod:`iosweep.analysis.subset`); ``parts``: the plan made already (the workflow's)."""
    settings = settings or AnalysisSettings()
    store, out = Path(store_path), Path(out_dir)
    asked = jobs or budget.cpus()
    if parts:  # (an empty plan, as written before every run had a part: planned again)
        jobs = 1
    elif ranks is not None:
        parts, jobs = [of_ranks(store, sorted(set(ranks)), settings.memory_gb)], 1
    else:
        parts, jobs = plan_jobs(store, settings.memory_gb, asked, budget.own_memory())
    work = out / WORK
    shutil.rmtree(work, ignore_errors=True)
    try:
        return _analyze_parts(store, out, work, parts, jobs, asked, settings, phases)
    finally:  # the parts' results, whole or half-written, are done with
        shutil.rmtree(work, ignore_errors=True)


def _analyze_parts(
    store: Path,
    out: Path,
    work: Path,
    parts: list[Part],
    jobs: int,
    asked: int,
    settings: AnalysisSettings,
    phases: dict[str, list] | None,
) -> dict[str, Any]:
    """:func:`analyze_run`'s parts analysed under ``work``, ``jobs`` at a time, and put
    together into ``out``."""
    dirs = [work / p.name for p in parts]
    results: list[Path] | list[PartResults] = dirs
    if len(parts) == 1:  # held in memory: nothing written to be read back
        held = PartResults(dirs[0], held=True)
        results = [analyze_part(store, parts[0], held, settings, phases)]
    else:
        why = ""
        if jobs < min(asked, len(parts)):
            why = (
                f" (not {asked}: a rank needs more than 1/{asked} of the budget less this "
                "process's own memory; a larger --memory-gb runs more at a time)"
            )
        print(f"parts: {len(parts)}, {jobs} at a time{why}", file=sys.stderr, flush=True)
        if jobs == 1:
            for p, d in zip(parts, dirs, strict=True):
                _said(p, len(parts), *_timed_part(store, p, d, settings, phases))
        else:
            _parts_at_once(store, parts, dirs, settings, phases, jobs)
    t0 = time.monotonic()
    # the put-together step's own peak: it holds a row of every file of the run, which the
    # parts' budget does not bound (1.63 GiB for the ImageNet run's 1.28 M files): said
    # before it starts where it would go over the budget, and measured
    if len(parts) > 1 and (
        over := budget.over_peak(
            "putting the parts together",
            put_together_need(dirs, settings.memory_gb),
            settings.memory_gb,
            "may take up to",
        )
    ):
        print(f"warning: {over}", file=sys.stderr, flush=True)
    measured = len(parts) > 1 and budget.reset_peak()
    summary = write_combined(store, out, results, settings, phases, asked)
    if len(parts) > 1:
        took = time.monotonic() - t0
        peak = budget.own_memory("VmHWM") if measured else 0  # 0: not known
        said = f", peak {peak / budget.GIB:.2f} GiB" if peak else ""
        print(f"put together from {len(parts)} parts in {took:.1f} s{said}", file=sys.stderr)
        if over := budget.over_peak("putting the parts together", peak, settings.memory_gb):
            print(f"warning: {over}", file=sys.stderr)
    return summary


def _parts_at_once(
    store: Path,
    parts: list[Part],
    dirs: list[Path],
    settings: AnalysisSettings,
    phases: dict[str, list] | None,
    jobs: int,
) -> None:
    """The parts analysed ``jobs`` at a time in processes of their own, each process taking
    one part after another (its free memory handed back between them, :func:`_timed_part`:
    at 102.5 M segments, a process's third part peaked 12 MB over its first; a process a
    part cost 1-1.5 s more a part); the first failure stops the rest."""
    ctx = multiprocessing.get_context("spawn")  # fork would copy Arrow's threads' locks
    with memory.huge_pages(), ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        running = {
            pool.submit(_timed_part, store, p, d, settings, phases): p
            for p, d in zip(parts, dirs, strict=True)
        }
        try:
            for f in as_completed(running):
                _said(running[f], len(parts), *f.result())
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise


def _timed_part(
    store: Path, p: Part, d: Path, settings: AnalysisSettings, phases: dict[str, list] | None
) -> tuple[float, int]:
    """:func:`analyze_part`; its seconds and its peak memory (the process's since it began,
    where the kernel cannot start the peak again)."""
    budget.reset_peak()
    t0 = time.monotonic()
    analyze_part(store, p, d, settings, phases)
    took, peak = time.monotonic() - t0, budget.own_memory("VmHWM")
    memory.release()  # (the process's next part starts from what it holds)
    return took, peak


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
    dirs: list[Path] | list[PartResults],
    settings: AnalysisSettings,
    phases: dict[str, list] | None = None,
    jobs: int = 1,
) -> dict[str, Any]:
    """The run's summary and tables, put together from its parts' results ``dirs`` (folders,
    or one held in memory; with ``jobs`` CPUs), written into ``out`` as
    :func:`iosweep.analysis.analyze_run` writes them; the summary."""
    memory.map_large_arrays()  # freed arrays go back at once
    c = combine(store, dirs, settings, phases, jobs)
    summary = c.summary
    summary["timeline"] = export.Timeline.record_of(c.timeline)
    summary["store_relative"] = os.path.relpath(store.resolve(), out.resolve())
    out.mkdir(parents=True, exist_ok=True)
    for name in ANALYSIS_TABLES:
        write_parquet(c.table(name), out / f"{name}.parquet")
    summary["tables"] = {name: f"{name}.parquet" for name in ANALYSIS_TABLES}
    model = summary.model(str(out))
    if c.timeline:
        export.write(open_store(store).meta, c.timeline, to_dict(model), out / export.FILE)
    write_summary(model, out)  # last: its presence means done
    return to_dict(model)


def write_plan(store: Path | str, path: Path | str, memory_gb: float | None) -> list[Part]:
    """How the workflow analyses a run (``path``, JSON): :func:`plan`'s parts, by the rule
    ``iosweep analyze`` follows; the parts. One part is analysed by the job that writes the
    run's analysis; several, each by a job of its own."""
    parts = plan(store, memory_gb)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"parts": [p.to_json() for p in parts]}, indent=1))
    return parts


def read_plan(path: Path | str) -> list[Part]:
    """The parts of a plan (:func:`write_plan`)."""
    return [Part.from_json(p) for p in json.loads(Path(path).read_text())["parts"]]


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    table = df.reset_index(drop=True)
    atomic_write(
        path,
        lambda p: table.to_parquet(p, index=False, compression="zstd"),
        need=int(table.memory_usage(deep=True).sum()),  # uncompressed: an upper bound
    )
