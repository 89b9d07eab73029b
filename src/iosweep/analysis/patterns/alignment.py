"""Requests not aligned to the file system, and the Lustre striping they meet: Darshan's POSIX counters of requests whose file
offset, or memory buffer, is not a multiple of the file system's alignment (its block size;
on Lustre, the stripe size). A misaligned request can touch one block (or stripe, and the
server holding it) more than its size needs, and with several writers, contend for it.

Counters only: DXT does not record alignment, and DFTracer traces have none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iosweep.analysis.data import RunData


def analyze_alignment(rd: RunData) -> dict[str, Any] | None:
    """The ``alignment`` section of a run's summary (None without POSIX counter records)."""
    if "POSIX" not in rd.modules:
        return None
    c = rd.counters[rd.counters["module"] == rd.modules.index("POSIX")]
    if not len(c):
        return None
    ops = int((c["reads"] + c["writes"]).sum())
    file_na, mem_na = int(c["file_not_aligned"].sum()), int(c["mem_not_aligned"].sum())
    values, counts = np.unique(c.loc[c["file_alignment"] > 0, "file_alignment"], return_counts=True)
    lustre = rd.lustre[rd.lustre["stripe_size"] > 0]
    return {
        "ops": ops,
        "file_not_aligned": file_na,
        "mem_not_aligned": mem_na,
        "file_share": file_na / ops if ops else 0.0,
        "mem_share": mem_na / ops if ops else 0.0,
        # the most common alignment among the files (Darshan records one per file)
        "file_alignment": int(values[counts.argmax()]) if len(values) else None,
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
