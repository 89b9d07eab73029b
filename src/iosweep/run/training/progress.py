"""Per-rank timestamps of epochs and steps, kept in memory and written once at exit.

Written at the end, into the run's ``progress/`` directory (which the tracers exclude), so
that recording progress adds no I/O to the trace while training runs. Stdlib only.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path


class Progress:
    def __init__(self, path: str | Path | None, rank: int):
        # the runner passes one path for all ranks, with a {rank} placeholder
        self.path = Path(str(path).format(rank=rank)) if path else None
        self.rank = rank
        # {"epoch", "step", "start", "end"[, "wait_start", "wait_end", "samples"]}; step -1 is
        # the whole epoch; start..end is the step's compute, wait_* the wait for its batch
        self.steps: list[dict] = []
        self.phases: dict[str, list[float]] = {}  # e.g. "eval", "checkpoint-0": [start, end]
        self.metrics: dict[str, float | str] = {}
        self.collectives = 0  # phases "collective-N" so far
        previous = sys.excepthook

        def record_then_report(kind, error, tb):  # an uncaught error ends the rank: say why
            self.fail(error)
            previous(kind, error, tb)

        sys.excepthook = record_then_report

    @contextmanager
    def step(self, epoch: int, step: int):
        t0 = time.time()
        yield
        self.steps.append({"epoch": epoch, "step": step, "start": t0, "end": time.time()})

    def add_step(
        self,
        epoch: int,
        step: int,
        start: float,
        end: float,
        wait: tuple[float, float] | None = None,
        samples: int | None = None,
    ) -> None:
        """A step whose compute ran from ``start`` to ``end``; ``wait``: when the rank waited
        for its batch; ``samples``: the batch's samples on this rank."""
        rec: dict = {"epoch": epoch, "step": step, "start": start, "end": end}
        if wait is not None:
            rec["wait_start"], rec["wait_end"] = wait
        if samples is not None:
            rec["samples"] = samples
        self.steps.append(rec)

    @contextmanager
    def phase(self, name: str):
        t0 = time.time()
        yield
        self.phases[name] = [t0, time.time()]

    @contextmanager
    def collective(self):
        """A wait for the other ranks (an all-reduce), the phase ``collective-N``."""
        with self.phase(f"collective-{self.collectives}"):
            yield
        self.collectives += 1

    def optimizer_step(self, optimizer, timed: bool = True) -> None:
        """``optimizer.step()``; of a Horovod ``DistributedOptimizer``, with ``timed``, its wait
        for the gradients' all-reduce (``synchronize()``) first, as :meth:`collective`. Not
        timed on a GPU: there ``synchronize()`` also waits for the backward pass the GPU runs."""
        if not timed or not hasattr(optimizer, "skip_synchronize"):
            optimizer.step()
            return
        with self.collective():
            optimizer.synchronize()
        with optimizer.skip_synchronize():
            optimizer.step()

    def fail(self, error: BaseException) -> None:
        """Record why this rank stopped (``<progress>.error``), for the manifest's reason: the
        last line of the error names the culprit (a DataLoader worker's error arrives with
        the worker's traceback in its text)."""
        if self.path is None:
            return
        lines = [ln for ln in str(error).strip().splitlines() if ln.strip()]
        text = lines[-1] if lines else type(error).__name__
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.with_suffix(".error").write_text(
            json.dumps({"rank": self.rank, "error": f"{type(error).__name__}: {text}"}) + "\n"
        )

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
