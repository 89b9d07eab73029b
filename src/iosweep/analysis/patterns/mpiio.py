"""The MPI-IO layer: time per rank in MPI-IO calls, collective against independent
operations, and the gap between MPI-IO and POSIX time.

An MPI-IO write may spend most of its time above POSIX (two-phase collective buffering,
waiting for other ranks, locks): in Darshan's mpi-io-test log the POSIX writes take 0.03 s
a rank and the MPI-IO writes 2.7 to 7.6 s, which is what the application measured. The
bytes are POSIX's too, so this layer is never added to the volume figures.

Per-rank times come from DXT_MPIIO segments where they hold every call the counters
counted (the sum of each rank's call durations), else from MPI-IO counter records: per rank,
and those Darshan reduced over all ranks handed to the ranks as shared.py does for POSIX.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import READ, WRITE, MpiioLayer, RunData
from iosweep.analysis.shared import FEW_RANKS, reduced, spread_records, variance_movers


def analyze_mpiio(
    rd: RunData, ranks: pd.DataFrame, file_rank: pd.DataFrame
) -> dict[str, Any] | None:
    """The ``mpiio`` section of a run's summary (None when the run has no MPI-IO).

    ``ranks`` lists the run's ranks; ``file_rank`` has each rank's POSIX seconds per file.
    """
    return mpiio_of(rd.mpiio, rd.n_ranks, ranks, file_rank)


def mpiio_of(
    layer: MpiioLayer | None, n_ranks: int, ranks: pd.DataFrame, file_rank: pd.DataFrame
) -> dict[str, Any] | None:
    """:func:`analyze_mpiio` of the run's MPI-IO layer (its ranks' operations and records
    put together, where it was read in parts)."""
    if layer is None or (layer.ops.empty and layer.records.empty):
        return None
    out: dict[str, Any] = {
        "source": "dxt" if any(_use_dxt(layer, d, n) for d, n in _DIRECTIONS) else "counters"
    }
    files = np.union1d(layer.ops["file"], layer.records["file"])
    for d, name in _DIRECTIONS:
        times = _rank_times(layer, d, name, n_ranks)
        posix = _posix_times(ranks, file_rank, files, name)
        out[name] = {
            "ops": _ops(layer, d, name),
            "bytes": _bytes(layer, d),
            "collective": int(layer.records[f"collective_{name}s"].clip(lower=0).sum()),
            "nonblocking": int(layer.records[f"nonblocking_{name}s"].clip(lower=0).sum()),
            "time": times,
            "rank_bytes": _rank_bytes(layer, d, name, n_ranks),
            "posix_time": _stats(posix) if posix is not None else None,
            # how much longer a rank spends in MPI-IO than in the POSIX calls under it
            "gap_mean": (times["mean"] - float(posix.mean()))
            if times and posix is not None and len(posix)
            else None,
        }
        ops = out[name]["ops"]
        out[name]["independent"] = max(ops - out[name]["collective"], 0)
    seen = np.union1d(layer.ops["rank"][layer.ops["rank"] >= 0], _ranked(layer)["actor"])
    # a reduced record is every rank's
    out["ranks"] = n_ranks if reduced(layer.records).any() else len(seen)
    return out


_DIRECTIONS = ((READ, "read"), (WRITE, "write"))


def _use_dxt(layer: MpiioLayer, d: int, name: str) -> bool:
    """Whether DXT holds every ``name`` call the counters counted: DXT's buffer fills up
    (a partial log's trace held 65,529 of 1,000,000 reads, a thirteenth of their time)."""
    traced = int((layer.ops["op"] == d).sum())
    return traced > 0 and traced >= int(layer.records[f"{name}s"].sum())


def _ranked(layer: MpiioLayer) -> pd.DataFrame:
    return layer.records[layer.records["actor"] >= 0]


def _ops(layer: MpiioLayer, d: int, name: str) -> int:
    counted = int(layer.records[f"{name}s"].sum())
    return counted or int((layer.ops["op"] == d).sum())


def _bytes(layer: MpiioLayer, d: int) -> int:
    counted = int(layer.records["bytes_read" if d == READ else "bytes_written"].sum())
    return counted or int(layer.ops.loc[layer.ops["op"] == d, "length"].sum())


def _rank_times(layer: MpiioLayer, d: int, name: str, n_ranks: int) -> dict[str, float] | None:
    """min / mean / max over ranks of the seconds each spent in MPI-IO ``name`` calls."""
    ops = layer.ops[(layer.ops["op"] == d) & (layer.ops["rank"] >= 0)]
    if len(ops) and _use_dxt(layer, d, name):
        dur = (ops["end"] - ops["start"]).clip(lower=0)
        return _stats(dur.groupby(ops["rank"]).sum().to_numpy())
    # a rank's time is its sum over files, so mean <= max always
    rows = _rank_rows(layer.records[layer.records[f"{name}s"] > 0], n_ranks)
    rows = rows[rows[f"{name}s"] > 0]
    if not len(rows):
        return None
    return _stats(rows.groupby("actor")[f"{name}_time"].sum().to_numpy())


def _rank_rows(recs: pd.DataFrame, n_ranks: int) -> pd.DataFrame:
    """The per-rank records of ``recs``, and those Darshan reduced over all ranks handed to
    each rank (shared.spread_records)."""
    red = reduced(recs)
    parts = [recs[~red & (recs["actor"] >= 0)]]
    if red.any():
        parts.append(spread_records(recs[red], n_ranks))
    return pd.concat(parts, ignore_index=True)


def _rank_bytes(layer: MpiioLayer, d: int, name: str, n_ranks: int) -> dict[str, float] | None:
    """min / mean / max over ranks of the bytes each asked of MPI-IO ``name`` calls: as
    :func:`_rank_times`, and None where a reduced record's bytes went to a few ranks (which
    ranks, Darshan does not record: :func:`~iosweep.analysis.shared.variance_movers`)."""
    col = "bytes_read" if d == READ else "bytes_written"
    ops = layer.ops[(layer.ops["op"] == d) & (layer.ops["rank"] >= 0)]
    if len(ops) and _use_dxt(layer, d, name):
        return _stats(ops["length"].groupby(ops["rank"]).sum().to_numpy())
    recs = layer.records[layer.records[col] > 0]
    red = reduced(recs)
    if red.any():
        movers, left = variance_movers(recs[red], n_ranks)
        if (left & ~(movers >= FEW_RANKS * n_ranks)).any():  # (NaN: not known either)
            return None
    rows = _rank_rows(recs, n_ranks)
    if not len(rows):
        return None
    per_rank = rows.groupby("actor")[col].sum()
    if red.any():  # ranks that asked nothing count (a reduced record is every rank's)
        per_rank = per_rank.reindex(range(n_ranks), fill_value=0)
    return _stats(per_rank.to_numpy())


AGGREGATOR_BYTES = 0.99  # the fewest ranks that move this share of the bytes ...
AGGREGATOR_RANKS = FEW_RANKS  # ... are MPI-IO's aggregators under this share of the ranks


def aggregator_ranks(mpiio: dict[str, Any] | None, ranks: pd.DataFrame) -> list[int] | None:
    """The ranks that do the file I/O for the others under collective MPI-IO (collective
    buffering): the fewest ranks moving 99% of the bytes, when they are under half the
    ranks; None when the job has no collective MPI-IO (``mpiio``: its summary) or most
    ranks move their own data."""
    m = mpiio or {}
    collective = sum(int((m.get(d) or {}).get("collective") or 0) for d in ("read", "write"))
    r = ranks
    if not collective or len(r) < 2:
        return None
    b = (r["bytes_read"] + r["bytes_written"]).sort_values(ascending=False, kind="stable")
    if b.sum() <= 0:
        return None
    k = int(np.searchsorted((b.cumsum() / b.sum()).to_numpy(), AGGREGATOR_BYTES)) + 1
    if k >= AGGREGATOR_RANKS * len(r):
        return None
    return sorted(int(x) for x in r.loc[b.index[:k], "rank"])


def _posix_times(
    ranks: pd.DataFrame, file_rank: pd.DataFrame, files: np.ndarray, name: str
) -> np.ndarray | None:
    """Each rank's seconds in POSIX ``name`` calls on the files MPI-IO opened: the calls
    under the MPI-IO ones (a rank's other files would make the gap negative)."""
    col = f"{name}_time"
    if not len(ranks) or col not in file_rank:
        return None
    fr = file_rank[(file_rank["actor"] >= 0) & file_rank["file"].isin(files)]
    per_rank = fr.groupby("actor")[col].sum()
    return per_rank.reindex(ranks["rank"].to_numpy(), fill_value=0.0).to_numpy(np.float64)


def _stats(v: np.ndarray) -> dict[str, float]:
    v = np.asarray(v, np.float64)
    return {"min": float(v.min()), "mean": float(v.mean()), "max": float(v.max())}
