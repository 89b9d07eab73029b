"""Across the sweep: one table of runs, scaling of every metric, insights that come and go,
and the tracer's overhead against ``tracer: none`` baselines (docs/analysis.md)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.pipeline.advice import overrule, rate_columns
from iosweep.analysis.pipeline.levers import pipeline_across
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.summary import (
    SUMMARY_FILE,
    InsightsAcross,
    Lever,
    Overhead,
    PipelineAcross,
    RunLevers,
    RunSummary,
    Scaling,
    read_summary,
    to_dict,
    write_sweep_file,
)
from iosweep.files import atomic_write

PARAM_COLUMNS = ["framework", "tracer", "nodes", "ppn", "ranks", "rep"]
SCALE = ["ranks", "nodes", "ppn"]
# Metrics that add up over ranks: they get a per-rank figure next to the total.
_TOTAL_SUFFIXES = ("_bytes_read", "_bytes_written", "_files")
_TOTALS = {
    "bytes_read",
    "bytes_written",
    "reads",
    "writes",
    "files",
    "opens",
    "stats",
    "seeks",
    "fsyncs",
    "meta_time",
    "io_busy_time_total",
    "checkpoints",
}


def load_summary(path: Path | str) -> dict[str, Any]:
    """A run's summary.json (the file or the run's analysis directory), checked against
    :mod:`iosweep.analysis.summary`, as a mapping; SummaryError (a ValueError) if it is not."""
    p = Path(path)
    if p.is_dir():
        p = p / SUMMARY_FILE
    if not p.exists():
        raise FileNotFoundError(f"{p}: no summary.json (analyse the run first)")
    d = to_dict(read_summary(p))
    d["_path"] = str(p)
    return d


def _is_total(metric: str) -> bool:
    return metric in _TOTALS or (
        metric.endswith(_TOTAL_SUFFIXES) and not metric.endswith("_per_rank")
    )


def _row(sm: dict[str, Any]) -> dict[str, Any]:
    params = dict(sm.get("params") or {})
    rk = sm.get("ranks") or {}
    row: dict[str, Any] = {"run_id": sm.get("run_id", "")}
    row["framework"] = params.pop("framework", "") or ""
    row["tracer"] = params.pop("tracer", None) or sm.get("tracer") or ""
    nodes = params.pop("nodes", None) or rk.get("nodes") or None
    ranks = params.pop("ranks", None) or rk.get("count") or None
    ppn = params.pop("ppn", None) or (ranks // nodes if ranks and nodes else None)
    if ranks is None and nodes and ppn:
        ranks = nodes * ppn
    row |= {"nodes": nodes, "ppn": ppn, "ranks": ranks, "rep": params.pop("rep", 0)}
    for k, v in sorted(params.items()):
        if isinstance(v, str | int | float | bool) or v is None:
            row[k] = v
    row["status"] = sm.get("status", "")
    row["analysis_status"] = sm.get("analysis_status", "error" if "error" in sm else "")
    row["incomplete"] = bool(sm.get("incomplete", "error" in sm))
    row["issues"] = len(sm.get("issues") or [])
    for k, v in (sm.get("headline") or {}).items():
        row[k] = v
    # The headline's own counts (hosts seen, ranks traced) must not override the sweep point.
    row |= {"nodes": nodes, "ppn": ppn, "ranks": ranks}
    for cls, acc in (sm.get("access") or {}).items():
        for d in ("read", "write"):
            row[f"{cls}_{d}_strategy"] = (acc or {}).get(d) or ""
    row |= rate_columns(sm.get("pipeline") or {})
    ins = sm.get("insights") or []
    row["insight_ids"] = ";".join(sorted({i["id"] for i in ins}))
    row["summary_path"] = sm.get("_path", "")
    return row


def sweep_table(summaries: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame([_row(s) for s in summaries])
    # Every parameter names the sweep point (with the repeat); scalar ones become columns.
    extra = sorted({k for s in summaries for k in (s.get("params") or {})} - set(PARAM_COLUMNS))
    if df.empty:
        return df
    df = df.sort_values(
        ["framework", "tracer", "ranks", "nodes", "rep"], na_position="last", kind="stable"
    ).reset_index(drop=True)
    df.attrs["params"] = PARAM_COLUMNS + [c for c in extra if c in df.columns]
    return df


def _metrics(df: pd.DataFrame) -> list[str]:
    skip = {"issues", "insights", "incomplete", "tracer_overhead"}
    out = []
    for c in df.columns:
        if c in skip or c in df.attrs.get("params", PARAM_COLUMNS) or c.startswith("rate_"):
            continue  # (the rate model's inputs are the advice's, not metrics to scale)
        if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]):
            out.append(c)
    return out


def _point_cols(df: pd.DataFrame) -> list[str]:
    """Columns naming a sweep point: every parameter but the repeat."""
    return [c for c in df.attrs.get("params", PARAM_COLUMNS) if c != "rep" and c in df.columns]


def _trend(e: float | None) -> str | None:
    if e is None:
        return None
    if abs(e) < 0.15:
        return "flat"
    if e <= -0.15:
        return "shrinks"
    if e < 0.85:
        return "sublinear"
    if e <= 1.15:
        return "linear"
    return "superlinear"


def _exponent(x: np.ndarray, y: np.ndarray) -> float | None:
    """Slope of log(y) over log(x): 0 = flat, 1 = grows with ranks."""
    ok = np.isfinite(y) & (y > 0) & (x > 0)
    if ok.sum() < 2 or len(np.unique(x[ok])) < 2:
        return None
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def _series(df: pd.DataFrame) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    pc = _point_cols(df)
    skey = [c for c in pc if c not in SCALE]
    if not skey:
        return [({}, df)]
    out = []
    for key, g in df.groupby(skey, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        out.append(({k: _py(v) for k, v in zip(skey, key, strict=True)}, g))
    return out


def _py(v: Any) -> Any:
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return None if math.isnan(v) else float(v)
    if v is pd.NA:
        return None
    return v


@dataclass(frozen=True)
class Metric:
    """A metric the sweep compares across scale: its unit, and how it would ideally behave as
    ranks grow in data-parallel training (weak scaling: each rank does the same work)."""

    name: str
    title: str
    unit: str  # bytes | bytes/s | s | share | count | samples/s
    ideal: str  # flat | linear | "" (no ideal: it depends on the job)
    better: str = ""  # lower | higher | "" (neither is better)


#: what the report plots and the trend table shows, in this order
SCALING_METRICS = (
    Metric("au", "Accelerator utilisation (MLPerf-Storage-style)", "share", "flat", "higher"),
    Metric("samples_per_s", "Samples per second, all ranks", "samples/s", "linear", "higher"),
    Metric("wait_per_rank", "Data wait per rank", "s", "flat", "lower"),
    Metric("run_time", "Run time", "s", "flat", "lower"),
    Metric("io_time_max", "I/O time, slowest rank", "s", "flat", "lower"),
    Metric("bytes_read_per_rank_max", "Bytes read, busiest rank", "bytes", "flat", "lower"),
    Metric("bytes_read", "Bytes read in total", "bytes", "linear"),
    Metric("bytes_written_per_writer", "Bytes written per writing rank", "bytes", "flat"),
    Metric("bytes_written", "Bytes written in total", "bytes", ""),
    Metric("bandwidth_aggregate", "Aggregate bandwidth", "bytes/s", "linear", "higher"),
    Metric("read_bandwidth_per_rank", "Read bandwidth demanded per rank", "bytes/s", "flat"),
    Metric("metadata_ops", "Metadata operations in total", "count", "linear"),
    Metric("opens_per_rank_max", "Opens, busiest rank", "count", "flat", "lower"),
    Metric("io_share_max", "I/O share of run time, slowest rank", "share", "flat", "lower"),
    Metric("imbalance_bytes", "Imbalance of bytes across ranks", "share", "flat", "lower"),
    Metric("imbalance_io_time", "Imbalance of I/O time across ranks", "share", "flat", "lower"),
)
METRICS = {m.name: m for m in SCALING_METRICS}


def _monotonic(y: np.ndarray) -> bool:
    d = np.diff(y[np.isfinite(y)])
    scale = np.nanmax(np.abs(y)) or 1.0
    d = d[np.abs(d) > 0.02 * scale]  # changes under 2 % of the values are no direction
    return bool((d >= 0).all() or (d <= 0).all())


def fit_trend(
    ranks: np.ndarray, mean: np.ndarray, reps: list[int]
) -> tuple[float | None, str | None, str]:
    """(slope of log(mean) over log(ranks), trend word, why none): no trend from one run per
    point, nor from a series that goes up and down (noise, or another effect than scale)."""
    if np.isfinite(mean).sum() < 2 or len(np.unique(ranks[np.isfinite(mean)])) < 2:
        return None, None, ""
    if min(reps) < 2:
        return None, "noisy", "one run per point: no trend fitted"
    if not _monotonic(mean):
        return None, "noisy", "not monotonic: no trend fitted"
    e = _exponent(ranks, mean)
    return e, _trend(e), ""


def judge(metric: str, trend: str | None) -> str:
    """The trend against the ideal: as ideal, better, worse (or nothing to say)."""
    m = METRICS.get(metric)
    if m is None or not m.ideal or trend in (None, "noisy"):
        return ""
    if trend == m.ideal:
        return "ideal" if m.ideal == "flat" else "as expected"
    grows = {"flat": 0, "shrinks": -1, "sublinear": 0.5, "linear": 1, "superlinear": 2}
    more = grows[trend] > grows[m.ideal]
    if not m.better:
        return "more than ideal" if more else "less than ideal"
    good = more == (m.better == "higher")
    return "better than ideal" if good else "worse than ideal"


def _point_stats(vals: pd.Series, g: pd.DataFrame) -> tuple[np.ndarray, ...]:
    by = vals.groupby([g["ranks"], g["nodes"]], dropna=False, sort=True)
    return tuple(by.agg(f).to_numpy(np.float64) for f in ("mean", "std", "min", "max"))


def scaling(df: pd.DataFrame) -> dict[str, Any]:
    metrics = _metrics(df)
    out: dict[str, Any] = {
        "metrics": metrics,
        "totals": [m for m in metrics if _is_total(m)],
        "catalogue": [asdict(m) for m in SCALING_METRICS],
        "series": [],
    }
    # untraced runs too: their input pipeline (AU, samples/s, run time) was measured
    ok = (
        df[df["analysis_status"].isin(["complete", "partial", "untraced"])]
        if "analysis_status" in df
        else df
    )
    for key, g in _series(ok):
        pts = g.groupby(["ranks", "nodes"], dropna=False, sort=True)
        points = [
            {
                "ranks": _py(r),
                "nodes": _py(n),
                "ppn": _py(gg["ppn"].iloc[0]),
                "reps": len(gg),
                "run_ids": gg["run_id"].tolist(),
            }
            for (r, n), gg in pts
        ]
        reps = [p["reps"] for p in points]
        ranks = np.array(
            [p["ranks"] if p["ranks"] is not None else np.nan for p in points], np.float64
        )
        series: dict[str, Any] = {"key": key, "points": points, "metrics": {}}
        for m in metrics:
            mean, std, lo, hi = _point_stats(pd.to_numeric(g[m], errors="coerce"), g)
            if not np.isfinite(mean).any():
                continue
            base = mean[0]
            e, trend, note = fit_trend(ranks, mean, reps)
            spec = METRICS.get(m)
            series["metrics"][m] = {
                "total": _is_total(m),
                "mean": _clean_list(mean),
                "std": _clean_list(std),
                "min": _clean_list(lo),
                "max": _clean_list(hi),
                "ratio": _clean_list(mean / base) if np.isfinite(base) and base != 0 else None,
                "exponent": e,
                "trend": trend,
                "note": note,
                "judgement": judge(m, trend),
                "unit": spec.unit if spec else None,
                "title": spec.title if spec else None,
            }
        out["series"].append(series)
    return out


def _clean_list(a: np.ndarray) -> list[float | None]:
    return [float(x) if np.isfinite(x) else None for x in a]


def insights_across(df: pd.DataFrame, overhead: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"series": []}
    ok = df[df["analysis_status"].isin(["complete", "partial"])] if "analysis_status" in df else df
    for key, g in _series(ok):
        pts = list(g.groupby(["ranks", "nodes"], dropna=False, sort=True))
        ids = sorted({i for s in g["insight_ids"] for i in s.split(";") if i})
        point_desc = [{"ranks": _py(r), "nodes": _py(n)} for (r, n), _ in pts]
        per: dict[str, Any] = {}
        for iid in ids:
            frac = [
                float(gg["insight_ids"].str.split(";").map(lambda s, i=iid: i in s).mean())
                for _, gg in pts
            ]
            per[iid] = _changes(frac, point_desc)
        ov = [
            o
            for o in overhead
            if all(o["point"].get(k) == v for k, v in key.items() if k in o["point"])
        ]
        if ov:
            fired = []
            for p in point_desc:
                hit = [
                    o
                    for o in ov
                    if o["point"].get("ranks") == p["ranks"]
                    and o["point"].get("nodes") == p["nodes"]
                ]
                fired.append(float(any(o["fired"] for o in hit)) if hit else 0.0)
            if any(fired):
                per["tracer_overhead"] = _changes(fired, point_desc)
        out["series"].append({"key": key, "points": point_desc, "insights": per})
    return out


def _changes(frac: list[float], points: list[dict[str, Any]]) -> dict[str, Any]:
    fired = [f > 0 for f in frac]
    appears = next(
        (points[i] for i in range(1, len(fired)) if fired[i] and not any(fired[:i])), None
    )
    disappears = next(
        (points[i] for i in range(1, len(fired)) if not fired[i] and all(fired[:i])), None
    )
    if all(fired):
        status = "always"
    elif not any(fired):
        status = "never"
    elif appears and all(fired[points.index(appears) :]):
        status = "appears"
    elif disappears and not any(fired[points.index(disappears) :]):
        status = "disappears"
    else:
        status = "intermittent"
    return {
        "fired_share": frac,
        "status": status,
        "appears_at": appears,
        "disappears_at": disappears,
    }


def tracer_overhead(df: pd.DataFrame, s: AnalysisSettings) -> list[dict[str, Any]]:
    """Run time of traced runs against the untraced runs (tracer: none) of the same point.

    A verdict only from repeats: at least two runs on each side, and spreads that do not
    overlap (on shared cores one untraced run can take twice as long as its neighbour)."""
    if "tracer" not in df or not (df["tracer"] == "none").any():
        return []
    pc = [c for c in _point_cols(df) if c != "tracer"]
    good = (
        df[df["analysis_status"].isin(["complete", "partial", "untraced"]) & df["run_time"].notna()]
        if "run_time" in df
        else df.iloc[0:0]
    )
    stats = ["mean", "count", "min", "max"]
    base = good[good["tracer"] == "none"].groupby(pc, dropna=False)["run_time"].agg(stats)
    out = []
    for key, g in good[good["tracer"] != "none"].groupby([*pc, "tracer"], dropna=False, sort=True):
        k = dict(zip([*pc, "tracer"], key, strict=True))
        bkey = tuple(k[c] for c in pc) if len(pc) > 1 else k[pc[0]]
        if bkey not in base.index:
            continue
        b = base.loc[bkey]
        t = g["run_time"]
        ov = float(t.mean()) / float(b["mean"]) - 1 if b["mean"] > 0 else None
        verdict = _overhead_verdict(ov, len(t), int(b["count"]), float(t.min()), float(b["max"]), s)
        out.append(
            {
                "point": {c: _py(k[c]) for c in pc},
                "tracer": str(k["tracer"]),
                "traced_run_time_mean": float(t.mean()),
                "baseline_run_time_mean": float(b["mean"]),
                "traced_runs": len(t),
                "baseline_runs": int(b["count"]),
                "traced_min": float(t.min()),
                "traced_max": float(t.max()),
                "baseline_min": float(b["min"]),
                "baseline_max": float(b["max"]),
                "overhead": ov,
                "fired": verdict == "above threshold",
                "verdict": verdict,
                "threshold": s.tracer_overhead_share,
            }
        )
    return out


def _overhead_verdict(
    ov: float | None, n_traced: int, n_base: int, traced_min: float, base_max: float, s
) -> str:
    if ov is None:
        return ""
    if n_traced < 2 or n_base < 2:
        return f"no verdict: {n_traced} traced and {n_base} untraced run(s), 2 of each needed"
    if traced_min <= base_max:
        return "within the noise: the traced and untraced run times overlap"
    return "above threshold" if ov > s.tracer_overhead_share else "below threshold"


def advised(
    sums: list[dict[str, Any]], df: pd.DataFrame, pipe: PipelineAcross, s: AnalysisSettings
) -> list[RunLevers]:
    """Each run's levers where the sweep measured a parameter one of them turns (or the run's
    own series has a best value to lead with); the others keep their verdict's."""
    if not pipe.levers or df.empty:
        return []
    rows = {str(r["run_id"]): r for r in df.to_dict("records")}
    out = []
    for d in sums:
        v, row = ((d.get("pipeline") or {}).get("verdict") or {}), rows.get(str(d.get("run_id")))
        if not v or row is None:
            continue
        own = [Lever.model_validate(lv) for lv in v.get("levers") or []]
        levers = overrule(own, row, pipe.levers, s)
        if levers != own:
            out.append(RunLevers(run_id=str(d["run_id"]), levers=levers))
    return out


def advised_levers(
    summaries: list[RunSummary], settings: AnalysisSettings | None = None
) -> dict[str, list[Lever]]:
    """Each run's levers as its sweep's measurements leave them (run id -> levers), for the
    runs where they differ from the verdict's: what ``iosweep show`` and the end of a sweep
    print, the same as the sweep analysis's ``pipeline.json``."""
    settings = settings or AnalysisSettings()
    sums = [to_dict(sm) for sm in summaries]
    if len(sums) < 2:
        return {}
    return {a.run_id: a.levers for a in input_pipeline(sums, sweep_table(sums), settings).advised}


def input_pipeline(
    sums: list[dict[str, Any]], df: pd.DataFrame, s: AnalysisSettings
) -> PipelineAcross:
    """The input pipeline across the sweep (``pipeline.json``), each run's levers overruled
    where the sweep measured them."""
    params = df.attrs.get("params", PARAM_COLUMNS) if len(df) else []
    across = PipelineAcross.model_validate(pipeline_across(df, params, s))
    across.advised = advised(sums, df, across, s)
    return across


def analyze_sweep(
    summaries: Iterable[dict[str, Any] | Path | str],
    out_dir: Path | str,
    settings: AnalysisSettings | None = None,
) -> dict[str, Any]:
    """Compare the runs of a sweep; write sweep.csv/.parquet, scaling.json, insights_across.json,
    overhead.json into ``out_dir``; return their contents."""
    settings = settings or AnalysisSettings()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sums = [s if isinstance(s, dict) else load_summary(s) for s in summaries]
    df = sweep_table(sums)
    ov = tracer_overhead(df, settings) if len(df) else []
    if len(df):
        df["tracer_overhead"] = np.nan
        for o in ov:
            pt = o["point"]
            m = (df["tracer"] == o["tracer"]) & np.logical_and.reduce(
                [(df[c] == pt[c]) if pt[c] is not None else df[c].isna() for c in pt]
                or [np.ones(len(df), bool)]
            )
            df.loc[m, "tracer_overhead"] = df.loc[m, "run_time"] / o["baseline_run_time_mean"] - 1
    across = input_pipeline(sums, df, settings)
    models = (
        Scaling.model_validate(scaling(df) if len(df) else {"metrics": [], "series": []}),
        InsightsAcross.model_validate(insights_across(df, ov) if len(df) else {"series": []}),
        Overhead.model_validate({"points": ov}),
        across,
    )
    atomic_write(out_dir / "sweep.csv", lambda p: df.to_csv(p, index=False))
    atomic_write(out_dir / "sweep.parquet", lambda p: df.to_parquet(p, index=False))
    for model in models:
        write_sweep_file(model, out_dir)
    scal, ins, ovh, pipe = (m.model_dump(mode="json", by_alias=True) for m in models)
    return {
        "runs": len(df),
        "scaling": scal,
        "insights_across": ins,
        "overhead": ovh["points"],
        "pipeline": pipe,
        "table": df,
    }
