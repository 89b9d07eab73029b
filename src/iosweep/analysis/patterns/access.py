"""Access strategy per file class and direction, with the evidence that decided it.

Each file first gets a category from who touched it (``files.parquet``, ``read_strategy`` /
``write_strategy``): ``exclusive`` (one rank), ``shared-whole`` (2+ ranks, each covering the
whole file), ``shared-disjoint`` (2+ ranks, bytes touched by 2+ ranks at most
``disjoint_overlap_max`` of the bytes touched), ``shared-overlapping``, or ``shared-unknown``
(2+ ranks, no offsets: counters only). A class then gets the category of the files that carry
``strategy_dominance`` of its bytes (else ``mixed``), spelled out for readers:

=====================  ==========================================================================
strategy               meaning
=====================  ==========================================================================
single-rank            one rank does all of this class's I/O in this direction
file-per-process       unshared files, at most ``fpp_max_files_per_rank`` per rank
partitioned            unshared files, more per rank: the file set is split between ranks
shared-whole           shared files, every rank reads (or writes) each whole
shared-disjoint        shared files, ranks on disjoint parts
shared-overlapping     shared files, ranks on overlapping parts
shared                 shared files, parts unknown (no offsets traced)
mixed                  no category carries ``strategy_dominance`` of the bytes
=====================  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import WHO
from iosweep.analysis.patterns.file_ranks import (
    ClassRows,
    FileRankFacts,
    StrategyRows,
    ValueCounts,
    class_stats,
)
from iosweep.analysis.patterns.spatial import CATEGORIES
from iosweep.analysis.settings import AnalysisSettings

_NAMES = {
    "exclusive": "file-per-process",  # refined to partitioned below
    "shared-whole": "shared-whole",
    "shared-disjoint": "shared-disjoint",
    "shared-overlapping": "shared-overlapping",
    "shared-unknown": "shared",
}


def _stats(v: pd.Series | np.ndarray) -> dict[str, float] | None:
    v = np.asarray(v, dtype=np.float64)
    if len(v) == 0:
        return None
    return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())}


def busiest(f: pd.DataFrame, col_bytes: str, n: int) -> pd.DataFrame:
    """The ``n`` files of most ``col_bytes``, ties by path (not by the order a reader happened
    to meet the files in). Only the rows that can be among them are sorted: a sort of every
    file's row copied the run's per-file frame (1.28 M files: the put-together run's peak)."""
    b = np.nan_to_num(f[col_bytes].to_numpy(np.float64), nan=-np.inf)  # unknowns sort last
    if len(b) > n and (least := np.partition(b, len(b) - n)[len(b) - n]) > -np.inf:
        f = f[b >= least]  # the n-th most, and its ties
    return f.sort_values([col_bytes, "path"], ascending=[False, True]).head(n)


def class_strategy(
    files: pd.DataFrame,
    rows: StrategyRows | None,
    cls: str,
    direction: str,
    n_ranks: int,
    s: AnalysisSettings,
) -> dict[str, Any] | None:
    """Strategy and evidence for the files of class ``cls`` in ``direction`` (read|write);
    ``rows``: the class's (rank, file) rows that way (:mod:`.file_ranks`)."""
    col_ops = "reads" if direction == "read" else "writes"
    col_bytes = f"bytes_{'read' if direction == 'read' else 'written'}"
    who = WHO[direction]
    f = files.loc[
        (files["class"] == cls) & (files[f"{direction}_strategy"] != ""),
        [
            "file",
            "path",
            "size",
            "coverage_source",
            col_ops,
            col_bytes,
            f"n_{who}",
            f"whole_{who}",
            f"{direction}_strategy",
            f"{direction}_union",
            f"{direction}_shared",
            f"{direction}_overlap",
        ],
    ]
    if f.empty or rows is None:
        return None
    per_rank = class_stats(rows)
    weights = f[col_bytes].to_numpy(np.float64)
    if weights.sum() == 0:
        weights = np.ones(len(f))  # zero-byte accesses: weigh files equally
    by_cat = pd.Series(weights).groupby(f[f"{direction}_strategy"].to_numpy()).sum() / weights.sum()
    ranks_per_file = f[f"n_{WHO[direction]}"]
    union = f[f"{direction}_union"].sum()
    shared = f[f"{direction}_shared"].sum()
    n_all = int(
        (
            (f[f"n_{WHO[direction]}"] >= max(n_ranks, 2))
            & (f[f"{direction}_strategy"] == "shared-whole")
        ).sum()
    )
    evidence: dict[str, Any] = {
        "files": len(f),
        "ranks": per_rank["ranks"],
        "ranks_of_run": n_ranks,
        "rank_list": per_rank["rank_list"],
        "bytes": int(f[col_bytes].sum()),
        "ops": int(f[col_ops].sum()),
        "ranks_per_file": _stats(ranks_per_file),
        "files_per_rank": per_rank["files_per_rank"],
        "bytes_per_rank_per_file": per_rank["bytes_per_rank_per_file"],
        "bytes_per_rank": per_rank["bytes_per_rank"],
        "whole_file_share": per_rank["whole_file_share"],
        "files_whole_by_every_rank": n_all,
        "offset_union_bytes": int(union),
        "offset_shared_bytes": int(shared),
        "offset_overlap": float(shared / union) if union > 0 else None,
        "offsets_known": bool((f["coverage_source"] == "segments").all()),
        "category_share": {k: round(float(v), 6) for k, v in by_cat.items()},
        "examples": [
            {
                "path": r.path,
                "size": int(r.size),
                "ranks": int(getattr(r, f"n_{WHO[direction]}")),
                "bytes": int(getattr(r, col_bytes)),
                "whole_by": int(getattr(r, f"whole_{WHO[direction]}")),
                "overlap": round(float(getattr(r, f"{direction}_overlap")), 6),
                "category": getattr(r, f"{direction}_strategy"),
            }
            for r in busiest(f, col_bytes, 5).itertuples()
        ],
    }
    if per_rank["ranks"] == 1:
        strategy = "single-rank"
    else:
        top = str(by_cat.idxmax())
        if by_cat[top] < s.strategy_dominance:
            strategy = "mixed"
        elif top == "exclusive":
            most = rows.exclusive_per_rank.max()
            strategy = "file-per-process" if most <= s.fpp_max_files_per_rank else "partitioned"
        else:
            strategy = _NAMES[top]
    return {"strategy": strategy, "evidence": evidence}


PAIR_COLUMNS = ["epoch", "file", "actor", "bytes"]


def epoch_read_pairs(rd, op_epoch: np.ndarray, cls: int) -> pd.DataFrame:
    """Class ``cls``'s reads inside epochs, per (epoch, file, rank): the bytes the rank read.
    Each rank's own: the pairs of some ranks are theirs in the whole run."""
    from iosweep.analysis.data import READ

    ops = rd.ops
    m = (ops.op == READ) & (ops.actor >= 0) & (op_epoch >= 0) & (rd.file_class[ops.file] == cls)
    if not m.any():
        return pd.DataFrame({c: np.empty(0, np.int64) for c in PAIR_COLUMNS})
    nf = max(len(rd.paths), 1)
    na = int(ops.actor.max()) + 1
    ef = op_epoch[m].astype(np.int64) * nf + ops.file[m]  # (epoch, file)
    pair, inv = np.unique(ef * na + ops.actor[m], return_inverse=True)
    pair_ef = pair // na
    return pd.DataFrame(
        {
            "epoch": pair_ef // nf,
            "file": pair_ef % nf,
            "actor": pair % na,
            "bytes": np.bincount(inv, weights=ops.length[m]),
        }
    )


def per_epoch_of(pairs: pd.DataFrame) -> dict[str, Any] | None:
    """How the ranks share a class's files within each epoch, and how that moves between
    epochs, from its :func:`epoch_read_pairs` (of every rank): None without any.

    A sampler that gives each rank a disjoint part of the files, and another part every
    epoch, makes every file read by one rank per epoch but by several over the run: that is
    a partition reshuffled each epoch, not shared files and not redundant reads."""
    return epoch_sharing(pairs, np.unique(pairs["epoch"])).summary()


@dataclass
class EpochSharing:
    """A class's sharing of files within epochs, over some of its files (all, or a pass
    over them: the sharing of disjoint sets of files adds up with ``+``)."""

    epochs: np.ndarray  # the run's epochs with reads of the class, sorted
    files: np.ndarray  # per epoch: files read in it
    shared: np.ndarray  # per epoch: files read in it by more than one rank
    max_readers: int
    redundant_bytes: int  # bytes read of a file in an epoch beyond its busiest reader's
    both: int  # files read by one rank in two consecutive epochs ...
    moved: int  # ... whose rank changed

    def __add__(self, o: EpochSharing) -> EpochSharing:
        return EpochSharing(
            self.epochs,
            self.files + o.files,
            self.shared + o.shared,
            max(self.max_readers, o.max_readers),
            self.redundant_bytes + o.redundant_bytes,
            self.both + o.both,
            self.moved + o.moved,
        )

    def summary(self) -> dict[str, Any] | None:
        """What :func:`per_epoch_of` says (None without reads in epochs)."""
        n = int(self.files.sum())
        if not n:
            return None
        return {
            "epochs": len(self.epochs),
            "files_per_epoch": [int(c) for c in self.files],
            "shared_in_epoch_share": float(self.shared.sum() / n),
            "max_readers_in_epoch": self.max_readers,
            "redundant_bytes_in_epochs": self.redundant_bytes,
            "reader_changed_share": self.moved / self.both if self.both else None,
        }


def epoch_sharing(pairs: pd.DataFrame, epochs: np.ndarray) -> EpochSharing:
    """The :class:`EpochSharing` of a class's read pairs (every rank's of its files);
    ``epochs``: the run's epochs with reads of the class (consecutive means in this list)."""
    epochs = np.asarray(epochs, np.int64)
    none = np.zeros(len(epochs), np.int64)
    if pairs.empty:
        return EpochSharing(epochs, none, none.copy(), 0, 0, 0, 0)
    nf = int(pairs["file"].max()) + 1
    pair_ef = pairs["epoch"].to_numpy(np.int64) * nf + pairs["file"].to_numpy(np.int64)
    pair_bytes = pairs["bytes"].to_numpy(np.float64)
    ef_u, ef_inv = np.unique(pair_ef, return_inverse=True)
    readers = np.bincount(ef_inv)
    total = np.bincount(ef_inv, weights=pair_bytes)
    top = np.zeros(len(ef_u))
    np.maximum.at(top, ef_inv, pair_bytes)
    at = np.searchsorted(epochs, ef_u // nf)
    shared = readers > 1
    # between consecutive epochs: the files read by one rank in both, whose rank changed
    both, moved = _reader_changes(
        epochs, ef_u, ef_inv, pairs["actor"].to_numpy(np.int64), ~shared, nf
    )
    return EpochSharing(
        epochs,
        np.bincount(at, minlength=len(epochs)),
        np.bincount(at, weights=shared, minlength=len(epochs)).astype(np.int64),
        int(readers.max()),
        int((total - top)[shared].sum()),
        both,
        moved,
    )


def _reader_changes(
    epochs: np.ndarray,
    ef_u: np.ndarray,
    ef_inv: np.ndarray,
    actor: np.ndarray,
    one: np.ndarray,
    nf: int,
) -> tuple[int, int]:
    """Of the files read by one rank in an epoch and by one rank in the next of ``epochs``:
    how many such (file, epoch), and how many of them changed rank. ``ef_u``: the sorted
    (epoch, file) keys of the reads, ``ef_inv`` each read's key, ``actor`` its rank, ``one``
    whether a key had one reader."""
    if not len(epochs):
        return 0, 0
    reader = np.empty(len(ef_u), np.int64)
    reader[ef_inv] = actor  # (where one rank read it in the epoch, that rank)
    ef1, reader = ef_u[one], reader[one]
    epoch = ef1 // nf
    at = np.searchsorted(epochs, epoch)
    # (an epoch not among ``epochs`` has no next one)
    later = (at + 1 < len(epochs)) & (epochs[np.minimum(at, len(epochs) - 1)] == epoch)
    key = epochs[np.minimum(at + 1, len(epochs) - 1)] * nf + ef1 % nf
    j = np.minimum(np.searchsorted(ef1, key), max(len(ef1) - 1, 0))
    found = later & (ef1[j] == key) if len(ef1) else later
    return int(found.sum()), int((reader[found] != reader[j[found]]).sum())


def epoch_strategy(
    run_strategy: str | None, pe: dict[str, Any] | None, s: AnalysisSettings
) -> str | None:
    """The class's read strategy once the epochs are known: a partition (reshuffled or not)
    when every file has one reader per epoch; the run-wide strategy otherwise."""
    if not pe or run_strategy in (None, "single-rank"):
        return run_strategy
    if pe["shared_in_epoch_share"] > s.disjoint_overlap_max:
        return run_strategy
    moved = pe["reader_changed_share"]
    if pe["epochs"] >= 2 and moved is not None and moved > 0:
        return "partitioned-reshuffled"
    return run_strategy if run_strategy in ("file-per-process", "partitioned") else "partitioned"


def classes_summary(
    class_names: list[str],
    n_ranks: int,
    s: AnalysisSettings,
    files: pd.DataFrame,
    facts: FileRankFacts,
    per_epoch: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Per file class: its files, volume, ranks, access strategy (with the sharing within
    epochs, ``per_epoch``: :func:`per_epoch_of` per class) and spatial patterns; ``facts``:
    what its (rank, file) rows give (:mod:`.file_ranks`)."""
    out = {}
    for ci, cname in enumerate(class_names):
        f = files[files["class"] == cname]
        if f.empty:
            continue
        sz = f["size"].to_numpy()
        c = facts.classes.get(ci) or _no_rows()
        cat = c.ops_by_category
        out[cname] = {
            "files": len(f),
            "size_total": int(sz.sum()),
            "size_min": int(sz.min()),
            "size_median": float(np.median(sz)),
            "size_max": int(sz.max()),
            "bytes_read": int(f["bytes_read"].sum()),
            "bytes_written": int(f["bytes_written"].sum()),
            "reads": int(f["reads"].sum()),
            "writes": int(f["writes"].sum()),
            "ranks": len(c.ranks),
            "readers": sorted(c.readers)[:1024],
            "writers": sorted(c.writers)[:1024],
            "access": _access(files, c, cname, n_ranks, s, per_epoch.get(cname)),
            "per_epoch": per_epoch.get(cname),
            "spatial": {
                "share_by_category": {
                    k: (float(cat[i] / cat.sum()) if cat.sum() else None)
                    for i, k in enumerate(CATEGORIES)
                },
                "patterns": {k: int(v) for k, v in c.patterns.items()},
                "whole_file_read_pairs": c.whole_read_pairs,
                "read_pairs": c.read_pairs,
                "read_coverage_frac_median": c.read_coverage_frac.median(),
            },
        }
    return out


def _no_rows() -> ClassRows:
    """A class no rank's row has (its files moved by unattributed processes only)."""
    empty = pd.Series(dtype=np.int64)
    return ClassRows(
        set(), set(), set(), np.zeros(len(CATEGORIES), np.int64), empty, 0, 0, ValueCounts(), {}
    )


def _access(
    files, c: ClassRows, cname: str, n_ranks: int, s: AnalysisSettings, pe: dict[str, Any] | None
) -> dict[str, Any]:
    """The class's strategy per direction; reads judged within epochs where they can be."""
    out = {
        d: class_strategy(files, c.strategy.get(d), cname, d, n_ranks, s) for d in ("read", "write")
    }
    read = out["read"]
    if read is not None:
        read["run_strategy"] = read["strategy"]
        read["strategy"] = epoch_strategy(read["strategy"], pe, s)
    return out


def access_summary(classes: dict[str, Any]) -> dict[str, dict[str, str | None]]:
    """Each class's strategy per direction (of :func:`classes_summary`)."""
    return {
        c: {
            d: (v["access"][d]["strategy"] if v["access"].get(d) else None)
            for d in ("read", "write")
        }
        for c, v in classes.items()
    }
