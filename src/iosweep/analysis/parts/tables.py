"""The volume tables (:mod:`iosweep.analysis.patterns.volume`) of a run analysed in parts.

A part writes its :class:`~iosweep.analysis.patterns.volume.TablesPart` as files, paths as
Parquet dictionaries (its codes are its own); the run's is the parts' rows put together
with the run's codes, then finished as a whole run's is (:func:`finish_tables`): a file's
size, the sharing of its bytes between ranks and a node's unique bytes need every part's
rows of it, a rank's rows need only its part.
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


def _with_paths(codes: np.ndarray, paths: pa.Array) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), paths)


def write_part(tp: TablesPart, paths: list[str], facts: dict[str, Any], out: Path) -> None:
    """``tp`` (its file codes index ``paths``) and the part's ``facts`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    dictionary = pa.array(paths, pa.string())
    fr = pa.Table.from_pandas(tp.file_rank.drop(columns=["file"]), preserve_index=False)
    fr = fr.add_column(1, "file", _with_paths(tp.file_rank["file"].to_numpy(), dictionary))
    pq.write_table(fr, out / FILE_RANK)
    mk, lo, hi = tp.spans
    nf = max(len(paths), 1)
    spans = pa.table(
        {
            "actor": pa.array(((mk >> 1) // nf - 1).astype(np.int32)),
            "file": _with_paths((mk >> 1) % nf, dictionary),
            "direction": pa.array((mk & 1).astype(np.int8)),
            "lo": pa.array(lo),
            "hi": pa.array(hi),
        }
    )
    pq.write_table(spans, out / SPANS)
    pq.write_table(pa.Table.from_pandas(tp.ranks, preserve_index=False), out / RANKS)
    counts = {"ops": tp.ops, "posix_traced": tp.posix_traced, "posix_counted": tp.posix_counted}
    (out / FACTS).write_text(json.dumps({**counts, **facts}))


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


def combine(parts: list[Path], paths: StringCodes) -> TablesPart:
    """The parts' tables put together, paths coded in ``paths`` (the run's codes grow from
    it in the order the parts name them)."""
    file_rank, spans, ranks = [], [], []
    counts = {"ops": 0, "posix_traced": 0, "posix_counted": 0}
    for out in parts:
        file_rank.append(_frame(pq.read_table(out / FILE_RANK), paths))
        spans.append(_frame(pq.read_table(out / SPANS), paths))
        ranks.append(pd.read_parquet(out / RANKS))
        f = facts(out)
        for k in counts:
            counts[k] += int(f[k])
    fr = pd.concat(file_rank, ignore_index=True)
    sp = pd.concat(spans, ignore_index=True)
    nf = max(len(paths), 1)
    key = ((sp["actor"].to_numpy(np.int64) + 1) * nf + sp["file"].to_numpy(np.int64)) * 2
    key += sp["direction"].to_numpy(np.int64)
    r = pd.concat(ranks, ignore_index=True).sort_values("rank", ignore_index=True)
    return TablesPart(fr, (key, sp["lo"].to_numpy(), sp["hi"].to_numpy()), r, **counts)
