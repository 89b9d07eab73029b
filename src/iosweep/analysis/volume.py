"""Volume and speed: the (rank x file), per-file, per-rank and per-node tables.

Figures merge the two sources a tracer may give: DXT segments (every operation) and Darshan
counters (totals per file and process, also for modules DXT does not trace, such as STDIO).
Where both exist for a (rank, file) the larger value is kept, so a truncated side never hides
I/O the other side saw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from iosweep.analysis import intervals
from iosweep.analysis.data import READ, WHO, WRITE, RunData
from iosweep.analysis.spatial import CATEGORIES, Spatial, fractions
from iosweep.trace.schema import SIZE_BINS

# Per (rank, file) metrics that add up over operations, processes and files, in the column
# order of file_ranks.parquet and ranks.parquet.
SUMMED_METRICS = (
    "reads",
    "writes",
    "bytes_read",
    "bytes_written",
    "read_time",
    "write_time",
    "opens",
    "stats",
    "seeks",
    "fsyncs",
    "meta_time",
)


@dataclass
class Tables:
    file_rank: pd.DataFrame  # one row per (actor, file), actor -1 = unattributed
    files: pd.DataFrame  # one row per file
    ranks: pd.DataFrame  # one row per actor (>= 0)
    nodes: pd.DataFrame  # one row per host
    dxt_available: bool
    completeness: float | None  # traced POSIX ops / counted POSIX ops


def build_tables(rd: RunData, sp: Spatial) -> Tables:
    """The (rank, file), files, ranks and nodes tables of a run, from its segments (reduced
    per stream in ``sp``'s order) and counters."""
    ops = rd.ops
    nf = max(len(rd.paths), 1)
    seg = _segment_streams(rd, sp)
    ctr, ctr_posix_ops = _counter_streams(rd, nf)
    fr, has_seg = _merge_streams(rd, seg, ctr, nf)
    _coverage_and_pattern(rd, fr, has_seg)
    completeness = _completeness(rd, ctr_posix_ops)
    files = _files_table(rd, fr, ops)
    ranks = _ranks_table(rd, fr, ops)
    nodes = _nodes_table(rd, fr, ranks, ops)
    keep = _FILE_RANK_COLUMNS + [c for c in fr.columns if c.startswith("ctr_size_")]
    return Tables(fr[keep], files, ranks, nodes, len(ops) > 0, completeness)


_FILE_RANK_COLUMNS = [
    "actor",
    "file",
    "class",
    *SUMMED_METRICS,
    "file_size",
    "extent",
    "read_coverage",
    "write_coverage",
    "read_coverage_frac",
    "read_whole",
    "write_whole",
    "coverage_source",
    "pattern",
    *[f"frac_{c}" for c in CATEGORIES],
    *[f"ops_{c}" for c in CATEGORIES],
    "first_io",
    "last_io",
    "eof_at",
    "seg_ops",
    "ctr_ops",
    "source",
]


def _segment_streams(rd: RunData, sp: Spatial) -> pd.DataFrame:
    """Segments per (actor, file), reduced in stream order (actor, file, op, time): counts,
    bytes, times, extent, end-of-file marks, spatial categories and byte coverage."""
    ops = rd.ops
    order, ks = sp.order, sp.key
    nops = len(order)
    af_s = ks >> 1  # stream key = ((actor + 1) * nf + file) * 2 + op
    new = np.ones(nops, bool)
    new[1:] = af_s[1:] != af_s[:-1]
    starts = np.flatnonzero(new)
    n = len(starts)
    idx = np.cumsum(new) - 1
    del new
    op_s = ops.op[order]
    is_r = op_s == READ
    ln = ops.length[order]
    st = ops.start[order]
    en = ops.end[order]
    off = ops.offset[order]

    def red(ufunc, x: np.ndarray, empty_dtype) -> np.ndarray:
        return ufunc.reduceat(x, starts) if n else np.empty(0, empty_dtype)

    dur = en - st
    seg = pd.DataFrame(
        {
            "key": af_s[starts],
            "seg_reads": red(np.add, is_r.astype(np.int64), np.int64),
            "seg_writes": red(np.add, (~is_r).astype(np.int64), np.int64),
            "seg_bytes_read": red(np.add, np.where(is_r, ln, 0), np.int64),
            "seg_bytes_written": red(np.add, np.where(is_r, 0, ln), np.int64),
            "seg_read_time": red(np.add, np.where(is_r, dur, 0.0), np.float64),
            "seg_write_time": red(np.add, np.where(is_r, 0.0, dur), np.float64),
            "first_io": red(np.minimum, st, np.float64),
            "last_io": red(np.maximum, en, np.float64),
        }
    )
    del dur, st, en
    known = off >= 0
    seg["seg_extent"] = red(np.maximum, np.where(known, off + ln, -1), np.int64)
    # Zero-length reads mark where a rank met end of file: the file's size at that time.
    seg["eof_at"] = red(np.maximum, np.where(is_r & (ln == 0) & known, off, -1), np.int64)
    cats = np.bincount(idx * len(CATEGORIES) + sp.cat[order], minlength=n * len(CATEGORIES))
    cats = cats.reshape(n, len(CATEGORIES))
    for i, c in enumerate(CATEGORIES):
        seg[f"ops_{c}"] = cats[:, i]
    del cats, is_r, op_s
    # Offset coverage per stream (actor, file, direction): bytes touched at least once. The
    # merged byte ranges also serve the sharing between ranks and the per-node figures.
    new_stream = np.ones(nops, bool)
    new_stream[1:] = ks[1:] != ks[:-1]
    sid = np.cumsum(new_stream) - 1
    skeys = ks[new_stream]
    del new_stream
    ms, mlo, mhi = intervals.merge(sid[known], off[known], (off + ln)[known])
    del sid, known, off, ln
    mk = skeys[ms]
    rd.cache["byte_spans"] = (mk, mlo, mhi)
    m_af = np.searchsorted(seg["key"].to_numpy(), mk >> 1)
    m_len = (mhi - mlo).astype(np.float64)
    rmask = (mk & 1) == READ
    seg["seg_read_coverage"] = np.bincount(m_af[rmask], weights=m_len[rmask], minlength=n).astype(
        np.int64
    )
    seg["seg_write_coverage"] = np.bincount(
        m_af[~rmask], weights=m_len[~rmask], minlength=n
    ).astype(np.int64)
    del m_af, m_len, rmask, idx

    return seg


def _counter_streams(rd: RunData, nf: int) -> tuple[pd.DataFrame, int]:
    """Counters per (actor, file) (columns ``ctr_*``), and the POSIX reads + writes counted."""
    c = rd.counters
    if len(c):
        c = c.assign(key=(c["actor"].astype(np.int64) + 1) * nf + c["file"])
        agg = {
            k: "sum"
            for k in [
                *SUMMED_METRICS,
                *(f"size_{d}_{b}" for d in ("read", "write") for b in SIZE_BINS),
            ]
        }
        agg |= {
            "max_byte_read": "max",
            "max_byte_written": "max",
            "open_start": "min",
            "close_end": "max",
        }
        ctr = c.groupby("key", sort=False).agg(agg).reset_index()
        posix = rd.modules.index("POSIX") if "POSIX" in rd.modules else -2
        ctr_posix_ops = int(
            (c.loc[c["module"] == posix, "reads"] + c.loc[c["module"] == posix, "writes"]).sum()
        )
        ctr = ctr.rename(columns={k: f"ctr_{k}" for k in ctr.columns if k != "key"})
    else:
        ctr = pd.DataFrame({"key": np.empty(0, np.int64)})
        ctr_posix_ops = 0

    return ctr, ctr_posix_ops


def _merge_streams(
    rd: RunData, seg: pd.DataFrame, ctr: pd.DataFrame, nf: int
) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per (actor, file) from segments and counters, the larger of the two per
    metric; also whether each row has segments."""
    fr = seg.merge(ctr, on="key", how="outer")
    fr["actor"] = (fr["key"] // nf - 1).astype(np.int32)
    fr["file"] = (fr["key"] % nf).astype(np.int32)
    fr = fr.drop(columns="key").sort_values(["actor", "file"]).reset_index(drop=True)
    has_seg = fr["seg_reads"].notna().to_numpy() if "seg_reads" in fr else np.zeros(len(fr), bool)
    has_ctr = fr["ctr_reads"].notna().to_numpy() if "ctr_reads" in fr else np.zeros(len(fr), bool)
    fr["source"] = np.where(has_seg & has_ctr, "both", np.where(has_seg, "segments", "counters"))

    col = _column_getter(fr)
    for m in ("reads", "writes", "bytes_read", "bytes_written"):
        fr[m] = np.maximum(col(f"seg_{m}"), col(f"ctr_{m}")).astype(np.int64)
    for m in ("read_time", "write_time"):
        fr[m] = np.maximum(col(f"seg_{m}", 0.0), col(f"ctr_{m}", 0.0))
    for m in ("opens", "stats", "seeks", "fsyncs"):
        fr[m] = col(f"ctr_{m}").astype(np.int64)
    fr["meta_time"] = col("ctr_meta_time", 0.0)
    fr["class"] = rd.file_class[fr["file"].to_numpy()] if len(fr) else np.empty(0, np.int8)

    return fr, has_seg


def _column_getter(fr: pd.DataFrame):
    """``col(name, fill)``: a column of ``fr`` with nulls filled; all ``fill`` if it is absent."""

    def col(name: str, fill=0) -> np.ndarray:
        return fr[name].fillna(fill).to_numpy() if name in fr else np.full(len(fr), fill)

    return col


def _coverage_and_pattern(rd: RunData, fr: pd.DataFrame, has_seg: np.ndarray) -> None:
    """File sizes, byte coverage, whole-file flags and the spatial pattern of each row."""
    col = _column_getter(fr)
    # File size: the furthest byte any rank touched, by segment or by counter (+1: Darshan's
    # MAX_BYTE is the last byte offset).
    ext = np.maximum.reduce(
        [
            col("seg_extent", -1),
            np.where(col("ctr_bytes_read") > 0, col("ctr_max_byte_read", -1) + 1, -1),
            np.where(col("ctr_bytes_written") > 0, col("ctr_max_byte_written", -1) + 1, -1),
        ]
    ).astype(np.int64)
    fr["extent"] = ext
    size = pd.Series(ext).groupby(fr["file"].to_numpy()).max()
    fr["file_size"] = (
        size.reindex(fr["file"].to_numpy()).to_numpy() if len(fr) else np.empty(0, np.int64)
    )
    fr["file_size"] = fr["file_size"].clip(lower=0).astype(np.int64)
    # Coverage: exact from segments; from counters only an upper bound (bytes, furthest byte).
    fr["read_coverage"] = np.where(
        has_seg,
        col("seg_read_coverage"),
        np.minimum(
            col("ctr_bytes_read"),
            np.where(col("ctr_bytes_read") > 0, col("ctr_max_byte_read", -1) + 1, 0),
        ),
    ).astype(np.int64)
    fr["write_coverage"] = np.where(
        has_seg,
        col("seg_write_coverage"),
        np.minimum(
            col("ctr_bytes_written"),
            np.where(col("ctr_bytes_written") > 0, col("ctr_max_byte_written", -1) + 1, 0),
        ),
    ).astype(np.int64)
    fr["coverage_source"] = np.where(has_seg, "segments", "counters")
    fsz = fr["file_size"].to_numpy()
    thr = rd.settings.whole_file_coverage
    fr["read_whole"] = (fsz > 0) & (fr["read_coverage"].to_numpy() >= thr * fsz)
    fr["write_whole"] = (fsz > 0) & (fr["write_coverage"].to_numpy() >= thr * fsz)
    fr["read_coverage_frac"] = np.divide(
        fr["read_coverage"], fsz, out=np.zeros(len(fr)), where=fsz > 0
    )
    cat_counts = (
        np.stack([col(f"ops_{c}") for c in CATEGORIES], axis=1) if len(fr) else np.zeros((0, 5))
    )
    fr_frac = fractions(cat_counts)
    for i, cname in enumerate(CATEGORIES):
        fr[f"frac_{cname}"] = fr_frac[:, i]
        fr[f"ops_{cname}"] = cat_counts[:, i].astype(np.int64)
    whole_any = (fr["read_whole"] | fr["write_whole"]).to_numpy()
    dominant = (
        np.array(CATEGORIES, dtype=object)[fr_frac.argmax(axis=1)]
        if len(fr)
        else np.empty(0, object)
    )
    no_ops = (fr["reads"] + fr["writes"]).to_numpy() == 0
    fr["pattern"] = np.select(
        [no_ops, ~has_seg, whole_any, cat_counts.sum(axis=1) == 0],
        ["none", "unknown", "whole-file", "none"],
        default=dominant,
    )
    fr["first_io"] = col("first_io", np.nan)
    fr["last_io"] = col("last_io", np.nan)
    fr["eof_at"] = col("eof_at", -1).astype(np.int64)
    fr["seg_ops"] = (col("seg_reads") + col("seg_writes")).astype(np.int64)
    fr["ctr_ops"] = (col("ctr_reads") + col("ctr_writes")).astype(np.int64)


def _completeness(rd: RunData, ctr_posix_ops: int) -> float | None:
    """Traced (DXT) POSIX operations over those the counters saw; None without both."""
    ops = rd.ops
    assert ops.module is not None, "build_tables runs before the per-op columns are released"
    seg_posix_ops = (
        int(np.isin(ops.module, [rd.modules.index("POSIX")]).sum()) if "POSIX" in rd.modules else 0
    )
    if len(ops) and ctr_posix_ops > 0:
        return min(1.0, seg_posix_ops / ctr_posix_ops)
    return None


def _files_table(rd: RunData, fr: pd.DataFrame, ops) -> pd.DataFrame:
    """One row per file: volume, sharing between ranks and offset overlap."""
    nf = max(len(rd.paths), 1)
    ranked = fr[fr["actor"] >= 0]
    g = fr.groupby("file", sort=True)
    files = g.agg(
        reads=("reads", "sum"),
        writes=("writes", "sum"),
        bytes_read=("bytes_read", "sum"),
        bytes_written=("bytes_written", "sum"),
        read_time=("read_time", "sum"),
        write_time=("write_time", "sum"),
        opens=("opens", "sum"),
        size=("file_size", "max"),
        first_io=("first_io", "min"),
        last_io=("last_io", "max"),
    )
    gr = ranked.groupby("file", sort=True)
    files["n_ranks"] = gr["actor"].nunique()
    files["n_readers"] = (ranked["reads"] > 0).groupby(ranked["file"]).sum()
    files["n_writers"] = (ranked["writes"] > 0).groupby(ranked["file"]).sum()
    rr = ranked[ranked["reads"] > 0]
    ww = ranked[ranked["writes"] > 0]
    files["whole_readers"] = rr.groupby("file")["read_whole"].sum()
    files["whole_writers"] = ww.groupby("file")["write_whole"].sum()
    files["max_rank_bytes_read"] = rr.groupby("file")["bytes_read"].max()
    files["min_rank_bytes_read"] = rr.groupby("file")["bytes_read"].min()
    files["coverage_source"] = ranked.groupby("file")["coverage_source"].agg(
        lambda s: "segments" if (s == "segments").all() else "counters"
    )
    hosts = ranked["actor"].map(rd.actor_host)
    files["n_hosts"] = hosts.groupby(ranked["file"]).nunique()
    # Offset overlap between ranks, from the byte ranges merged per (rank, file, direction)
    # (a rank's own re-reads do not count as sharing).
    mk, mlo, mhi = rd.cache.get("byte_spans", (np.empty(0, np.int64),) * 3)
    m_actor = (mk >> 1) // nf - 1
    m_file = (mk >> 1) % nf
    idx = files.index.to_numpy()
    for d, name in ((READ, "read"), (WRITE, "write")):
        m = (m_actor >= 0) & ((mk & 1) == d)
        one, two = intervals.shared_coverage(m_file[m], m_actor[m], mlo[m], mhi[m], nf, merged=True)
        files[f"{name}_union"] = one[idx].astype(np.int64)
        files[f"{name}_shared"] = two[idx].astype(np.int64)
    files = files.fillna(
        {
            "n_ranks": 0,
            "n_readers": 0,
            "n_writers": 0,
            "whole_readers": 0,
            "whole_writers": 0,
            "max_rank_bytes_read": 0,
            "min_rank_bytes_read": 0,
            "n_hosts": 0,
            "coverage_source": "segments",
        }
    )
    for c in (
        "n_ranks",
        "n_readers",
        "n_writers",
        "whole_readers",
        "whole_writers",
        "n_hosts",
        "max_rank_bytes_read",
        "min_rank_bytes_read",
    ):
        files[c] = files[c].astype(np.int64)
    files = files.reset_index()
    files.insert(1, "path", [rd.paths[i] for i in files["file"]])
    files.insert(2, "class", files["file"].map(lambda i: rd.class_names[rd.file_class[i]]))
    s = rd.settings
    for direction in ("read", "write"):
        nact = files[f"n_{WHO[direction]}"].to_numpy()
        whole = files[f"whole_{WHO[direction]}"].to_numpy()
        union = files[f"{direction}_union"].to_numpy()
        shared = files[f"{direction}_shared"].to_numpy()
        seg_cov = (files["coverage_source"] == "segments").to_numpy()
        overlap = np.divide(shared, union, out=np.zeros(len(files)), where=union > 0)
        files[f"{direction}_overlap"] = overlap
        strat = np.select(
            [
                nact == 0,
                nact == 1,
                whole == nact,
                ~seg_cov,
                overlap <= s.disjoint_overlap_max,
            ],
            ["", "exclusive", "shared-whole", "shared-unknown", "shared-disjoint"],
            default="shared-overlapping",
        )
        files[f"{direction}_strategy"] = strat
    return files


def _ranks_table(rd: RunData, fr: pd.DataFrame, ops) -> pd.DataFrame:
    ranked = fr[fr["actor"] >= 0]
    actors = sorted(set(rd.actor_host) | set(ranked["actor"].unique().tolist()))
    r = pd.DataFrame(index=pd.Index(np.array(actors, dtype=np.int64), name="rank"))
    g = ranked.groupby("actor")
    for m in SUMMED_METRICS:
        r[m] = g[m].sum()
    r["files"] = g["file"].nunique()
    for ci, cname in enumerate(rd.class_names):
        gc = ranked[ranked["class"] == ci].groupby("actor")
        r[f"bytes_read_{cname}"] = gc["bytes_read"].sum()
        r[f"bytes_written_{cname}"] = gc["bytes_written"].sum()
    r = r.fillna(0)
    for c in r.columns:
        if not c.endswith("_time"):
            r[c] = r[c].astype(np.int64)
    r.insert(0, "host", [rd.actor_host.get(a, "") for a in r.index])
    # Processes per rank (the rank itself plus forked workers).
    key = (ops.actor.astype(np.int64) << 40) | (ops.pid & ((1 << 40) - 1))
    seen = pd.unique(key[ops.actor >= 0])
    ck = rd.counters
    ck = ck[ck["actor"] >= 0]
    seen = np.union1d(
        seen, (ck["actor"].to_numpy(np.int64) << 40) | (ck["pid"].to_numpy() & ((1 << 40) - 1))
    )
    per = pd.Series(seen >> 40).value_counts()
    r["processes"] = per.reindex(r.index).fillna(0).astype(np.int64).to_numpy()
    # I/O wall time: the union of the rank's operations in time (overlapping ops of workers
    # count once); operations known only from counters add their cumulative time.
    m = ops.actor >= 0
    na = (max(actors) + 1) if actors else 0
    ga, glo, ghi = rd.io_spans()
    union = np.bincount(ga, weights=ghi - glo, minlength=na)[:na]
    ctr_only = (
        ranked[ranked["source"] == "counters"]
        .groupby("actor")[["read_time", "write_time"]]
        .sum()
        .sum(axis=1)
    )
    r["io_time"] = union[r.index.to_numpy()] + ctr_only.reindex(r.index).fillna(0).to_numpy()
    busy = np.bincount(ops.actor[m], weights=(ops.end - ops.start)[m], minlength=na)
    r["io_busy_time"] = busy[r.index.to_numpy()] + ctr_only.reindex(r.index).fillna(0).to_numpy()
    first = ranked.groupby("actor")["first_io"].min()
    last = ranked.groupby("actor")["last_io"].max()
    r["first_io"] = first.reindex(r.index).to_numpy()
    r["last_io"] = last.reindex(r.index).to_numpy()
    moved = (r["bytes_read"] + r["bytes_written"]).to_numpy(np.float64)
    t = r["io_time"].to_numpy()
    r["bandwidth"] = np.divide(moved, t, out=np.zeros(len(r)), where=t > 0)
    rt = rd.run_time
    r["io_share"] = r["io_time"] / rt if rt > 0 else 0.0
    med = float(np.median(t)) if len(t) else 0.0
    s = rd.settings
    r["straggler"] = (
        (t > med * (1 + s.straggler_excess)) & (t >= s.straggler_min_io_time_s) & (len(t) > 1)
    )
    return r.reset_index()


def _nodes_table(rd: RunData, fr: pd.DataFrame, ranks: pd.DataFrame, ops) -> pd.DataFrame:
    """Per host: ranks, volume, I/O time, and whether data is read once per node or per rank."""
    if ranks.empty:
        return pd.DataFrame(
            columns=[
                "host",
                "ranks",
                "bytes_read",
                "bytes_written",
                "io_time_sum",
                "io_time_max",
                "unique_bytes_read",
                "read_amplification",
                "read_redundancy",
                "read_once_per",
            ]
        )
    g = ranks.groupby("host", sort=True)
    nodes = g.agg(
        ranks=("rank", "nunique"),
        bytes_read=("bytes_read", "sum"),
        bytes_written=("bytes_written", "sum"),
        io_time_sum=("io_time", "sum"),
        io_time_max=("io_time", "max"),
    )
    hosts = sorted(nodes.index)
    host_code = {h: i for i, h in enumerate(hosts)}
    nf = max(len(rd.paths), 1)
    # Unique bytes read on a node: union of its ranks' read ranges per file.
    mk, mlo, mhi = rd.cache.get("byte_spans", (np.empty(0, np.int64),) * 3)
    m_actor = (mk >> 1) // nf - 1
    m = (m_actor >= 0) & ((mk & 1) == READ)
    act_host = np.full(max(rd.actor_host, default=-1) + 2, -1, np.int64)
    for a, h in rd.actor_host.items():
        act_host[a] = host_code.get(h, -1)
    hcode = act_host[np.minimum(m_actor[m], len(act_host) - 1)]
    ok = hcode >= 0
    key = hcode[ok] * nf + ((mk[m] >> 1) % nf)[ok]
    u = intervals.union_length(key, mlo[m][ok], mhi[m][ok], len(hosts) * nf)
    uniq = u.reshape(len(hosts), nf).sum(axis=1) if len(hosts) else np.zeros(0)
    # Counter-only (rank, file) rows: the largest coverage on the node is a lower bound.
    co = fr[(fr["actor"] >= 0) & (fr["coverage_source"] == "counters") & (fr["reads"] > 0)]
    if len(co):
        co = co.assign(host=co["actor"].map(rd.actor_host))
        extra = co.groupby(["host", "file"])["read_coverage"].max().groupby("host").sum()
        uniq = uniq + extra.reindex(hosts).fillna(0).to_numpy()
    nodes["unique_bytes_read"] = uniq.astype(np.int64)
    br = nodes["bytes_read"].to_numpy(np.float64)
    # Amplification counts every byte moved (re-reads too); redundancy counts how many of the
    # node's ranks read each distinct byte: ~1 = once per node, ~ranks = once per rank.
    nodes["read_amplification"] = np.divide(br, uniq, out=np.zeros(len(nodes)), where=uniq > 0)
    rc = fr[fr["actor"] >= 0].assign(host=lambda d: d["actor"].map(rd.actor_host))
    cov_sum = (
        rc.groupby("host")["read_coverage"]
        .sum()
        .reindex(nodes.index)
        .fillna(0)
        .to_numpy(np.float64)
    )
    red = np.divide(cov_sum, uniq, out=np.zeros(len(nodes)), where=uniq > 0)
    nodes["read_redundancy"] = red
    nr = nodes["ranks"].to_numpy()
    nodes["read_once_per"] = np.select(
        [uniq == 0, nr <= 1, red >= 0.9 * nr, red <= 1.1],
        ["", "node", "rank", "node"],
        default="partly-redundant",
    )
    return nodes.reset_index()
