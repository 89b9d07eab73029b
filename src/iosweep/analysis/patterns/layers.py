"""Every I/O layer the trace recorded, analysed or not: what passed through each.

A Darshan log of an HPC application holds several layers over the same bytes: HDF5 or
PnetCDF above MPI-IO, MPI-IO above POSIX, DAOS's object calls under its file interface DFS.
The analysis counts the file layers (``analysis.modules``: POSIX, STDIO, DFS by default)
once; this section lists them all, so that a job whose I/O only a layer outside them saw
(a DAOS object-store job, say) is told so, not told that nothing was recorded.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from iosweep.analysis.data import RunData
from iosweep.analysis.sections import PartIn, PartOut, PartsIn, Section, register

TOTALS = "layers.parquet"  # a part's totals per module and source (RunData.layers)

# module -> (name in words, where it sits relative to the file layers)
LAYERS = {
    "H5F": ("HDF5 files", "library"),
    "H5D": ("HDF5 datasets", "library"),
    "PNETCDF_FILE": ("PnetCDF files", "library"),
    "PNETCDF_VAR": ("PnetCDF variables", "library"),
    "MPIIO": ("MPI-IO", "middleware"),
    "POSIX": ("POSIX", "file"),
    "STDIO": ("STDIO", "file"),
    "DFS": ("DAOS file system (DFS)", "file"),
    "DAOS": ("DAOS objects", "object store"),
}


def analyze_layers(rd: RunData) -> list[dict[str, Any]]:
    """The ``layers`` section of a run's summary: one entry per module the trace holds, in
    order from the application down to storage."""
    return layers_of(rd.layers, rd.settings.modules)


def layers_of(totals: pd.DataFrame, analysed: list[str]) -> list[dict[str, Any]]:
    """:func:`analyze_layers` from the run's per-module totals by source (``RunData.layers``,
    or the parts' put together): a module's counters where it has any, else its segments."""
    sums = totals.groupby(["module", "source"], sort=False).sum(numeric_only=True).reset_index()
    has_counters = set(sums.loc[sums["source"] == "counters", "module"])
    rows = sums[(sums["source"] == "counters") | ~sums["module"].isin(has_counters)]
    order = list(LAYERS)
    rows = rows.assign(
        at=[order.index(m) if m in LAYERS else len(order) for m in rows["module"]]
    ).sort_values(["at", "module"])
    out = []
    for r in rows.to_dict(orient="records"):
        name, level = LAYERS.get(r["module"], (r["module"], "other"))
        out.append(
            {
                "module": r["module"],
                "name": name,
                "level": level,
                "analysed": r["module"] in analysed,
                "records": int(r["records"]),
                "reads": int(r["reads"]),
                "writes": int(r["writes"]),
                "bytes_read": int(r["bytes_read"]),
                "bytes_written": int(r["bytes_written"]),
                "time": float(r["time"]),
            }
        )
    return out


def unanalysed_io(layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The layers outside ``analysis.modules`` that moved bytes."""
    return [x for x in layers if not x["analysed"] and (x["bytes_read"] or x["bytes_written"])]


def _of_part(part: PartIn, out: PartOut) -> None:
    out.put(TOTALS, part.rd.layers)


def _of_run(parts: PartsIn) -> list[dict[str, Any]]:
    return layers_of(pd.concat(parts.frames(TOTALS)), parts.settings.modules)


SECTION = register(Section("layers", _of_part, _of_run))
