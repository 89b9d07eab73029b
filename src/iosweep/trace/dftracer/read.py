"""Read one DFTracer trace (``.pfw`` or ``.pfw.gz``) into a :class:`~iosweep.trace.logs.ProcessLog`.

A DFTracer trace is a stream of JSON objects, one per line (older versions open it with a
``[`` line and end lines with commas). ``.pfw.gz`` is gzip, possibly several members back to
back (one per buffer flush). Three kinds of lines matter here:

* metadata records (``ph`` 4 or ``"M"``): ``FH`` maps a file hash to its path, ``HH`` a host
  hash to the host name, ``SH`` a string hash to a string (command line, executable),
  ``PR``/``rank`` an MPI rank, ``CM``/``time_metric`` the time unit;
* complete events (``ph`` 1 or ``"X"``): ``ts``/``dur`` in the time unit (microseconds since the
  Unix epoch by default, from ``gettimeofday``), ``args`` with ``fhash``, ``hhash``, ``ret``,
  ``count``, ``offset``, ``whence``, ``flags``, ``size`` ...;
* DFTracer's own ``start``/``end`` events (cat ``dftracer``): command, ppid, version, and in
  ``end`` the number of events the tracer logged.

DFTracer does not log file descriptors, only the file hash of the descriptor, so the file
position is rebuilt per (pid, POSIX-or-STDIO, file); see ``docs/dftracer.md``.

Parsing is done in bulk by ``pyarrow.json`` on blocks of lines; a block that does not parse
(a damaged line, a field of an unexpected type) is parsed line by line so one bad line costs
only itself. The position rebuild is vectorised with numpy.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from iosweep.trace.logs import LogError, ProcessLog
from iosweep.trace.schema import Issue, conform

TRACER = "dftracer"
#: ProcessLog.incomplete entry for a trace that lost events (cut, damaged or unfinished).
INCOMPLETE_TRACE = "trace"

_TIME_SCALE = {"US": 1e-6, "NS": 1e-9, "MS": 1e-3, "SEC": 1.0, "S": 1.0}

# Trace-event phases: DFTracer >= 2 writes numbers, older versions the Chrome letters.
PH_UNKNOWN, PH_COMPLETE, PH_COUNTER, PH_AGGREGATED, PH_METADATA = 0, 1, 2, 3, 4
_PH_LETTERS = {"X": PH_COMPLETE, "C": PH_COUNTER, "A": PH_AGGREGATED, "M": PH_METADATA}

_O_APPEND = 0o2000  # Linux open(2) flag: writes go to end of file, position unknowable here

# --- what each POSIX/STDIO call does to the file position ------------------------------------
# Kinds of call in the position model.
_K_NONE = 0  # no effect on the position
_K_OPEN = 1  # position := 0 (unknown if O_APPEND / "a" mode)
_K_CLOSE = 2  # handle gone: position unknown afterwards
_K_LSEEK = 3  # ret is the new absolute position
_K_FSEEK = 4  # ret is 0/-1: position from offset + whence
_K_TELL = 5  # ret is the current position (resynchronises)
_K_REWIND = 6  # position := 0
_K_UNKNOWN = 7  # position becomes unknown (fsetpos, fdopen, freopen)
_K_UNGETC = 8  # position -= 1
_K_IO_POS = 10  # read/write at the current position, advances it
_K_IO_EXPLICIT = 11  # pread/pwrite: explicit offset, position unchanged

# How the bytes transferred are found, for read/write-class calls.
_B_RET = 1  # ret (bytes), else count (requested)
_B_ITEMS = 2  # ret * size (fread/fwrite return items), else count * size
_B_RET_LEN = 3  # args.ret_len (fgets), 0 when absent (EOF)
_B_STR_LEN = 4  # args.str_len (fputs)
_B_ONE = 5  # one byte when ret >= 0 (fgetc, fputc)
_B_WORD = 6  # sizeof(int) (getw, putw)

_READ, _WRITE = 1, 2

# name -> (kind, bytes rule, direction)
_POSIX_OPS: dict[str, tuple[int, int, int]] = {
    **{
        n: (_K_OPEN, 0, 0) for n in ("open", "open64", "creat", "creat64", "__open_2", "__open64_2")
    },
    **{n: (_K_OPEN, 0, 0) for n in ("openat", "openat64", "__openat_2", "__openat64_2")},
    "close": (_K_CLOSE, 0, 0),
    "lseek": (_K_LSEEK, 0, 0),
    "lseek64": (_K_LSEEK, 0, 0),
    **{n: (_K_IO_POS, _B_RET, _READ) for n in ("read", "readv", "__read_chk")},
    **{n: (_K_IO_POS, _B_RET, _WRITE) for n in ("write", "writev")},
    **{
        n: (_K_IO_EXPLICIT, _B_RET, _READ)
        for n in ("pread", "pread64", "preadv", "preadv64", "__pread_chk", "__pread64_chk")
    },
    **{n: (_K_IO_EXPLICIT, _B_RET, _WRITE) for n in ("pwrite", "pwrite64", "pwritev", "pwritev64")},
}
_STDIO_OPS: dict[str, tuple[int, int, int]] = {
    "fopen": (_K_OPEN, 0, 0),
    "fopen64": (_K_OPEN, 0, 0),
    "fdopen": (_K_UNKNOWN, 0, 0),
    "freopen": (_K_UNKNOWN, 0, 0),
    "fclose": (_K_CLOSE, 0, 0),
    "fseek": (_K_FSEEK, 0, 0),
    "fseeko": (_K_FSEEK, 0, 0),
    "fseeko64": (_K_FSEEK, 0, 0),
    "ftell": (_K_TELL, 0, 0),
    "ftello": (_K_TELL, 0, 0),
    "ftello64": (_K_TELL, 0, 0),
    "rewind": (_K_REWIND, 0, 0),
    "fsetpos": (_K_UNKNOWN, 0, 0),
    "fsetpos64": (_K_UNKNOWN, 0, 0),
    "ungetc": (_K_UNGETC, 0, 0),
    "fread": (_K_IO_POS, _B_ITEMS, _READ),
    "fread_unlocked": (_K_IO_POS, _B_ITEMS, _READ),
    "fwrite": (_K_IO_POS, _B_ITEMS, _WRITE),
    "fwrite_unlocked": (_K_IO_POS, _B_ITEMS, _WRITE),
    "fgets": (_K_IO_POS, _B_RET_LEN, _READ),
    "fputs": (_K_IO_POS, _B_STR_LEN, _WRITE),
    "fgetc": (_K_IO_POS, _B_ONE, _READ),
    "getc": (_K_IO_POS, _B_ONE, _READ),
    "getc_unlocked": (_K_IO_POS, _B_ONE, _READ),
    "fputc": (_K_IO_POS, _B_ONE, _WRITE),
    "putc": (_K_IO_POS, _B_ONE, _WRITE),
    "getw": (_K_IO_POS, _B_WORD, _READ),
    "putw": (_K_IO_POS, _B_WORD, _WRITE),
}
_MODULE_OPS = {"POSIX": _POSIX_OPS, "STDIO": _STDIO_OPS}
_CAT_CODE = {"POSIX": 1, "STDIO": 2}

# --- the columns parsed out of each line ---------------------------------------------------------
_ARGS_INT = ("ret", "count", "size", "offset", "whence", "flags", "ret_len", "str_len")
_ARGS_STR = ("hhash", "fhash", "name", "value")
_TOP_INT = ("id", "pid", "tid", "ts", "dur")
_TOP_STR = ("name", "cat")
# Normalised table every parse path produces (args flattened with an ``a_`` prefix).
_NORM = pa.schema(
    [("line", pa.int64())]
    + [(c, pa.int64()) for c in _TOP_INT]
    + [(c, pa.string()) for c in _TOP_STR]
    + [("ph", pa.int8())]
    + [(f"a_{c}", pa.string()) for c in _ARGS_STR]
    + [(f"a_{c}", pa.int64()) for c in _ARGS_INT]
)
_CHUNK_LINES = 4096  # lines per block when a bulk parse failed and blocks are retried
_INT64_MAX = 2**63 - 1


@dataclass
class _StreamProblem:
    kind: str  # truncated | corrupt
    message: str


# ------------------------------------------------------------------------------------------------
# public API


def read_dftracer_trace(path: Path) -> ProcessLog:
    """Decode one DFTracer trace file.

    Returns a :class:`ProcessLog` whose ``segments`` hold the POSIX/STDIO read/write calls and
    whose ``app_events`` hold every other timed event (POSIX/STDIO metadata calls, application
    annotations). Times are seconds from ``ProcessLog.start`` (epoch seconds of the earliest
    event); ``rank`` is -1 unless the trace itself records an MPI rank.

    Raises :class:`LogError` when nothing usable can be read (kind ``unreadable``, ``empty``,
    ``corrupt`` or ``truncated``). A file that is readable in part yields the events before the
    damage, with an :class:`Issue` in ``issues`` and ``"trace"`` in ``incomplete``.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise LogError(path, "unreadable", f"cannot read DFTracer trace: {e.strerror or e}") from e
    if not raw:
        raise LogError(path, "empty", "DFTracer trace is empty (0 bytes): nothing was flushed")

    problems: list[_StreamProblem] = []
    warnings: list[Issue] = []
    if raw[:2] == b"\x1f\x8b":
        text, problem, note = _gunzip(raw)
        if note:
            warnings.append(Issue(str(path), "trailing-bytes", note, "warning"))
        if problem is not None:
            if not text or text.isspace():
                raise LogError(path, problem.kind, problem.message + "; no event could be read")
            problems.append(problem)
    elif path.name.endswith(".gz"):
        raise LogError(
            path, "corrupt", f"not a gzip file: starts with {raw[:8]!r}, not the gzip magic 1f 8b"
        )
    else:
        text = raw
    if not text or text.isspace():
        raise LogError(path, "empty", "DFTracer trace holds no data (only whitespace)")

    lines, cut_tail = _split_lines(text)
    if cut_tail is not None and not problems:
        problems.append(
            _StreamProblem(
                "truncated",
                f"the last line ({cut_tail[0]}) ends mid-event: the file was cut while written",
            )
        )
    norm, bad = _parse_lines(lines)
    return _build(path, norm, lines, bad, problems, warnings)


# ------------------------------------------------------------------------------------------------
# bytes -> lines


def _gunzip(raw: bytes) -> tuple[bytes, _StreamProblem | None, str | None]:
    """Decompress every gzip member; on damage keep what came before it.

    Returns (text, problem, note). Input is fed in slices so that, when zlib stops on a bad
    byte, only the slice in progress has to be replayed (in small pieces, from a copy of the
    decompressor) to recover the output that precedes the damage.
    """
    out: list[bytes] = []
    pos, members = 0, 0
    step, small = 1 << 16, 512
    while pos < len(raw):
        if raw[pos : pos + 2] != b"\x1f\x8b":
            rest = raw[pos:]
            if members and not rest.strip(b"\x00"):
                # zero padding after the last member (seen on some file systems after a crash)
                return b"".join(out), None, f"{len(rest)} zero bytes after the last gzip member"
            return (
                b"".join(out),
                _StreamProblem(
                    "corrupt",
                    f"bytes from offset {pos} are not a gzip member ({rest[:8]!r}); "
                    f"data after gzip member {members} is lost",
                ),
                None,
            )
        d = zlib.decompressobj(wbits=31)
        start = pos
        while not d.eof:
            chunk = raw[pos : pos + step]
            if not chunk:
                return (
                    b"".join(out),
                    _StreamProblem(
                        "truncated",
                        f"gzip stream ends inside member {members + 1} (file cut at byte "
                        f"{len(raw)}, member began at {start}): events after the cut are lost",
                    ),
                    None,
                )
            saved = d.copy()
            try:
                out.append(d.decompress(chunk))
            except zlib.error as e:
                # replay this slice in small pieces to keep the output before the bad byte
                d, good = saved, 0
                try:
                    for i in range(0, len(chunk), small):
                        out.append(d.decompress(chunk[i : i + small]))
                        good = min(i + small, len(chunk))
                except zlib.error:
                    pass
                where = f"compressed bytes {pos + good}..{min(pos + good + small, len(raw))}"
                if "incorrect data check" in str(e) or "incorrect length check" in str(e):
                    msg = (
                        f"gzip checksum mismatch in member {members + 1}: the text decoded "
                        "but is damaged somewhere; lines that do not parse are skipped, values "
                        "in lines that do may be wrong"
                    )
                    return b"".join(out), _StreamProblem("corrupt", msg), None
                return (
                    b"".join(out),
                    _StreamProblem(
                        "corrupt",
                        f"gzip data damaged in member {members + 1}, detected at {where} "
                        f"of {len(raw)} ({e}); events after it are lost",
                    ),
                    None,
                )
            pos += len(chunk)
        pos -= len(d.unused_data)
        out.append(d.flush())
        members += 1
    return b"".join(out), None, None


class _Lines:
    """The event lines of a trace, with their 1-based line numbers in the file.

    Kept as one buffer when the file needs no cleaning (the usual case), so the bulk parser
    reads it without copies; split into a list only when single lines are needed.
    """

    _NEAR_END = 2000  # lines looked up by scanning from either end instead of splitting all

    def __init__(self, numbers: np.ndarray, buf: bytes | None = None, items: list | None = None):
        self.numbers = numbers
        self._buf = buf
        self._items = items

    def __len__(self) -> int:
        return len(self.numbers)

    def joined(self) -> bytes:
        if self._buf is None:
            self._buf = b"\n".join(self._items or [])
        return self._buf

    def items(self) -> list[bytes]:
        if self._items is None:
            self._items = self.joined().split(b"\n")[: len(self.numbers)]
        return self._items

    def get(self, i: int) -> bytes:
        """Line ``i`` (0-based among event lines)."""
        if self._items is not None or self._buf is None:
            return self.items()[i]
        buf, n = self._buf, len(self.numbers)
        if i < self._NEAR_END:
            start = 0
            for _ in range(i):
                start = buf.index(b"\n", start) + 1
            end = buf.find(b"\n", start)
            return buf[start : end if end >= 0 else len(buf)]
        if n - i <= self._NEAR_END:
            end = len(buf) - 1  # the buffer ends with a newline (see _split_lines)
            for _ in range(n - 1 - i):
                end = buf.rindex(b"\n", 0, end)
            return buf[buf.rfind(b"\n", 0, end) + 1 : end]
        return self.items()[i]


def _split_lines(text: bytes) -> tuple[_Lines, tuple[int, bytes] | None]:
    """Find the event lines; the 2nd value is ``(line_no, text)`` of a last line cut mid-event.

    Drops blank lines, the ``[``/``]`` lines and trailing commas of older DFTracer versions.
    """
    cut: tuple[int, bytes] | None = None
    if not text.endswith(b"\n"):
        # a file that does not end in a newline was cut mid-event, unless its last line is whole
        nl = text.rfind(b"\n")
        last = text[nl + 1 :].strip().rstrip(b",")
        whole = True
        if last.startswith(b"{"):
            try:
                json.loads(last)
            except ValueError:
                whole = False
        if whole:
            text = text + b"\n"
        else:
            cut = (text.count(b"\n", 0, nl + 1) + 1, last[:80])
            text = text[: nl + 1]
    # every line "{...}" (DFTracer >= 2): the buffer goes to the bulk parser as it is
    n = text.count(b"\n")
    if text[:1] == b"{" and text.count(b"}\n") == n and text.count(b"\n{") == n - 1:
        return _Lines(np.arange(1, n + 1, dtype=np.int64), buf=text), cut
    # else blank lines, "[" / "]" lines, trailing commas, CR LF (older versions)
    kept, numbers = [], []
    for i, line in enumerate(text.split(b"\n"), 1):
        s = line.strip()
        if s.endswith(b","):
            s = s[:-1].rstrip()
        if not s or s in (b"[", b"]"):
            continue
        kept.append(s)
        numbers.append(i)
    return _Lines(np.asarray(numbers, dtype=np.int64), items=kept), cut


# ------------------------------------------------------------------------------------------------
# lines -> normalised table


def _sample_ph_type(lines: _Lines) -> pa.DataType:
    for line in (lines.get(i) for i in range(min(50, len(lines)))):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "ph" in obj:
            return pa.string() if isinstance(obj["ph"], str) else pa.int64()
    return pa.int64()


def _explicit_schema(ph_type: pa.DataType) -> pa.Schema:
    args = pa.struct([(c, pa.string()) for c in _ARGS_STR] + [(c, pa.int64()) for c in _ARGS_INT])
    return pa.schema(
        [(c, pa.int64()) for c in _TOP_INT]
        + [(c, pa.string()) for c in _TOP_STR]
        + [("ph", ph_type), ("args", args)]
    )


def _ph_codes(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if pa.types.is_string(col.type):
        s = pc.fill_null(col, "")
        codes = np.zeros(len(col), dtype=np.int8)
        for letter, code in _PH_LETTERS.items():
            codes[pc.equal(s, letter).to_numpy(zero_copy_only=False)] = code
        return pa.array(codes)
    v = pc.fill_null(col, 0).to_numpy(zero_copy_only=False)
    v = np.where((v >= 0) & (v <= PH_METADATA), v, 0)
    return pa.array(v.astype(np.int8))


def _bulk(buf: bytes, schema: pa.Schema, line_no: np.ndarray) -> pa.Table:
    t = pj.read_json(
        pa.BufferReader(buf),
        read_options=pj.ReadOptions(block_size=1 << 23),
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    )
    if t.num_rows != len(line_no):
        raise ValueError("row count differs from line count")
    args = t.column("args")
    cols: dict[str, Any] = {"line": pa.array(line_no)}
    for c in _TOP_INT + _TOP_STR:
        cols[c] = t.column(c)
    cols["ph"] = _ph_codes(t.column("ph"))
    flat = pa.Table.from_arrays([args], names=["args"]).flatten()
    for c in _ARGS_STR + _ARGS_INT:
        cols[f"a_{c}"] = flat.column(f"args.{c}")
    return pa.table(cols, schema=_NORM)


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v if -_INT64_MAX - 1 <= v <= _INT64_MAX else None
    if isinstance(v, float) and np.isfinite(v) and abs(v) < 2**63:
        return int(v)
    if isinstance(v, str):
        try:
            return _as_int(int(v))
        except ValueError:
            return None
    return None


def _as_str(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v)


def _ph_of(v: Any) -> int:
    if isinstance(v, str):
        return _PH_LETTERS.get(v, PH_UNKNOWN)
    if isinstance(v, int) and 0 <= v <= PH_METADATA:
        return v
    return PH_UNKNOWN


def _one_by_one(lines: list[bytes], line_no: np.ndarray, bad: list[tuple[int, str, bytes]]):
    """Parse line by line (json), coercing fields to the normalised types; collect bad lines."""
    cols: dict[str, list] = {f.name: [] for f in _NORM}
    for line, no in zip(lines, line_no.tolist(), strict=True):
        try:
            obj = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            bad.append((no, f"not UTF-8 text ({e.reason} at byte {e.start})", line[:80]))
            continue
        except ValueError as e:
            bad.append((no, f"not valid JSON ({e})", line[:80]))
            continue
        if not isinstance(obj, dict):
            bad.append((no, f"a JSON {type(obj).__name__}, not an event object", line[:80]))
            continue
        args = obj.get("args")
        if not isinstance(args, dict):
            args = {}
        cols["line"].append(no)
        for c in _TOP_INT:
            cols[c].append(_as_int(obj.get(c)))
        for c in _TOP_STR:
            cols[c].append(_as_str(obj.get(c)))
        cols["ph"].append(_ph_of(obj.get("ph")))
        for c in _ARGS_STR:
            cols[f"a_{c}"].append(_as_str(args.get(c)))
        for c in _ARGS_INT:
            cols[f"a_{c}"].append(_as_int(args.get(c)))
    return pa.table(cols, schema=_NORM)


def _parse_lines(lines: _Lines) -> tuple[pa.Table, list[tuple[int, str, bytes]]]:
    """All lines in one bulk parse; if that fails, blocks of lines; failing blocks line by line."""
    bad: list[tuple[int, str, bytes]] = []
    if not len(lines):
        return _NORM.empty_table(), bad
    schema = _explicit_schema(_sample_ph_type(lines))
    try:
        return _bulk(lines.joined(), schema, lines.numbers), bad
    except (pa.ArrowInvalid, ValueError):
        pass
    parts = []
    items, line_no = lines.items(), lines.numbers
    for i in range(0, len(items), _CHUNK_LINES):
        block, numbers = items[i : i + _CHUNK_LINES], line_no[i : i + _CHUNK_LINES]
        try:
            parts.append(_bulk(b"\n".join(block), schema, numbers))
        except (pa.ArrowInvalid, ValueError):
            parts.append(_one_by_one(block, numbers, bad))
    return pa.concat_tables(parts), bad


# ------------------------------------------------------------------------------------------------
# normalised table -> ProcessLog


def _codes(col: pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """Dictionary-encode: (int32 codes, -1 for null; the distinct values)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    d = pc.dictionary_encode(arr)
    codes = pc.fill_null(d.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    return codes, d.dictionary.to_pylist()


def _ints(t: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values with nulls as 0, validity mask)."""
    col = t.column(name)
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False)
    return pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64), valid


def _dict_array(codes: np.ndarray, values: list[str | None]) -> pa.DictionaryArray:
    """Dictionary column from codes into ``values``; code -1 or a None value gives null."""
    values = list(values)
    lookup = np.array([v is not None for v in values] + [False])
    ok = lookup[codes]  # code -1 reads the trailing False
    indices = pa.array(codes, type=pa.int32(), mask=~ok)
    dictionary = pa.array([v if v is not None else "" for v in values], type=pa.string())
    return pa.DictionaryArray.from_arrays(indices, dictionary)


def _hash_to_u64(h: str | None) -> int | None:
    if not h:
        return None
    try:
        v = int(h, 16)
    except ValueError:
        return None
    return v if v < 2**64 else None


def _reparse(lines: _Lines, wanted: np.ndarray) -> list[dict]:
    """Full JSON of a few rows (start/end/fopen), by line number: fields the bulk parse skips."""
    out = []
    for i in np.searchsorted(lines.numbers, wanted).tolist():
        try:
            obj = json.loads(lines.get(i))
        except (ValueError, IndexError):
            obj = {}
        out.append(obj if isinstance(obj, dict) else {})
    return out


def _by_start(t: pa.Table) -> pa.Table:
    """Rows in start-time order (the file holds them in completion order)."""
    start = t.column("start").to_numpy()
    if len(start) < 2 or bool((start[1:] >= start[:-1]).all()):
        return t
    return t.take(pa.array(np.argsort(start, kind="stable")))


def _positions(
    pid: np.ndarray,
    catc: np.ndarray,
    fh: np.ndarray,
    ts: np.ndarray,
    line: np.ndarray,
    kind: np.ndarray,
    set_val: np.ndarray,
    is_set: np.ndarray,
    delta: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """File position before each call, per (pid, module, file), in time order.

    ``is_set``/``set_val`` (NaN = unknown) reset the position, ``delta`` (NaN = unknown)
    advances it. Returns (position before each row as float, NaN unknown; open depth at the row).
    """
    n = len(pid)
    if n == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    order = np.lexsort((line, ts, fh, catc, pid))
    p, c, f = pid[order], catc[order], fh[order]
    new_key = np.ones(n, dtype=bool)
    new_key[1:] = (p[1:] != p[:-1]) | (c[1:] != c[:-1]) | (f[1:] != f[:-1])
    key_id = np.cumsum(new_key) - 1
    k = kind[order]

    # open depth (floored at 0: a close of a handle opened before tracing began is ignored)
    step = np.where(k == _K_OPEN, 1, np.where(k == _K_CLOSE, -1, 0)).astype(np.int64)
    cum = np.cumsum(step)
    key_start = np.flatnonzero(new_key)
    base = (cum - step)[key_start][key_id]
    c_in = cum - base  # cumulative within the key
    # running minimum within each key: offset keys apart so one key never sees another's
    spread = (key_id.astype(np.int64) * (2 * n + 2)).astype(np.int64)
    running_min = np.minimum.accumulate(np.minimum(c_in, 0) - spread) + spread
    depth = c_in - np.minimum(running_min, 0)
    multi = depth > 1  # several handles open on the file: which one moved is unknown

    sv = set_val[order].copy()
    sv[multi] = np.nan
    starts = is_set[order] | new_key
    sv = np.where(is_set[order], sv, np.nan)  # an implicit key start is an unknown position
    seg = np.cumsum(starts) - 1
    seg_starts = np.flatnonzero(starts)
    d = delta[order]
    unk = np.isnan(d)
    d0 = np.where(unk, 0.0, d)
    d0[starts] = 0.0  # a reset's own delta does not count
    unk = unk & ~starts
    cx = np.cumsum(d0) - d0  # exclusive prefix sums
    ux = np.cumsum(unk) - unk
    pos = sv[seg_starts][seg] + (cx - cx[seg_starts][seg])
    pos[(ux - ux[seg_starts][seg]) > 0] = np.nan
    pos[multi] = np.nan
    out_pos = np.empty(n)
    out_pos[order] = pos
    out_depth = np.empty(n, dtype=np.int64)
    out_depth[order] = depth
    return out_pos, out_depth


def _build(
    path: Path,
    norm: pa.Table,
    lines: _Lines,
    bad: list[tuple[int, str, bytes]],
    problems: list[_StreamProblem],
    warnings: list[Issue],
) -> ProcessLog:
    src = str(path)
    n_lines = len(lines)
    issues: list[Issue] = []
    lost = False
    for p in problems:
        issues.append(Issue(src, p.kind, p.message, "error"))
        lost = True
    if bad:
        no, why, text = bad[0]
        issues.append(
            Issue(
                src,
                "corrupt",
                f"{len(bad)} of {n_lines} lines are not trace events and were skipped "
                f"(first: line {no}, {why}: {text!r})",
                "error",
            )
        )
        lost = True
    if norm.num_rows == 0 and problems:
        raise LogError(path, problems[0].kind, problems[0].message + "; no whole event before it")
    if norm.num_rows == 0:
        raise LogError(
            path,
            "corrupt",
            f"not a DFTracer trace: none of its {n_lines} lines is a JSON event"
            + (f" (line {bad[0][0]}: {bad[0][1]}: {bad[0][2]!r})" if bad else ""),
        )

    ph = norm.column("ph").to_numpy(zero_copy_only=False)
    ts, ts_ok = _ints(norm, "ts")
    name_c, names = _codes(norm.column("name"))
    is_meta = ph == PH_METADATA
    timed = ~is_meta & ts_ok & (name_c >= 0)
    if not timed.any():
        if (is_meta & (name_c >= 0)).any():
            raise LogError(
                path, "empty", "DFTracer trace holds metadata records but no timed event"
            )
        raise LogError(
            path, "corrupt", "not a DFTracer trace: no line has the name/ts/ph of a trace event"
        )
    untimed = int((~is_meta & ~timed).sum())
    if untimed:
        warnings.append(
            Issue(src, "corrupt", f"{untimed} events without name or ts were skipped", "warning")
        )

    # ---- metadata records: hash -> path / host / string, rank, time unit
    files: dict[str, str] = {}
    hosts: dict[str, str] = {}
    strings: dict[str, str] = {}
    rank_of_pid: dict[int, int] = {}
    time_metric = "US"
    meta_rows = norm.filter(pa.array(is_meta)).select(["name", "pid", "a_name", "a_value"])
    for rec, pid_m, key, value in zip(
        *(meta_rows.column(c).to_pylist() for c in ("name", "pid", "a_name", "a_value")),
        strict=True,
    ):
        if rec == "FH" and value:
            files[value] = key
        elif rec == "HH" and value:
            hosts[value] = key
        elif rec == "SH" and value:
            strings[value] = key
        elif rec == "CM" and key == "time_metric" and value:
            time_metric = value.upper()
        elif rec == "PR" and key == "rank" and pid_m is not None:
            r = _as_int(value)
            if r is not None:
                rank_of_pid[pid_m] = r
    scale = _TIME_SCALE.get(time_metric)
    if scale is None:
        warnings.append(
            Issue(
                src, "bad-time-unit", f"unknown time_metric {time_metric!r}; read as µs", "warning"
            )
        )
        scale = 1e-6

    cat_c, cats = _codes(norm.column("cat"))
    pid, pid_ok = _ints(norm, "pid")
    tid, tid_ok = _ints(norm, "tid")
    dur, _ = _ints(norm, "dur")
    line = norm.column("line").to_numpy()

    # ---- DFTracer's own start/end events
    cat_is_tracer = np.array([c == TRACER for c in cats] + [False])[cat_c]
    name_lookup = {v: i for i, v in enumerate(names)}
    start_rows = np.flatnonzero(timed & cat_is_tracer & (name_c == name_lookup.get("start", -2)))
    end_rows = np.flatnonzero(timed & cat_is_tracer & (name_c == name_lookup.get("end", -2)))
    start_args = [o.get("args") or {} for o in _reparse(lines, line[start_rows])]
    end_args = [o.get("args") or {} for o in _reparse(lines, line[end_rows])]

    # ---- times
    t_first = int(ts[timed].min())
    t_last = int((ts + dur)[timed].max())
    epoch_start = t_first * scale
    if not (946684800.0 <= epoch_start <= 4102444800.0):  # 2000-01-01 .. 2100-01-01
        warnings.append(
            Issue(
                src,
                "bad-timestamps",
                f"first event time {t_first} ({time_metric}) is not a Unix epoch time between "
                "2000 and 2100: this trace cannot be put on the run's clock",
                "warning",
            )
        )
    rel_start = (ts - t_first) * scale
    rel_end = rel_start + dur * scale

    # ---- main process, host, command
    main_pid: int
    if len(start_rows):
        main_pid = int(pid[start_rows[0]])
    else:
        vals, counts = np.unique(pid[timed & pid_ok], return_counts=True)
        main_pid = int(vals[np.argmax(counts)]) if len(vals) else -1
    hh_c, hh_vals = _codes(norm.column("a_hhash"))
    host_vals = [hosts.get(h) if h else None for h in hh_vals]
    host: str | None = None
    if len(start_rows) and hh_c[start_rows[0]] >= 0:
        host = host_vals[hh_c[start_rows[0]]]
    if host is None:
        known = [h for h in host_vals if h]
        host = known[0] if known else None
    sa = start_args[0] if start_args else {}
    cmd = strings.get(str(sa.get("cmd_hash")), "") if sa else ""
    exe = cmd.replace(";", " ") if cmd else strings.get(str(sa.get("exec_hash")), "")
    ppid = _as_int(sa.get("ppid")) if sa else None
    version = "" if sa.get("version") is None else str(sa.get("version"))

    # ---- unfinished or lossy traces
    if start_rows.size and not end_rows.size and not problems:
        issues.append(
            Issue(
                src,
                "truncated",
                "no 'end' event: the process stopped before DFTracer finalised the trace "
                "(killed, crashed or still running); events after its last flush are lost",
                "error",
            )
        )
        lost = True
    if end_args and not lost:
        # DFTracer numbers the events it logs (counter series records carry no id)
        expected = _as_int(end_args[-1].get("num_events"))
        found = int((timed & pc.is_valid(norm.column("id")).to_numpy()).sum()) - len(end_rows)
        if expected is not None and found < expected:
            issues.append(
                Issue(
                    src,
                    "missing-events",
                    f"DFTracer logged {expected} events but {found} are in the file",
                    "error",
                )
            )
            lost = True

    # ---- classify timed events
    fh_c, fh_vals = _codes(norm.column("a_fhash"))
    # what each call does: looked up once per distinct (module, name), then broadcast
    kind = np.zeros(len(ph), dtype=np.int8)
    brule = np.zeros(len(ph), dtype=np.int8)
    direction = np.zeros(len(ph), dtype=np.int8)
    catc = np.zeros(len(ph), dtype=np.int8)
    for module, ops in _MODULE_OPS.items():
        if module not in cats:
            continue
        table = np.zeros((len(names) + 1, 3), dtype=np.int8)  # last row: null name
        for i, nm in enumerate(names):
            table[i] = ops.get(nm, (0, 0, 0))
        in_mod = cat_c == cats.index(module)
        looked = table[name_c[in_mod]]
        kind[in_mod], brule[in_mod], direction[in_mod] = looked[:, 0], looked[:, 1], looked[:, 2]
        catc[in_mod] = _CAT_CODE[module]
    complete = (ph == PH_COMPLETE) | (ph == PH_UNKNOWN)  # very old traces may lack "ph"
    modelled = timed & complete & (kind > 0) & (fh_c >= 0)

    ret, ret_ok = _ints(norm, "a_ret")
    count, count_ok = _ints(norm, "a_count")
    size, size_ok = _ints(norm, "a_size")
    offset, offset_ok = _ints(norm, "a_offset")
    whence, whence_ok = _ints(norm, "a_whence")
    flags, flags_ok = _ints(norm, "a_flags")
    ret_len, ret_len_ok = _ints(norm, "a_ret_len")
    str_len, str_len_ok = _ints(norm, "a_str_len")

    # bytes moved, NaN where the trace does not say
    nbytes = np.full(len(ph), np.nan)
    r = brule == _B_RET
    nbytes[r & count_ok] = count[r & count_ok]
    nbytes[r & ret_ok] = ret[r & ret_ok]
    r = brule == _B_ITEMS
    items = np.where(ret_ok, ret, np.where(count_ok, count, -1))
    m = r & size_ok & (ret_ok | count_ok)
    nbytes[m] = (items * size)[m]
    r = brule == _B_RET_LEN
    nbytes[r] = np.where(ret_len_ok, ret_len, 0)[r]
    r = brule == _B_STR_LEN
    nbytes[r & str_len_ok] = str_len[r & str_len_ok]
    r = brule == _B_ONE
    nbytes[r] = 1.0
    nbytes[r & ret_ok & (ret < 0)] = 0.0
    nbytes[brule == _B_WORD] = 4.0
    # a failed call (ret < 0) moved nothing; it stays an app event, not a segment
    failed = (kind >= _K_IO_POS) & ret_ok & (ret < 0) & (brule != _B_ONE)

    # position model inputs
    is_set = np.zeros(len(ph), dtype=bool)
    set_val = np.full(len(ph), np.nan)
    delta = np.zeros(len(ph))
    opened = kind == _K_OPEN
    is_set |= opened
    set_val[opened] = 0.0
    append = opened & flags_ok & ((flags & _O_APPEND) != 0)
    fopen_rows = np.flatnonzero(modelled & opened & (catc == _CAT_CODE["STDIO"]))
    if fopen_rows.size:
        modes = [
            str((o.get("args") or {}).get("mode", "")) for o in _reparse(lines, line[fopen_rows])
        ]
        append[fopen_rows[np.array(["a" in mo for mo in modes])]] = True
    set_val[append] = np.nan
    for k in (_K_CLOSE, _K_UNKNOWN):
        is_set |= kind == k
    m = kind == _K_REWIND
    is_set |= m
    set_val[m] = 0.0
    m = (kind == _K_TELL) & ret_ok & (ret >= 0)
    is_set |= m
    set_val[m] = ret[m]
    # lseek: ret is the new position; without ret fall back to offset + whence
    lk = kind == _K_LSEEK
    m = lk & ret_ok & (ret >= 0)
    is_set |= m
    set_val[m] = ret[m]
    no_ret = lk & ~ret_ok
    fk = (kind == _K_FSEEK) & ~(ret_ok & (ret < 0))  # a failed fseek leaves the position
    for rows in (no_ret, fk):
        m = rows & whence_ok & (whence == 0) & offset_ok
        is_set |= m
        set_val[m] = offset[m]
        m = rows & whence_ok & (whence == 1) & offset_ok
        delta[m] = offset[m]
        m = rows & ~(whence_ok & (whence <= 1) & offset_ok)
        is_set |= m  # SEEK_END (file size unknown) or no arguments: position unknown
    m = (kind == _K_UNGETC) & ret_ok & (ret >= 0)
    delta[m] = -1.0
    io_pos = kind == _K_IO_POS
    delta[io_pos] = np.where(failed, 0.0, nbytes)[io_pos]

    idx = np.flatnonzero(modelled)
    pos_m, depth_m = _positions(
        pid[idx],
        catc[idx],
        fh_c[idx],
        ts[idx],
        line[idx],
        kind[idx],
        set_val[idx],
        is_set[idx],
        delta[idx],
    )
    pos = np.full(len(ph), np.nan)
    pos[idx] = pos_m
    depth = np.zeros(len(ph), dtype=np.int64)
    depth[idx] = depth_m
    explicit = kind == _K_IO_EXPLICIT
    seg_off = np.where(explicit, np.where(offset_ok, offset, -1).astype(float), pos)
    ambiguous = int((modelled & io_pos & (depth > 1)).sum())
    if ambiguous:
        warnings.append(
            Issue(
                src,
                "ambiguous-offsets",
                f"{ambiguous} reads/writes happened while a file had several open handles in "
                "one process; DFTracer does not log descriptors, so their offsets are unknown (-1)",
                "warning",
            )
        )

    is_seg = modelled & (kind >= _K_IO_POS) & ~failed & ~np.isnan(nbytes)
    no_args = timed & complete & (kind >= _K_IO_POS) & (fh_c < 0)
    if no_args.any():
        warnings.append(
            Issue(
                src,
                "no-args",
                f"{int(no_args.sum())} read/write calls carry no file hash or sizes "
                "(DFTRACER_INC_METADATA off?); they are kept as app events only",
                "warning",
            )
        )
    aggregated = int((timed & (ph == PH_AGGREGATED)).sum())
    if aggregated:
        warnings.append(
            Issue(
                src,
                "aggregated",
                f"{aggregated} aggregated events (DFTRACER aggregation on): per-call I/O is "
                "not in the trace; they are kept as app events",
                "warning",
            )
        )
    is_app = timed & ~cat_is_tracer & ~is_seg
    unknown_files = {fh_vals[c] for c in np.unique(fh_c[is_seg | is_app]) if c >= 0} - set(files)
    if unknown_files:
        warnings.append(
            Issue(
                src,
                "unknown-file",
                f"{len(unknown_files)} file hashes have no FH record (path unknown), "
                f"e.g. {sorted(unknown_files)[0]}",
                "warning",
            )
        )

    # ---- tables
    path_vals = [files.get(h) if h else None for h in fh_vals]
    file_ids = pa.array([_hash_to_u64(h) for h in fh_vals] + [None], type=pa.uint64())
    rank_col = np.full(len(ph), -1, dtype=np.int32)
    for rank_pid, rk in rank_of_pid.items():
        rank_col[pid == rank_pid] = rk
    source = path.name

    def common(mask: np.ndarray) -> dict[str, Any]:
        rows = np.flatnonzero(mask)
        return {
            "rank": pa.array(rank_col[rows], type=pa.int32()),
            "host": _dict_array(hh_c[rows], host_vals),
            "pid": pa.array(pid[rows], type=pa.int64(), mask=~pid_ok[rows]),
            "thread": pa.array(tid[rows], type=pa.int64(), mask=~tid_ok[rows]),
            "start": pa.array(rel_start[rows]),
            "end": pa.array(rel_end[rows]),
            "source": _dict_array(np.zeros(len(rows), dtype=np.int32), [source]),
        }

    seg_rows = np.flatnonzero(is_seg)
    seg_cols = common(is_seg)
    seg_cols.update(
        {
            "file_id": file_ids.take(
                pa.array(np.where(fh_c[seg_rows] >= 0, fh_c[seg_rows], len(fh_vals)))
            ),
            "path": _dict_array(fh_c[seg_rows], path_vals),
            "module": _dict_array((catc[seg_rows] - 1).astype(np.int32), ["POSIX", "STDIO"]),
            "op": _dict_array((direction[seg_rows] - 1).astype(np.int32), ["read", "write"]),
            "offset": pa.array(
                np.where(np.isnan(seg_off[seg_rows]), -1, seg_off[seg_rows]).astype(np.int64)
            ),
            "length": pa.array(nbytes[seg_rows].astype(np.int64)),
        }
    )
    segments = _by_start(conform(pa.table(seg_cols), "segments"))

    app_rows = np.flatnonzero(is_app)
    app_cols = common(is_app)
    app_cols.update(
        {
            "cat": _dict_array(cat_c[app_rows], cats),
            "name": _dict_array(name_c[app_rows], names),
            "path": _dict_array(fh_c[app_rows], path_vals),
        }
    )
    app_events = _by_start(conform(pa.table(app_cols), "app_events"))

    pids = np.unique(pid[timed & pid_ok & ~cat_is_tracer])
    return ProcessLog(
        source=path,
        tracer=TRACER,
        pid=main_pid,
        exe=exe,
        start=epoch_start,
        end=t_last * scale,
        segments=segments,
        host=host,
        nprocs=max(1, len(set(pids.tolist()) | {main_pid})),
        # per-process trace: never the Darshan "one log, ranks 0..n-1" sense of mpi; a PR rank
        # record only fills the rank column
        mpi=False,
        version=version,
        counters=None,
        app_events=app_events,
        incomplete=[INCOMPLETE_TRACE] if lost else [],
        issues=issues + warnings,
        ppid=ppid,
    )


__all__ = ["INCOMPLETE_TRACE", "read_dftracer_trace"]
