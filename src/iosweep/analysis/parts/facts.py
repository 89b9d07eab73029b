"""What a part of a run found besides its tables (``part.json``): the typed hand-on from a
part (:mod:`.run`) to the run's results (:mod:`.combine`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iosweep.analysis.shared import SharedRecords

FILE = "part.json"


@dataclass
class PartTrace:
    """The part's share of the summary's ``trace`` section."""

    segments: int
    counter_records: int
    excluded_ops: int
    excluded_records: int
    excluded_paths: list[str]
    excluded_io_ops: int
    unsized_io_calls: int
    unattributed: dict[str, int]  # ops, bytes, records


@dataclass
class PartFacts:
    """A part's facts: who it holds, when, and each section's figures that are not tables."""

    ranks: list[int]
    whole: bool  # the whole run, read as it is (parts.plan.Part.whole)
    actor_kind: str  # "rank", or "process" for a run whose store names no ranks
    shared_records: SharedRecords  # the records Darshan reduced for all ranks (whole only)
    unknown_actors: list[int]  # whose counters held impossible values (RunData's)
    limitations: list[str]  # of what was read: said of the analysis of one part only
    actor_host: dict[int, str]
    run_start: float
    run_end: float
    has_steps: bool
    counter_records: int
    epochs_known: bool  # the run's epochs, from any rank's steps
    pair_epochs: dict[int, list[int]]  # per class, the epochs its reads fall in
    untimed: int  # segments without a time (the run's issue adds them up)
    issues: list[dict[str, Any]]
    artefacts: list[dict[str, Any]]
    op_classes: dict[str, int]  # operations per "<class index> <0|1: write>"
    ranked_span: tuple[float, float] | None  # the ranks' first start and last end
    timeline: dict[str, Any] | None  # the part's timeline record (timeline.export)
    other_layer_ops: dict[str, int]
    trace: PartTrace
    # the tables' counts (parts.tables.write_part): segments, traced and counted POSIX
    # operations, (rank, file) rows, and those per bucket of files (a part held in memory:
    # none, counted where a pass needs them)
    ops: int = 0
    posix_traced: int = 0
    posix_counted: int = 0
    file_rank_rows: int = -1
    bucket_rows: list[int] = field(default_factory=list)

    def write(self, out: Path) -> None:
        (out / FILE).write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, out: Path) -> PartFacts:
        """The facts a part wrote under ``out`` (:meth:`write`)."""
        d = json.loads((out / FILE).read_text())
        return cls(
            **{
                **d,
                "shared_records": SharedRecords(**d["shared_records"]),
                "actor_host": {int(a): h for a, h in d["actor_host"].items()},
                "pair_epochs": {int(c): e for c, e in d["pair_epochs"].items()},
                "ranked_span": d["ranked_span"] and tuple(d["ranked_span"]),
                "trace": PartTrace(**d["trace"]),
            }
        )
