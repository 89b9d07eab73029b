"""Across a sweep: what the measurements say of each lever, and the advice that follows
from them (docs/analysis.md "Advice from evidence").

For a series of runs that differ only in one lever (:func:`.levers.lever_series`), each
value's measured samples/s (mean and range of its repeats) and its change from the value
before; the best value measured; and beside each value the rate model's prediction from
the series' *other* runs (:mod:`.rates`: leave-one-out, interpolated between the runs of
the two values beside it, or from the nearest past the ends),
with its error against what was measured.

Then a run's levers (its verdict's rules of thumb) are overruled where the sweep measured
the lever they turn (:func:`overrule`): one that the sweep measured no better, or worse, from
the run's own value is dropped, and the best value measured leads, said as measured; a
prediction beyond the sweep's values is said as predicted.
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

import pandas as pd

from iosweep.analysis.pipeline.rates import RateInputs, candidates, predict
from iosweep.analysis.summary import Lever, LeverSeries
from iosweep.units import whole_text

#: the rate model's figures a run's row of the sweep table carries (``rate_<name>``)
RATE_FIELDS = (
    "workers",
    "samples_per_s",
    "compute_s",
    "prep_s",
    "prep_source",
    "cpu_s",
    "cores_per_rank",
    "ranks",
    "bytes_per_sample",
)
WORDS = {"loader_workers": "loader workers", "staging": "staging"}


def rate_columns(pipeline: dict[str, Any]) -> dict[str, Any]:
    """A run's rate-model figures as sweep-table columns (none where it has no model)."""
    rates = (pipeline or {}).get("rates") or {}
    if not rates.get("available"):
        return {}
    return {f"rate_{k}": rates.get(k) for k in RATE_FIELDS}


def _inputs(row: pd.Series) -> RateInputs | None:
    def num(k: str) -> float | None:
        v = row.get(f"rate_{k}")
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    rate, compute, ranks, workers = (
        num("samples_per_s"),
        num("compute_s"),
        num("ranks"),
        num("workers"),
    )
    if not rate or not compute or not ranks or workers is None:
        return None
    return RateInputs(
        workers=int(workers),
        rate=rate / ranks,
        compute_s=compute,
        prep_s=num("prep_s"),
        prep_source=str(row.get("rate_prep_source") or ""),
        cpu_s=num("cpu_s"),
        cores_per_rank=num("cores_per_rank"),
        ranks=int(ranks),
        bytes_per_sample=num("bytes_per_sample"),
    )


def as_set(v: Any) -> Any:
    """A lever's value as it was set: 2, not 2.0 (a column with gaps is a float column)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _mean(x: pd.Series) -> float | None:
    x = pd.to_numeric(x, errors="coerce").dropna()
    return float(x.mean()) if len(x) else None


def _from(g: pd.DataFrame, lever: str, at: Any, value: Any, s) -> tuple[float, str, str] | None:
    """The model fed the runs of ``at`` (their mean), predicting ``value``."""
    preds = [
        (predict(r, int(value), s), str(row["run_id"]))
        for _, row in g[g[lever] == at].iterrows()
        if (r := _inputs(row)) is not None
    ]
    if not preds:
        return None
    rate = sum(p["samples_per_s"] for p, _ in preds) / len(preds)
    return rate, preds[0][0]["bottleneck"], ", ".join(run for _, run in preds)


def _predicted(g: pd.DataFrame, lever: str, value: Any, s) -> dict[str, Any]:
    """The steady samples/s the model predicts for ``value`` from the series' other runs:
    between two measured values, fed each neighbour's runs and interpolated linearly in the
    workers (each run's model holds its own per-sample costs, which grow with the processes
    on the cores); past them, fed the nearest's. Nothing for a lever it does not model."""
    if lever != "loader_workers" or "rate_samples_per_s" not in g:
        return {}
    fed = sorted({float(v) for v in g.loc[g["rate_samples_per_s"].notna(), lever]} - {float(value)})
    lo = [v for v in fed if v < float(value)]
    hi = [v for v in fed if v > float(value)]
    below = _from(g, lever, lo[-1], value, s) if lo else None
    above = _from(g, lever, hi[0], value, s) if hi else None
    if below and above:
        x = (float(value) - lo[-1]) / (hi[0] - lo[-1])
        near = below if x <= 0.5 else above
        return {
            "predicted": below[0] + (above[0] - below[0]) * x,
            "bottleneck": near[1],
            "predicted_from": f"{below[2]}, {above[2]}",
        }
    one = below or above
    if one is None:
        return {}
    return {"predicted": one[0], "bottleneck": one[1], "predicted_from": one[2]}


def lever_points(g: pd.DataFrame, lever: str, values: list[Any], s) -> list[dict[str, Any]]:
    """Each value's measured samples/s (mean, range, change) and the model's prediction."""
    out: list[dict[str, Any]] = []
    for v in values:
        runs = g[g[lever] == v]
        sps = pd.to_numeric(runs.get("samples_per_s"), errors="coerce").dropna()
        mean = float(sps.mean()) if len(sps) else None
        prev = out[-1]["samples_per_s"] if out else None
        steady = _mean(runs["rate_samples_per_s"]) if "rate_samples_per_s" in runs else None
        pred = _predicted(g, lever, v, s)
        p = pred.get("predicted")
        out.append(
            {
                "value": as_set(v),
                "runs": len(runs),
                "samples_per_s": mean,
                "samples_per_s_min": float(sps.min()) if len(sps) else None,
                "samples_per_s_max": float(sps.max()) if len(sps) else None,
                "change": mean / prev - 1 if mean is not None and prev else None,
                "steady_samples_per_s": steady,
                "predicted": p,
                "error": p / steady - 1 if p is not None and steady else None,
                "bottleneck": pred.get("bottleneck", ""),
                "predicted_from": pred.get("predicted_from", ""),
            }
        )
    return out


def better(a: dict[str, Any], b: dict[str, Any], s) -> bool:
    """Whether value ``a`` was measured better than ``b``: a mean samples/s at least
    ``lever_min_gain`` higher, and, where both have repeats, ranges that do not overlap."""
    if a["samples_per_s"] is None or b["samples_per_s"] is None:
        return False
    if a["samples_per_s"] < b["samples_per_s"] * (1 + s.lever_min_gain):
        return False
    if a["runs"] >= 2 and b["runs"] >= 2:
        return a["samples_per_s_min"] > b["samples_per_s_max"]
    return True


def best_value(points: list[dict[str, Any]]) -> Any:
    known = [p for p in points if p["samples_per_s"] is not None]
    return max(known, key=lambda p: p["samples_per_s"])["value"] if known else None


def _spread(p: dict[str, Any]) -> str:
    if p["runs"] < 2:
        return "1 run"
    return f"{p['runs']} runs, {whole_text(p['samples_per_s_min'])}-{whole_text(p['samples_per_s_max'])}"


def advice_text(lever: str, points: list[dict[str, Any]], s) -> str:
    """What the series measured, the best value, and the model's predictions beside it."""
    best = best_value(points)
    if best is None:
        return ""
    words = WORDS[lever]
    top = next(p for p in points if p["value"] == best)
    steps = [
        f"{a['value']} → {b['value']}: {b['change']:+.0%}"
        for a, b in pairwise(points)
        if b["change"] is not None
    ]
    worse = [p["value"] for p in points if p["value"] != best and better(top, p, s)]
    text = (
        f"measured best: {words} {best} ({whole_text(top['samples_per_s'])} samples/s, {_spread(top)})"
        + (f"; each step: {', '.join(steps)}" if steps else "")
        + (f"; measured worse than {best}: {', '.join(str(v) for v in worse)}" if worse else "")
    )
    pred = [p for p in points if p["predicted"] is not None]
    if pred:
        text += (
            "; the rate model, fed the runs beside each value (not its own), predicted "
            + ", ".join(
                f"{p['value']}: {whole_text(p['predicted'])} against {whole_text(p['steady_samples_per_s'])} "
                f"measured in steady state ({p['error']:+.0%}, {p['bottleneck']})"
                for p in pred
                if p["error"] is not None
            )
        )
    return text


def _helps(series: LeverSeries, own: Any, direction: str, s) -> bool | None:
    """Whether the sweep measured the way ``direction`` from ``own`` better (None: it did not
    measure that way)."""
    pts = {p.value: p.model_dump() for p in series.points}
    if own not in pts:
        return None
    order = list(pts)
    i = order.index(own)
    ahead = (
        order[i + 1 :] if direction in ("more", "on") else order[:i] if direction == "fewer" else []
    )
    if not ahead:
        return None
    return any(better(pts[v], pts[own], s) for v in ahead)


def _same(a: Any, b: Any) -> bool:
    """Two parameter values alike, as set (2.0 is 2; NaN, a gap in a float column, is None)."""

    def norm(v: Any) -> str:
        return "None" if v is None or (isinstance(v, float) and math.isnan(v)) else str(as_set(v))

    return norm(a) == norm(b)


def _matches(series: LeverSeries, point: dict[str, Any]) -> bool:
    return all(_same(point.get(k), v) for k, v in series.key.items())


def _measured(series: LeverSeries, text: str) -> Lever:
    """A lever the sweep's measurements advise: set the series' parameter as ``text`` says."""
    return Lever(text=text, param=series.lever, direction="set", source="measured")


def overrule(
    levers: list[Lever], point: dict[str, Any], series: list[LeverSeries], s
) -> list[Lever]:
    """A run's levers where the sweep measured them: one measured no better or worse from the
    run's own value is dropped, and the best value measured leads (as measured)."""
    out = list(levers)
    lead: list[Lever] = []
    for sr in series:
        own = as_set(point.get(sr.lever))
        if sr.best is None or own is None or not _matches(sr, point):
            continue
        pts = {p.value: p for p in sr.points}
        top, mine = pts[sr.best], pts.get(own)
        beaten = (
            sr.best != own and mine is not None and better(top.model_dump(), mine.model_dump(), s)
        )
        # a way the sweep measured no better goes; so does one it did not measure where a
        # value it did measure beats this run's (the measurement leads instead)
        dropped = [
            lv
            for lv in out
            if lv.param == sr.lever
            and lv.direction
            and ((helps := _helps(sr, own, lv.direction, s)) is False or (helps is None and beaten))
        ]
        out = [lv for lv in out if lv not in dropped]
        words = WORDS[sr.lever]
        if beaten and mine is not None:
            gain = (top.samples_per_s or 0) / (mine.samples_per_s or 1) - 1
            lead.append(
                _measured(
                    sr,
                    f"{words} {sr.best}: measured best in this series ({whole_text(top.samples_per_s)} "
                    f"samples/s against {whole_text(mine.samples_per_s)} with {own}, {gain:+.0%})",
                )
            )
        elif dropped and mine is not None:
            best = (
                "the best measured"
                if sr.best == own
                else f"the best, {sr.best}: {whole_text(top.samples_per_s)}"
            )
            lead.append(
                _measured(
                    sr,
                    f"keep {words} {own}: no other value this sweep measured beat it by "
                    f"{s.lever_min_gain:.0%} or more ({own}: {whole_text(mine.samples_per_s)} samples/s, "
                    f"{best})",
                )
            )
    return lead + out


def beyond(g: pd.DataFrame, lever: str, points: list[dict[str, Any]], s) -> str:
    """Where the best value measured is the series' largest: what the model, fed its runs,
    predicts of larger ones, said as predicted ('' where it predicts no gain worth a try)."""
    best = best_value(points)
    if lever != "loader_workers" or best is None or best != points[-1]["value"]:
        return ""
    fed = [r for r in (_inputs(row) for _, row in g[g[lever] == best].iterrows()) if r]
    if not fed:
        return ""
    r = fed[0]
    now = r.rate * r.ranks
    ahead = [predict(r, w, s) for w in candidates(r) if w > best]
    if not ahead:
        return ""
    top = max(p["samples_per_s"] for p in ahead)
    if top < now * (1 + s.lever_min_gain):
        return ""
    first = next(p for p in ahead if p["samples_per_s"] >= 0.98 * top)
    return (
        f"predicted, not measured: {WORDS[lever]} {first['workers']} would give about "
        f"{whole_text(first['samples_per_s'])} samples/s in steady state against {whole_text(now)} with "
        f"{best} (bound then by {first['bottleneck']}; the rate model fed this series' run "
        f"with {best}: try it)"
    )
