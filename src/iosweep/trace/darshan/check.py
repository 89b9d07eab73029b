"""Check a Darshan log's layout in Python before any of it reaches libdarshan-util.

libdarshan-util trusts the file: on a damaged log it can trip an ``assert`` (abort) while
parsing name records, or scan past its buffer for the exe/mount text of the job record.
:func:`check_log` validates the header, every region of the region map against the file
size (overlap, truncation), and the small job and name-record regions, which it
decompresses with Python's zlib/bz2. Nothing here calls into C.
"""

from __future__ import annotations

import bisect
import bz2
import itertools
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.trace.logs import LogError

DARSHAN_MAGIC = 6567223
# Header layouts of the log format versions we read: format 3.00 (Darshan 3.0) to 3.41
# (Darshan 3.4.x, 3.5.x). version: (module slots, partial_flag offset, its size, name_map off)
_LAYOUTS = {
    "3.00": (16, 20, 4, 24),  # as 3.10; only its name records differ (see _parse_names)
    "3.10": (16, 20, 4, 24),
    "3.20": (16, 20, 4, 24),
    "3.21": (16, 20, 4, 24),
    "3.41": (64, 24, 8, 32),
}
_MAX_HEADER = 48 + 64 * 20
_COMP_ZLIB, _COMP_BZIP2, _COMP_NONE = 0, 1, 2
JOB_RECORD_SIZE = 4096  # DARSHANJOB_RECORD_SIZE: job struct + exe/mount text, uncompressed
_JOB_STRUCT_SIZE = {"3.41": 1080}  # start/end gained a nsec field in 3.41; 1064 before
_NO_IDS, _NO_PATHS = np.zeros(0, np.uint64), pa.array([], pa.string())


@dataclass
class LogLayout:
    """What :func:`check_log` learnt from a log without calling libdarshan-util."""

    version: str  # log format version, e.g. "3.41"
    swap: bool  # written on a machine of the other byte order
    comp_type: int
    size: int  # file size in bytes
    header_size: int
    regions: dict[str, tuple[int, int]]  # "job", "names", "slot<i>": (offset, length)
    mapped_end: int  # where the last mapped region ends (== size for an intact log)
    lost_slots: list[int] = field(default_factory=list)  # module slots cut off by truncation
    names: NameTable = field(default_factory=lambda: NameTable(_NO_IDS, _NO_PATHS))


def decompressor(comp_type: int) -> zlib._Decompress | bz2.BZ2Decompressor | None:
    """A fresh decompressor of one compressed stream of a log's (None: stored uncompressed)."""
    if comp_type == _COMP_NONE:
        return None
    return zlib.decompressobj() if comp_type == _COMP_ZLIB else bz2.BZ2Decompressor()


def decompress(path: Path, what: str, data: bytes, comp_type: int) -> bytes:
    """Inflate one region. MPI logs concatenate one stream per rank: loop over the streams."""
    if comp_type == _COMP_NONE:
        return data
    out = []
    rest = data
    while rest:
        d = decompressor(comp_type)
        assert d is not None  # (stored uncompressed: returned above)
        try:
            out.append(d.decompress(rest))
        except (zlib.error, OSError, ValueError) as e:
            raise LogError(path, "corrupt", f"cannot decompress the {what} ({e})") from None
        if not d.eof:
            raise LogError(path, "corrupt", f"the compressed stream of the {what} is cut short")
        rest = d.unused_data
    return b"".join(out)


class NameTable(Mapping[int, str]):
    """A log's file-name records, record id -> path: arrays looked up a column at a time (an
    ImageNet-scale run's logs hold 2.56 M names), a mapping for the odd single name."""

    def __init__(self, ids: np.ndarray, paths: pa.Array):
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        # an id named twice keeps its last name (as a dict built in file order does)
        last = np.r_[ids[1:] != ids[:-1], True] if len(ids) else np.zeros(0, bool)
        self.ids = ids[last]  # sorted
        # the paths stay as read, each id's found through _place: a log's lookups take the
        # paths they need, not every path twice (a third of reading the names)
        self._given, self._place = paths, order[last]
        self._sorted: pa.Array | None = None

    @property
    def paths(self) -> pa.Array:
        """The path of each of :attr:`ids`."""
        if self._sorted is None:
            self._sorted = self._given.take(pa.array(self._place))
        return self._sorted

    def __getitem__(self, rid: int) -> str:
        at = int(np.searchsorted(self.ids, rid))
        if at == len(self.ids) or int(self.ids[at]) != rid:
            raise KeyError(rid)
        return str(self._given[int(self._place[at])].as_py())

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids.tolist())

    def __len__(self) -> int:
        return len(self.ids)

    def lookup(self, rids: np.ndarray, unknown) -> pa.Array:
        """The path of each of ``rids`` (distinct record ids, an Arrow array in their order);
        ``unknown(rid)`` names one without a name record, or with an empty name."""
        at = np.minimum(np.searchsorted(self.ids, rids), max(len(self.ids) - 1, 0))
        found = self.ids[at] == rids if len(self.ids) else np.zeros(len(rids), bool)
        out = (
            self._given.take(pa.array(self._place[at]))
            if len(self.ids)
            else pa.nulls(len(rids), pa.string())
        )
        missing = ~found | (pc.fill_null(pc.binary_length(out), 0).to_numpy() == 0)
        if not missing.any():
            return out
        values = out.to_pylist()
        for i in np.flatnonzero(missing).tolist():
            values[i] = unknown(int(rids[i]))
        return pa.array(values, pa.string())


def _parse_names(path: Path, buf: bytes, swap: bool, version: str) -> NameTable:
    """Name records: (uint64 id, NUL-terminated path) repeated, exactly filling the region;
    format 3.00 wrote (uint64 id, uint32 length, path) instead."""
    if version == "3.00":
        return _parse_names_3_00(path, buf, swap)
    if not buf:
        return NameTable(_NO_IDS, _NO_PATHS)
    u8 = np.frombuffer(buf, np.uint8)
    nul = np.flatnonzero(u8 == 0)
    # a record's path ends at the first NUL at least 8 bytes (its id) after its start; an id
    # may hold NUL bytes too, so the records are found by walking from NUL to NUL: where the
    # next record ends at the very next NUL (most records), a whole stretch at once
    n = len(nul)
    nxt = np.searchsorted(nul, nul + 9)
    # the NULs after which the walk skips one (and the last: the walk ends there)
    jumps = np.r_[np.flatnonzero(nxt[:-1] != np.arange(1, n)), n - 1]
    k = int(np.searchsorted(nul, 8))
    if len(jumps) > n // 8:  # ids full of NULs (small numbers): a NUL at a time
        step, chain = nxt.tolist(), []
        while k < n:
            chain.append(k)
            k = step[k]
        ends = nul[chain]
    else:  # stretches k..j of NULs that end records, walked with Python's ints and bisect
        marks = np.zeros(n + 1, np.int8)
        at, after = jumps.tolist(), nxt[jumps].tolist()
        while k < n:
            i = bisect.bisect_left(at, k)
            marks[k] += 1
            marks[at[i] + 1] -= 1
            k = after[i]
        ends = nul[np.cumsum(marks[:n], dtype=np.int8) > 0]
    starts = np.r_[0, ends[:-1] + 1].astype(np.int64)
    done = int(ends[-1]) + 1 if len(ends) else 0
    if done != len(buf):
        raise LogError(path, "corrupt", f"the file-name records are damaged at byte {done}")
    ids = u8[starts[:, None] + np.arange(8)].view(">u8" if swap else "<u8").ravel()
    lengths = ends - starts - 8
    # the paths' bytes: all but each record's id and its NUL (a mask, not an index a byte)
    keep = np.ones(len(u8), bool)
    keep[ends] = False
    keep[(starts[:, None] + np.arange(8)).ravel()] = False
    data = u8[keep]
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int32)
    paths = pa.StringArray.from_buffers(len(ids), pa.py_buffer(offsets), pa.py_buffer(data))
    try:
        paths.validate(full=True)
    except pa.ArrowInvalid:  # a name that is not UTF-8: decoded as before, bad bytes replaced
        raw = [data[a:b].tobytes() for a, b in itertools.pairwise(offsets.tolist())]
        paths = pa.array([r.decode("utf-8", "replace") for r in raw], pa.string())
    return NameTable(ids.astype(np.uint64), paths)


def _parse_names_3_00(path: Path, buf: bytes, swap: bool) -> NameTable:
    names: dict[int, str] = {}
    fmt = ">QI" if swap else "<QI"
    pos, n = 0, len(buf)
    while pos < n:
        if pos + 12 > n:
            raise LogError(path, "corrupt", f"the file-name records are damaged at byte {pos}")
        rid, length = struct.unpack_from(fmt, buf, pos)
        if pos + 12 + length > n:
            raise LogError(path, "corrupt", f"the file-name records are damaged at byte {pos}")
        names[rid] = buf[pos + 12 : pos + 12 + length].decode("utf-8", "replace")
        pos += 12 + length
    return NameTable(np.array(list(names), np.uint64), pa.array(list(names.values()), pa.string()))


def check_log(path: Path | str, names: bool = True) -> LogLayout:
    """Validate a Darshan log's structure in Python; raise :class:`LogError` if it is unusable.

    Checks the magic number and format version, that the mapped regions lie inside the file
    and do not overlap, and that the job record and file-name records decompress and parse.
    A log cut short keeps the module regions before the cut (``lost_slots`` lists the rest).
    Without ``names``, the file-name records are neither checked nor parsed (a look at the
    log's job alone: the records are read later).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(_MAX_HEADER)
    except OSError as e:
        raise LogError(path, "unreadable", f"cannot read the file ({e.strerror})") from None
    if size == 0:
        raise LogError(path, "unreadable", "empty file (0 bytes), not a Darshan log")
    if len(head) < 16:
        raise LogError(path, "unreadable", f"only {size} bytes: too short to be a Darshan log")
    swap, order, version = _byte_order_and_version(path, head)
    nslots, _pf_off, _pf_size, nm_off = _LAYOUTS[version]
    map_off = nm_off + 16
    header_size = map_off + 20 * nslots  # mod_map[n] (16 B each) then mod_ver[n] (4 B each)
    if size < header_size:
        raise LogError(
            path, "truncated", f"file is {size} bytes, shorter than its {header_size}-byte header"
        )
    comp_type = head[16]
    if comp_type not in (_COMP_ZLIB, _COMP_BZIP2, _COMP_NONE):
        raise LogError(path, "corrupt", f"unknown compression type {comp_type} in the header")

    regions, mapped_end, lost = _regions(
        path, head, order, (nm_off, map_off, nslots, header_size), size
    )
    layout = LogLayout(version, swap, comp_type, size, header_size, regions, mapped_end, lost)
    _check_records(path, layout, names)
    return layout


def _byte_order_and_version(path: Path, head: bytes) -> tuple[bool, str, str]:
    """(byte-swapped, struct byte order, format version); LogError for a log we cannot read."""
    if struct.unpack_from("<q", head, 8)[0] == DARSHAN_MAGIC:
        swap, order = False, "<"
    elif struct.unpack_from(">q", head, 8)[0] == DARSHAN_MAGIC:
        swap, order = True, ">"
    else:
        raise LogError(path, "unreadable", "not a Darshan log (no Darshan magic number)")
    version = head[:8].split(b"\0")[0].decode("ascii", "replace")
    if version in _LAYOUTS:
        return swap, order, version
    try:
        older = float(version) < 3.00
    except ValueError:
        raise LogError(path, "corrupt", f"damaged format version {version!r}") from None
    why = (
        "older than 3.00: a Darshan 2 log, which libdarshan-util 3.x (PyDarshan's) does not "
        "read either"
        if older
        else "newer than the bundled libdarshan-util 3.5 knows"
    )
    raise LogError(path, "unsupported", f"log format version {version} is {why}")


def _regions(
    path: Path, head: bytes, order: str, header: tuple[int, int, int, int], size: int
) -> tuple[dict[str, tuple[int, int]], int, list[int]]:
    """(regions by name, end of the last one, module slots cut off by truncation): the
    header's region map checked against itself and the file size. ``header``: the name
    map's offset, the module map's offset, its slots, and the header's size."""
    nm_off, map_off, nslots, header_size = header
    mapped = {}
    off, ln = struct.unpack_from(order + "QQ", head, nm_off)
    if ln:
        mapped["names"] = (off, ln)
    for i in range(nslots):
        off, ln = struct.unpack_from(order + "QQ", head, map_off + 16 * i)
        if ln:
            mapped[f"slot{i}"] = (off, ln)
    for name, (off, ln) in mapped.items():
        if off < header_size or off + ln > 1 << 48:
            raise LogError(path, "corrupt", f"the header's region map is damaged ({name})")
    # the job record runs from the header to the first mapped region (or to the end)
    job_end = min((off for off, _ in mapped.values()), default=size)
    regions = {"job": (header_size, job_end - header_size), **mapped}
    spans = sorted((off, off + ln, name) for name, (off, ln) in regions.items())
    for (_s0, e0, n0), (s1, _e1, n1) in itertools.pairwise(spans):
        if s1 < e0:
            raise LogError(path, "corrupt", f"the header's region map is damaged ({n0}, {n1})")
    mapped_end = max(end for _, end, _ in spans)
    lost = []
    for _s, end, name in spans:
        if end <= size:
            continue
        if not name.startswith("slot"):
            what = "job record is" if name == "job" else "file-name records are"
            raise LogError(
                path,
                "truncated",
                f"file is {size} bytes but its header maps {mapped_end}: the {what} cut off",
            )
        lost.append(int(name[4:]))
    if regions["job"][1] <= 0:
        raise LogError(path, "corrupt", "the header's region map leaves no job record")
    return regions, mapped_end, lost


def _check_records(path: Path, layout: LogLayout, names: bool) -> None:
    """Decompress and check the job record; parse the file-name records into the layout
    (with ``names``)."""
    regions, comp_type, version = layout.regions, layout.comp_type, layout.version
    with open(path, "rb") as f:
        off, ln = regions["job"]
        f.seek(off)
        job = decompress(path, "job record", f.read(ln), comp_type)
        # libdarshan-util keeps the first 4096 bytes and scans the exe/mount text after the job
        # struct for NUL-terminated lines: without a NUL in there it would read past its buffer
        jsize = _JOB_STRUCT_SIZE.get(version, 1064)
        if len(job) <= jsize or (len(job) >= JOB_RECORD_SIZE and b"\0" not in job[jsize:4096]):
            raise LogError(path, "corrupt", f"the job record is damaged ({len(job)} bytes)")
        if names and "names" in regions:
            off, ln = regions["names"]
            f.seek(off)
            raw = decompress(path, "file-name records", f.read(ln), comp_type)
            layout.names = _parse_names(path, raw, layout.swap, version)
