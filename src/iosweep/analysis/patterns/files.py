"""The per-file and per-node tables: what a file's (rank, file) rows and byte ranges say
together (its volume, which ranks share it and how much of its bytes), and how much of what a
node's ranks read was distinct."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from iosweep.analysis import intervals
from iosweep.analysis.data import READ, WHO, WRITE, RunData
from iosweep.analysis.settings import AnalysisSettings
from iosweep.columns import distinct


@dataclass(frozen=True)
class RunFiles:
    """What the per-file and per-node tables know of a run besides its (rank, file) rows and
    byte ranges: its paths, their classes, and the ranks' hosts."""

    paths: list[str]
    file_class: np.ndarray  # class code per path
    class_names: list[str]
    actor_host: dict[int, str]
    settings: AnalysisSettings

    @classmethod
    def of(cls, rd: RunData) -> RunFiles:
        return cls(rd.paths, rd.file_class, rd.class_names, rd.actor_host, rd.settings)

    @property
    def nf(self) -> int:
        """The stream keys' file count (at least 1)."""
        return max(len(self.paths), 1)


def labels(names: tuple[str, ...], code: np.ndarray) -> np.ndarray:
    """An object column of ``names[code]`` sharing the few str objects (a numpy string array
    cast to object makes one str per row: 150 MB a column at a million files)."""
    return np.array(names, dtype=object)[code]


def ranked_rows(fr: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """The rows of ranks (not unattributed processes), only ``cols``: at a million files the
    (rank, file) table is gigabytes, and a full filtered copy of it doubled the peak memory
    (where every row is a rank's, the columns are not copied: pandas' copy-on-write)."""
    ranked = fr["actor"].to_numpy() >= 0
    return fr[cols] if ranked.all() else fr.loc[ranked, cols]


def files_table(fr: pd.DataFrame, spans: tuple[np.ndarray, ...], run: RunFiles) -> pd.DataFrame:
    """One row per file: volume, sharing between ranks and offset overlap. ``spans``: the byte
    ranges merged per (rank, file, direction), as (stream key, lo, hi)."""
    nf = run.nf
    ranked = ranked_rows(
        fr,
        [
            "file",
            "actor",
            "reads",
            "writes",
            "bytes_read",
            "read_whole",
            "write_whole",
            "coverage_source",
        ],
    )
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
    # bytes whose offsets no segment gives (counter records beside a trace: a reduced
    # shared record's remainder, what DXT lost): not part of the unions below
    unplaced = fr["source"].to_numpy() == "counters"
    files["read_unplaced"] = (
        pd.Series(fr["bytes_read"].to_numpy()[unplaced], fr["file"].to_numpy()[unplaced])
        .groupby(level=0)
        .sum()
        .reindex(files.index, fill_value=0)
        .astype(np.int64)
    )
    _rank_figures(files, ranked, run.actor_host)
    # Offset overlap between ranks, from the byte ranges merged per (rank, file, direction)
    # (a rank's own re-reads do not count as sharing).
    mk, mlo, mhi = spans
    m_actor = (mk >> 1) // nf - 1
    m_file = (mk >> 1) % nf
    idx = files.index.to_numpy()
    for d, name in ((READ, "read"), (WRITE, "write")):
        m = (m_actor >= 0) & ((mk & 1) == d)
        one, two = intervals.shared_coverage(m_file[m], m_actor[m], mlo[m], mhi[m], nf, merged=True)
        files[f"{name}_union"] = one[idx].astype(np.int64)
        files[f"{name}_shared"] = two[idx].astype(np.int64)
    files = files.reset_index()
    fid = files["file"].to_numpy()
    # object dtype: references to the run's path strings, not an Arrow copy of them (70 MB
    # at a million files)
    files.insert(1, "path", pd.Series(np.asarray(run.paths, dtype=object)[fid], dtype=object))
    files.insert(
        2, "class", np.asarray(run.class_names, dtype=object)[np.asarray(run.file_class)[fid]]
    )
    s = run.settings
    for direction in ("read", "write"):
        nact = files[f"n_{WHO[direction]}"].to_numpy()
        whole = files[f"whole_{WHO[direction]}"].to_numpy()
        union = files[f"{direction}_union"].to_numpy()
        shared = files[f"{direction}_shared"].to_numpy()
        seg_cov = (files["coverage_source"] == "segments").to_numpy()
        overlap = np.divide(shared, union, out=np.zeros(len(files)), where=union > 0)
        files[f"{direction}_overlap"] = overlap
        # codes, then labels shared by every row (choices as strings made a 90 MB text array
        # per direction at a million files)
        code = np.select(
            [
                nact == 0,
                nact == 1,
                whole == nact,
                ~seg_cov,
                overlap <= s.disjoint_overlap_max,
            ],
            [0, 1, 2, 3, 4],
            default=5,
        )
        files[f"{direction}_strategy"] = pd.Series(labels(_STRATEGIES, code), dtype=object)
    return files


_STRATEGIES = (
    "",
    "exclusive",
    "shared-whole",
    "shared-unknown",
    "shared-disjoint",
    "shared-overlapping",
)


def _rank_figures(files: pd.DataFrame, ranked: pd.DataFrame, actor_host: dict[int, str]) -> None:
    """The files' figures over their ranks' rows (``ranked``): how many ranks, readers,
    writers and hosts, whole-file readers and writers, the most and least bytes a reader
    read, and whether any row's coverage comes from counters. One lookup of each row's file
    among the table's (ten groupings of 2 M rows took 2 s)."""
    at = np.searchsorted(files.index.to_numpy(), ranked["file"].to_numpy())
    n = len(files)
    reads = ranked["reads"].to_numpy() > 0
    writes = ranked["writes"].to_numpy() > 0
    actor = ranked["actor"].to_numpy(np.int64)
    host_code = {h: i for i, h in enumerate(sorted(set(actor_host.values())))}
    host = np.full(int(actor.max(initial=-1)) + 1, -1, np.int64)
    for a, h in actor_host.items():
        if 0 <= a < len(host):
            host[a] = host_code[h]
    host = host[actor] if len(actor) else actor
    bytes_read = ranked["bytes_read"].to_numpy(np.int64)
    files["n_ranks"] = _distinct_per_group(at, actor, np.ones(len(at), bool), n)
    files["n_readers"] = np.bincount(at[reads], minlength=n)
    files["n_writers"] = np.bincount(at[writes], minlength=n)
    files["whole_readers"] = np.bincount(at[reads & ranked["read_whole"].to_numpy()], minlength=n)
    files["whole_writers"] = np.bincount(at[writes & ranked["write_whole"].to_numpy()], minlength=n)
    most, least = np.zeros(n, np.int64), np.full(n, np.iinfo(np.int64).max)
    np.maximum.at(most, at[reads], bytes_read[reads])
    np.minimum.at(least, at[reads], bytes_read[reads])
    files["max_rank_bytes_read"] = most
    files["min_rank_bytes_read"] = np.where(files["n_readers"].to_numpy() > 0, least, 0)
    # A file is covered by segments only when every rank's row is.
    by_counters = (
        np.bincount(at[ranked["coverage_source"].to_numpy() == "counters"], minlength=n) > 0
    )
    files["coverage_source"] = labels(("segments", "counters"), by_counters.astype(np.int64))
    files["n_hosts"] = _distinct_per_group(at, host, host >= 0, n)


def _distinct_per_group(at: np.ndarray, values: np.ndarray, keep: np.ndarray, n: int) -> np.ndarray:
    """How many distinct ``values`` (non-negative) the rows ``keep`` of each group ``at``
    hold (``n`` groups)."""
    width = int(values.max(initial=0)) + 1
    pairs = distinct(at[keep].astype(np.int64) * width + values[keep])
    return np.bincount(pairs // width, minlength=n)


def hosts_of(ranks: pd.DataFrame) -> list[str]:
    """The hosts of the nodes table, in its order."""
    return sorted(set(ranks["host"])) if len(ranks) else []


def node_reads(
    fr: pd.DataFrame, spans: tuple[np.ndarray, ...], run: RunFiles, hosts: list[str]
) -> np.ndarray:
    """Per host (rows: ``hosts``' order): the distinct bytes its ranks read per file, summed
    ([0]; the union of their read ranges, and for counter-only rows the largest coverage on
    the node, a lower bound) and its ranks' read coverage summed ([1]). Both add up over
    disjoint sets of files (``fr`` and ``spans``: all the rows of some files)."""
    out = np.zeros((2, len(hosts)))
    if not hosts:
        return out
    host_code = {h: i for i, h in enumerate(hosts)}
    nf = run.nf
    mk, mlo, mhi = spans
    m_actor = (mk >> 1) // nf - 1
    m = (m_actor >= 0) & ((mk & 1) == READ)
    act_host = np.full(max(run.actor_host, default=-1) + 2, -1, np.int64)
    for a, h in run.actor_host.items():
        act_host[a] = host_code.get(h, -1)
    hcode = act_host[np.minimum(m_actor[m], len(act_host) - 1)]
    ok = hcode >= 0
    key = hcode[ok] * nf + ((mk[m] >> 1) % nf)[ok]
    u = intervals.union_length(key, mlo[m][ok], mhi[m][ok], len(hosts) * nf)
    out[0] = u.reshape(len(hosts), nf).sum(axis=1)
    rc = ranked_rows(fr, ["actor", "file", "coverage_source", "reads", "read_coverage"])
    co = rc[(rc["coverage_source"] == "counters") & (rc["reads"] > 0)]
    if len(co):
        co = co.assign(host=co["actor"].map(run.actor_host))
        extra = co.groupby(["host", "file"])["read_coverage"].max().groupby("host").sum()
        out[0] += extra.reindex(hosts).fillna(0).to_numpy()
    host = rc["actor"].map(run.actor_host)
    out[1] = rc["read_coverage"].groupby(host).sum().reindex(hosts).fillna(0).to_numpy()
    return out


def nodes_table(ranks: pd.DataFrame, reads: np.ndarray) -> pd.DataFrame:
    """Per host: ranks, volume, I/O time, and whether data is read once per node or per rank
    (``reads``: :func:`node_reads` of every file)."""
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
    uniq, cov_sum = reads
    nodes["unique_bytes_read"] = uniq.astype(np.int64)
    br = nodes["bytes_read"].to_numpy(np.float64)
    # Amplification counts every byte moved (re-reads too); redundancy counts how many of the
    # node's ranks read each distinct byte: ~1 = once per node, ~ranks = once per rank.
    nodes["read_amplification"] = np.divide(br, uniq, out=np.zeros(len(nodes)), where=uniq > 0)
    red = np.divide(cov_sum, uniq, out=np.zeros(len(nodes)), where=uniq > 0)
    nodes["read_redundancy"] = red
    nr = nodes["ranks"].to_numpy()
    nodes["read_once_per"] = np.select(
        [uniq == 0, nr <= 1, red >= 0.9 * nr, red <= 1.1],
        ["", "node", "rank", "node"],
        default="partly-redundant",
    )
    return nodes.reset_index()
