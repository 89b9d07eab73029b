"""Read and write trace stores (one directory per run; layout in :mod:`iosweep.trace.schema`)."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from iosweep import memory
from iosweep.files import atomic_write, atomic_writes
from iosweep.trace.schema import STORE_TABLES, RunMeta, conform, empty_table

RUN_JSON = "run.json"


@dataclass
class TraceStore:
    """A run's trace store, opened. Tables are read on first access."""

    path: Path
    meta: RunMeta
    # each table's Parquet footer, read once: a part of a large run reads a table's columns
    # one at a time, and each read parsed the footer again (0.6 s a part at 100 M segments)
    _footers: dict[str, pq.FileMetaData] = field(default_factory=dict, repr=False, compare=False)

    def footer(self, name: str) -> pq.FileMetaData | None:
        """Table ``name``'s Parquet footer (None for a table not written)."""
        if name not in self._footers:
            f = self.path / f"{name}.parquet"
            if not f.exists():
                return None
            self._footers[name] = pq.read_metadata(f)
        return self._footers[name]

    def table(
        self,
        name: str,
        columns: list[str] | None = None,
        missing_as_null: bool = False,
        row_groups: list[int] | None = None,
    ) -> pa.Table:
        """The table ``name`` (only ``columns`` if given; only the Parquet ``row_groups`` if
        given, see :meth:`rank_ranges`). ``missing_as_null``: columns a store written before
        they were added come back as nulls instead of an error."""
        if name not in STORE_TABLES:
            raise KeyError(f"unknown trace-store table {name!r}; known: {sorted(STORE_TABLES)}")
        f = self.path / f"{name}.parquet"
        md = self.footer(name)
        if md is None:
            t = empty_table(name)
            return t.select(columns) if columns else t
        if not (missing_as_null and columns):
            return _read(f, columns, row_groups, md)
        have = set(md.schema.to_arrow_schema().names)
        t = _read(f, [c for c in columns if c in have], row_groups, md)
        schema = STORE_TABLES[name]
        return pa.table(
            {c: t[c] if c in have else pa.nulls(t.num_rows, schema.field(c).type) for c in columns}
        )

    def rank_ranges(self, name: str) -> list[tuple[int, int] | None]:
        """Per Parquet row group of table ``name``, the (lowest, highest) rank of its rows, from
        the file's statistics; None where they are not recorded (then the group may hold any
        rank). Stores are written sorted by rank (:func:`write_store`), so a few ranks' rows
        lie in a few row groups."""
        md = self.footer(name)
        if md is None:
            return []
        if "rank" not in md.schema.names:
            return [None] * md.num_row_groups
        col = md.schema.names.index("rank")
        out: list[tuple[int, int] | None] = []
        for g in range(md.num_row_groups):
            st = md.row_group(g).column(col).statistics
            known = st is not None and st.has_min_max and st.null_count == 0
            out.append((int(st.min), int(st.max)) if known else None)
        return out

    def group_rows(self, name: str) -> list[int]:
        """The rows of each Parquet row group of table ``name`` (none for a table not written)."""
        md = self.footer(name)
        if md is None:
            return []
        return [md.row_group(g).num_rows for g in range(md.num_row_groups)]

    @property
    def segments(self) -> pa.Table:
        return self.table("segments")

    @property
    def counters(self) -> pa.Table:
        return self.table("counters")

    @property
    def steps(self) -> pa.Table:
        return self.table("steps")

    @property
    def app_events(self) -> pa.Table:
        return self.table("app_events")


@dataclass
class Parts:
    """A table given as its parts, made one at a time in rank order (ingest: a log each), so
    that :func:`write_store` holds about one row group of it, never the whole table."""

    make: Callable[[], Iterator[pa.Table]]
    need: int | None = None  # bytes the parts hold in all: a bound of the file written


@dataclass
class JointParts:
    """Several tables given together as their parts: ``make`` yields, in rank order, each
    source's part of every table at once (ingest: a log's segments and counters as it is
    read), and :func:`write_store` writes the tables side by side, so that a source is made
    once, not once a table."""

    names: tuple[str, ...]
    make: Callable[[], Iterator[dict[str, pa.Table | None]]]
    need: int | None = None  # bytes the parts hold in all, every table's


def write_store(
    path: Path,
    meta: RunMeta | Callable[[], RunMeta],
    tables: Mapping[str, pa.Table | Callable[[], pa.Table] | Parts],
    joint: JointParts | None = None,
) -> Path:
    """Write ``meta`` and every table (missing ones as empty tables) into ``path``, each
    sorted by rank in row groups of whole ranks (:func:`rank_groups`).

    A table may be given as a function that builds it: it is called when the table's turn
    comes, so that a caller can hold only one large table at a time; or as its
    :class:`Parts`, written as they come; or among ``joint``'s tables, written first, side by
    side. ``meta`` may be a function too, called once the tables are written (what it says
    may be learnt while they are made).
    ``run.json`` goes first out and last in: a store is complete exactly when it has one, so
    a write cut short (a full disk, an interrupted workflow) is never opened as a store."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / RUN_JSON).unlink(missing_ok=True)
    if joint is not None:
        files = [path / f"{name}.parquet" for name in joint.names]
        atomic_writes(files, functools.partial(_write_joint, joint), need=joint.need)
        memory.release()
    written = set(joint.names if joint is not None else ())
    parts = {n: t for n, t in tables.items() if isinstance(t, Parts) and n not in written}
    _write_all_parts(path, parts)
    for name in STORE_TABLES:
        if name in written or name in parts:
            continue
        t = tables.get(name)
        if callable(t):
            t = t()
        t = empty_table(name) if t is None else by_rank(conform(t, name))
        write = functools.partial(_write_parquet, t)
        atomic_write(path / f"{name}.parquet", write, need=t.nbytes)  # uncompressed: a bound
        del t, write
        memory.release()  # what the table held, before the next is built
    (meta() if callable(meta) else meta).write(path / RUN_JSON)
    return path


def rank_key(rank: np.ndarray | int) -> np.ndarray:
    """The order of a store's rows (and ingest's logs): by rank, rank -1 (no rank) last."""
    return np.where(rank < 0, np.iinfo(np.int32).max, rank)


def by_rank(table: pa.Table) -> pa.Table:
    """``table`` with its rows in rank order, rows tied to no rank (-1) last; the rows of one
    rank keep their order. Already in order (one log per process, in rank order): itself."""
    if table.num_rows < 2 or "rank" not in table.column_names:
        return table
    key = rank_key(pc.fill_null(table.column("rank"), -1).to_numpy(zero_copy_only=False))
    if (key[1:] >= key[:-1]).all():
        return table
    return table.take(np.argsort(key, kind="stable"))


def _read(
    f: Path, columns: list[str] | None, row_groups: list[int] | None, md: pq.FileMetaData
) -> pa.Table:
    if row_groups is None:
        return pq.read_table(f, columns=columns)
    return pq.ParquetFile(f, metadata=md).read_row_groups(row_groups, columns=columns)


# Rows per Parquet row group, at most. Every row group repeats a dictionary column's whole
# dictionary (a million paths, 72 MB, at ImageNet scale): Arrow's default of 1 Mi rows wrote and
# decoded it five times for five million segments. In one row group that store writes in half
# the time and its paths read in a third.
ROW_GROUP_ROWS = 1 << 24
# A group ends at the first rank's end that brings it to this many rows: a part of a rank or
# two then reads its own ranks' groups alone (at 16 Mi rows a group of 5 ranks, a part of 2 read
# 2.3-4.5x its rows, the counters 4x: 8.5 s of a 54 s part), while small ranks still share
# a group. The dictionary a rank's group repeats is only the paths it uses (+5% on disk).
GROUP_MIN_ROWS = 1 << 19


def rank_groups(rank: np.ndarray, limit: int | None = None, least: int | None = None) -> list[int]:
    """Row-group lengths for a table whose rank column is ``rank``: each group ends where a
    rank's rows end, the first such end at ``least`` rows or more (default GROUP_MIN_ROWS, at
    most ``limit``), and holds at most ``limit`` rows (a rank of more is cut), so that reading
    some ranks reads only their groups. Rows tied to no rank (-1) after the ranked ones, as
    stores are written, start a group of their own: otherwise its statistics (-1 to the
    highest rank) would say it may hold any rank."""
    limit = limit or ROW_GROUP_ROWS  # read here: tests make it small
    least = min(least or GROUP_MIN_ROWS, limit)
    ranked = int((rank >= 0).sum())
    if 0 < ranked < len(rank) and (rank[ranked:] < 0).all():
        return _groups(rank[:ranked], limit, least) + _groups(rank[ranked:], limit, least)
    return _groups(rank, limit, least)


def _groups(rank: np.ndarray, limit: int, least: int) -> list[int]:
    ends = np.append(np.flatnonzero(rank[1:] != rank[:-1]) + 1, len(rank))  # each rank's run
    sizes, start = [], 0
    while start < len(rank):
        first = min(int(np.searchsorted(ends, start + least)), len(ends) - 1)  # enough rows
        if ends[first] - start > limit:  # too many: the last end that fits, or cut the run
            i = int(np.searchsorted(ends, start + limit, side="right")) - 1
            first = i if i >= 0 and ends[i] > start else -1
        end = int(ends[first]) if first >= 0 else start + limit
        sizes.append(end - start)
        start = end
    return sizes


def writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """A store table's Parquet writer. zstd: segments compress ~5-10x (sorted times, repeated
    paths as dictionaries). Only the dictionary columns dictionary-encoded: tried on every
    column, Parquet hashes every number first, mostly to fall back to plain (the ImageNet
    run's counters: writing -20%, reading a third of the time, the file no larger)."""
    dictionaries = [f.name for f in schema if pa.types.is_dictionary(f.type)]
    return pq.ParquetWriter(path, schema, compression="zstd", use_dictionary=dictionaries)


def _write_parquet(table: pa.Table, path: Path) -> None:
    if "rank" not in table.column_names or not table.num_rows:
        with writer(path, table.schema) as w:
            w.write_table(table, row_group_size=ROW_GROUP_ROWS)
        return
    rank = pc.fill_null(table.column("rank"), -1).to_numpy(zero_copy_only=False)
    with writer(path, table.schema) as w:
        offset = 0
        for n in rank_groups(rank):
            w.write_table(table.slice(offset, n), row_group_size=n)
            offset += n


# Arrow bytes of a table held before a row group of it is written (Parts): wide counter
# records reach it long before ROW_GROUP_ROWS. What the ingest's writing process holds rests
# on it, not on the run (trace/ingest/need.py): measured on the 10.2 M run's ingest, the
# writer's peak was 1.09 GiB at 1 GiB, 0.71 at 256 MiB, 0.51 at 128 MiB, 0.41 at 64 MiB
# (the counters then in 5, 7, 16 and 32 row groups: a group per two ranks here).
GROUP_BYTES = 128 << 20


class _GroupWriter:
    """One table's parts into its Parquet writer, in row groups of whole ranks: what comes is
    held until ``flush`` bytes more than was kept last time, then written but for the last
    group (more of its ranks may come); each group's dictionaries are those of its own rows."""

    def __init__(self, name: str, w: pq.ParquetWriter, flush: int = 0):
        self.name, self.w, self.flush = name, w, flush or GROUP_BYTES  # (read here: tests)
        self.held: list[pa.Table] = []
        self.rows = self.size = self.kept = 0  # of what is held (Table.nbytes is not free)

    def add(self, part: pa.Table | None) -> None:
        if part is None or not part.num_rows:
            return
        self.held.append(by_rank(conform(part, self.name)))
        self.rows, self.size = self.rows + part.num_rows, self.size + self.held[-1].nbytes
        if self.rows >= ROW_GROUP_ROWS or self.size >= self.kept + self.flush:
            self.held = _write_groups(self.w, self.held, self.size / self.rows, keep_last=True)
            self.rows = sum(t.num_rows for t in self.held)
            self.size = self.kept = sum(t.nbytes for t in self.held)

    def finish(self) -> None:
        """Write what is held (the writer is closed by its owner)."""
        _write_groups(self.w, self.held, self.size / max(self.rows, 1), keep_last=False)
        self.held = []


def _write_parts(name: str, parts: Parts, flush: int, path: Path) -> None:
    """The parts of table ``name`` into ``path``, in row groups of whole ranks, holding about
    ``flush`` bytes before it writes."""
    with writer(path, STORE_TABLES[name]) as w:
        groups = _GroupWriter(name, w, flush)
        for part in parts.make():
            groups.add(part)
        groups.finish()


def _write_all_parts(path: Path, tables: dict[str, Parts]) -> None:
    """Tables given as their parts into ``path``, side by side in threads (a core each, each
    holding its share of GROUP_BYTES): Parquet's encoding and the spills' reading let go of
    the GIL (the 10.2 M run's put-together from parts: 16.3 s one table after another)."""
    threads = max(1, min(len(tables), len(os.sched_getaffinity(0))))

    def write(name: str, t: Parts) -> None:
        fill = functools.partial(_write_parts, name, t, GROUP_BYTES // threads)
        atomic_write(path / f"{name}.parquet", fill, need=t.need)
        memory.release()  # what the table held, before the next is made

    with ThreadPoolExecutor(threads) as pool:
        for done in [pool.submit(write, name, t) for name, t in tables.items()]:
            done.result()


def _write_joint(joint: JointParts, paths: list[Path]) -> None:
    """``joint``'s tables into ``paths`` (in the order of its names), side by side: each holds
    a quarter of what one table alone may before it writes (read here: tests make it small)."""
    with contextlib.ExitStack() as stack:
        groups = [
            _GroupWriter(n, stack.enter_context(writer(p, STORE_TABLES[n])), GROUP_BYTES // 4)
            for n, p in zip(joint.names, paths, strict=True)
        ]
        for made in joint.make():
            for g in groups:
                g.add(made.get(g.name))
        for g in groups:
            g.finish()


def _write_groups(
    w: pq.ParquetWriter, held: list[pa.Table], per_row: float, keep_last: bool
) -> list[pa.Table]:
    """Write ``held`` (of about ``per_row`` bytes a row) in row groups of whole ranks, of at
    most ROW_GROUP_ROWS rows and about GROUP_BYTES; with ``keep_last``, the last group stays
    held (more of its ranks may come). Returns what is still held.

    Each group's dictionaries are unified over its own parts alone: unified over everything
    held, a dictionary carried every path held into every group, to be cut out again (4 s of
    the ImageNet-scale run's ingest)."""
    held = [t for t in held if t.num_rows]
    if not held:
        return []
    rank = np.concatenate(
        [pc.fill_null(t.column("rank"), -1).to_numpy(zero_copy_only=False) for t in held]
    )
    rows = min(ROW_GROUP_ROWS, max(1, int(GROUP_BYTES / max(per_row, 1))))
    sizes = rank_groups(rank, rows)
    for n in sizes[:-1] if keep_last else sizes:
        group, held = _first_rows(held, n)
        t = _compact(pa.concat_tables(group).unify_dictionaries())
        w.write_table(t, row_group_size=n)
    return held


def _first_rows(tables: list[pa.Table], n: int) -> tuple[list[pa.Table], list[pa.Table]]:
    """``tables`` (one after another) split after their first ``n`` rows: a table cut in two
    is cut within a rank too large for one group (rare), and its halves keep its dictionaries
    whole until their groups are written (:func:`_compact`)."""
    taken: list[pa.Table] = []
    for i, t in enumerate(tables):
        if n >= t.num_rows:
            taken.append(t)
            n -= t.num_rows
            if n == 0:
                return taken, tables[i + 1 :]
            continue
        return [*taken, t.slice(0, n)], [t.slice(n), *tables[i + 1 :]]
    return taken, []


def _compact(table: pa.Table) -> pa.Table:
    """``table`` with each dictionary column's dictionary cut to the values its rows use, in
    their order: Parquet writes a group's dictionary whole (a part cut in two, or a reader's
    dictionary, may hold values its rows do not use)."""
    cols = []
    for col in table.columns:
        if not pa.types.is_dictionary(col.type) or not col.num_chunks:
            cols.append(col)
            continue
        d = col.combine_chunks() if col.num_chunks > 1 else col.chunk(0)
        nulls = np.asarray(d.is_null()) if d.null_count else None
        idx = pc.fill_null(d.indices, 0).to_numpy() if d.null_count else d.indices.to_numpy()
        # the values used, in dictionary order, and each one's place among them: a mark and a
        # running count over the dictionary, linear (sorting the indices as floats, which
        # nulls made them: 4.3 s against 0.1 s for 4 M rows of a 1.28 M-path dictionary)
        used = np.zeros(max(len(d.dictionary), 1), bool)  # (a null's index 0 needs a place)
        used[idx if nulls is None else idx[~nulls]] = True
        if used.all():  # (a group of whole logs uses every value of its logs' dictionaries)
            cols.append(col)
            continue
        place = (np.cumsum(used, dtype=np.int64) - 1).astype(idx.dtype, copy=False)
        indices = pa.array(place[idx], d.indices.type, mask=nulls)
        kept = d.dictionary.take(pa.array(np.flatnonzero(used)))
        cols.append(pa.DictionaryArray.from_arrays(indices, kept))
    return pa.Table.from_arrays(cols, schema=table.schema)


def open_store(path: Path) -> TraceStore:
    path = Path(path)
    meta_file = path / RUN_JSON
    if not meta_file.exists():
        raise FileNotFoundError(f"{path} is not a trace store: it has no {RUN_JSON}")
    return TraceStore(path=path, meta=RunMeta.read(meta_file))
