"""Where a read log's tables wait until the store is written: in memory, or on disk.

Every log must be read before any row is written (a log's rank, and the run's clock, are known
only from all of them), so a run's tables would all be held at once: ~440 B a segment, 4.4 GB
at ten million. Past ``SPILL_MIN_BYTES`` of logs, each log's tables go to an Arrow IPC file as
soon as it is read (in the reader process, so they do not travel between processes either),
and come back one log at a time while the store is written (:class:`iosweep.trace.store.Parts`):
then ingest holds about one log and one row group, whatever the run's size.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pyarrow as pa

from iosweep.files import atomic_write
from iosweep.trace.logs import ProcessLog

TABLE_ATTRS = ("segments", "counters", "app_events")  # ProcessLog attributes holding tables

# Logs (bytes on disk) from which the tables are spilled: below, holding them costs less than
# a few hundred MB, and writing and reading them back would only slow ingest down.
SPILL_MIN_BYTES = 256 * 2**20

SPILL_DIR = ".ingest-parts"  # in the store's directory while it is written


def spill(log: ProcessLog, where: Path, key: str) -> None:
    """Move ``log``'s tables to IPC files named after ``key`` (unique among the run's logs)
    under ``where``; the log keeps their paths (``log.spilled``). A full disk raises
    NoSpaceError naming the file: the ingest stops (a log left out would be a wrong store)."""
    where.mkdir(parents=True, exist_ok=True)
    for attr in TABLE_ATTRS:
        table = getattr(log, attr)
        if table is None:
            continue
        f = where / f"{key}.{attr}.arrow"
        atomic_write(f, functools.partial(_write, table), need=table.nbytes)
        log.spilled[attr] = (f, table.nbytes)
        setattr(log, attr, None)


def _write(table: pa.Table, f: Path) -> None:
    # lz4: a third of the bytes for little time (the spill of 100 M segments is GBs)
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    with pa.OSFile(str(f), "wb") as sink, pa.ipc.new_file(sink, table.schema, options=options) as w:
        w.write_table(table)


def table_of(log: ProcessLog, attr: str, columns: list[str] | None = None) -> pa.Table | None:
    """One of ``log``'s tables (only ``columns`` if given), from memory or its spill."""
    if attr not in log.spilled:
        t = getattr(log, attr)
        return t.select(columns) if t is not None and columns else t
    with pa.OSFile(str(log.spilled[attr][0])) as src:  # read, not mapped: owns its memory
        t = pa.ipc.open_file(src).read_all()
    return t.select(columns) if columns else t


def take(log: ProcessLog, attr: str) -> pa.Table | None:
    """``log``'s table, handed over: the log no longer holds it (nor its spill file)."""
    t = table_of(log, attr)
    setattr(log, attr, None)
    spilled = log.spilled.pop(attr, None)
    if spilled is not None:
        spilled[0].unlink(missing_ok=True)
    return t


def nbytes(log: ProcessLog, attr: str) -> int:
    """The Arrow bytes of one of ``log``'s tables, held or spilled: a bound of what writing it
    into a store takes on disk."""
    if attr in log.spilled:
        return log.spilled[attr][1]
    t = getattr(log, attr)
    return t.nbytes if t is not None else 0


def remove(where: Path | None) -> None:
    if where is not None:
        shutil.rmtree(where, ignore_errors=True)
