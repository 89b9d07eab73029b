"""Across the sweep: what each lever of the input pipeline did, how far the job scales before
its input gives out, and a projection beyond the sweep.

- **Levers**: for loader workers and staging, every series of runs that differ only in that
  lever (and the repeat): AU and samples/s at each of its values, e.g. "loader workers 2 -> 8
  -> 16: AU 9% -> 37% -> 92%, samples/s 329 -> 998 -> 1591".
- **Scale**: per series over ranks and nodes: AU, samples/s, and the read bandwidth the job
  demanded per rank and per node; the largest point still at or above the AU threshold.
- **Projection**: at how many ranks the input would become storage-bound, given the file
  system's bandwidth and open rate (settings ``fs_bandwidth``, ``fs_metadata_rate``) or the
  highest the sweep observed. What it assumes is said with it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.pipeline.advice import advice_text, as_set, best_value, beyond, lever_points
from iosweep.analysis.settings import AnalysisSettings
from iosweep.units import human_bytes, whole_text

LEVERS = {"loader_workers": "loader workers", "staging": "staging"}
_ORDER = {"none": 0, "node-local": 1}
IGNORED = {"rep", "run_id"}


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _pct(v: float | None) -> str:
    return "?" if v is None or not np.isfinite(v) else f"{v:.0%}"


def _runs(df: pd.DataFrame) -> pd.DataFrame:
    """Runs whose input pipeline was analysed (traced or not)."""
    if "au" not in df:
        return df.iloc[0:0]
    return df[df["au"].notna() | df.get("samples_per_s", pd.Series(dtype=float)).notna()]


def lever_series(df: pd.DataFrame, params: list[str], s: AnalysisSettings) -> list[dict[str, Any]]:
    """Every series of runs that differ only in one lever: what each value measured, the best
    value, and the rate model's predictions beside them (:mod:`.advice`)."""
    runs = _runs(df)
    out = []
    for lever, words in LEVERS.items():
        if lever not in runs or runs[lever].nunique() < 2:
            continue
        rest = [c for c in params if c not in IGNORED and c != lever and c in runs]
        for key, g in runs.groupby(rest, dropna=False, sort=True):
            if g[lever].nunique() < 2:
                continue
            key = key if isinstance(key, tuple) else (key,)
            by = g.groupby(lever, sort=False).agg(
                au=("au", "mean"),
                compute_share=("compute_share", "mean"),
                samples_per_s=("samples_per_s", "mean"),
                reps=("run_id", "count"),
            )
            order = sorted(by.index, key=lambda v: _ORDER.get(v, v) if isinstance(v, str) else v)
            by = by.loc[order]
            values = [as_set(_py(v)) for v in by.index]
            au = [_py(v) for v in by["au"]]
            sps = [_py(v) for v in by["samples_per_s"]]
            text = (
                f"{words} {' → '.join(str(v) for v in values)}: AU {' → '.join(_pct(a) for a in au)}, "
                f"samples/s {' → '.join(whole_text(x) for x in sps)}"
            )
            points = lever_points(g, lever, order, s)
            out.append(
                {
                    "lever": lever,
                    "key": {k: as_set(_py(v)) for k, v in zip(rest, key, strict=True)},
                    "values": values,
                    "au": au,
                    "compute_share": [_py(v) for v in by["compute_share"]],
                    "samples_per_s": sps,
                    "reps": [int(r) for r in by["reps"]],
                    "text": text,
                    "points": points,
                    "best": best_value(points),
                    "advice": advice_text(lever, points, s),
                    "beyond": beyond(g, lever, points, s),
                }
            )
    return out


def scale_series(df: pd.DataFrame, params: list[str], s: AnalysisSettings) -> list[dict[str, Any]]:
    """Per series of runs that differ only in scale: the input pipeline at each point, and
    the largest point still at or above the AU threshold."""
    runs = _runs(df)
    rest = [c for c in params if c not in IGNORED | {"ranks", "nodes", "ppn"} and c in runs]
    out = []
    groups = runs.groupby(rest, dropna=False, sort=True) if rest else [((), runs)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        pts = g.groupby(["ranks", "nodes"], sort=True).agg(
            au=("au", "mean"),
            samples_per_s=("samples_per_s", "mean"),
            bw_rank=("read_bandwidth_per_rank", "mean"),
        )
        if len(pts) < 1:
            continue
        ranks = [int(r) for r, _ in pts.index]
        nodes = [int(n) for _, n in pts.index]
        ok = [i for i, a in enumerate(pts["au"]) if a is not None and a >= s.au_threshold]
        best = max(ok, key=lambda i: (ranks[i], nodes[i])) if ok else None
        bw = [_py(v) for v in pts["bw_rank"]]
        out.append(
            {
                "key": {k: _py(v) for k, v in zip(rest, key, strict=True)},
                "ranks": ranks,
                "nodes": nodes,
                "au": [_py(v) for v in pts["au"]],
                "samples_per_s": [_py(v) for v in pts["samples_per_s"]],
                "read_bandwidth_per_rank": bw,
                "read_bandwidth_per_node": [
                    None if b is None else b * r / n
                    for b, r, n in zip(bw, ranks, nodes, strict=True)
                ],
                "largest_fed": None
                if best is None
                else {"ranks": ranks[best], "nodes": nodes[best]},
            }
        )
    return out


def projection(df: pd.DataFrame, s: AnalysisSettings) -> dict[str, Any] | None:
    """At how many ranks would the input become storage-bound? From the run that read the
    most per rank, fed fully (AU 100%), against the file system's bandwidth."""
    runs = _runs(df)
    need = {"read_bandwidth_per_rank", "au", "ranks"}
    if runs.empty or not need <= set(runs.columns):
        return None
    r = runs.dropna(subset=["read_bandwidth_per_rank", "au"])
    r = r[(r["read_bandwidth_per_rank"] > 0) & (r["au"] > 0)]
    # only jobs that read their data while they train (not those that load it all first)
    if "dataset_files_read_per_epoch" not in r:
        return None
    r = r[r["dataset_files_read_per_epoch"].fillna(0) > 0]
    # DLIO runs emulate a job (a replay among them measures DLIO on this machine): the
    # projection extrapolates the demand of the jobs themselves where the sweep has any;
    # what the file system delivered counts every run
    seen = r
    if "workload" in r:
        jobs = r[~r["workload"].astype(str).str.startswith("dlio:")]
        r = jobs if not jobs.empty else r
    if r.empty:
        return None
    # Fully fed, a rank reads as fast as its compute consumes samples: its bandwidth / AU,
    # estimated from the run that came closest (the highest AU: the least extrapolation).
    fed = r["au"].clip(upper=1.0)
    demand = r["read_bandwidth_per_rank"] / fed
    i = fed.idxmax()
    fs_bw = s.fs_bandwidth or float((seen["read_bandwidth_per_rank"] * seen["ranks"]).max())
    ranks_bw = fs_bw / float(demand[i])
    out = {
        "run_id": str(r.loc[i, "run_id"]),
        "demand_per_rank": float(demand[i]),
        "fs_bandwidth": fs_bw,
        "fs_bandwidth_source": "analysis.fs_bandwidth" if s.fs_bandwidth else "highest observed",
        "ranks_at_bandwidth": ranks_bw,
        "opens_per_rank": None,
        "fs_metadata_rate": None,
        "ranks_at_metadata": None,
    }
    text = (
        f"Fully fed, a rank of {r.loc[i, 'run_id']} (AU {fed[i]:.0%}) would read "
        f"{human_bytes(float(demand[i]))}/s; " + _at(ranks_bw, fs_bw, s.fs_bandwidth)
    )
    if "files_per_s" in r and r["files_per_s"].notna().any():
        opens = r["files_per_s"] / r["ranks"] / fed
        j = i if np.isfinite(opens[i]) else opens.dropna().index[0]
        fs_md = s.fs_metadata_rate or float(seen["files_per_s"].max())
        at_md = fs_md / float(opens[j])
        out |= {
            "opens_per_rank": float(opens[j]),
            "fs_metadata_rate": fs_md,
            "ranks_at_metadata": at_md,
        }
        src = "analysis.fs_metadata_rate" if s.fs_metadata_rate else "the most this sweep observed"
        text += (
            f"; its {opens[j]:,.0f} file opens per second meet {fs_md:,.0f} opens/s ({src}) "
            + _ranks_words(at_md)
        )
    out["text"] = text + (
        ". This assumes that each rank reads its own samples (data-parallel, weak scaling), that a "
        "rank's demand per second stays what it was here, that all ranks share the file system, "
        "and no cache between them and the storage."
    )
    return out


def _ranks_words(n: float) -> str:
    if n < 1.5:
        return "already at one rank"
    return f"at about {n:,.0f} ranks"


def _at(ranks: float, fs_bw: float, configured: float | None) -> str:
    if configured:
        return (
            f"at {human_bytes(fs_bw)}/s (analysis.fs_bandwidth) the input becomes storage-bound "
            + _ranks_words(ranks)
        )
    return (
        f"this sweep saw the file system deliver at most {human_bytes(fs_bw)}/s, a lower bound of "
        f"what it can do: at that rate the input would be storage-bound {_ranks_words(ranks)} "
        "(set analysis.fs_bandwidth to project with the real figure)"
    )


def pipeline_across(df: pd.DataFrame, params: list[str], s: AnalysisSettings) -> dict[str, Any]:
    return {
        "levers": lever_series(df, params, s),
        "scale": scale_series(df, params, s),
        "projection": projection(df, s),
        "au_threshold": s.au_threshold,
    }
