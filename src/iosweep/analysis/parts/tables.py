"""The volume tables (:mod:`iosweep.analysis.patterns.volume`) of a run analysed in parts.

A part writes its :class:`~iosweep.analysis.patterns.volume.TablesPart` as files, paths as
Parquet dictionaries (its codes are its own). A file's size, the sharing of its bytes between
ranks and a node's unique bytes need every part's rows of it, a rank's rows only its part: so
a part writes its (rank, file) rows and byte ranges sorted by a bucket of their file (a hash
of its path, the same in every part), and the run's are put together a few buckets at a time
(:func:`passes`), every row of a file in the same pass, so that no more of them than the
budget allows are ever held together.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from iosweep.analysis.parts.facts import PartFacts
from iosweep.analysis.patterns.volume import TablesPart

FILE_RANK, SPANS, RANKS = "file_rank.parquet", "spans.parquet", "ranks.parquet"
PATHS = "paths.parquet"  # the part's paths: its frames' ``file`` columns are codes into it
BUCKETS = 1024  # of files, by path: the unit a pass over the run's rows takes whole
BUCKET = "bucket"
_GROUP_ROWS = 1 << 17  # rows per Parquet row group: what a pass reads beyond its buckets


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


def _by_bucket(table: pa.Table, bucket: np.ndarray) -> pa.Table:
    """``table`` with each row's bucket, its rows in bucket order (stable)."""
    order = np.argsort(bucket, kind="stable")
    return table.append_column(BUCKET, pa.array(bucket, pa.int16())).take(pa.array(order))


def write_part(tp: TablesPart, paths: list[str], facts: PartFacts, out: Path) -> None:
    """``tp`` (its file codes index ``paths``), ``paths`` and the part's ``facts`` under
    ``out``; the (rank, file) rows and byte ranges in bucket order, the rows per bucket in
    the facts."""
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"path": pa.array(paths, pa.string())}), out / PATHS)
    write_frame(tp.file_rank, paths, out / FILE_RANK, by_bucket=True)
    mk, lo, hi = tp.spans
    nf = max(len(paths), 1)
    spans = pd.DataFrame(
        {
            "actor": ((mk >> 1) // nf - 1).astype(np.int32),
            "file": ((mk >> 1) % nf).astype(np.int32),
            "direction": (mk & 1).astype(np.int8),
            "lo": lo,
            "hi": hi,
        }
    )
    write_frame(spans, paths, out / SPANS, by_bucket=True)
    pq.write_table(pa.Table.from_pandas(tp.ranks, preserve_index=False), out / RANKS)
    codes = tp.file_rank["file"].to_numpy()
    rows = np.bincount(buckets_of(paths)[codes], minlength=BUCKETS) if len(codes) else None
    per_bucket = rows.tolist() if rows is not None else [0] * BUCKETS
    counted = replace(
        facts,
        ops=tp.ops,
        posix_traced=tp.posix_traced,
        posix_counted=tp.posix_counted,
        bucket_rows=per_bucket,
    )
    counted.write(out)


def write_frame(df: pd.DataFrame, paths: list[str], out: Path, by_bucket: bool = False) -> None:
    """``df`` as Parquet, its ``file`` column codes into ``paths`` (the part's, written by
    :func:`write_part`); ``by_bucket``: its rows in the order of their files' buckets (read
    by :func:`pass_frame`)."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    if by_bucket:
        codes = df["file"].to_numpy()
        table = _by_bucket(table, buckets_of(paths)[codes] if len(codes) else codes)
    pq.write_table(table, out, row_group_size=_GROUP_ROWS)


class RunPaths:
    """The run's path codes (growing as parts are read, in the order of first use) and, per
    part, the run's code of each of its own.

    Paths are matched by a 64-bit hash of each (pandas' SipHash, in C), each match checked
    against the path itself: looked up as Python strings (a pandas index, a dict), 32 parts'
    million paths took 64 s and 25 s; so, 19 s. Two paths with the same hash stop the analysis (about 1 in 10^7 for a
    million paths), never merge silently."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._hash = np.empty(0, np.uint64)  # the hashes of ``values``, sorted
        self._code = np.empty(0, np.int64)  # the code of each hash in ``_hash``
        self._of: dict[Path, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.values)

    def of(self, out: Path) -> np.ndarray:
        """The run's codes of part ``out``'s paths (its codes index them)."""
        if out not in self._of:
            col = pq.read_table(out / PATHS)["path"]
            self._of[out] = self._codes(np.asarray(col.to_pylist(), dtype=object), out)
        return self._of[out]

    def _codes(self, mine: np.ndarray, out: Path) -> np.ndarray:
        h = pd.util.hash_array(mine, categorize=False) if len(mine) else np.empty(0, np.uint64)
        at = np.minimum(np.searchsorted(self._hash, h), max(len(self._hash) - 1, 0))
        found = self._hash[at] == h if len(self._hash) else np.zeros(len(h), bool)
        codes = np.empty(len(h), np.int64)
        codes[found] = self._code[at[found]]
        new = np.flatnonzero(~found)
        codes[new] = len(self.values) + np.arange(len(new))
        same = np.asarray(self.values, dtype=object)[codes[found]] == mine[found]
        if not same.all() or len(np.unique(h[new])) < len(new):
            raise ValueError(
                f"{out / PATHS}: two paths have the same 64-bit hash; the run cannot be put "
                "together from parts: analyse it whole"
            )
        self.values.extend(mine[new].tolist())
        hashes, codes_of = (
            np.concatenate([self._hash, h[new]]),
            np.concatenate([self._code, codes[new]]),
        )
        order = np.argsort(hashes, kind="stable")
        self._hash, self._code = hashes[order], codes_of[order]
        return codes.astype(np.int32)


def read_frame(out: Path, paths: RunPaths) -> pd.DataFrame:
    """A frame of :func:`write_frame` with the run's path codes."""
    return _frame(pq.read_table(out), paths, out.parent)


def facts(out: Path) -> PartFacts:
    """A part's facts (:func:`write_part`)."""
    return PartFacts.read(out)


def _column(col: pa.ChunkedArray) -> np.ndarray:
    """A part's column; strings as objects shared by every row that holds them (a str per
    row would weigh GBs at a million files)."""
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        enc = pc.dictionary_encode(col.combine_chunks())
        values = np.asarray(enc.dictionary.to_pylist(), dtype=object)
        return values[enc.indices.to_numpy(zero_copy_only=False)]
    return col.to_numpy()


def _frame(table: pa.Table, paths: RunPaths, out: Path) -> pd.DataFrame:
    """A frame of part ``out``, its ``file`` codes the run's."""
    df = pd.DataFrame({c: _column(table[c]) for c in table.column_names}, copy=False)
    return recoded(df, paths, out)


def recoded(df: pd.DataFrame, paths: RunPaths, out: Path) -> pd.DataFrame:
    """``df``, a frame of part ``out`` (read, or handed over in memory), its ``file`` codes
    the run's."""
    if "file" in df:
        code = df["file"].fillna(-1).to_numpy(np.int64)  # (an empty frame's may be floats)
        df["file"] = np.where(code >= 0, paths.of(out)[code.clip(min=0)], -1).astype(np.int32)
    return df


def ranks_and_counts(parts: list[Path]) -> tuple[pd.DataFrame, dict[str, int]]:
    """The parts' rank rows (:func:`~iosweep.analysis.patterns.volume.rank_rows`) and their
    segments, traced and counted POSIX operations, added up."""
    counts = {"ops": 0, "posix_traced": 0, "posix_counted": 0}
    for out in parts:
        f = facts(out)
        for k in counts:
            counts[k] += int(getattr(f, k))
    ranks = pd.concat([pd.read_parquet(out / RANKS) for out in parts], ignore_index=True)
    return ranks.sort_values("rank", ignore_index=True), counts


def code_paths(parts: list[Path], paths: RunPaths) -> None:
    """The run's codes for every part's paths (in the parts' order)."""
    for out in parts:
        paths.of(out)


def passes(parts: list[Path], max_rows: int) -> list[tuple[int, int]]:
    """The buckets in ranges [lo, hi) of at most ``max_rows`` (rank, file) rows of every
    part together (a bucket alone may hold more: it is never cut)."""
    rows = np.sum([facts(out).bucket_rows for out in parts], axis=0)
    out: list[tuple[int, int]] = []
    lo, held = 0, 0
    for b in range(BUCKETS):
        if held and held + rows[b] > max_rows:
            out.append((lo, b))
            lo, held = b, 0
        held += int(rows[b])
    out.append((lo, BUCKETS))
    return out


def pass_frame(
    parts: list[Path], paths: RunPaths, name: str, buckets: tuple[int, int]
) -> pd.DataFrame | None:
    """The rows in the ``buckets`` range of every part's ``name`` frame (written by bucket),
    with the run's path codes: every row of their files; None where no part has one."""
    lo, hi = buckets
    where = [(BUCKET, ">=", lo), (BUCKET, "<", hi)]
    found = [
        _frame(pq.read_table(out / name, filters=where), paths, out)
        for out in parts
        if (out / name).exists()
    ]
    return pd.concat(found, ignore_index=True).drop(columns=BUCKET) if found else None


def pass_rows(
    parts: list[Path], paths: RunPaths, buckets: tuple[int, int]
) -> tuple[pd.DataFrame, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The (rank, file) rows and byte ranges of every part in the ``buckets`` range, with the
    run's path codes: every row of their files."""
    fr = pass_frame(parts, paths, FILE_RANK, buckets)
    sp = pass_frame(parts, paths, SPANS, buckets)
    assert fr is not None and sp is not None, "every part writes its rows and ranges"
    nf = max(len(paths), 1)
    key = ((sp["actor"].to_numpy(np.int64) + 1) * nf + sp["file"].to_numpy(np.int64)) * 2
    key += sp["direction"].to_numpy(np.int64)
    return fr, (key, sp["lo"].to_numpy(), sp["hi"].to_numpy())


def rows_of(parts: list[Path], paths: RunPaths, files: np.ndarray) -> pd.DataFrame:
    """Every part's (rank, file) rows of the ``files`` given (run's codes)."""
    found = []
    for out in parts:
        mine = np.flatnonzero(np.isin(paths.of(out), files)).astype(np.int32)
        where = pc.field("file").isin(pa.array(mine, pa.int32()))
        found.append(_frame(pq.read_table(out / FILE_RANK, filters=where), paths, out))
    return pd.concat(found, ignore_index=True).drop(columns=BUCKET)
