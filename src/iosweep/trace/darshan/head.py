"""A Darshan log's head: what ties it to a rank (its process, job, times and host), read
without its records, so that a run's logs can be attributed before any of their records are
read, and each log's records then go into the store as they are read
(:mod:`iosweep.trace.ingest.stream`).

The host is the one :func:`~iosweep.trace.darshan.read.read_darshan_log` gives: rank 0's
host in the first DXT record with operations, else the lowest rank's. Only as much of a DXT
region is inflated as it takes to reach that record (its first, in a per-process log).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from iosweep.trace.darshan.bulk import COUNTS_AT, DXT_HEAD, HOST_AT, HOST_LEN, SEGMENT
from iosweep.trace.darshan.check import decompressor
from iosweep.trace.darshan.dxt import DXT_MODULES
from iosweep.trace.darshan.libutil import LogHandle
from iosweep.trace.darshan.read import checked_layout, job_facts, module_slots
from iosweep.trace.logs import ProcessLog

_CHUNK = 1 << 12  # compressed bytes inflated at a time while looking for the host (a log's
# first record is in its first few: 64 KiB inflated 0.6 s more for the 544 logs of a run)


def read_darshan_head(path: Path | str) -> ProcessLog:
    """One log's :class:`ProcessLog` without its tables (``segments`` and ``counters`` are
    None): the fields :func:`~iosweep.trace.darshan.read.read_darshan_log` gives it from the
    header, the job record and the host of its DXT records. Raises :class:`LogError` where
    the header or job record is unusable, as reading the whole log would."""
    path = Path(path)
    layout = checked_layout(path, names=False)
    h = LogHandle(path)
    try:
        job, mods = h.job(), h.modules()
    finally:
        h.close()
    facts = job_facts(path, layout, job, mods)
    by_idx, slot_name = module_slots(layout, mods)
    lost = {slot_name.get(s) for s in layout.lost_slots}
    spans = {n: layout.regions[f"slot{s}"] for s, n in slot_name.items() if n not in lost}
    order = ">" if layout.swap else "<"
    first_hosts: dict[int, str] = {}
    host = None
    # (an MPI log's ranks' hosts are read from all its records: ingest reads it whole)
    dxt = [n for n in by_idx if n in DXT_MODULES and n in spans] if not facts["mpi"] else []
    for name in dxt:
        found = _dxt_hosts(path, spans[name], layout.comp_type, order)
        if 0 in found:
            host = found[0]
            break
        for r in sorted(found):
            first_hosts.setdefault(r, found[r])
    if host is None:
        host = next(iter(first_hosts.values()), None)
    return ProcessLog(**facts, segments=None, host=host, head=True)


def _dxt_hosts(path: Path, span: tuple[int, int], comp_type: int, order: str) -> dict[int, str]:
    """The host of each rank's first record with operations in a DXT region, up to rank 0's
    (where it stops); a damaged region gives what was found before the damage."""
    inflate = _inflater(comp_type)
    counts = struct.Struct(order + "qq")
    head = struct.Struct(order + "Qq")
    found: dict[int, str] = {}
    buf, skip = b"", 0  # inflated bytes not yet walked; bytes of a record's segments to pass
    off, left = span
    try:
        with open(path, "rb") as f:
            f.seek(off)
            while left > 0:
                raw = f.read(min(_CHUNK, left))
                if not raw:
                    break
                left -= len(raw)
                data = inflate(raw)
                cut = min(skip, len(data))
                buf, skip = buf + data[cut:], skip - cut
                pos = 0
                while pos + DXT_HEAD <= len(buf):
                    wc, rc = counts.unpack_from(buf, pos + COUNTS_AT)
                    if wc < 0 or rc < 0:
                        return found
                    _rid, rank = head.unpack_from(buf, pos)
                    if wc + rc > 0 and rank not in found:
                        name = buf[pos + HOST_AT : pos + HOST_AT + HOST_LEN]
                        found[rank] = name.split(b"\0", 1)[0].decode("utf-8", "replace")
                        if rank == 0:
                            return found
                    pos += DXT_HEAD + SEGMENT * (wc + rc)
                skip += max(pos - len(buf), 0)
                buf = buf[pos:]
    except (OSError, zlib.error, ValueError, EOFError):
        pass  # the records' reader says what is damaged
    return found


def _inflater(comp_type: int):
    """A function inflating a region's compressed bytes piece by piece."""
    inflater = decompressor(comp_type)
    return inflater.decompress if inflater is not None else bytes
