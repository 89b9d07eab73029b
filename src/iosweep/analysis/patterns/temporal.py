"""Temporal pattern: per-rank operation signatures, I/O phases, and where they fall in training.

Signature: a rank's operations in time order, each written as ``<op> <size> <where>``, where
``where`` is ``@0``, ``@EOF`` (a zero-length read at the end of the file), ``contiguous``,
``stride <gap>`` or ``@<offset>``; repeats of the same token are run-length compressed
(``read 262.1 kB x140 contiguous``) and grouped by file in order of access.
Ranks are compared on the *shape* of their sequence: file class, op, size, kind of position and
repeat count, without file names or offsets, so file-per-process ranks reading their own files
the same way compare equal.
"""

from __future__ import annotations

import hashlib
import math
import os
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import OPS, READ, RunData
from iosweep.analysis.patterns.spatial import CONTIGUOUS, STRIDED, Spatial
from iosweep.analysis.sections import PartIn, PartOut, PartsError, PartsIn, Section, register
from iosweep.units import human_bytes

AT0, EOF, CONT, STRIDE, AT = range(5)


def _runs(rd: RunData, sp: Spatial, file_size: np.ndarray) -> dict[str, np.ndarray]:
    """Run-length encoded operations per actor in time order (actors >= 0)."""
    ops = rd.ops
    order = rd.actor_time_order()
    n = len(order)
    kind = _kinds(rd, sp, order, file_size)
    val = np.where(kind == STRIDE, sp.gap[order], 0)  # what must repeat too
    at = kind == AT
    val[at] = ops.offset[order[at]]
    del at
    # A run ends where any of these changes; each column is gathered in time order, compared
    # and freed in turn (ten million operations: 40-80 MB per gathered column).
    new = np.zeros(n, bool)
    new[:1] = True
    for col in (ops.actor, ops.file, ops.op, ops.length, kind, val):
        x = col if col is kind or col is val else col[order]
        new[1:] |= x[1:] != x[:-1]
        del x
    starts = np.flatnonzero(new)
    del new
    first = order[starts]
    file = ops.file[first]
    return {
        "actor": ops.actor[first],
        "file": file,
        "cls": rd.file_class[file],
        "op": ops.op[first],
        "length": ops.length[first],
        "kind": kind[starts],
        "val": val[starts],
        "count": np.diff(np.append(starts, n)),
    }


def _kinds(rd: RunData, sp: Spatial, order: np.ndarray, file_size: np.ndarray) -> np.ndarray:
    """Each operation's place (AT0, EOF, CONT, STRIDE or AT), in ``order``."""
    ops = rd.ops
    cat = sp.cat[order]
    kind = np.full(len(order), AT, np.int8)
    kind[cat == STRIDED] = STRIDE
    kind[cat == CONTIGUOUS] = CONT
    del cat
    off = ops.offset[order]
    kind[off == 0] = AT0
    # a zero-byte read at or past the end of the file
    eof = np.flatnonzero((ops.length[order] == 0) & (off >= 0))
    eof = eof[ops.op[order[eof]] == READ]
    eof = eof[off[eof] >= file_size[ops.file[order[eof]]]]
    kind[eof] = EOF
    return kind


def _token(op: int, length: int, kind: int, val: int, count: int) -> str:
    rep = f" x{count}" if count > 1 else ""
    where = {
        AT0: "@0",
        EOF: "@EOF",
        CONT: "contiguous",
        STRIDE: f"stride {human_bytes(val)}",
        AT: f"@{human_bytes(val)}",
    }[kind]
    return f"{OPS[op]} {human_bytes(length)}{rep} {where}"


def _shape_hash(r: dict[str, np.ndarray], sl: slice | np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=12)
    for k in ("cls", "op", "length", "kind", "count"):
        h.update(np.ascontiguousarray(r[k][sl]).astype(np.int64).tobytes())
    # Strides are part of the shape; absolute offsets are not.
    h.update(np.where(r["kind"][sl] == STRIDE, r["val"][sl], 0).astype(np.int64).tobytes())
    return h.hexdigest()


def signatures(rd: RunData, sp: Spatial, file_size: np.ndarray) -> dict[str, Any]:
    """Each rank's signature, and which ranks' sequences have the same shape (per file class
    and overall); ``file_size``: each file's size (per path code), where end of file is."""
    return signature_groups(*rank_signatures(rd, sp, file_size))


def rank_signatures(
    rd: RunData, sp: Spatial, file_size: np.ndarray
) -> tuple[dict[str, Any], dict[str, dict[int, str]]]:
    """Per rank (each rank's own): its signature, and the hash of its sequence's shape per
    scope (a file class, or ``all``)."""
    r = _runs(rd, sp, file_size)
    maxr = rd.settings.signature_max_runs
    bounds = np.flatnonzero(np.diff(r["actor"])) + 1 if len(r["actor"]) else np.empty(0, int)
    starts = np.concatenate([[0], bounds]) if len(r["actor"]) else np.empty(0, int)
    ends = np.append(starts[1:], len(r["actor"])).astype(int)
    per_rank: dict[str, Any] = {}
    shapes: dict[str, dict[int, str]] = {"all": {}}
    classes = rd.class_names
    for s, e in zip(starts, ends, strict=True):
        a = int(r["actor"][s])
        shown = slice(s, min(e, s + maxr))
        parts: list[str] = []
        cur_file = -1
        for i in range(shown.start, shown.stop):
            f = int(r["file"][i])
            tok = _token(
                int(r["op"][i]),
                int(r["length"][i]),
                int(r["kind"][i]),
                int(r["val"][i]),
                int(r["count"][i]),
            )
            if f != cur_file:
                parts.append(f"{os.path.basename(rd.paths[f]) or rd.paths[f]}: {tok}")
                cur_file = f
            else:
                parts[-1] += f", {tok}"
        more = e - shown.stop
        text = " | ".join(parts) + (f" | ... (+{more} more runs)" if more > 0 else "")
        shapes["all"][a] = _shape_hash(r, slice(s, e))
        for ci, cname in enumerate(classes):
            sel = np.flatnonzero(r["cls"][s:e] == ci) + s
            if len(sel):
                shapes.setdefault(cname, {})[a] = _shape_hash(r, sel)
        per_rank[str(a)] = {
            "signature": text,
            "runs": int(e - s),
            "ops": int(r["count"][s:e].sum()),
            "shape": shapes["all"][a],
        }
    return per_rank, shapes


def temporal_summary(
    sig: dict[str, Any], ph: pd.DataFrame, windows: pd.DataFrame
) -> dict[str, Any]:
    """The summary's temporal section: the ranks' signatures (:func:`signatures`), the
    phases (:func:`phases`: the first 100) and the run's epochs (:func:`epoch_windows`)."""
    return {
        "signatures": sig["per_rank"],
        "same_sequence": sig["same_sequence"],
        "signature_groups": sig["groups"],
        "phases": _phase_summary(ph),
        "epochs": _epochs(windows),
    }


def _epochs(windows: pd.DataFrame) -> list[dict[str, Any]]:
    """Run-wide epoch windows (earliest start, latest end over ranks), in epoch order."""
    ep = windows[windows["step"] < 0].sort_values("epoch")
    return [
        {"epoch": int(r.epoch), "start": float(r.start), "end": float(r.end)}
        for r in ep.itertuples()
    ]


def _phase_summary(ph: pd.DataFrame) -> dict[str, Any]:
    if ph.empty:
        return {"count": 0, "phases": []}
    keep = ph.head(100)
    return {
        "count": len(ph),
        "io_active_time": float(ph["duration"].sum()),
        "phases": [
            {
                k: (None if (isinstance(v, float) and math.isnan(v)) or v is pd.NA else v)
                for k, v in r.items()
            }
            for r in keep.astype(object).to_dict(orient="records")
        ],
    }


def signature_groups(per_rank: dict[str, Any], shapes: dict[str, dict[int, str]]) -> dict[str, Any]:
    """:func:`signatures` from :func:`rank_signatures` of every rank."""
    same: dict[str, Any] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for scope, by_actor in shapes.items():
        inv: dict[str, list[int]] = {}
        for a, hsh in by_actor.items():
            inv.setdefault(hsh, []).append(a)
        same[scope] = len(inv) == 1 and len(by_actor) > 1 if by_actor else None
        groups[scope] = sorted(
            (
                {
                    "ranks": sorted(v),
                    "example": per_rank[str(v[0])]["signature"] if scope == "all" else None,
                }
                for v in inv.values()
            ),
            key=lambda g: (-len(g["ranks"]), g["ranks"][0]),
        )
    return {"per_rank": per_rank, "same_sequence": same, "groups": groups}


PHASE_COLUMNS = [
    "phase",
    "start",
    "end",
    "duration",
    "ops",
    "reads",
    "writes",
    "bytes_read",
    "bytes_written",
    "ranks",
    "main_class",
    "where",
    "epoch",
]
_SUMMED = ["ops", "reads", "writes", "bytes_read", "bytes_written"]


def phases(rd: RunData, steps_windows: pd.DataFrame) -> pd.DataFrame:
    """I/O phases: operations of all ranks merged in time, split where no I/O for phase_gap_s."""
    found, ranks = phase_parts(rd)
    return phases_of(found, ranks, rd.class_names, rd.settings.phase_gap_s, steps_windows)


def phase_parts(rd: RunData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The phases of ``rd``'s operations alone (some ranks' of a run: a run's phase is one or
    more of theirs, merged by the same rule): start, end, operations, bytes, and per file
    class the bytes + 1 of each operation (``class_<i>``, which class moved the most); and
    the distinct (phase, rank) pairs."""
    ops = rd.ops
    if len(ops) == 0:
        return pd.DataFrame(columns=["start", "end", *_SUMMED]), pd.DataFrame(
            columns=["phase", "rank"]
        )
    order = rd.time_order()
    st = ops.start[order]
    en = np.maximum.accumulate(ops.end[order])
    new = np.ones(len(st), bool)
    new[1:] = st[1:] > en[:-1] + rd.settings.phase_gap_s
    starts = np.flatnonzero(new)
    del new
    n = len(starts)
    ph_start, ph_end = st[starts], np.maximum.reduceat(en, starts)
    del st, en
    # Phase of each operation in its original position: the aggregations below then read the
    # operations' own columns instead of time-ordered copies of them.
    pid = np.empty(len(order), np.int64)
    pid[order] = np.repeat(np.arange(n), np.diff(np.append(starts, len(order))))
    is_r = ops.op == READ
    ln = ops.length
    ph = pd.DataFrame(
        {
            "start": ph_start,
            "end": ph_end,
            "ops": np.bincount(pid, minlength=n),
            "reads": np.bincount(pid, weights=is_r, minlength=n).astype(np.int64),
            "writes": np.bincount(pid, weights=~is_r, minlength=n).astype(np.int64),
            "bytes_read": np.bincount(pid, weights=np.where(is_r, ln, 0), minlength=n).astype(
                np.int64
            ),
            "bytes_written": np.bincount(pid, weights=np.where(is_r, 0, ln), minlength=n).astype(
                np.int64
            ),
        }
    )
    ncls = len(rd.class_names)
    cls = rd.file_class[ops.file].astype(np.int64)
    cb = np.bincount(pid * ncls + cls, weights=ln + 1, minlength=n * ncls).reshape(n, ncls)
    for i in range(ncls):
        ph[f"class_{i}"] = cb[:, i]
    m = ops.actor >= 0
    na = int(ops.actor.max(initial=0)) + 1
    pairs = pd.unique(pid[m] * na + ops.actor[m])
    return ph, pd.DataFrame({"phase": pairs // na, "rank": pairs % na})


def phases_of(
    found: pd.DataFrame,
    ranks: pd.DataFrame,
    class_names: list[str],
    gap: float,
    steps_windows: pd.DataFrame,
) -> pd.DataFrame:
    """The run's phases from :func:`phase_parts` of every part of it, put together (``found``
    and ``ranks`` with a ``part`` column where there are several, phases numbered within
    theirs), merged where they are no more than ``gap`` apart."""
    if found.empty:
        return pd.DataFrame(columns=PHASE_COLUMNS)
    part = found["part"].to_numpy() if "part" in found else np.zeros(len(found), np.int64)
    key = pd.DataFrame({"part": part, "phase": found.groupby(part).cumcount().to_numpy()})
    order = np.argsort(found["start"].to_numpy(), kind="stable")
    found, key = found.iloc[order].reset_index(drop=True), key.iloc[order]
    en = np.maximum.accumulate(found["end"].to_numpy())
    new = np.r_[True, found["start"].to_numpy()[1:] > en[:-1] + gap]
    gid = np.cumsum(new) - 1
    g = found.groupby(gid)
    ph = g.agg(start=("start", "min"), end=("end", "max"), **{c: (c, "sum") for c in _SUMMED})
    ph.insert(0, "phase", np.arange(len(ph)))
    ph["duration"] = ph["end"] - ph["start"]
    # Ranks per phase: distinct (phase, rank) pairs, counted per phase.
    rank_part = ranks["part"].to_numpy() if "part" in ranks else np.zeros(len(ranks), np.int64)
    where = pd.MultiIndex.from_arrays([key["part"], key["phase"]])
    at = where.get_indexer(pd.MultiIndex.from_arrays([rank_part, ranks["phase"].to_numpy()]))
    rank = ranks["rank"].to_numpy(np.int64)
    na = int(rank.max(initial=0)) + 1
    pairs = pd.unique(gid[at] * na + rank)
    ph["ranks"] = np.bincount(pairs // na, minlength=len(ph))
    cb = g[[f"class_{i}" for i in range(len(class_names))]].sum().to_numpy()
    ph["main_class"] = np.array(class_names, dtype=object)[cb.argmax(axis=1)]
    where_, epoch = _locate(ph["start"].to_numpy(), ph["end"].to_numpy(), steps_windows)
    ph["where"] = where_
    ph["epoch"] = pd.array(epoch, dtype="Int64")
    return ph.reset_index(drop=True)[PHASE_COLUMNS]


def _locate(s: np.ndarray, e: np.ndarray, win: pd.DataFrame) -> tuple[list[str], list[int | None]]:
    """Describe each [s, e] relative to the run's epochs (and steps) from the manifest.

    Vectorised over phases (a long run may have thousands): epochs and steps are looked up
    with searchsorted on their start and end times.
    """
    if win.empty:
        return ["not known"] * len(s), [None] * len(s)
    ep = win[win["step"] < 0].sort_values("start")
    st = win[win["step"] >= 0].sort_values("start")
    es, ee = ep["start"].to_numpy(np.float64), ep["end"].to_numpy(np.float64)
    eid = ep["epoch"].to_numpy()
    ss = st["start"].to_numpy(np.float64)
    se = np.maximum.accumulate(st["end"].to_numpy(np.float64)) if len(st) else np.empty(0)
    sep, snum = st["epoch"].to_numpy(), st["step"].to_numpy()
    mid = (s + e) / 2
    i = np.searchsorted(es, mid, side="right") - 1
    inside = (i >= 0) & (mid <= ee[np.maximum(i, 0)]) if len(es) else np.zeros(len(s), bool)
    # Steps overlapping [s, e]: from the first that ends at or after s to the last that starts
    # at or before e.
    j_lo = np.searchsorted(se, s, side="left")
    j_hi = np.searchsorted(ss, e, side="right") - 1
    where: list[str] = []
    epochs: list[int | None] = []
    for k in range(len(s)):
        if inside[k]:
            ep_k = int(eid[i[k]])
            lo, hi = int(j_lo[k]), int(j_hi[k])
            txt = f"epoch {ep_k}"
            steps = [
                int(snum[j]) for j in (lo, hi) if 0 <= j < len(snum) and lo <= hi and sep[j] == ep_k
            ]
            if steps:
                a, b = min(steps), max(steps)
                txt += f", step {a}" if a == b else f", steps {a}-{b}"
            else:
                txt += ", between steps"
            where.append(txt)
            epochs.append(ep_k)
        elif len(es) == 0 or mid[k] < es[0]:
            where.append("before the first epoch")
            epochs.append(None)
        elif mid[k] > ee.max():
            where.append("after the last epoch")
            epochs.append(None)
        else:  # the last epoch to start before mid has ended: we are after it
            last = int(eid[i[k]])
            where.append(f"between epochs {last} and {last + 1}")
            epochs.append(None)
    return where, epochs


def epoch_windows(rd: RunData) -> pd.DataFrame:
    """Run-wide epoch and step windows (earliest start, latest end over ranks)."""
    return epoch_windows_of(rd.steps)


def epoch_windows_of(st: pd.DataFrame) -> pd.DataFrame:
    """:func:`epoch_windows` of the steps ``st`` (every rank's: epoch, step, start, end)."""
    if st.empty:
        return pd.DataFrame(columns=["epoch", "step", "start", "end"])
    w = st.groupby(["epoch", "step"], as_index=False).agg(
        start=("start", "min"), end=("end", "max")
    )
    # Epochs without a whole-epoch row (step -1) span their steps.
    have = set(w.loc[w["step"] < 0, "epoch"])
    extra = (
        w[(w["step"] >= 0) & ~w["epoch"].isin(have)]
        .groupby("epoch", as_index=False)
        .agg(start=("start", "min"), end=("end", "max"))
    )
    extra["step"] = -1
    return pd.concat([w, extra], ignore_index=True)


HEATMAP_BINS = 120


HEATMAP_COLUMNS = ["rank", "bin", "t0", "t1", "bytes_read", "bytes_written", "ops"]


def heatmap(rd: RunData, nbins: int = HEATMAP_BINS) -> pd.DataFrame:
    """Bytes read and written per rank and time bin over the run (every operation counted in
    the bin where it starts), as PyDarshan's job summary draws them; ``heatmap.parquet``."""
    ops = rd.ops
    m = ops.actor >= 0
    if not m.any():
        return pd.DataFrame(columns=HEATMAP_COLUMNS)
    edges = heatmap_edges(
        rd.run_start, rd.run_end, float(ops.start[m].min()), float(ops.end[m].max()), nbins
    )
    actors = np.unique(ops.actor[m])
    bins = heatmap_bins(ops.actor[m], ops.op[m], ops.length[m], ops.start[m], actors, edges)
    return heatmap_frame(bins, actors, edges)


def heatmap_edges(
    run_start: float, run_end: float, first: float, last: float, nbins: int = HEATMAP_BINS
) -> np.ndarray:
    """The bins' edges: the run, widened to its ranks' first and last operation."""
    lo = min(run_start, first)
    hi = max(run_end, last, lo + 1e-9)
    return np.linspace(lo, hi, nbins + 1)


def heatmap_bins(
    actor: np.ndarray,
    op: np.ndarray,
    length: np.ndarray,
    start: np.ndarray,
    actors: np.ndarray,
    edges: np.ndarray,
) -> np.ndarray:
    """Bytes read, bytes written and operations (3 x ranks x bins) of ranks' operations, by
    rank (its index in ``actors``, sorted) and the bin it starts in: sums, so the bins of
    some ranks' operations add up to the run's."""
    nbins = len(edges) - 1
    b = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, nbins - 1)
    key = np.searchsorted(actors, actor) * nbins + b
    size = len(actors) * nbins
    is_r = op == READ
    out = [
        np.bincount(key, weights=np.where(is_r, length, 0), minlength=size),
        np.bincount(key, weights=np.where(is_r, 0, length), minlength=size),
        np.bincount(key, minlength=size),
    ]
    return np.stack(out).reshape(3, len(actors), nbins)


def heatmap_frame(bins: np.ndarray, actors: np.ndarray, edges: np.ndarray) -> pd.DataFrame:
    """``heatmap.parquet`` from :func:`heatmap_bins` (of every rank)."""
    nbins = len(edges) - 1
    out = pd.DataFrame(
        {
            "rank": np.repeat(actors, nbins).astype(np.int32),
            "bin": np.tile(np.arange(nbins), len(actors)).astype(np.int32),
            "t0": np.tile(edges[:-1], len(actors)),
            "t1": np.tile(edges[1:], len(actors)),
            "bytes_read": bins[0].ravel().astype(np.int64),
            "bytes_written": bins[1].ravel().astype(np.int64),
            "ops": bins[2].ravel().astype(np.int64),
        }
    )
    return out[out["ops"] > 0].reset_index(drop=True)[HEATMAP_COLUMNS]


PHASES, PHASE_RANKS = "phases.parquet", "phase_ranks.parquet"  # a part's own phases
SIGNATURES, EOF_READS = "signatures.json", "eof_reads.parquet"


def _of_part(part: PartIn, out: PartOut) -> None:
    """The part's phases and its ranks' signatures, with the zero-byte reads taken to be at
    the end of their file as the part's ranks see it, for the run's sizes to confirm."""
    rd, size = part.rd, part.file_size
    per_rank, shapes = rank_signatures(rd, part.spatial, size) if len(rd.ops) else ({}, {})
    shapes_json = {scope: {str(a): h for a, h in by.items()} for scope, by in shapes.items()}
    out.put_json(SIGNATURES, {"per_rank": per_rank, "shapes": shapes_json})
    ops = rd.ops
    at_eof = (ops.op == READ) & (ops.length == 0) & (ops.offset >= 0) & (ops.actor >= 0)
    at_eof &= ops.offset >= size[ops.file]
    eof = pd.DataFrame({"file": ops.file[at_eof], "offset": ops.offset[at_eof]})
    out.put(EOF_READS, eof.drop_duplicates(), rd.paths)
    found, ranks = phase_parts(rd)
    out.put(PHASES, found)
    out.put(PHASE_RANKS, ranks)


def _run_signatures(parts: PartsIn) -> dict[str, Any]:
    """The ranks' signatures from the parts', once the run's file sizes confirm where each
    part took end of file to be (PartsError where they do not)."""
    files = parts.tables.files
    if not parts.tables.dxt_available:  # no operations: nothing to sign
        return {"per_rank": {}, "same_sequence": {}, "groups": {}}
    size = np.zeros(max(len(parts.paths), 1), np.int64)
    size[files["file"].to_numpy()] = files["size"].to_numpy()
    for eof in parts.frames(EOF_READS, coded=True):
        early = eof[size[eof["file"].to_numpy()] > eof["offset"].to_numpy()]
        if len(early):
            raise PartsError(
                f"a zero-byte read of {parts.paths[int(early['file'].iloc[0])]} at "
                f"{int(early['offset'].iloc[0])} is at the end of the file as one part's "
                "ranks see it, not as the run's do: analyse the run whole"
            )
    per_rank: dict[str, Any] = {}
    shapes: dict[str, dict[int, str]] = {}
    for signed in parts.values(SIGNATURES):
        per_rank |= signed["per_rank"]
        for scope, by in signed["shapes"].items():
            shapes.setdefault(scope, {}).update({int(a): h for a, h in by.items()})
    return signature_groups(per_rank, shapes)


def _with_part(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The parts' frames as one, each row with its part's number (``part``)."""
    return pd.concat([f.assign(part=i) for i, f in enumerate(frames)], ignore_index=True)


def _of_run(parts: PartsIn) -> dict[str, Any]:
    """The summary; the table ``phases``."""
    found = _with_part(parts.frames(PHASES))
    ranks = _with_part(parts.frames(PHASE_RANKS))
    ph = phases_of(found, ranks, parts.class_names, parts.settings.phase_gap_s, parts.windows)
    parts.table("phases", ph)
    return temporal_summary(_run_signatures(parts), ph, parts.windows)


SECTION = register(Section("temporal", _of_part, _of_run))
