"""The volume tables (:mod:`iosweep.analysis.patterns.volume`) of a run analysed in parts.

A part puts its :class:`~iosweep.analysis.patterns.volume.TablesPart` with its results
(:class:`~.results.PartResults`), paths coded (its codes are its own). A file's size, the
sharing of its bytes between ranks and a node's unique bytes need every part's rows of it, a
rank's rows only its part: so a part puts its (rank, file) rows and byte ranges by a bucket
of their file (a hash of its path, the same in every part), and the run's are put together a
few buckets at a time (:func:`passes`), every row of a file in the same pass, so that no more
of them than the budget allows are ever held together.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.analysis.parts.facts import PartFacts
from iosweep.analysis.parts.results import BUCKETS, PartResults, buckets_of
from iosweep.analysis.patterns.volume import TablesPart

FILE_RANK, SPANS, RANKS = "file_rank.parquet", "spans.parquet", "ranks.parquet"


def write_part(tp: TablesPart, paths: list[str], facts: PartFacts, out: PartResults) -> None:
    """``tp`` (its file codes index ``paths``), ``paths`` and the part's ``facts`` into
    ``out``; the (rank, file) rows and byte ranges by bucket, the rows per bucket in the
    facts (of a part on disk: one held counts them if a pass needs them)."""
    out.put_paths(paths)
    out.put(FILE_RANK, tp.file_rank, paths, by_bucket=True)
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
    out.put(SPANS, spans, paths, by_bucket=True)
    out.put(RANKS, tp.ranks)
    per_bucket: list[int] = []
    if not out.held:
        codes = tp.file_rank["file"].to_numpy()
        rows = np.bincount(buckets_of(paths)[codes], minlength=BUCKETS) if len(codes) else None
        per_bucket = rows.tolist() if rows is not None else [0] * BUCKETS
    counted = replace(
        facts,
        ops=tp.ops,
        posix_traced=tp.posix_traced,
        posix_counted=tp.posix_counted,
        file_rank_rows=len(tp.file_rank),
        bucket_rows=per_bucket,
    )
    out.put_facts(counted)


class RunPaths:
    """The run's path codes (growing as parts are read, in the order of first use) and, per
    part, the run's code of each of its own.

    Parts' paths are looked up among the run's so far as Arrow strings (``index_in``: a hash
    table in C++, every match exact), several parts at a time (:meth:`add`), each lookup
    building that table anew. As Python strings (a pandas index, a dict), 32 parts' million
    paths took 64 s and 25 s; by 64-bit hashes in numpy, 40 s at 102.5 M segments (19.3 M
    rows of path lists); one part at a time in Arrow, 17 s; so, 11 s. The first part's codes
    are the run's."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._known = pa.array([], pa.large_string())  # ``values`` as Arrow strings
        self._of: dict[object, np.ndarray] = {}
        self._first: Path | None = None  # the part whose codes are the run's

    def __len__(self) -> int:
        return len(self.values)

    def of(self, part: PartResults) -> np.ndarray:
        """The run's codes of ``part``'s paths (its codes index them)."""
        self.add([part], 0)
        return self._of[part.folder]

    def add(self, parts: list[PartResults], max_bytes: int) -> None:
        """The codes of ``parts``' paths, in their order, looked up a batch of parts at a
        time: each batch's paths at most ``max_bytes`` of Arrow strings (one part at least)."""
        batch: list[tuple[PartResults, pa.Array]] = []
        size = 0
        for part in parts:
            if part.folder in self._of:
                continue
            mine = part.path_array()
            if batch and size + mine.nbytes > max_bytes:
                self._look_up(batch)
                batch, size = [], 0
            batch.append((part, mine))
            size += mine.nbytes
        if batch:
            self._look_up(batch)

    def same(self, part: PartResults) -> bool:
        """Whether ``part``'s codes are the run's."""
        return part.folder == self._first

    def _look_up(self, batch: list[tuple[PartResults, pa.Array]]) -> None:
        if not self._of:  # the first part's codes are the run's
            part, mine = batch.pop(0)
            self.values, self._known, self._first = mine.to_pylist(), mine, part.folder
            self._of[part.folder] = np.arange(len(mine), dtype=np.int32)
            if not batch:
                return
        mine = pa.chunked_array([m for _, m in batch], pa.large_string())  # (not copied)
        found = pc.index_in(mine, value_set=self._known)
        codes = pc.fill_null(found, -1).to_numpy().copy()
        new = np.flatnonzero(codes < 0)
        # the paths not seen before, coded in the order of their first use
        added = mine.take(pa.array(new)).combine_chunks().dictionary_encode()
        codes[new] = len(self.values) + added.indices.to_numpy()
        self.values.extend(added.dictionary.to_pylist())
        self._known = pa.concat_arrays([self._known, added.dictionary])
        at = 0
        for part, m in batch:
            self._of[part.folder] = codes[at : at + len(m)].astype(np.int32)
            at += len(m)


def recoded(df: pd.DataFrame, paths: RunPaths, part: PartResults) -> pd.DataFrame:
    """``df``, a frame of ``part``, its ``file`` codes the run's."""
    if "file" in df:
        code = df["file"].fillna(-1).to_numpy(np.int64)  # (an empty frame's may be floats)
        codes = paths.of(part)  # (the first part's are the run's: not looked up)
        run = code if paths.same(part) else codes[code.clip(min=0)]
        df["file"] = np.where(code >= 0, run, -1).astype(np.int32)
    return df


def coded(part: PartResults, name: str, paths: RunPaths) -> pd.DataFrame:
    """``part``'s frame ``name`` with the run's path codes."""
    return recoded(part.frame(name, objects=True), paths, part)


def ranks_and_counts(parts: list[PartResults]) -> tuple[pd.DataFrame, dict[str, int]]:
    """The parts' rank rows (:func:`~iosweep.analysis.patterns.volume.rank_rows`) and their
    segments, traced and counted POSIX operations, added up."""
    counts = {"ops": 0, "posix_traced": 0, "posix_counted": 0}
    for out in parts:
        f = out.facts()
        for k in counts:
            counts[k] += int(getattr(f, k))
    ranks = pd.concat([out.frame(RANKS) for out in parts], ignore_index=True)
    return ranks.sort_values("rank", ignore_index=True), counts


def passes(parts: list[PartResults], max_rows: int) -> list[tuple[int, int]]:
    """The buckets in ranges [lo, hi) of at most ``max_rows`` (rank, file) rows of every
    part together (a bucket alone may hold more: it is never cut)."""
    counted = [out.facts().file_rank_rows for out in parts]  # (-1: a part of an older iosweep)
    if min(counted) >= 0 and sum(counted) <= max_rows:
        return [(0, BUCKETS)]
    rows = np.sum([out.bucket_rows(FILE_RANK) for out in parts], axis=0)
    found: list[tuple[int, int]] = []
    lo, held = 0, 0
    for b in range(BUCKETS):
        if held and held + rows[b] > max_rows:
            found.append((lo, b))
            lo, held = b, 0
        held += int(rows[b])
    found.append((lo, BUCKETS))
    return found


def pass_frame(
    parts: list[PartResults], paths: RunPaths, name: str, buckets: tuple[int, int]
) -> pd.DataFrame | None:
    """The rows in the ``buckets`` range of every part's ``name`` frame (put by bucket), with
    the run's path codes: every row of their files; None where no part has one."""
    every = buckets == (0, BUCKETS)
    found = []
    for out in parts:
        df = out.in_buckets(name, buckets, every)
        if df is not None:
            found.append(recoded(df, paths, out))
    return pd.concat(found, ignore_index=True) if found else None


def pass_rows(
    parts: list[PartResults], paths: RunPaths, buckets: tuple[int, int]
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


def rows_of(parts: list[PartResults], paths: RunPaths, files: np.ndarray) -> pd.DataFrame:
    """Every part's (rank, file) rows of the ``files`` given (run's codes)."""
    found = []
    for out in parts:
        mine = np.flatnonzero(np.isin(paths.of(out), files)).astype(np.int32)
        found.append(recoded(out.of_files(FILE_RANK, mine), paths, out))
    return pd.concat(found, ignore_index=True)
