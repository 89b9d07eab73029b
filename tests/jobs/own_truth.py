"""The training scripts' own account of their main thread, the truth the hooks must match:
each batch's wait (asked .. had), each epoch's bounds, and AU as iosweep defines it (MLPerf
Storage's manner: compute over epoch time, the first step's wait and the first step left out).
"""

import json
import time


class Truth:
    def __init__(self, rank, **extra):
        self.doc = {"rank": rank, "epochs": [], "samples": 0, **extra}
        self.waits = []
        self.apart = []  # (start, end): neither compute nor wait (a synchronous checkpoint)
        self.start = None  # None: no epoch open

    def epoch_start(self):
        self.start, self.waits = time.time(), []

    def set_apart(self, start, end):
        """Time in a step that is neither its compute nor a wait (a checkpoint's save)."""
        self.apart.append((start, end))

    def waited(self, asked, had, samples):
        self.waits.append((asked, had))
        self.doc["samples"] += samples

    def epoch_end(self, end):
        """The open epoch ends at ``end`` (once: a second end of the same epoch is ignored)."""
        if self.start is None:
            return
        w = self.waits
        bounds = [(w[k][1], w[k + 1][0] if k + 1 < len(w) else end) for k in range(len(w))]
        compute = [
            b - a - sum(y - x for x, y in self.apart if a <= x and y <= b) for a, b in bounds
        ]
        self.doc["epochs"].append({
            "start": self.start, "end": end, "steps": len(w),
            "wait": sum(b - a for a, b in w),
            "first_wait": w[0][1] - w[0][0] if w else 0.0,
            "first_step": compute[0] if w else 0.0,
            "compute": sum(compute[1:]),
        })  # fmt: skip
        self.start = None

    def timed_epoch(self, iterator, step):
        """One epoch: each ``next(iterator)`` timed in this thread (the wait), ``step(batch)``
        run on each batch, the epoch ended at the StopIteration."""
        self.epoch_start()
        while True:
            t0 = time.time()
            try:
                batch = next(iterator)
            except StopIteration:
                self.epoch_end(t0)
                return
            self.waited(t0, time.time(), len(batch[0]))
            step(batch)

    def write(self, path):
        e = self.doc["epochs"]
        rest = sum(x["end"] - x["start"] - x["first_wait"] - x["first_step"] for x in e)
        self.doc["au"] = sum(x["compute"] for x in e) / rest
        with open(path, "w") as f:
            json.dump(self.doc, f)
