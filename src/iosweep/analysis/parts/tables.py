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

from iosweep.analysis.parts.facts import PartFacts
from iosweep.analysis.parts.results import BUCKETS, PATHS, PartResults, buckets_of
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

    Paths are matched by a 64-bit hash of each (pandas' SipHash, in C), each match checked
    against the path itself: looked up as Python strings (a pandas index, a dict), 32 parts'
    million paths took 64 s and 25 s; so, 19 s. The first part's codes are the run's, hashed
    only once a second part is read. Two paths with the same hash stop the analysis (about 1
    in 10^7 for a million paths), never merge silently."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._hash = np.empty(0, np.uint64)  # the hashes of ``values``, sorted
        self._code = np.empty(0, np.int64)  # the code of each hash in ``_hash``
        self._hashed = 0  # how many of ``values`` are in ``_hash``
        self._of: dict[object, np.ndarray] = {}
        self._first: Path | None = None  # the part whose codes are the run's

    def __len__(self) -> int:
        return len(self.values)

    def of(self, part: PartResults) -> np.ndarray:
        """The run's codes of ``part``'s paths (its codes index them)."""
        if part.folder not in self._of:
            mine = part.paths()
            if not self._of:
                self.values = mine.tolist()
                self._first = part.folder
                self._of[part.folder] = np.arange(len(mine), dtype=np.int32)
            else:
                self._of[part.folder] = self._codes(mine, part)
        return self._of[part.folder]

    def same(self, part: PartResults) -> bool:
        """Whether ``part``'s codes are the run's."""
        return part.folder == self._first

    def _codes(self, mine: np.ndarray, part: PartResults) -> np.ndarray:
        if self._hashed < len(self.values):  # the first part's, hashed now a second is read
            first = np.asarray(self.values, dtype=object)
            self._add(
                pd.util.hash_array(first, categorize=False), np.arange(len(first)), self._first
            )
        h = pd.util.hash_array(mine, categorize=False) if len(mine) else np.empty(0, np.uint64)
        at = np.minimum(np.searchsorted(self._hash, h), max(len(self._hash) - 1, 0))
        found = self._hash[at] == h if len(self._hash) else np.zeros(len(h), bool)
        codes = np.empty(len(h), np.int64)
        codes[found] = self._code[at[found]]
        new = np.flatnonzero(~found)
        codes[new] = len(self.values) + np.arange(len(new))
        same = np.asarray(self.values, dtype=object)[codes[found]] == mine[found]
        if not same.all():
            raise _collision(part.folder)
        self.values.extend(mine[new].tolist())
        self._add(h[new], codes[new], part.folder)
        return codes.astype(np.int32)

    def _add(self, h: np.ndarray, codes: np.ndarray, folder: Path | None) -> None:
        """Hashes ``h`` of the run's ``codes`` (of the part in ``folder``) into the lookup (a
        clash stops the run)."""
        if len(np.unique(h)) < len(h):
            raise _collision(folder)
        hashes, codes_of = np.concatenate([self._hash, h]), np.concatenate([self._code, codes])
        order = np.argsort(hashes, kind="stable")
        self._hash, self._code = hashes[order], codes_of[order]
        self._hashed += len(h)


def _collision(folder: Path | None) -> ValueError:
    return ValueError(
        f"{Path(folder or '.') / PATHS}: two paths have the same 64-bit hash; the run cannot "
        "be put together from parts: analyse it whole"
    )


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


def code_paths(parts: list[PartResults], paths: RunPaths) -> None:
    """The run's codes for every part's paths (in the parts' order)."""
    for out in parts:
        paths.of(out)


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
