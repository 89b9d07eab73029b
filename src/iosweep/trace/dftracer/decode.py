"""DFTracer trace bytes to one normalised Arrow table: gunzip (keeping what precedes damage),
split into event lines, parse them in bulk with ``pyarrow.json`` (a block that does not parse
is parsed line by line, so one bad line costs only itself).
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

# Trace-event phases: DFTracer >= 2 writes numbers, older versions the Chrome letters.
PH_UNKNOWN, PH_COMPLETE, PH_COUNTER, PH_AGGREGATED, PH_METADATA = 0, 1, 2, 3, 4
_PH_LETTERS = {"X": PH_COMPLETE, "C": PH_COUNTER, "A": PH_AGGREGATED, "M": PH_METADATA}

# --- the columns parsed out of each line ---------------------------------------------------------
_ARGS_INT = (
    "ret",
    "count",
    "size",
    "offset",
    "whence",
    "flags",
    "ret_len",
    "str_len",
    "epoch",
    "step",
)
# fname, hostname: the file and host of an event as pydftracer 1.0.x writes them (no hashes)
_ARGS_STR = ("hhash", "fhash", "name", "value", "fname", "hostname")
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
# Whether the bulk JSON parse uses Arrow's threads: yes in one process; no in each of several
# reader processes, which already keep the cores busy (10 M events: 17.7 s -> 16.3 s).
BULK_THREADS = True
_CHUNK_LINES = 4096  # lines per block when a bulk parse failed and blocks are retried
_INT64_MAX = 2**63 - 1


@dataclass
class StreamProblem:
    kind: str  # truncated | corrupt
    message: str


# ------------------------------------------------------------------------------------------------
# bytes -> lines


def gunzip(raw: bytes) -> tuple[bytes, StreamProblem | None, str | None]:
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
                StreamProblem(
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
                    StreamProblem(
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
                    return b"".join(out), StreamProblem("corrupt", msg), None
                return (
                    b"".join(out),
                    StreamProblem(
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


class Lines:
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
            end = len(buf) - 1  # the buffer ends with a newline (see split_lines)
            for _ in range(n - 1 - i):
                end = buf.rindex(b"\n", 0, end)
            return buf[buf.rfind(b"\n", 0, end) + 1 : end]
        return self.items()[i]


def split_lines(text: bytes) -> tuple[Lines, tuple[int, bytes] | None]:
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
    # every line "{...}" (DFTracer >= 2): the buffer goes to the bulk parser as it is. Looked
    # at by numpy around each newline (bytes.count of "}\n" and "\n{" took 7 s of 69 for
    # 10 M events: a two-byte pattern is searched, not counted by memchr)
    if text[:1] == b"{":
        u8 = np.frombuffer(text, np.uint8)
        ends = np.flatnonzero(u8 == 10)  # (text ends with one: the last line's)
        if (u8[ends - 1] == ord("}")).all() and (u8[ends[:-1] + 1] == ord("{")).all():
            return Lines(np.arange(1, len(ends) + 1, dtype=np.int64), buf=text), cut
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
    return Lines(np.asarray(numbers, dtype=np.int64), items=kept), cut


# ------------------------------------------------------------------------------------------------
# lines -> normalised table


def _sample_types(lines: Lines) -> tuple[pa.DataType, bool]:
    """(type of ``ph``, whether numbers are written as strings) from the first events: DFTracer
    >= 2 writes numbers and ``ph`` as a number, pydftracer 1.0.x (DLIO 2.0.0's) strings."""
    for line in (lines.get(i) for i in range(min(50, len(lines)))):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "ph" in obj:
            ph = pa.string() if isinstance(obj["ph"], str) else pa.int64()
            return ph, isinstance(obj.get("ts"), str)
    return pa.int64(), False


def explicit_schema(ph_type: pa.DataType) -> pa.Schema:
    """The fields the bulk parse reads (the rest of a line is skipped), ``ph`` as written."""
    args = pa.struct([(c, pa.string()) for c in _ARGS_STR] + [(c, pa.int64()) for c in _ARGS_INT])
    return pa.schema(
        [(c, pa.int64()) for c in _TOP_INT]
        + [(c, pa.string()) for c in _TOP_STR]
        + [("ph", ph_type), ("args", args)]
    )


# pydftracer 1.0.x quotes numbers, and not always ("ret":26 beside "ret":"0"): the numeric
# fields are unquoted in the bytes, so that one bulk parse reads them all as numbers.
_QUOTED_NUMBER = re.compile(
    rb'"(' + b"|".join(c.encode() for c in _TOP_INT + _ARGS_INT) + rb')":"(-?[0-9]+)"'
)


# What is left quoted of epoch and step after that is text (DLIO writes "epoch":"train"):
# not an iteration's number, so out of the numeric column's way.
_TEXT_COUNT = re.compile(rb'"(epoch|step)":"')


def _unquote(buf: bytes) -> bytes:
    return _TEXT_COUNT.sub(rb'"\1_text":"', _QUOTED_NUMBER.sub(rb'"\1":\2', buf))


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
        read_options=pj.ReadOptions(block_size=1 << 23, use_threads=BULK_THREADS),
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


def as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v if -_INT64_MAX - 1 <= v <= _INT64_MAX else None
    if isinstance(v, float) and np.isfinite(v) and abs(v) < 2**63:
        return int(v)
    if isinstance(v, str):
        try:
            return as_int(int(v))
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


def _rejoined(lines: list[bytes], k: int) -> dict | None:
    """Line ``k - 1`` and line ``k`` as one event, where a string of it held a raw newline
    (DFTracer 1.x writes file names as they are: Stormer's ``/dev/shm/FI_NAMED_AV_0\n``
    splits its open event in two); None where the two are not one event object."""
    if k >= len(lines):
        return None
    try:
        obj = json.loads((lines[k - 1] + b"\n" + lines[k]).decode("utf-8"), strict=False)
    except ValueError:  # (UnicodeDecodeError is one)
        return None
    return obj if isinstance(obj, dict) else None


def _one_by_one(lines: list[bytes], line_no: np.ndarray, bad: list[tuple[int, str, bytes]]):
    """Parse line by line (json), coercing fields to the normalised types; collect bad lines."""
    cols: dict[str, list] = {f.name: [] for f in _NORM}
    numbers = line_no.tolist()
    k = 0
    while k < len(lines):
        line, no = lines[k], numbers[k]
        k += 1
        try:
            obj = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            bad.append((no, f"not UTF-8 text ({e.reason} at byte {e.start})", line[:80]))
            continue
        except ValueError as e:
            obj = _rejoined(lines, k)
            if obj is None:
                bad.append((no, f"not valid JSON ({e})", line[:80]))
                continue
            k += 1  # the next line was this event's end
        if not isinstance(obj, dict):
            bad.append((no, f"a JSON {type(obj).__name__}, not an event object", line[:80]))
            continue
        args = obj.get("args")
        if not isinstance(args, dict):
            args = {}
        cols["line"].append(no)
        for c in _TOP_INT:
            cols[c].append(as_int(obj.get(c)))
        for c in _TOP_STR:
            cols[c].append(_as_str(obj.get(c)))
        cols["ph"].append(_ph_of(obj.get("ph")))
        for c in _ARGS_STR:
            cols[f"a_{c}"].append(_as_str(args.get(c)))
        for c in _ARGS_INT:
            cols[f"a_{c}"].append(as_int(args.get(c)))
    return pa.table(cols, schema=_NORM)


def parse_lines(lines: Lines) -> tuple[pa.Table, list[tuple[int, str, bytes]]]:
    """All lines in one bulk parse; if that fails, blocks of lines; failing blocks line by line."""
    bad: list[tuple[int, str, bytes]] = []
    if not len(lines):
        return _NORM.empty_table(), bad
    ph_type, strings = _sample_types(lines)
    schema = explicit_schema(ph_type)
    prepare = _unquote if strings else (lambda b: b)
    try:
        return _bulk(prepare(lines.joined()), schema, lines.numbers), bad
    except (pa.ArrowInvalid, ValueError):
        pass
    parts = []
    items, line_no = lines.items(), lines.numbers
    for i in range(0, len(items), _CHUNK_LINES):
        block, numbers = items[i : i + _CHUNK_LINES], line_no[i : i + _CHUNK_LINES]
        try:
            parts.append(_bulk(prepare(b"\n".join(block)), schema, numbers))
        except (pa.ArrowInvalid, ValueError):
            parts.append(_one_by_one(block, numbers, bad))
    return pa.concat_tables(parts), bad
