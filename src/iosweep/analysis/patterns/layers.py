"""Every I/O layer the trace recorded, analysed or not: what passed through each.

A Darshan log of an HPC application holds several layers over the same bytes: HDF5 or
PnetCDF above MPI-IO, MPI-IO above POSIX, DAOS's object calls under its file interface DFS.
The analysis counts the file layers (``analysis.modules``: POSIX, STDIO, DFS by default)
once; this section lists them all, so that a job whose I/O only a layer outside them saw
(a DAOS object-store job, say) is told so, not told that nothing was recorded.
"""

from __future__ import annotations

from typing import Any

from iosweep.analysis.data import RunData

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
    order = list(LAYERS)
    rows = rd.layers.to_dict(orient="records")
    rows.sort(key=lambda r: order.index(r["module"]) if r["module"] in LAYERS else len(order))
    out = []
    for r in rows:
        name, level = LAYERS.get(r["module"], (r["module"], "other"))
        out.append(
            {
                "module": r["module"],
                "name": name,
                "level": level,
                "analysed": r["module"] in rd.settings.modules,
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
