"""Requests not aligned to the file system, and the Lustre striping they meet: Darshan's POSIX counters of requests whose file
offset, or memory buffer, is not a multiple of the file system's alignment (its block size;
on Lustre, the stripe size). A misaligned request can touch one block (or stripe, and the
server holding it) more than its size needs, and with several writers, contend for it.

Counters only: DXT does not record alignment, and DFTracer traces have none.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import RunData
from iosweep.analysis.sections import PartIn, PartOut, PartsIn, Section, register

COUNTS, LUSTRE = "alignment.json", "lustre.parquet"  # a part's counts, its files' striping


def alignment_counts(rd: RunData) -> dict[str, Any] | None:
    """The POSIX counter records' calls, misaligned calls and alignments (value: records);
    None without POSIX records. Of some ranks' records, theirs (:func:`add_alignment_counts`)."""
    if "POSIX" not in rd.modules:
        return None
    c = rd.counters[rd.counters["module"] == rd.modules.index("POSIX")]
    if not len(c):
        return None
    values, counts = np.unique(c.loc[c["file_alignment"] > 0, "file_alignment"], return_counts=True)
    return {
        "ops": int((c["reads"] + c["writes"]).sum()),
        "file_not_aligned": int(c["file_not_aligned"].sum()),
        "mem_not_aligned": int(c["mem_not_aligned"].sum()),
        "alignments": {str(int(v)): int(n) for v, n in zip(values, counts, strict=True)},
    }


def add_alignment_counts(parts: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """:func:`alignment_counts` of some parts of a run's ranks as the run's."""
    known = [p for p in parts if p is not None]
    if not known:
        return None
    out: dict[str, Any] = {
        k: sum(p[k] for p in known) for k in ("ops", "file_not_aligned", "mem_not_aligned")
    }
    out["alignments"] = {}
    for p in known:
        for v, n in p["alignments"].items():
            out["alignments"][v] = out["alignments"].get(v, 0) + n
    return out


def alignment_of(counts: dict[str, Any] | None, lustre: pd.DataFrame) -> dict[str, Any] | None:
    """The section from the run's :func:`alignment_counts` and its files' Lustre striping
    (one row per file: stripe_size, stripe_count)."""
    if counts is None:
        return None
    ops, file_na, mem_na = counts["ops"], counts["file_not_aligned"], counts["mem_not_aligned"]
    values = np.array([int(v) for v in counts["alignments"]], np.int64)
    n = np.array(list(counts["alignments"].values()), np.int64)
    lustre = lustre[lustre["stripe_size"] > 0]
    return {
        "ops": ops,
        "file_not_aligned": file_na,
        "mem_not_aligned": mem_na,
        "file_share": file_na / ops if ops else 0.0,
        "mem_share": mem_na / ops if ops else 0.0,
        # the most common alignment among the files (Darshan records one per file; the
        # smallest of equally common ones)
        "file_alignment": int(values[np.lexsort((values, -n))[0]]) if len(values) else None,
        # Lustre striping where the log has LUSTRE records: the most common of the files'
        "lustre": {
            "files": len(lustre),
            "stripe_size": _most_common(lustre["stripe_size"]),
            "stripe_count": _most_common(lustre["stripe_count"]),
            "stripe_count_max": int(lustre["stripe_count"].max()),
        }
        if len(lustre)
        else None,
    }


def _most_common(v) -> int:
    values, counts = np.unique(np.asarray(v, np.int64), return_counts=True)
    return int(values[counts.argmax()])


def _of_part(part: PartIn, out: PartOut) -> None:
    out.put_json(COUNTS, alignment_counts(part.rd))
    out.put(LUSTRE, part.rd.lustre, part.rd.paths)


def _of_run(parts: PartsIn) -> dict[str, Any] | None:
    lustre = pd.concat(parts.frames(LUSTRE, coded=True)).drop_duplicates("file")
    return alignment_of(add_alignment_counts(parts.values(COUNTS)), lustre)


SECTION = register(Section("alignment", _of_part, _of_run))
