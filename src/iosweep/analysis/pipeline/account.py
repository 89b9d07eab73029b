"""Where each second of a rank's time went: the time account.

A rank's window runs from the run's start to the end of its last epoch or evaluation loop.
Each second of it belongs to exactly one slice, the first of these whose evidence covers it:

- ``checkpoint``: checkpoint events the job marks (``analysis.phases.checkpoint``), the
  rank's writes to checkpoint files, and the saves its script or the hooks timed;
- ``evaluation``: the steps of evaluation loops (``analysis.phases.evaluation``) and the
  evaluation events themselves;
- ``wait_phase_start``: the wait for the first batch of each epoch or evaluation loop
  (loader workers started, an iterator built, the first batches prepared), and the timed
  build of its iterator (manifest phases ``pipeline-start-N``);
- ``wait_steady``: the wait for every other batch;
- ``collectives``: the training thread's waits in blocking collective calls the hooks timed
  (``torch.distributed``'s, Horovod's ``synchronize`` of the gradients: manifest phases
  ``collective-N``), the rank waiting for the others inside its steps. Where nothing timed
  them (DDP's all-reduce overlapped with backward, a compiled step) they stay in compute;
- ``compute``: the training steps (from a batch's arrival to the next request; in a trace,
  the span of the step's compute events);
- ``startup``: the run's start to the first epoch or evaluation loop;
- ``unexplained``: what no timed or traced region covers, with where it lies ("before the
  first batch of epoch 2", "between steps of epoch 1", "between epoch 1 and evaluation 1").

Nothing is guessed: time the evidence does not name stays unexplained. The verdict reads the
account (:mod:`.verdict`), the report draws it as a bar per rank.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis import intervals
from iosweep.analysis.data import WRITE, RunData, events_matching
from iosweep.analysis.patterns.checkpoints import timed_phases
from iosweep.analysis.summary.pipeline import ACCOUNT_KINDS

KINDS = ACCOUNT_KINDS
COLUMNS = ["rank", "kind", "where", "seconds", "phases"]  # phases: the rank's epochs and
# evaluation loops
EVIDENCE = {
    "checkpoint": "checkpoint events (analysis.phases.checkpoint) and writes to checkpoint files",
    "evaluation": "evaluation loops' steps and events (analysis.phases.evaluation)",
    "wait_phase_start": "the wait for each epoch's and evaluation loop's first batch",
    "wait_steady": "the wait for every other batch",
    "collectives": "the blocking collective calls the hooks timed in the steps",
    "compute": "the training steps",
    "startup": "the run's start to its first epoch or evaluation loop",
    "unexplained": "no timed or traced region covers it",
}


@dataclass
class Loop:
    """An epoch or an evaluation loop of one rank: its steps and the waits before them (the
    first is the phase start's)."""

    label: str  # "epoch 2", "evaluation 1"
    evaluation: bool
    start: float
    end: float
    wait_lo: np.ndarray
    wait_hi: np.ndarray
    step_lo: np.ndarray
    step_hi: np.ndarray


def _spans(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The intervals merged (sorted, disjoint), empty and unknown ones left out."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    keep = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
    if not keep.any():
        return np.empty(0), np.empty(0)
    _, mlo, mhi = intervals.merge(np.zeros(int(keep.sum()), np.int64), lo[keep], hi[keep])
    return mlo, mhi


def _minus(a: tuple, b: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the disjoint sorted spans ``a`` outside the disjoint sorted spans ``b``."""
    alo, ahi = a
    blo, bhi = b
    if not len(alo) or not len(blo):
        return alo, ahi
    # b's complement over a's range: before b, b's gaps, after b
    clo = np.concatenate([[min(alo[0], blo[0]) - 1.0], bhi])
    chi = np.concatenate([blo, [max(ahi[-1], bhi[-1]) + 1.0]])
    keep = chi > clo
    return intervals.intersect(alo, ahi, clo[keep], chi[keep])


def _union(a: tuple, b: tuple) -> tuple[np.ndarray, np.ndarray]:
    return _spans(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def _where(mid: float, loops: list[Loop]) -> str:
    """Where an unexplained moment lies, in the loops' words."""
    for k, lp in enumerate(loops):
        if lp.start <= mid <= lp.end:
            first = lp.wait_lo[0] if len(lp.wait_lo) and np.isfinite(lp.wait_lo[0]) else lp.start
            if mid > lp.step_hi.max():
                return f"after the last step of {lp.label}"
            return (
                f"before the first batch of {lp.label}"
                if mid < first
                else (f"between steps of {lp.label}")
            )
        if mid < lp.start:
            return f"between {loops[k - 1].label} and {lp.label}" if k else "before the first loop"
    return "after the last step"


@dataclass
class Slice:
    """One span of a rank's time in the account: its kind, where it lies (unexplained
    time), and its bounds (s from the run's clock zero)."""

    kind: str
    where: str
    start: float
    end: float


def rank_spans(
    window_lo: float,
    loops: list[Loop],
    checkpoint: tuple[np.ndarray, np.ndarray],
    evaluation_events: tuple[np.ndarray, np.ndarray],
    pipeline_starts: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0)),
    collectives: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0)),
) -> list[Slice]:
    """One rank's window cut into the account's slices, each second in exactly one, in time
    order. ``pipeline_starts``: the timed builds of each loop's iterator (``iter(loader)``,
    ``iter(dataset)``), part of the wait at a phase's start; ``collectives``: the timed waits
    in collective calls."""
    loops = sorted((lp for lp in loops if len(lp.step_lo)), key=lambda lp: lp.start)
    if not loops:
        return []
    hi = max(lp.end for lp in loops)
    first = [lp.wait_lo[:1] for lp in loops]
    rest = [lp.wait_lo[1:] for lp in loops], [lp.wait_hi[1:] for lp in loops]
    train = [lp for lp in loops if not lp.evaluation]
    evals = [lp for lp in loops if lp.evaluation]
    covered = {
        "checkpoint": _spans(*checkpoint),
        "evaluation": _union(
            _spans(
                np.concatenate([lp.step_lo for lp in evals] or [np.empty(0)]),
                np.concatenate([lp.step_hi for lp in evals] or [np.empty(0)]),
            ),
            _spans(*evaluation_events),
        ),
        "wait_phase_start": _union(
            _spans(np.concatenate(first), np.concatenate([lp.wait_hi[:1] for lp in loops])),
            _spans(*pipeline_starts),
        ),
        "wait_steady": _spans(np.concatenate(rest[0]), np.concatenate(rest[1])),
        "collectives": _spans(*collectives),
        "compute": _spans(
            np.concatenate([lp.step_lo for lp in train] or [np.empty(0)]),
            np.concatenate([lp.step_hi for lp in train] or [np.empty(0)]),
        ),
        "startup": _spans(np.array([window_lo]), np.array([loops[0].start])),
    }
    window = (np.array([window_lo]), np.array([hi]))
    claimed: tuple = (np.empty(0), np.empty(0))
    out = []
    for kind in KINDS[:-1]:
        own = _minus(intervals.intersect(*covered[kind], *window), claimed)
        out += [Slice(kind, "", float(a), float(b)) for a, b in zip(*own, strict=True)]
        claimed = _union(claimed, own)
    left = _minus(window, claimed)
    out += [
        Slice("unexplained", _where(0.5 * (a + b), loops), float(a), float(b))
        for a, b in zip(*left, strict=True)
    ]
    return sorted(out, key=lambda x: x.start)


def rank_account(rank: int, window_lo: float, loops: list[Loop], *evidence: tuple) -> list:
    """One rank's account: rows of :data:`COLUMNS`, every kind's seconds (unexplained time
    by where it lies); ``evidence`` as :func:`rank_spans` takes it."""
    cut = rank_spans(window_lo, loops, *evidence)
    if not cut:
        return []
    n = sum(1 for lp in loops if len(lp.step_lo))
    seconds = {k: 0.0 for k in KINDS[:-1]}
    by_place: dict[str, float] = {}
    for x in cut:
        if x.kind == "unexplained":
            by_place[x.where] = by_place.get(x.where, 0.0) + (x.end - x.start)
        else:
            seconds[x.kind] += x.end - x.start
    rows = [
        {"rank": rank, "kind": k, "where": "", "seconds": v, "phases": n}
        for k, v in seconds.items()
    ]
    return rows + [
        {"rank": rank, "kind": "unexplained", "where": w, "seconds": v, "phases": n}
        for w, v in by_place.items()
    ]


def rank_loops(epochs: list, eval_steps: pd.DataFrame) -> dict[int, list[Loop]]:
    """Per rank: its epochs (``waits.RankEpoch``, whose steps carry their wait windows) and
    its evaluation loops (the evaluation steps between two epochs are one loop)."""
    out: dict[int, list[Loop]] = {}
    for re_ in epochs:
        st = re_.steps
        out.setdefault(re_.rank, []).append(
            Loop(
                f"epoch {re_.epoch}",
                False,
                re_.start,
                re_.end,
                st["wait_lo"].to_numpy(np.float64),
                st["wait_hi"].to_numpy(np.float64),
                st["start"].to_numpy(np.float64),
                st["end"].to_numpy(np.float64),
            )
        )
    if eval_steps is None or eval_steps.empty:
        return out
    for actor, g in eval_steps.groupby("actor", sort=True):
        train = sorted(out.get(int(actor), []), key=lambda lp: lp.start)
        starts = np.array([lp.start for lp in train])
        g = g.sort_values("start")
        after = np.searchsorted(starts, g["start"].to_numpy(np.float64), "right")
        for n, (_, loop) in enumerate(g.groupby(after, sort=True), start=1):
            wlo = loop["wait_start"].to_numpy(np.float64)
            s, e = loop["start"].to_numpy(np.float64), loop["end"].to_numpy(np.float64)
            whi = loop["wait_end"].to_numpy(np.float64)
            prev = np.concatenate([[s[0]], e[:-1]])
            wlo, whi = np.where(np.isfinite(wlo), wlo, prev), np.where(np.isfinite(whi), whi, s)
            out.setdefault(int(actor), []).append(
                Loop(f"evaluation {n}", True, float(wlo[0]), float(e.max()), wlo, whi, s, e)
            )
    return out


def summary(rows: pd.DataFrame) -> dict[str, Any]:
    """The run's account (summary.TimeAccount) from every rank's rows."""
    if rows.empty:
        return {"available": False, "reason": "no steps: nothing to account for"}
    ranks = sorted(int(r) for r in rows["rank"].unique())
    n = len(ranks)
    per = rows.groupby(["rank", "kind"])["seconds"].sum().unstack(fill_value=0.0)
    per = per.reindex(columns=list(KINDS), fill_value=0.0)
    window = per.sum(axis=1)
    mean = per.mean()
    win = float(window.mean())
    places = rows[rows["kind"] == "unexplained"].groupby("where")["seconds"].sum() / n
    places = places[places > 0].sort_values(ascending=False)
    wait = float(mean["wait_phase_start"] + mean["wait_steady"])
    loop = win - float(mean["startup"])
    return {
        "available": True,
        "window_per_rank": win,
        "slices": [
            {
                "kind": k,
                "seconds": float(mean[k]),
                "share": float(mean[k]) / win if win > 0 else None,
                "evidence": EVIDENCE[k],
            }
            for k in KINDS
        ],
        "unexplained_at": [{"where": str(w), "seconds": float(v)} for w, v in places.items()],
        "per_rank": [
            {
                "rank": r,
                "window": float(window[r]),
                "seconds": {k: float(per.loc[r, k]) for k in KINDS},
            }
            for r in ranks
        ],
        "wait_per_rank": wait,
        "loop_per_rank": loop,
        "loop_wait_share": wait / loop if loop > 0 else None,
        "phase_start_share_of_wait": float(mean["wait_phase_start"]) / wait if wait > 0 else None,
        "phases_per_rank": float(rows.groupby("rank")["phases"].max().mean()),
    }


def loop_threads(rd: RunData) -> dict[int, tuple[int, int]]:
    """Per rank: the (pid, thread) of its training loop, by its compute and fetch events;
    without them, the rank's own process (thread unknown: -1)."""
    out = {p.rank: (p.pid, -1) for p in rd.meta.processes if p.role == "rank" and p.rank >= 0}
    ev = rd.app_events
    if ev.empty:
        return out
    loop = events_matching(ev, rd.settings.phases.get("fetch") or [])
    loop |= events_matching(ev, rd.settings.phases.get("compute") or [])
    e = ev[loop & (ev["actor"].to_numpy() >= 0)]
    for actor, g in e.groupby("actor", sort=True):
        key = g.groupby(["pid", "thread"]).size().idxmax()
        out[int(actor)] = (int(key[0]), int(key[1]))
    return out


def _marked(rd: RunData, kind: str, loops: dict[int, tuple[int, int]]) -> dict[int, tuple]:
    """Per rank: the spans of the events of ``kind`` on its training loop's thread."""
    ev = rd.app_events
    if ev.empty:
        return {}
    m = events_matching(ev, rd.settings.phases.get(kind) or []) & (ev["actor"].to_numpy() >= 0)
    out: dict[int, tuple] = {}
    for actor, g in ev[m].groupby("actor", sort=True):
        pid, thread = loops.get(int(actor), (-1, -1))
        g = g[(g["pid"] == pid) & ((g["thread"] == thread) | (thread < 0))] if pid >= 0 else g
        out[int(actor)] = (g["start"].to_numpy(np.float64), g["end"].to_numpy(np.float64))
    return out


def _checkpoint_writes(rd: RunData, loops: dict[int, tuple[int, int]]) -> dict[int, tuple]:
    """Per rank: its training process's writes to checkpoint files (on the loop's thread
    where the tracer names threads): a synchronous checkpoint, not another thread's."""
    if "checkpoint" not in rd.class_names or not len(rd.ops):
        return {}
    ops = rd.ops
    ckpt = rd.class_names.index("checkpoint")
    m = (ops.op == WRITE) & (rd.file_class[ops.file] == ckpt) & (ops.actor >= 0)
    out: dict[int, tuple] = {}
    for actor in np.unique(ops.actor[m]).tolist():
        mine = m & (ops.actor == actor)
        pid, thread = loops.get(int(actor), (-1, -1))
        if ops.pid is not None and pid >= 0:
            mine &= ops.pid == pid
            if ops.thread is not None and thread >= 0:
                mine &= (ops.thread == thread) | (ops.thread < 0)
        out[int(actor)] = (ops.start[mine], ops.end[mine])
    return out


def _timed(rd: RunData, prefix: str) -> dict[int, tuple]:
    """Per rank: the spans of the manifest's phases named ``prefix...`` that its script or
    iosweep's hooks timed (``checkpoint``: saves; ``pipeline-start``: an iterator built;
    ``collective-``: a wait in a collective call); ranks
    are actors only where the run's actors are ranks."""
    if rd.actor_kind != "rank":
        return {}
    out: dict[int, list[tuple[float, float]]] = {}
    for ph in timed_phases(rd.meta, prefix):
        out.setdefault(ph["rank"], []).append((ph["start"], ph["end"]))
    return {r: (np.array([a for a, _ in v]), np.array([b for _, b in v])) for r, v in out.items()}


def checkpoint_spans(rd: RunData, threads: dict[int, tuple[int, int]] | None = None) -> dict:
    """Per rank: its synchronous checkpoints as disjoint sorted spans: checkpoint events on its
    loop's thread, its training process's writes to checkpoint files, and the saves timed
    in the process (DFTracer does not see ``torch.save``'s writes)."""
    threads = loop_threads(rd) if threads is None else threads
    out: dict[int, tuple] = {}
    for found in (_marked(rd, "checkpoint", threads), _checkpoint_writes(rd, threads)):
        for actor, spans in found.items():
            out[actor] = _union(out.get(actor, (np.empty(0), np.empty(0))), spans)
    for actor, spans in _timed(rd, "checkpoint").items():
        out[actor] = _union(out.get(actor, (np.empty(0), np.empty(0))), spans)
    return out


def _evidence(rd: RunData, epochs: list) -> Iterator[tuple]:
    """Per rank, in order: its loops and what marks its checkpoints, evaluations, pipeline
    starts and collectives (the inputs of :func:`rank_spans`)."""
    loops = rank_loops(epochs, rd.eval_steps)
    threads = loop_threads(rd)
    ckpt = checkpoint_spans(rd, threads)
    evals = _marked(rd, "evaluation", threads)
    starts = _timed(rd, "pipeline-start")
    collectives = _timed(rd, "collective-")
    none = (np.empty(0), np.empty(0))
    for actor, lps in sorted(loops.items()):
        found = (ckpt, evals, starts, collectives)
        yield actor, lps, *(spans.get(actor, none) for spans in found)


def account_rows(rd: RunData, epochs: list) -> pd.DataFrame:
    """Every rank's account (:data:`COLUMNS`) from its epochs (``waits.rank_epochs``), its
    evaluation loops and what marks checkpoints."""
    rows = [
        r
        for actor, lps, *evidence in _evidence(rd, epochs)
        for r in rank_account(actor, rd.run_start, lps, *evidence)
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def account_slices(rd: RunData, epochs: list) -> Iterator[tuple[int, Slice]]:
    """Every rank's account as spans in time (rank, :class:`Slice`): the timeline's track of
    it."""
    for actor, lps, *evidence in _evidence(rd, epochs):
        for x in rank_spans(rd.run_start, lps, *evidence):
            yield actor, x
