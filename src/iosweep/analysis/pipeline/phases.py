"""Steps, data waits and epochs from a trace's own annotations, for runs without step
records (DFTracer traces of a job iosweep did not run, DLIO's runs).

Which events are compute, the loop waiting for a batch (fetch), epochs and application I/O
is declared by ``analysis.phases`` (rules on category and name). Per rank, the process that
holds the compute events (or, without them, the fetch events) is the training loop; its
loader workers' events (``__getitem__`` ...) belong to the rank but take no part here.

- With fetch events: each fetch is the wait for one batch; its step runs from the batch's
  arrival (the fetch's end) to the next fetch's start (or, for the last, the end of the
  compute after it). The step's compute is the span of the compute events inside it,
  nested ones included; a step with none inside (only the loop annotated) is all compute.
- Without them: each compute event (after merging nested and overlapping ones) is a step;
  the waits are the gaps between steps.
- Epochs: epoch events where there are any; else a new epoch wherever an ``iter()`` loop
  counts its steps from 1 again; else one epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis import intervals
from iosweep.analysis.data import RunData, events_matching
from iosweep.analysis.settings import PHASE_KINDS
from iosweep.trace.schema import Issue

STEP_COLUMNS = ["actor", "epoch", "step", "start", "end", "wait_start", "wait_end", "samples"]
# an evaluation loop's steps (analysis.phases.evaluation): not training, no epoch of their own
EVAL_COLUMNS = ["actor", "start", "end", "wait_start", "wait_end"]


@dataclass
class FromEvents:
    """What the annotations gave: steps (the manifest's columns), how they were timed, and
    warnings naming what did not fit."""

    steps: pd.DataFrame
    timing: dict[str, Any]
    issues: list[dict[str, str]] = field(default_factory=list)
    evaluation: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=EVAL_COLUMNS))


def _kind(rd: RunData, kind: str) -> np.ndarray:
    rules = rd.settings.phases.get(kind) or []
    return events_matching(rd.app_events, rules) & (rd.app_events["actor"].to_numpy() >= 0)


def _loop_pid(ev: pd.DataFrame, comp: np.ndarray, fetch: np.ndarray, actor: int) -> int:
    """The pid of the rank's training loop: the one with the most compute (else fetch) events."""
    mine = ev["actor"].to_numpy() == actor
    for m in (comp, fetch):
        pids = ev["pid"].to_numpy()[mine & m]
        if len(pids):
            vals, counts = np.unique(pids, return_counts=True)
            return int(vals[np.argmax(counts)])
    return -1


def _iterations(cs, ce, kinds, a: int, b: int) -> list[tuple[float, float]]:
    """The compute events ``a..b`` (by start) cut into iterations, each (start, end): a new
    one wherever the kind of event that began the first comes again. Forward, backward and
    optimizer events of one batch stay one iteration; two DLIO ``compute`` events are two."""
    if b <= a:
        return []
    cuts = [i for i in range(a + 1, b) if kinds[i] == kinds[a]]
    out = []
    for lo, hi in zip([a, *cuts], [*cuts, b], strict=True):
        out.append((float(cs[lo]), float(max(ce[lo:hi].max(), cs[lo]))))
    return out


def _fetch_steps(fs, fe, fstep, cs, ce, kinds) -> list[dict[str, Any]]:
    """Steps of one loop from its fetch events (sorted) and its compute events (sorted, with
    their kinds: category and name).

    Each fetch's step is the first iteration of compute after it. Later iterations before
    the next fetch are steps whose fetch the trace lacks (a loop left by ``break`` closes
    DFTracer's ``iter()`` before it logs that iteration, as DLIO's does at its step limit):
    their waits are unknown (the gap since the previous step). A fetch with no compute after
    it is a step of its own (only the loop annotated)."""
    out = []
    for k in range(len(fs)):
        lo, hi = fe[k], (fs[k + 1] if k + 1 < len(fs) else np.inf)
        a, b = np.searchsorted(cs, lo, "left"), np.searchsorted(cs, hi, "left")
        its = _iterations(cs, ce, kinds, int(a), int(b))
        start, end = its[0] if its else (lo, hi if np.isfinite(hi) else lo)
        out.append(
            {
                "start": start,
                "end": end,
                "wait_start": fs[k],
                "wait_end": fe[k],
                "iter_step": fstep[k],
            }
        )
        out += [
            {"start": s0, "end": e0, "wait_start": np.nan, "wait_end": np.nan, "iter_step": -1}
            for s0, e0 in its[1:]
        ]
    return out


def _training_fetches(f: pd.DataFrame, cs: np.ndarray) -> pd.DataFrame:
    """The fetch events of the training loop: of the loops (category and name) annotated in
    this process, the one whose steps hold the most compute events (DLIO's data generator
    iterates with ``iter()`` too, before training); without compute, the longest loop."""
    if f.empty:
        return f
    best, score = f, (-1, -1)
    for _, g in f.groupby(["cat", "name"], observed=True):
        lo, hi = g["end"].to_numpy(), np.r_[g["start"].to_numpy()[1:], np.inf]
        held = int((np.searchsorted(cs, hi, "left") - np.searchsorted(cs, lo, "left") > 0).sum())
        if (held, len(g)) > score:
            best, score = g, (held, len(g))
    return best


def _compute_steps(cs, ce) -> list[dict[str, Any]]:
    g = np.zeros(len(cs), np.int64)
    _, lo, hi = intervals.merge(g, cs, ce)  # nested and overlapping compute: one step
    return [
        {
            "start": float(a),
            "end": float(b),
            "wait_start": np.nan,
            "wait_end": np.nan,
            "iter_step": -1,
        }
        for a, b in zip(lo, hi, strict=True)
    ]


def _epochs(steps: list[dict[str, Any]], windows: list[tuple[float, float]]) -> list[int]:
    """Each step's epoch: the epoch event holding it (-1: none, not training); else iter()'s
    step count restarting."""
    if windows:
        starts = np.array([w[0] for w in windows])
        out = []
        for s in steps:
            e = int(np.searchsorted(starts, s["start"], "right")) - 1
            out.append(e if e >= 0 and s["start"] <= windows[e][1] else -1)
        return out
    epoch, out, last = 0, [], None
    for s in steps:
        n = s["iter_step"]
        if last is not None and n >= 0 and last >= 0 and n <= last:
            epoch += 1
        out.append(epoch)
        last = n
    return out


def _evaluation_steps(steps: list[dict[str, Any]], cs, is_eval) -> np.ndarray:
    """Which steps are evaluation's: an evaluation event among the compute events inside
    them (Stormer's eval steps also hold the model's own ``computation/forward``)."""
    out = np.zeros(len(steps), bool)
    if not is_eval.any():
        return out
    for k, st in enumerate(steps):
        a, b = np.searchsorted(cs, st["start"], "left"), np.searchsorted(cs, st["end"], "right")
        out[k] = bool(is_eval[a:b].any())
    return out


def _rank_steps(
    rd: RunData, actor: int, masks: dict[str, np.ndarray], used: set[str], evals: list
) -> list[dict[str, Any]]:
    """The rank's training steps and epochs (step -1); its evaluation steps go to ``evals``,
    the fetch events it timed them by to ``used``."""
    ev = rd.app_events
    pid = _loop_pid(ev, masks["compute"], masks["fetch"], actor)
    here = (ev["actor"].to_numpy() == actor) & (ev["pid"].to_numpy() == pid)
    order = np.argsort(ev["start"].to_numpy()[here & masks["compute"]], kind="stable")
    c = ev[here & masks["compute"]].iloc[order]
    is_eval = masks["evaluation"][here & masks["compute"]][order]
    cs, ce = c["start"].to_numpy(np.float64), c["end"].to_numpy(np.float64)
    f = _training_fetches(ev[here & masks["fetch"]].sort_values("start"), cs)
    kinds = (c["cat"].astype(str) + "/" + c["name"].astype(str)).to_numpy()
    used.update(f"{c}/{n}" for c, n in zip(f["cat"], f["name"], strict=True))
    if len(f):
        steps = _fetch_steps(
            f["start"].to_numpy(np.float64),
            f["end"].to_numpy(np.float64),
            f["step"].to_numpy(np.int64),
            cs,
            ce,
            kinds,
        )
    else:
        steps = _compute_steps(cs, ce)
    evaluation = _evaluation_steps(steps, cs, is_eval)
    evals += [
        {"actor": actor, **{k: st[k] for k in EVAL_COLUMNS[1:]}}
        for st, e in zip(steps, evaluation, strict=True)
        if e
    ]
    steps = [st for st, e in zip(steps, evaluation, strict=True) if not e]
    ep = ev[(ev["actor"].to_numpy() == actor) & masks["epoch"]].sort_values("start")
    windows = list(zip(ep["start"], ep["end"], strict=True))
    rows = [
        {"actor": actor, "epoch": e, **s}
        for s, e in zip(steps, _epochs(steps, windows), strict=True)
        if e >= 0
    ]
    # the epochs' own rows (step -1): their events, else the span of their steps
    by_epoch: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_epoch.setdefault(r["epoch"], []).append(r)
    out = []
    for e, rs in sorted(by_epoch.items()):
        for k, r in enumerate(rs):
            out.append({**r, "step": k})
        lo = (
            windows[e][0]
            if e < len(windows)
            else min(r["wait_start"] if np.isfinite(r["wait_start"]) else r["start"] for r in rs)
        )
        hi = windows[e][1] if e < len(windows) else max(r["end"] for r in rs)
        out.append(
            {
                "actor": actor,
                "epoch": e,
                "step": -1,
                "start": lo,
                "end": hi,
                "wait_start": np.nan,
                "wait_end": np.nan,
            }
        )
    return out


def _crossing(rd: RunData, masks: dict[str, np.ndarray]) -> list[dict[str, str]]:
    """Compute and fetch events of one process that overlap without one holding the other:
    annotations that cannot both be right (a fetch half inside a compute region)."""
    ev = rd.app_events
    out = []
    for (actor, pid), _ in ev[masks["fetch"]].groupby(["actor", "pid"]):
        here = (ev["actor"].to_numpy() == actor) & (ev["pid"].to_numpy() == pid)
        c, f = ev[here & masks["compute"]], ev[here & masks["fetch"]]
        if c.empty:
            continue
        cs, ce = c["start"].to_numpy(), c["end"].to_numpy()
        n = 0
        for a, b in zip(f["start"].to_numpy(), f["end"].to_numpy(), strict=True):
            inside = (cs < b) & (ce > a)
            n += int((inside & ~((cs <= a) & (ce >= b)) & ~((cs >= a) & (ce <= b))).sum())
        if n:
            src = str(ev.loc[here & masks["fetch"], "cat"].iloc[0])
            out.append(
                {
                    "source": f"rank {actor}",
                    "kind": "crossing-events",
                    "severity": "warning",
                    "message": f"{n} compute events of pid {pid} overlap fetch events "
                    f"({src}) without either holding the other: annotations that cross "
                    "(an iter() started inside a compute region?); the steps take the "
                    "fetch events as the waits",
                }
            )
    return out


def _unmatched(rd: RunData, masks: dict[str, np.ndarray]) -> list[dict[str, str]]:
    """A kind the user set (not the defaults) whose rules match no event: name the rules and
    what the trace's events are called."""
    from iosweep.analysis.settings import AnalysisSettings

    defaults = AnalysisSettings().phases
    ev = rd.app_events
    out = []
    for kind, rules in rd.settings.phases.items():
        if rules == defaults.get(kind) or masks[kind].any() or ev.empty:
            continue
        seen = ", ".join(sorted({str(c) for c in ev["cat"].cat.categories})[:20])
        out.append(
            {
                "source": f"analysis.phases.{kind}",
                "kind": "no-match",
                "severity": "warning",
                "message": f"analysis.phases.{kind} {rules} matches no event of the trace; "
                f"its categories are: {seen}",
            }
        )
    return out


def _named(ev: pd.DataFrame, m: np.ndarray) -> list[str]:
    """Up to three ``cat/name`` of the events a mask picks, for the record of the method."""
    return sorted({f"{c}/{n}" for c, n in zip(ev["cat"][m], ev["name"][m], strict=True)})[:3]


def steps_from_events(rd: RunData) -> FromEvents | None:
    """Steps from the app events (None when no event is compute or fetch)."""
    if rd.app_events.empty:
        return None
    masks = {k: _kind(rd, k) for k in PHASE_KINDS}
    issues = _unmatched(rd, masks)
    actors = sorted({int(a) for a in rd.app_events["actor"][masks["compute"] | masks["fetch"]]})
    if not actors:
        return FromEvents(pd.DataFrame(columns=STEP_COLUMNS), {}, issues) if issues else None
    used: set[str] = set()
    evals: list[dict[str, Any]] = []
    rows = [r for a in actors for r in _rank_steps(rd, a, masks, used, evals)]
    steps = pd.DataFrame(rows)
    steps = steps.drop(columns=[c for c in ("iter_step",) if c in steps])
    steps["samples"] = np.nan
    has_fetch = bool(used)
    ev = rd.app_events
    method = (
        f"the trace's own annotations: fetch events ({', '.join(sorted(used)[:3])}) are "
        "the waits, the compute events inside each step its compute"
        if has_fetch
        else "the trace's own annotations: compute events are the steps, the gaps between "
        "them the waits"
    )
    if evals:
        method += (
            f"; {len(evals)} steps whose compute events are evaluation's "
            "(analysis.phases.evaluation) are evaluation, not training"
        )
    timing: dict[str, Any] = {
        "source": "events",
        "wait": "measured" if has_fetch else "",
        "method": method,
        "loop": ", ".join(_named(ev, masks["compute"])),
        "batches_timed": int((steps["step"] >= 0).sum()),
    }
    issues += _crossing(rd, masks)
    return FromEvents(
        steps[STEP_COLUMNS], timing, issues, pd.DataFrame(evals, columns=EVAL_COLUMNS)
    )


def use_annotated_steps(rd: RunData) -> None:
    """A run without step records gets them from its own annotations, if it has any
    (``rd.steps``), with how they were timed for the pipeline's summary
    (``rd.timing``) and what did not fit (``rd.issues``)."""
    if not rd.steps.empty and (rd.steps["step"] >= 0).any():
        return
    found = steps_from_events(rd)
    if found is None:
        return
    rd.issues.extend(Issue(**i) for i in found.issues)
    if len(found.steps):
        rd.steps = found.steps
        rd.timing = found.timing
        rd.eval_steps = found.evaluation
