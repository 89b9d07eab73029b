"""A part's results, as the put-together step reads them: files in the part's folder (one of
several parts, each analysed by a job or process of its own), or held in memory (the only
part of its run: written to be read back at once, they cost a fifth of the run's time at
10 M segments, benchmarks/README.md).

Every frame whose ``file`` column holds codes into the part's paths is put with those paths
(:meth:`PartResults.put_paths`); the frames a pass over the run's files reads (``by_bucket``)
are kept on disk in the order of their files' buckets (:func:`buckets_of`, the same in
every part), so that a pass reads only its rows."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from iosweep.analysis.parts.facts import PartFacts

PATHS = "paths.parquet"  # the part's paths: its frames' ``file`` columns are codes into it
BUCKETS = 1024  # of files, by path: the unit a pass over the run's rows takes whole
BUCKET = "bucket"
GROUP_ROWS = 1 << 17  # rows per Parquet row group
# ... of a frame put by bucket: what a pass reads beyond its buckets (the 102.5 M run's
# (rank, file) rows in 10 passes: a part's read in 0.29 s, not 0.53 s, with 131 k)
BUCKET_GROUP_ROWS = 1 << 15
# Parquet's dictionary page, past which a column is written plain: a column of few values
# (counts, classes) still gets one, one of times or offsets gives up early instead of hashing
# 1 MiB of values first (a part of the 102.5 M run: its frames written in 1.3 s, not 4.7 s,
# read as fast, 15% smaller)
DICTIONARY_BYTES = 1 << 16

Filters = list[tuple[str, str, Any]]
_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
}


def path_rows(dirs: list[Path]) -> int:
    """The rows of the parts' path lists (a file read in several parts counts in each), from
    their Parquet footers (nothing read)."""
    return sum(pq.ParquetFile(d / PATHS).metadata.num_rows for d in dirs if (d / PATHS).exists())


def buckets_of(paths: list[str]) -> np.ndarray:
    """Each path's bucket: a hash of the path (pandas' SipHash with its fixed key: the same
    in every process), so every part puts a file's rows in the same bucket. Hashed once per
    list (a million paths: seconds)."""
    if _hashed and _hashed[0] is paths:
        return _hashed[1]
    h = pd.util.hash_array(np.asarray(paths, dtype=object)) if len(paths) else np.empty(0)
    _hashed[:] = [paths, (h % BUCKETS).astype(np.int16)]
    return _hashed[1]


_hashed: list[Any] = []  # the paths last hashed, and their buckets


def _column(col: pa.ChunkedArray) -> np.ndarray:
    """A part's column; strings as objects shared by every row that holds them (a str per
    row would weigh GBs at a million files)."""
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        enc = pc.dictionary_encode(col.combine_chunks())
        values = np.asarray(enc.dictionary.to_pylist(), dtype=object)
        return values[enc.indices.to_numpy(zero_copy_only=False)]
    return col.to_numpy()


def _as_frame(table: pa.Table) -> pd.DataFrame:
    return pd.DataFrame({c: _column(table[c]) for c in table.column_names}, copy=False)


class PartResults:
    """A part's results under ``folder`` (its name in messages and its key in the run's path
    codes); ``held``: kept in memory, nothing written (the part is its run's only one)."""

    def __init__(self, folder: Path, held: bool = False) -> None:
        self.folder = Path(folder)
        self._held: dict[str, Any] | None = {} if held else None
        # per frame put by bucket: its footer and each row group's lowest and highest bucket
        self._buckets: dict[str, tuple[pq.FileMetaData, np.ndarray, np.ndarray] | None] = {}

    def __repr__(self) -> str:
        return f"PartResults({str(self.folder)!r}, held={self.held})"

    def __getstate__(self) -> dict[str, Any]:
        assert self._held is None, "a part held in memory stays in its process"
        return {**self.__dict__, "_buckets": {}}

    @property
    def held(self) -> bool:
        return self._held is not None

    def start(self) -> None:
        """Ready to be written (a folder on disk)."""
        if self._held is None:
            self.folder.mkdir(parents=True, exist_ok=True)

    # writing
    def put(
        self,
        name: str,
        df: pd.DataFrame,
        paths: list[str] | None = None,
        by_bucket: bool = False,
        group_rows: int | None = None,
    ) -> None:
        """The frame ``name``; ``paths``: its ``file`` column's codes index them (the part's,
        :meth:`put_paths`); ``by_bucket``: read a pass at a time (:meth:`in_buckets`);
        ``group_rows``: the rows of a Parquet row group (read a window at a time)."""
        if self._held is not None:
            self._held[name] = df
            return
        if paths is None and group_rows is None:
            df.to_parquet(
                self.folder / name, index=False, dictionary_pagesize_limit=DICTIONARY_BYTES
            )
            return
        table = pa.Table.from_pandas(df, preserve_index=False)
        if by_bucket:
            assert paths is not None, "a frame by bucket has paths"
            codes = df["file"].to_numpy()
            bucket = buckets_of(paths)[codes] if len(codes) else codes
            order = np.argsort(bucket, kind="stable")
            table = table.append_column(BUCKET, pa.array(bucket, pa.int16()))
            table = table.take(pa.array(order))
        pq.write_table(
            table,
            self.folder / name,
            row_group_size=group_rows or (BUCKET_GROUP_ROWS if by_bucket else GROUP_ROWS),
            dictionary_pagesize_limit=DICTIONARY_BYTES,
        )

    def put_paths(self, paths: list[str]) -> None:
        if self._held is not None:
            self._held[PATHS] = paths
        else:
            pq.write_table(pa.table({"path": pa.array(paths, pa.string())}), self.folder / PATHS)

    def put_json(self, name: str, value: Any) -> None:
        if self._held is not None:
            self._held[name] = value
        else:
            (self.folder / name).write_text(json.dumps(value))

    def put_facts(self, facts: PartFacts) -> None:
        if self._held is not None:
            self._held["facts"] = facts
        else:
            facts.write(self.folder)

    # reading
    def has(self, name: str) -> bool:
        return name in self._held if self._held is not None else (self.folder / name).exists()

    def facts(self) -> PartFacts:
        return self._held["facts"] if self._held is not None else PartFacts.read(self.folder)

    def json(self, name: str) -> Any:
        if self._held is not None:
            return self._held[name]
        return json.loads((self.folder / name).read_text())

    def path_array(self) -> pa.Array:
        """The part's paths, as Arrow (large) strings."""
        if self._held is not None:
            return pa.array(self._held[PATHS], pa.large_string())
        path = pq.read_table(self.folder / PATHS)["path"]
        return path.combine_chunks().cast(pa.large_string())

    def frame(self, name: str, objects: bool = False) -> pd.DataFrame:
        """The frame ``name`` as put (its codes the part's); ``objects``: read from disk with
        its strings as shared objects (a frame put with paths: one per file's row)."""
        if self._held is not None:
            return self._held[name].copy(deep=False)
        if objects:
            return _as_frame(pq.read_table(self.folder / name))
        return pd.read_parquet(self.folder / name)

    def take(self, name: str) -> pd.DataFrame:
        """:meth:`frame`, let go of here (the last read of a large frame)."""
        if self._held is not None:
            return self._held.pop(name)
        return self.frame(name, objects=True)

    def rows(self, name: str) -> int:
        if self._held is not None:
            return len(self._held[name])
        return pq.ParquetFile(self.folder / name).metadata.num_rows

    def select(
        self, name: str, columns: list[str] | None = None, filters: Filters | None = None
    ) -> pd.DataFrame:
        """The frame ``name``'s ``columns``, the rows that pass ``filters`` (Parquet's: each
        ``(column, op, value)`` with op one of ``< <= > >= ==``, all of them)."""
        if self._held is None:
            return pq.read_table(self.folder / name, columns=columns, filters=filters).to_pandas()
        df = self._held[name]
        if filters:
            keep = np.ones(len(df), bool)
            for column, op, value in filters:
                keep &= _COMPARE[op](df[column].to_numpy(), value)
            df = df[keep]
        return (df[columns] if columns is not None else df).copy(deep=False)

    def in_buckets(self, name: str, buckets: tuple[int, int], every: bool) -> pd.DataFrame | None:
        """The rows of frame ``name`` (put ``by_bucket``) whose files are in the ``buckets``
        range, part's codes; ``every``: the range holds every bucket (the one pass over the
        run's files: a held frame is let go of here). None: no such frame."""
        if not self.has(name):
            return None
        lo, hi = buckets
        if self._held is None:
            return _as_frame(self._bucket_range(name, lo, hi)).drop(columns=BUCKET)
        if every:
            return self.take(name)
        df = self.frame(name)
        b = buckets_of(self._held[PATHS])[df["file"].to_numpy()]
        return df[(b >= lo) & (b < hi)]

    def _bucket_range(self, name: str, lo: int, hi: int) -> pa.Table:
        """The rows of frame ``name`` (on disk, put by bucket: its rows in bucket order) in
        buckets [lo, hi): the row groups that hold them, cut where the range starts and ends
        (a pass a part a frame: a filtered dataset read cost more than the rows read)."""
        f = self.folder / name
        if name not in self._buckets:
            md = pq.read_metadata(f)
            i = md.schema.to_arrow_schema().get_field_index(BUCKET)
            stats = [md.row_group(g).column(i).statistics for g in range(md.num_row_groups)]
            known = all(st is not None and st.has_min_max for st in stats)
            self._buckets[name] = (
                (md, np.array([st.min for st in stats]), np.array([st.max for st in stats]))
                if known
                else None
            )
        found = self._buckets[name]
        if found is None:  # (no statistics: let Parquet filter)
            return pq.read_table(f, filters=[(BUCKET, ">=", lo), (BUCKET, "<", hi)])
        md, least, most = found
        pf = pq.ParquetFile(f, metadata=md)
        touched = (most >= lo) & (least < hi)
        whole = np.flatnonzero(touched & (least >= lo) & (most < hi)).tolist()
        pieces = [pf.read_row_groups(whole)] if whole else []
        # the groups the range starts or ends in (its rows in bucket order: one at each end),
        # a group at a time, their rows in range copied (a slice would hold the whole group)
        for g in np.flatnonzero(touched & ((least < lo) | (most >= hi))).tolist():
            t = pf.read_row_group(g)
            b = t[BUCKET].to_numpy()
            pieces.insert(0 if least[g] < lo else len(pieces), t.filter((b >= lo) & (b < hi)))
        return pa.concat_tables(pieces) if pieces else pf.schema_arrow.empty_table()

    def of_files(self, name: str, mine: np.ndarray) -> pd.DataFrame:
        """The rows of frame ``name`` of the files ``mine`` (the part's codes)."""
        if self._held is not None:
            df = self.frame(name)
            return df[np.isin(df["file"].to_numpy(), mine)]
        where = pc.field("file").isin(pa.array(mine, pa.int32()))
        return _as_frame(pq.read_table(self.folder / name, filters=where)).drop(columns=BUCKET)

    def bucket_rows(self, name: str) -> np.ndarray:
        """The rows of frame ``name`` in each bucket."""
        f = self.facts()
        if f.bucket_rows:
            return np.asarray(f.bucket_rows, np.int64)
        codes = self.frame(name)["file"].to_numpy()
        paths = self._held[PATHS] if self._held is not None else self.path_array().to_pylist()
        if not len(codes):
            return np.zeros(BUCKETS, np.int64)
        return np.bincount(buckets_of(paths)[codes], minlength=BUCKETS)

    def group_starts(self, name: str, column: str) -> tuple[list[float], list[int]]:
        """The least ``column`` value and the rows of each row group of frame ``name`` (put
        with ``group_rows``; of as many rows, where held)."""
        if self._held is not None:
            values = self._held[name][column].to_numpy()
            at = np.arange(0, len(values), GROUP_ROWS)
            mins = np.minimum.reduceat(values, at) if len(values) else np.empty(0)
            return mins.tolist(), np.diff(np.append(at, len(values))).tolist()
        md = pq.ParquetFile(self.folder / name).metadata
        i = md.schema.to_arrow_schema().get_field_index(column)
        starts, rows = [], []
        for g in range(md.num_row_groups):
            st = md.row_group(g).column(i).statistics
            starts.append(st.min if st is not None and st.has_min_max else -np.inf)
            rows.append(md.row_group(g).num_rows)
        return starts, rows
