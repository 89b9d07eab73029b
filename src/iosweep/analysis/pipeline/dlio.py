"""DLIO's own AU beside iosweep's, for a DLIO run (its output folder read at ingest:
``RunMeta.manifest["dlio"]``, iosweep.trace.dlio), and why the two differ.

DLIO's AU per rank and epoch is the configured computation time of every step but the first
over the epoch's wall time less the first step's processing time (``statscounter.py``); its
summary's per-epoch AU is the mean over ranks. iosweep's is the traced compute of every step
but the first over the epoch time less the first wait and first step, from the trace's own
compute and fetch events: the numerator is measured (a sleep overshoots its request), and
the windows start and end at slightly different points.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iosweep.trace.schema import RunMeta


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and np.isfinite(v) else None


def _replay(d: dict[str, Any], pipe: dict[str, Any]) -> dict[str, Any] | None:
    """The replayed run's answer (the workload's ``iosweep`` section) beside this run's."""
    of = (d.get("workload") or {}).get("iosweep")
    if not isinstance(of, dict) or not of.get("replay_of"):
        return None
    tot, v = pipe.get("totals") or {}, (pipe.get("verdict") or {}).get("kind")
    au, sps = _finite(of.get("au")), _finite(of.get("samples_per_s"))
    ranks = of.get("ranks") if isinstance(of.get("ranks"), int) else None
    mine_au, mine_sps, mine_ranks = tot.get("au"), tot.get("samples_per_s"), tot.get("ranks")
    parts = [f"replays run {of['replay_of']} ({ranks} rank(s)) at {mine_ranks} rank(s)"]
    if au is not None and mine_au is not None:
        parts.append(
            f"AU {mine_au:.1%} against the run's {au:.1%} ({(mine_au - au) * 100:+.1f} points)"
        )
    if sps is not None and mine_sps is not None:
        parts.append(f"{mine_sps:,.1f} samples/s against {sps:,.1f} ({mine_sps / sps:.2f}x)")
    if of.get("verdict"):
        parts.append(
            f"the same verdict ({v})"
            if of["verdict"] == v
            else f"verdict {v} where the run's was {of['verdict']}"
        )
    return {
        "of_run": str(of["replay_of"]),
        "ranks_of_run": ranks,
        "au_of_run": au,
        "samples_per_s_of_run": sps,
        "verdict_of_run": of.get("verdict"),
        "calibrated": of.get("calibrated") if isinstance(of.get("calibrated"), bool) else None,
        "limits": [str(x) for x in of.get("limits") or [] if isinstance(x, str)],
        "text": "; ".join(parts),
    }


def dlio_beside(meta: RunMeta, table: pd.DataFrame, pipe: dict[str, Any]) -> dict | None:
    """The DlioAu record (iosweep.analysis.summary), or None for a run that is not DLIO's;
    ``table``, ``pipe``: the pipeline's (rank, epoch) table and summary."""
    d = (meta.manifest or {}).get("dlio")
    if not isinstance(d, dict):
        return None
    totals = pipe.get("totals")
    per_epoch = [float(v) / 100 for v in d.get("au_percentage") or [] if _finite(v) is not None]
    mean = _finite(d.get("au_mean_percentage"))
    mean = mean / 100 if mean is not None else None
    mine = (
        [None if pd.isna(v) else float(v) for v in table.groupby("epoch")["au"].mean()]
        if len(table)
        else []
    )
    ours = (totals or {}).get("au")
    steps = (table["steps"] - 1).clip(lower=0).sum() if len(table) else 0
    traced = float(table["compute"].sum() / steps) if steps else None
    ct = _finite(d.get("computation_time"))
    if mean is None or ours is None:
        text = (
            "DLIO's summary gives no training AU"
            if mean is None
            else "iosweep found no steps to judge"
        )
    else:
        own = ((meta.manifest or {}).get("timing") or {}).get("source") == "dlio"
        what = (
            "DLIO's own step times put each step's processing at"
            if own
            else ("the traced compute events last")
        )
        why = (
            f"DLIO counts each step's configured computation time ({ct * 1e3:.1f} ms), "
            f"{what} {traced * 1e3:.1f} ms on average"
            if ct is not None and traced is not None
            else "DLIO counts each step's configured computation time, iosweep the traced one"
        )
        text = (
            f"DLIO's own AU {mean:.1%}, iosweep's {ours:.1%} ({(ours - mean) * 100:+.1f} points): "
            f"{why}; DLIO divides by its epoch's wall time less the first step, iosweep by "
            "the epoch time less the first wait and step"
        )
    return {
        "au_mean": mean,
        "au_per_epoch": per_epoch,
        "iosweep_au": ours,
        "iosweep_au_per_epoch": mine,
        "computation_time": ct,
        "traced_compute_mean": traced,
        "throughput_samples_per_s": _finite(d.get("throughput_samples_per_s")),
        "text": text,
        "replay": _replay(d, pipe),
    }
