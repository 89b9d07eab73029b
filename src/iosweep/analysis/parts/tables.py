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

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from iosweep.analysis.data import StringCodes
from iosweep.analysis.patterns.volume import TablesPart

FILE_RANK, SPANS, RANKS, FACTS = "file_rank.parquet", "spans.parquet", "ranks.parquet", "part.json"
BUCKETS = 1024  # of files, by path: the unit a pass over the run's rows takes whole
BUCKET = "bucket"
_GROUP_ROWS = 1 << 17  # rows per Parquet row group: what a pass reads beyond its buckets


def buckets_of(paths: list[str] | np.ndarray) -> np.ndarray:
    """Each path's bucket: a hash of the path (pandas' SipHash with its fixed key: the same
    in every process), so every part puts a file's rows in the same bucket."""
    if not len(paths):
        return np.empty(0, np.int16)
    h = pd.util.hash_array(np.asarray(paths, dtype=object))
    return (h % BUCKETS).astype(np.int16)


def _by_bucket(table: pa.Table, bucket: np.ndarray) -> pa.Table:
    """``table`` with each row's bucket, its rows in bucket order (stable)."""
    order = np.argsort(bucket, kind="stable")
    return table.append_column(BUCKET, pa.array(bucket)).take(pa.array(order))


def _with_paths(codes: np.ndarray, paths: pa.Array) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), paths)


def write_part(tp: TablesPart, paths: list[str], facts: dict[str, Any], out: Path) -> None:
    """``tp`` (its file codes index ``paths``) and the part's ``facts`` under ``out``; the
    (rank, file) rows and byte ranges in bucket order, the rows per bucket in the facts."""
    out.mkdir(parents=True, exist_ok=True)
    dictionary = pa.array(paths, pa.string())
    bucket = buckets_of(paths)
    codes = tp.file_rank["file"].to_numpy()
    fr = pa.Table.from_pandas(tp.file_rank.drop(columns=["file"]), preserve_index=False)
    fr = _by_bucket(fr.add_column(1, "file", _with_paths(codes, dictionary)), bucket[codes])
    pq.write_table(fr, out / FILE_RANK, row_group_size=_GROUP_ROWS)
    mk, lo, hi = tp.spans
    nf = max(len(paths), 1)
    span_file = (mk >> 1) % nf
    spans = pa.table(
        {
            "actor": pa.array(((mk >> 1) // nf - 1).astype(np.int32)),
            "file": _with_paths(span_file, dictionary),
            "direction": pa.array((mk & 1).astype(np.int8)),
            "lo": pa.array(lo),
            "hi": pa.array(hi),
        }
    )
    spans = _by_bucket(spans, bucket[span_file] if len(paths) else np.empty(0, np.int16))
    pq.write_table(spans, out / SPANS, row_group_size=_GROUP_ROWS)
    pq.write_table(pa.Table.from_pandas(tp.ranks, preserve_index=False), out / RANKS)
    counts = {"ops": tp.ops, "posix_traced": tp.posix_traced, "posix_counted": tp.posix_counted}
    rows = np.bincount(bucket[codes], minlength=BUCKETS) if len(codes) else np.zeros(BUCKETS)
    facts = {**counts, **facts, "bucket_rows": rows.astype(int).tolist()}
    (out / FACTS).write_text(json.dumps(facts))


def write_frame(df: pd.DataFrame, paths: list[str], out: Path) -> None:
    """``df`` as Parquet, its ``file`` codes (into ``paths``) as a path dictionary."""
    table = pa.Table.from_pandas(df.drop(columns=["file"]), preserve_index=False)
    codes = df["file"].to_numpy()
    table = table.append_column("file", _with_paths(codes, pa.array(paths, pa.string())))
    pq.write_table(table, out)


def read_frame(out: Path, paths: StringCodes) -> pd.DataFrame:
    """A frame of :func:`write_frame` with the run's path codes."""
    return _frame(pq.read_table(out), paths)


def facts(out: Path) -> dict[str, Any]:
    """A part's facts (:func:`write_part`)."""
    return json.loads((out / FACTS).read_text())


def _column(col: pa.ChunkedArray, paths: StringCodes) -> np.ndarray:
    """A part's column as the run's: paths (dictionaries) as the run's codes, strings as
    objects shared by every row that holds them (a str per row would weigh GBs at a million
    files)."""
    if pa.types.is_dictionary(col.type):
        return paths.codes(col, "<unknown>")
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        enc = pc.dictionary_encode(col.combine_chunks())
        values = np.asarray(enc.dictionary.to_pylist(), dtype=object)
        return values[enc.indices.to_numpy(zero_copy_only=False)]
    return col.to_numpy()


def _frame(table: pa.Table, paths: StringCodes) -> pd.DataFrame:
    return pd.DataFrame({c: _column(table[c], paths) for c in table.column_names}, copy=False)


def ranks_and_counts(parts: list[Path]) -> tuple[pd.DataFrame, dict[str, int]]:
    """The parts' rank rows (:func:`~iosweep.analysis.patterns.volume.rank_rows`) and their
    segments, traced and counted POSIX operations, added up."""
    counts = {"ops": 0, "posix_traced": 0, "posix_counted": 0}
    for out in parts:
        f = facts(out)
        for k in counts:
            counts[k] += int(f[k])
    ranks = pd.concat([pd.read_parquet(out / RANKS) for out in parts], ignore_index=True)
    return ranks.sort_values("rank", ignore_index=True), counts


def code_paths(parts: list[Path], paths: StringCodes) -> None:
    """The run's codes for every path of the parts' (rank, file) rows (in the parts' order,
    as reading them whole would give)."""
    for out in parts:
        paths.codes(pq.read_table(out / FILE_RANK, columns=["file"])["file"], "<unknown>")


def passes(parts: list[Path], max_rows: int) -> list[tuple[int, int]]:
    """The buckets in ranges [lo, hi) of at most ``max_rows`` (rank, file) rows of every
    part together (a bucket alone may hold more: it is never cut)."""
    rows = np.sum([facts(out)["bucket_rows"] for out in parts], axis=0)
    out: list[tuple[int, int]] = []
    lo, held = 0, 0
    for b in range(BUCKETS):
        if held and held + rows[b] > max_rows:
            out.append((lo, b))
            lo, held = b, 0
        held += int(rows[b])
    out.append((lo, BUCKETS))
    return out


def pass_rows(
    parts: list[Path], paths: StringCodes, buckets: tuple[int, int]
) -> tuple[pd.DataFrame, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The (rank, file) rows and byte ranges of every part in the ``buckets`` range, with the
    run's path codes: every row of their files."""
    lo, hi = buckets
    where = [(BUCKET, ">=", lo), (BUCKET, "<", hi)]
    file_rank, spans = [], []
    for out in parts:
        file_rank.append(_frame(pq.read_table(out / FILE_RANK, filters=where), paths))
        spans.append(_frame(pq.read_table(out / SPANS, filters=where), paths))
    fr = pd.concat(file_rank, ignore_index=True).drop(columns=BUCKET)
    sp = pd.concat(spans, ignore_index=True)
    nf = max(len(paths), 1)
    key = ((sp["actor"].to_numpy(np.int64) + 1) * nf + sp["file"].to_numpy(np.int64)) * 2
    key += sp["direction"].to_numpy(np.int64)
    return fr, (key, sp["lo"].to_numpy(), sp["hi"].to_numpy())


def rows_of(parts: list[Path], paths: StringCodes, files: list[str]) -> pd.DataFrame:
    """Every part's (rank, file) rows of the ``files`` named, with the run's path codes."""
    where = pc.field("file").isin(pa.array(files, pa.string()))
    found = [_frame(pq.read_table(out / FILE_RANK, filters=where), paths) for out in parts]
    return pd.concat(found, ignore_index=True).drop(columns=BUCKET)
