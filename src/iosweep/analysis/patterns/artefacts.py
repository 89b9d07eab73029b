"""Tracer artefacts: operations a tracer charged to the wrong file, found and set apart.

Darshan (3.5.0) identifies a file by its descriptor. ``torch.save`` opens its file with
``fopen`` and writes through ``fileno()``; after the ``fclose`` the descriptor number is
reused by other files (often ones Darshan excludes), and Darshan keeps charging their I/O to
the checkpoint: a PyTorch run showed 163 kB of "checkpoint reads" and a 10 kB write at offset
0 near exit, long after its last checkpoint. Those operations are the artefact when they
come from the process that wrote the checkpoint, after the last checkpoint of the run was
saved (the training script's own record where there is one, else the last burst of
checkpoint writes), and are not part of a burst of their own. They are taken out of every
figure, with their counter totals, and listed in the summary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iosweep.analysis.data import READ, RunData
from iosweep.analysis.patterns.checkpoints import CLASS, app_saves

SLACK = 0.05  # seconds around a save the script timed (the clocks differ by milliseconds)


def _late_ops(rd: RunData, ci: int) -> np.ndarray:
    """Checkpoint I/O no checkpoint explains, by the process that wrote the file: reads after
    its last write of that file, and (when the script timed its saves) writes after the
    run's last save."""
    ops = rd.ops
    is_ck = rd.file_class[ops.file] == ci
    w = is_ck & (ops.op != READ)
    late = np.zeros(len(ops), bool)
    if not w.any() or ops.pid is None:
        return late
    key = ops.file.astype(np.int64) * (1 << 32) + (ops.pid & 0xFFFFFFFF)
    wk, inv = np.unique(key[w], return_inverse=True)
    last_write = np.full(len(wk), -np.inf)
    np.maximum.at(last_write, inv, ops.end[w])
    pos = np.searchsorted(wk, key)
    known = (pos < len(wk)) & (wk[np.minimum(pos, len(wk) - 1)] == key)
    after = known & (ops.start > last_write[np.minimum(pos, len(wk) - 1)])
    late |= is_ck & (ops.op == READ) & after
    saves = app_saves(rd.meta)
    if saves:
        end = max(sv["end"] for sv in saves) + SLACK
        late |= is_ck & (ops.op != READ) & known & (ops.start > end)
    return late


def fd_reuse(rd: RunData) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """(mask of the artefact operations, one record per file) for a Darshan run."""
    ops = rd.ops
    none = np.zeros(len(ops), bool)
    if rd.meta.tracer != "darshan" or CLASS not in rd.class_names or not len(ops):
        return none, []
    late = _late_ops(rd, rd.class_names.index(CLASS))
    if not late.any():
        return none, []
    records = []
    # in path order: the same records however the run's rows are read (whole or in parts)
    for f in sorted(np.unique(ops.file[late]), key=lambda f: rd.paths[int(f)]):
        m = late & (ops.file == f)
        r = m & (ops.op == READ)
        records.append(
            {
                "kind": "darshan-fd-reuse",
                "path": rd.paths[int(f)],
                "rank": int(ops.actor[m][0]),
                "ops": int(m.sum()),
                "bytes_read": int(ops.length[r].sum()),
                "bytes_written": int(ops.length[m & ~r].sum()),
                "start": float(ops.start[m].min()),
                "end": float(ops.end[m].max()),
                "message": (
                    "I/O charged to this checkpoint after the run's last checkpoint was saved, by the "
                    "process that saved it: Darshan charges I/O on a reused file descriptor to the "
                    "file that last had it (torch.save writes through fileno()); left out of every figure"
                ),
            }
        )
    return late, records


def remove(rd: RunData, mask: np.ndarray, records: list[dict[str, Any]]) -> None:
    """Take the operations out of ``rd``, and their totals out of the counters they inflated."""
    if not mask.any():
        return
    ops = rd.ops
    c = rd.counters
    for rec in records:
        f = rd.paths.index(rec["path"])
        rows = (c["file"] == f) & (c["actor"] == rec["rank"]) if len(c) else None
        if rows is None or not rows.any():
            continue
        m = mask & (ops.file == f)
        r = m & (ops.op == READ)
        i = c.index[rows][0]  # one row per (process, file): the writer's
        for col, v in (
            ("reads", int(r.sum())),
            ("bytes_read", rec["bytes_read"]),
            ("writes", int((m & ~r).sum())),
            ("bytes_written", rec["bytes_written"]),
        ):
            c.loc[i, col] = max(int(c.loc[i, col]) - v, 0)
    rd.ops = ops.take(np.flatnonzero(~mask))
    rd.cache.clear()
