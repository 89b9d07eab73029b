"""``iosweep analyze --in-parts``: one trace store analysed in parts of whole ranks within the
budget, written as :func:`iosweep.analysis.analyze_run` writes a run's analysis."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from iosweep.analysis import budget
from iosweep.analysis.findings.run import write_parquet
from iosweep.analysis.parts.combine import combine
from iosweep.analysis.parts.plan import Part, plan
from iosweep.analysis.parts.run import analyze_part
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.subset import ranks_text
from iosweep.analysis.summary import to_dict, validate, write_summary
from iosweep.files import json_safe

WORK = ".parts"  # the parts' results, under the output directory until the run's are written
NO_TIMELINE = "not made for a run analysed in parts (iosweep analyze without --in-parts makes it)"


def analyze_in_parts(
    store_path: Path | str,
    out_dir: Path | str,
    settings: AnalysisSettings | None = None,
    phases: dict[str, list] | None = None,
) -> dict[str, Any]:
    """Analyse one store in parts whose need fits ``settings.memory_gb`` (each part's figures
    put together as the run's: docs/analysis.md, "Memory"); write ``summary.json`` and the
    tables into ``out_dir``; return the summary. The timeline is not made."""
    settings = settings or AnalysisSettings()
    store, out = Path(store_path), Path(out_dir)
    parts = plan(store, settings.memory_gb)
    work = out / WORK
    shutil.rmtree(work, ignore_errors=True)
    dirs = []
    for p in parts:
        t0 = time.monotonic()
        dirs.append(work / p.name)
        analyze_part(store, p, dirs[-1], settings, phases)
        print(
            f"part {p.index + 1}/{len(parts)}: ranks {ranks_text(p.ranks)} "
            f"({p.need.segments:,} segments) in {time.monotonic() - t0:.1f} s",
            file=sys.stderr,
        )
    summary = write_combined(store, out, dirs, settings, phases)
    shutil.rmtree(work, ignore_errors=True)
    return summary


def write_combined(
    store: Path,
    out: Path,
    dirs: list[Path],
    settings: AnalysisSettings,
    phases: dict[str, list] | None = None,
) -> dict[str, Any]:
    """The run's summary and tables, put together from its parts' folders ``dirs``, written
    into ``out`` as :func:`iosweep.analysis.analyze_run` writes them; the summary."""
    c = combine(store, dirs, settings, phases)
    summary = c.summary
    summary["timeline"] = {"file": "", "cut": NO_TIMELINE}
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
