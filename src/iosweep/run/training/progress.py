"""Per-rank timestamps of epochs and steps, kept in memory and written once at exit.

Written at the end, into the run's ``progress/`` directory (which the tracers exclude), so
that recording progress adds no I/O to the trace while training runs. Stdlib only.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path


class Progress:
    def __init__(self, path: str | Path | None, rank: int):
        # the runner passes one path for all ranks, with a {rank} placeholder
        self.path = Path(str(path).format(rank=rank)) if path else None
        self.rank = rank
        self.steps: list[dict] = []  # {"epoch", "step", "start", "end"}; step -1 = whole epoch
        self.phases: dict[str, list[float]] = {}  # e.g. "eval", "checkpoint-0": [start, end]
        self.metrics: dict[str, float] = {}

    @contextmanager
    def step(self, epoch: int, step: int):
        t0 = time.time()
        yield
        self.steps.append({"epoch": epoch, "step": step, "start": t0, "end": time.time()})

    @contextmanager
    def phase(self, name: str):
        t0 = time.time()
        yield
        self.phases[name] = [t0, time.time()]

    def write(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "rank": self.rank,
            "pid": os.getpid(),
            "steps": self.steps,
            "phases": self.phases,
            "metrics": self.metrics,
        }
        self.path.write_text(json.dumps(doc) + "\n")
