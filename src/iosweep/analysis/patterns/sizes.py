"""Request sizes: the full distribution (power-of-two bins and exact sizes), not only Darshan's bins.

Segments give every request's size; (rank, file) pairs known only from Darshan counters (no
DXT, or modules DXT does not trace such as STDIO) add their 10-bin histograms. The table
``sizes.parquet`` holds both binnings (column ``binning``): ``log2`` (segments, exact bins
[2^(k-1), 2^k), bin 0 = zero-length) and ``darshan`` (Darshan's 10 bins, segments and
counter-only pairs together).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import OPS, RunData
from iosweep.analysis.patterns.file_ranks import FileRankFacts
from iosweep.analysis.sections import PartIn, PartOut, PartsIn, Section, register
from iosweep.analysis.settings import AnalysisSettings
from iosweep.trace.schema import SIZE_BIN_LOWER, SIZE_BINS, darshan_size_bin


def _log2_bin(length: np.ndarray) -> np.ndarray:
    # frexp(x) = m * 2**e with m in [0.5, 1): e is the bin with [2**(e-1), 2**e); 0 -> bin 0.
    return np.frexp(length.astype(np.float64))[1].astype(np.int64)


def size_counts(rd: RunData) -> pd.DataFrame:
    """The operations' exact sizes with their counts per (class, op): ``k`` (class * 2 +
    op), ``size``, ``count``. A hash count over the operations; everything else (bins,
    percentiles, most common sizes) comes from the distinct sizes only, and the counts of
    some ranks add up to the run's (:func:`add_size_counts`)."""
    ops = rd.ops
    cls = rd.file_class[ops.file].astype(np.int64) if len(ops) else np.empty(0, np.int64)
    key = (cls * 2 + ops.op) * (1 << 48) + ops.length
    del cls
    vc = pd.Series(key).value_counts()
    del key
    kv = vc.index.to_numpy()
    return pd.DataFrame({"k": kv >> 48, "size": kv & ((1 << 48) - 1), "count": vc.to_numpy()})


def add_size_counts(counts: list[pd.DataFrame]) -> pd.DataFrame:
    """Size counts of several parts of a run (:func:`size_counts`) as one."""
    all_ = pd.concat(counts, ignore_index=True)
    return all_.groupby(["k", "size"], as_index=False, sort=False)["count"].sum()


def sizes_of(
    exact: pd.DataFrame, facts: FileRankFacts, classes: list[str], settings: AnalysisSettings
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The sizes table and summary from the size counts and what the (rank, file) rows give
    (their counter-only rows add Darshan's bins)."""
    ncls = len(classes)
    thr = settings.small_request_bytes
    rows: list[dict[str, Any]] = []
    ek, esz, ecnt = exact["k"].to_numpy(), exact["size"].to_numpy(), exact["count"].to_numpy()
    nb = 64
    lb = _log2_bin(esz)
    hist = np.bincount(ek * nb + lb, weights=ecnt, minlength=ncls * 2 * nb)
    hist = hist.reshape(ncls * 2, nb).astype(np.int64)
    hbytes = np.bincount(ek * nb + lb, weights=esz * ecnt, minlength=ncls * 2 * nb)
    hbytes = hbytes.reshape(ncls * 2, nb)
    dh = np.bincount(ek * 10 + darshan_size_bin(esz), weights=ecnt, minlength=ncls * 2 * 10)
    dh = dh.reshape(ncls * 2, 10).astype(np.int64)
    # Counter-only (rank, file) pairs: Darshan's bins.
    ctr_hist, ctr_small = facts.counter_bins, facts.counter_small

    summary: dict[str, Any] = {"small_request_bytes": thr, "by_class": {}}

    def add_rows(name: str, op: str, h: np.ndarray, hb: np.ndarray, d: np.ndarray) -> None:
        tot = h.sum()
        cum = np.cumsum(h) / tot if tot else np.zeros(len(h))
        for b in np.flatnonzero(h):
            rows.append(
                {
                    "binning": "log2",
                    "class": name,
                    "op": op,
                    "bin": int(b),
                    "bin_lower": 0 if b == 0 else 1 << (int(b) - 1),
                    "bin_upper": 1 << int(b),
                    "count": int(h[b]),
                    "bytes": int(hb[b]),
                    "cum_fraction": float(cum[b]),
                }
            )
        dt = d.sum()
        dcum = np.cumsum(d) / dt if dt else np.zeros(10)
        for b in np.flatnonzero(d):
            rows.append(
                {
                    "binning": "darshan",
                    "class": name,
                    "op": op,
                    "bin": int(b),
                    "bin_lower": SIZE_BIN_LOWER[b],
                    "bin_upper": SIZE_BIN_LOWER[b + 1] if b < 9 else None,
                    "count": int(d[b]),
                    "bytes": None,
                    "cum_fraction": float(dcum[b]),
                }
            )

    def describe(ks: list[int], name: str, op: str) -> dict[str, Any] | None:
        h = hist[ks].sum(axis=0)
        hb = hbytes[ks].sum(axis=0)
        ch = ctr_hist[ks].sum(axis=0)
        add_rows(name, op, h, hb, dh[ks].sum(axis=0) + ch)
        n_seg, n_ctr = int(h.sum()), int(ch.sum())
        if n_seg + n_ctr == 0:
            return None
        out: dict[str, Any] = {
            "ops": n_seg + n_ctr,
            "ops_from_segments": n_seg,
            "ops_from_counters": n_ctr,
        }
        e = exact[exact["k"].isin(ks)].groupby("size")["count"].sum().sort_index()
        # from counters, a request is small when its whole bin is below the threshold (bins
        # include their upper bound: 1 MiB requests are in 100K_1M, and not small), or when
        # ACCESS1..4 say its size (below)
        small_ctr = int(
            ch[[i for i in range(10) if (SIZE_BIN_LOWER[i + 1] if i < 9 else 1 << 62) < thr]].sum()
        )
        zero = int(e.get(0, 0)) if len(e) else 0
        nz = e[e.index > 0]  # zero-byte reads (EOF probes) are counted apart, never in sizes
        out["zero_length"] = zero
        if len(nz):
            sizes = nz.index.to_numpy()
            cnt = nz.to_numpy()
            cum = np.cumsum(cnt)

            def pct(q: float) -> int:
                return int(sizes[np.searchsorted(cum, q * cum[-1], side="left")])

            top = e.sort_values(ascending=False, kind="stable").head(settings.top_sizes)
            out |= {
                "bytes": int((sizes * cnt).sum()),
                "mean": float((sizes * cnt).sum() / cum[-1]),
                "min": int(sizes[0]),
                "p10": pct(0.1),
                "median": pct(0.5),
                "p90": pct(0.9),
                "max": int(sizes[-1]),
                "top_sizes": [
                    {"size": int(s), "count": int(c), "share": float(c / e.sum())}
                    for s, c in top.items()
                ],
            }
            small_seg = int(cnt[sizes < thr].sum())
        else:
            small_seg = 0
        # Median as a Darshan bin: available with counters only too.
        dall = dh[ks].sum(axis=0) + ch
        mb = int(np.searchsorted(np.cumsum(dall), 0.5 * dall.sum(), side="left"))
        out["median_bin"] = SIZE_BINS[mb]
        lo, hi = ctr_small[ks].sum(axis=0)
        # small_undecided: counters only, requests of Darshan's bin that holds the threshold
        # (100K_1M) whose size neither DXT nor ACCESS1..4 tell
        out["small"], out["small_undecided"] = small_seg + small_ctr + int(lo), int(hi - lo)
        sized = out["ops"] - out["zero_length"]
        out["small_share"] = out["small"] / sized if sized else 0.0
        out["small_source"] = (
            "segments" if n_ctr == 0 else ("counters" if n_seg == 0 else "segments+counters")
        )
        return out

    for ci, cname in enumerate([*classes, "all"]):
        summary["by_class"][cname] = {}
        for oi, op in enumerate(OPS):
            ks = [ci * 2 + oi] if cname != "all" else [c * 2 + oi for c in range(ncls)]
            d = describe(ks, cname, op)
            if d is not None:
                summary["by_class"][cname][op] = d
        if not summary["by_class"][cname]:
            del summary["by_class"][cname]
    table = pd.DataFrame(
        rows,
        columns=[
            "binning",
            "class",
            "op",
            "bin",
            "bin_lower",
            "bin_upper",
            "count",
            "bytes",
            "cum_fraction",
        ],
    )
    table["bin_upper"] = table["bin_upper"].astype("Int64")
    table["bytes"] = table["bytes"].astype("Int64")
    return table, summary


COUNTS = "size_counts.parquet"  # a part's size_counts


def _of_part(part: PartIn, out: PartOut) -> None:
    out.put(COUNTS, size_counts(part.rd))


def _of_run(parts: PartsIn) -> dict[str, Any]:
    exact = add_size_counts(parts.frames(COUNTS))
    table, summary = sizes_of(exact, parts.rows, parts.class_names, parts.settings)
    parts.table("sizes", table)
    return summary


SECTION = register(Section("sizes", _of_part, _of_run))
