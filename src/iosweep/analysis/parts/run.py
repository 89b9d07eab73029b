"""A part analysed on its own, and the parts' results put together into the run's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from iosweep import memory
from iosweep.analysis.classify import classify_paths
from iosweep.analysis.data import RunData, StringCodes, class_names, load_run
from iosweep.analysis.parts import tables
from iosweep.analysis.parts.plan import Part
from iosweep.analysis.patterns.artefacts import fd_reuse, remove
from iosweep.analysis.patterns.files import RunFiles
from iosweep.analysis.patterns.spatial import classify_ops
from iosweep.analysis.patterns.volume import Tables, finish_tables, tables_part
from iosweep.analysis.pipeline.phases import use_annotated_steps
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.subset import select
from iosweep.trace.store import open_store


def part_data(
    store: Path, part: Part, settings: AnalysisSettings, phases: dict[str, list] | None = None
) -> RunData:
    """The part's data, as the whole run's is analysed: tracer artefacts out, annotated
    steps in."""
    subset = select(open_store(store), part.ranks, unranked=part.unranked)
    rd = load_run(store, settings, phases, subset)
    remove(rd, *fd_reuse(rd))
    use_annotated_steps(rd)
    return rd


def analyze_part(
    store: Path,
    part: Part,
    out: Path,
    settings: AnalysisSettings,
    phases: dict[str, list] | None = None,
) -> None:
    """The part's results under ``out`` (one folder per part)."""
    memory.map_large_arrays()
    rd = part_data(store, part, settings, phases)
    tp = tables_part(rd, classify_ops(rd))
    facts = {
        "ranks": part.ranks,
        "actor_host": {str(a): h for a, h in rd.actor_host.items()},
        "run_start": rd.run_start,
        "run_end": rd.run_end,
        "has_steps": not rd.steps.empty,
    }
    tables.write_part(tp, rd.paths, facts, out)


def combine_tables(store: Path, parts: list[Path], settings: AnalysisSettings) -> Tables:
    """The run's volume tables from its parts' results (folders of :func:`analyze_part`)."""
    meta = open_store(store).meta
    if meta.phases:
        settings = replace(settings, phases={**settings.phases, **meta.phases})
    paths = StringCodes()
    tp = tables.combine(parts, paths)
    facts = [tables.facts(p) for p in parts]
    actor_host = {int(a): h for f in facts for a, h in f["actor_host"].items()}
    run = RunFiles(
        paths.values,
        classify_paths(pa.array(paths.values, pa.string()), settings),
        class_names(settings, meta, any(f["has_steps"] for f in facts)),
        dict(sorted(actor_host.items())),
        settings,
    )
    start = min(f["run_start"] for f in facts)
    end = max(f["run_end"] for f in facts)
    return finish_tables(tp, run, max(0.0, end - start))
