"""A run's logs read by several jobs (parts: on SLURM, one job a part, on any node), then put
together into one store by a job of its own.

A part reads its share of the logs as a one-job ingest reads them all (:func:`read_logs`, its
readers a process per core), each log's tables spilled to its folder
(:mod:`iosweep.trace.ingest.parts`), and writes what it read (the logs' heads and issues) to
``part.pkl``. Which logs a part reads comes from the logs alone (:func:`assign`: the largest
first, each to the part with the fewest bytes so far), so every part's job finds its share
without any other. Putting them together takes each log's read from the part that read it
and writes the store as a one-job ingest of spilled logs does (``clock.place_all``): the same
store, table by table (tests/test_ingest_in_parts.py). The parts' files are linked, not moved,
into the store's own spill folder, so a put-together that fails can be run again.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from iosweep.files import atomic_write
from iosweep.trace.ingest import need
from iosweep.trace.ingest.find import LogEntry, discover, outside
from iosweep.trace.ingest.readlogs import read_each
from iosweep.trace.logs import ProcessLog
from iosweep.trace.schema import Issue

PART_FILE = "part.pkl"
PART_VERSION = 1


def code_digest() -> str:
    """The trace stage's own source: a store, or a part, made by other reader code is not
    taken as this code's."""
    h = hashlib.sha256()
    for f in sorted(Path(__file__).parents[1].rglob("*.py")):  # all of iosweep.trace
        h.update(f.read_bytes())
    return h.hexdigest()


@dataclass
class ReadLog:
    """One log as a part read it: the file as it was then, and the log (its tables spilled,
    or None where it could not be read) with the issues reading it found."""

    path: str  # resolved
    size: int
    mtime_ns: int
    log: ProcessLog | None
    issues: list[Issue]


@dataclass
class ReadPart:
    """What one part's job read (``part.pkl`` in its folder, beside the spilled tables)."""

    index: int
    count: int
    readers: int  # processes that read its logs (none: a part with no log)
    code: str  # code_digest() of the code that read them
    logs: list[ReadLog] = field(default_factory=list)
    version: int = PART_VERSION


def _stat(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_size, st.st_mtime_ns


def assign(entries: list[LogEntry], count: int) -> list[list[LogEntry]]:
    """The logs of each of ``count`` parts: the largest first, each to the part that has the
    fewest bytes so far (ties: the lowest part), in the order found within a part. The same
    logs give the same parts in every job."""
    sizes = [e.path.stat().st_size if e.path.exists() else 0 for e in entries]
    order = sorted(range(len(entries)), key=lambda i: (-sizes[i], str(entries[i].path)))
    load = [0] * count
    owner = [0] * len(entries)
    for i in order:
        k = min(range(count), key=lambda j: (load[j], j))
        owner[i] = k
        load[k] += sizes[i]
    return [[e for e, k in zip(entries, owner, strict=True) if k == j] for j in range(count)]


def read_part(
    inputs: list[Path],
    out: Path,
    index: int,
    count: int,
    *,
    exclude: list[Path] | None = None,
    isolate: bool = False,
    workers: int | None = None,
    memory_gb: float | None = None,
) -> ReadPart:
    """Read part ``index`` (from 0) of ``count`` of the logs under ``inputs`` into the folder
    ``out`` (made afresh): its logs' tables spilled there and ``part.pkl``. Logs under ``out``
    or ``exclude`` are not the run's. ``memory_gb``: the budget, as :func:`ingest`'s."""
    if not 0 <= index < count:
        raise ValueError(f"part {index} of {count}: a part is numbered 0..{count - 1}")
    out = Path(out)
    own = part_entries(inputs, index, count, [out, *(exclude or [])])
    readers = need.readers_within(own, workers, True, memory_gb) if own else 0
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    stats = [_stat(e.path) for e in own]  # before reading: a log changed after is caught
    readers, found = read_each(own, isolate, readers, spill_to=out) if own else (0, [])
    part = ReadPart(index, count, readers, code_digest())
    for e, (size, mtime), issues in zip(own, stats, found, strict=True):
        if e.log is not None:  # its spill files, by name in this folder (it may move)
            e.log.spilled = {a: (Path(f.name), n) for a, (f, n) in e.log.spilled.items()}
        part.logs.append(ReadLog(str(e.path.resolve()), size, mtime, e.log, issues))
    atomic_write(out / PART_FILE, lambda f: f.write_bytes(pickle.dumps(part)))
    return part


def part_entries(inputs: list[Path], index: int, count: int, exclude: list[Path]) -> list[LogEntry]:
    """The logs under ``inputs`` (but those under ``exclude``) that part ``index`` of
    ``count`` reads."""
    entries, _unfinished = discover([Path(p) for p in inputs])
    return assign(outside(entries, exclude), count)[index]


def load_part(folder: Path) -> ReadPart:
    """A part's ``part.pkl``; ValueError naming the folder where it is missing, damaged, or
    written by other reader code."""
    f = Path(folder) / PART_FILE
    try:
        part = pickle.loads(f.read_bytes())
    except FileNotFoundError:
        why = "not an ingest part, or its job did not finish"
        raise ValueError(f"{folder}: no {PART_FILE}: {why}") from None
    except Exception as e:  # a truncated or foreign file: pickle raises many kinds
        raise ValueError(f"{f}: not a readable ingest part ({type(e).__name__}: {e})") from None
    if not isinstance(part, ReadPart) or getattr(part, "version", None) != PART_VERSION:
        raise ValueError(f"{f}: not an ingest part of this iosweep version: read the part again")
    if part.code != code_digest():
        raise ValueError(f"{f}: read by other iosweep reader code: read the part again")
    return part


def _linked(src: Path, dst: Path) -> None:
    """``src`` at ``dst`` too: a hard link (the put-together takes its spill files, and the
    part keeps its own), a copy across file systems."""
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def take_parts(
    entries: list[LogEntry], folders: list[Path], spill_to: Path, issues: list[Issue]
) -> int:
    """Each of ``entries``'s logs as the part that read it read it (``entry.log``, its issues
    added to ``issues`` in the order of ``entries``, as a one-job ingest adds them); returns
    the processes that read them, all parts together. The parts' spill files are linked into
    ``spill_to``. ValueError naming the log where no part read it, several did, or it changed
    since, and naming the part where its parts disagree on how many there are."""
    read: dict[str, tuple[ReadLog, Path]] = {}
    readers = 0
    parts = [load_part(f) for f in folders]
    if not parts:
        raise ValueError("no parts given")
    counts = {p.count for p in parts}
    if len(counts) != 1 or sorted(p.index for p in parts) != list(range(parts[0].count)):
        got = ", ".join(
            f"{f}: part {p.index} of {p.count}" for f, p in zip(folders, parts, strict=True)
        )
        raise ValueError(f"the parts are not one whole ({got}): give every part of one count")
    for folder, part in zip(folders, parts, strict=True):
        readers += part.readers
        for r in part.logs:
            if r.path in read:
                raise ValueError(f"{r.path}: read by two parts ({read[r.path][1]}, {folder})")
            read[r.path] = (r, Path(folder))
    spill_to.mkdir(parents=True, exist_ok=True)
    for n, e in enumerate(entries):
        key = str(e.path.resolve())
        if key not in read:
            raise ValueError(f"{e.path}: read by none of the {len(parts)} parts: read them again")
        r, folder = read[key]
        if (r.size, r.mtime_ns) != _stat(e.path):
            raise ValueError(f"{e.path}: changed since part {folder} read it: read it again")
        if r.log is not None:
            for attr, (name, nbytes) in r.log.spilled.items():
                dst = spill_to / f"{n}.{name}"
                _linked(folder / name, dst)
                r.log.spilled[attr] = (dst, nbytes)
        e.log = r.log
        issues.extend(r.issues)
    return readers
