"""DFTracer's file-position model: what each POSIX/STDIO call does to a file's position.

DFTracer logs no file descriptors, only the file hash, so the position before each read or
write is rebuilt per (pid, POSIX-or-STDIO, file) from the calls in time order (see
docs/dftracer.md). Everything here is vectorised with numpy: one pass per trace.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Kind(IntEnum):
    """What a call does to the file position."""

    NONE = 0  # no effect on the position
    OPEN = 1  # position := 0 (unknown if O_APPEND / "a" mode)
    CLOSE = 2  # handle gone: position unknown afterwards
    LSEEK = 3  # ret is the new absolute position
    FSEEK = 4  # ret is 0/-1: position from offset + whence
    TELL = 5  # ret is the current position (resynchronises)
    REWIND = 6  # position := 0
    UNKNOWN = 7  # position becomes unknown (fsetpos, fdopen, freopen)
    UNGETC = 8  # position -= 1
    IO_POS = 10  # read/write at the current position, advances it
    IO_EXPLICIT = 11  # pread/pwrite: explicit offset, position unchanged


class ByteRule(IntEnum):
    """How the bytes a read/write-class call moved are found."""

    NONE = 0
    RET = 1  # ret (bytes), else count (requested)
    ITEMS = 2  # ret * size (fread/fwrite return items), else count * size
    RET_LEN = 3  # args.ret_len (fgets), 0 when absent (EOF)
    STR_LEN = 4  # args.str_len (fputs)
    ONE = 5  # one byte when ret >= 0 (fgetc, fputc)
    WORD = 6  # sizeof(int) (getw, putw)


READ, WRITE = 1, 2
O_APPEND = 0o2000  # Linux open(2) flag: writes go to end of file, position unknowable here

_NO_IO = (ByteRule.NONE, 0)

# name -> (kind, bytes rule, direction)
POSIX_OPS: dict[str, tuple[Kind, ByteRule, int]] = {
    **{
        n: (Kind.OPEN, *_NO_IO)
        for n in ("open", "open64", "creat", "creat64", "__open_2", "__open64_2")
    },
    **{n: (Kind.OPEN, *_NO_IO) for n in ("openat", "openat64", "__openat_2", "__openat64_2")},
    "close": (Kind.CLOSE, *_NO_IO),
    "lseek": (Kind.LSEEK, *_NO_IO),
    "lseek64": (Kind.LSEEK, *_NO_IO),
    **{n: (Kind.IO_POS, ByteRule.RET, READ) for n in ("read", "readv", "__read_chk")},
    **{n: (Kind.IO_POS, ByteRule.RET, WRITE) for n in ("write", "writev")},
    **{
        n: (Kind.IO_EXPLICIT, ByteRule.RET, READ)
        for n in ("pread", "pread64", "preadv", "preadv64", "__pread_chk", "__pread64_chk")
    },
    **{
        n: (Kind.IO_EXPLICIT, ByteRule.RET, WRITE)
        for n in ("pwrite", "pwrite64", "pwritev", "pwritev64")
    },
}
STDIO_OPS: dict[str, tuple[Kind, ByteRule, int]] = {
    "fopen": (Kind.OPEN, *_NO_IO),
    "fopen64": (Kind.OPEN, *_NO_IO),
    "fdopen": (Kind.UNKNOWN, *_NO_IO),
    "freopen": (Kind.UNKNOWN, *_NO_IO),
    "fclose": (Kind.CLOSE, *_NO_IO),
    "fseek": (Kind.FSEEK, *_NO_IO),
    "fseeko": (Kind.FSEEK, *_NO_IO),
    "fseeko64": (Kind.FSEEK, *_NO_IO),
    "ftell": (Kind.TELL, *_NO_IO),
    "ftello": (Kind.TELL, *_NO_IO),
    "ftello64": (Kind.TELL, *_NO_IO),
    "rewind": (Kind.REWIND, *_NO_IO),
    "fsetpos": (Kind.UNKNOWN, *_NO_IO),
    "fsetpos64": (Kind.UNKNOWN, *_NO_IO),
    "ungetc": (Kind.UNGETC, *_NO_IO),
    "fread": (Kind.IO_POS, ByteRule.ITEMS, READ),
    "fread_unlocked": (Kind.IO_POS, ByteRule.ITEMS, READ),
    "fwrite": (Kind.IO_POS, ByteRule.ITEMS, WRITE),
    "fwrite_unlocked": (Kind.IO_POS, ByteRule.ITEMS, WRITE),
    "fgets": (Kind.IO_POS, ByteRule.RET_LEN, READ),
    "fputs": (Kind.IO_POS, ByteRule.STR_LEN, WRITE),
    "fgetc": (Kind.IO_POS, ByteRule.ONE, READ),
    "getc": (Kind.IO_POS, ByteRule.ONE, READ),
    "getc_unlocked": (Kind.IO_POS, ByteRule.ONE, READ),
    "fputc": (Kind.IO_POS, ByteRule.ONE, WRITE),
    "putc": (Kind.IO_POS, ByteRule.ONE, WRITE),
    "getw": (Kind.IO_POS, ByteRule.WORD, READ),
    "putw": (Kind.IO_POS, ByteRule.WORD, WRITE),
}
MODULE_OPS = {"POSIX": POSIX_OPS, "STDIO": STDIO_OPS}
CAT_CODE = {"POSIX": 1, "STDIO": 2}


def bytes_moved(
    brule: np.ndarray, kind: np.ndarray, args: dict[str, tuple[np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray]:
    """(bytes each call moved, NaN where the trace does not say; calls that failed).

    ``args``: name -> (int64 values, validity) of ``ret``, ``count``, ``size``, ``ret_len``,
    ``str_len``. A failed call (ret < 0) moved nothing; it stays an app event, not a segment.
    """
    ret, ret_ok = args["ret"]
    count, count_ok = args["count"]
    size, size_ok = args["size"]
    ret_len, ret_len_ok = args["ret_len"]
    str_len, str_len_ok = args["str_len"]
    nbytes = np.full(len(brule), np.nan)
    r = brule == ByteRule.RET
    nbytes[r & count_ok] = count[r & count_ok]
    nbytes[r & ret_ok] = ret[r & ret_ok]
    r = brule == ByteRule.ITEMS
    items = np.where(ret_ok, ret, np.where(count_ok, count, -1))
    m = r & size_ok & (ret_ok | count_ok)
    nbytes[m] = (items * size)[m]
    r = brule == ByteRule.RET_LEN
    nbytes[r] = np.where(ret_len_ok, ret_len, 0)[r]
    r = brule == ByteRule.STR_LEN
    nbytes[r & str_len_ok] = str_len[r & str_len_ok]
    r = brule == ByteRule.ONE
    nbytes[r] = 1.0
    nbytes[r & ret_ok & (ret < 0)] = 0.0
    nbytes[brule == ByteRule.WORD] = 4.0
    failed = (kind >= Kind.IO_POS) & ret_ok & (ret < 0) & (brule != ByteRule.ONE)
    return nbytes, failed


def position_inputs(
    kind: np.ndarray,
    append: np.ndarray,
    nbytes: np.ndarray,
    failed: np.ndarray,
    args: dict[str, tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(is_set, set_val, delta) for :func:`positions`: where a call resets the position and
    to what (NaN = unknown), and by how much it moves it. ``append``: opens in append mode.
    ``args``: name -> (values, validity) of ``ret``, ``offset``, ``whence``."""
    ret, ret_ok = args["ret"]
    offset, offset_ok = args["offset"]
    whence, whence_ok = args["whence"]
    is_set = np.zeros(len(kind), dtype=bool)
    set_val = np.full(len(kind), np.nan)
    delta = np.zeros(len(kind))
    opened = kind == Kind.OPEN
    is_set |= opened
    set_val[opened] = 0.0
    set_val[append] = np.nan
    for k in (Kind.CLOSE, Kind.UNKNOWN):
        is_set |= kind == k
    m = kind == Kind.REWIND
    is_set |= m
    set_val[m] = 0.0
    m = (kind == Kind.TELL) & ret_ok & (ret >= 0)
    is_set |= m
    set_val[m] = ret[m]
    # lseek: ret is the new position; without ret fall back to offset + whence
    lk = kind == Kind.LSEEK
    m = lk & ret_ok & (ret >= 0)
    is_set |= m
    set_val[m] = ret[m]
    no_ret = lk & ~ret_ok
    fk = (kind == Kind.FSEEK) & ~(ret_ok & (ret < 0))  # a failed fseek leaves the position
    for rows in (no_ret, fk):
        m = rows & whence_ok & (whence == 0) & offset_ok
        is_set |= m
        set_val[m] = offset[m]
        m = rows & whence_ok & (whence == 1) & offset_ok
        delta[m] = offset[m]
        m = rows & ~(whence_ok & (whence <= 1) & offset_ok)
        is_set |= m  # SEEK_END (file size unknown) or no arguments: position unknown
    m = (kind == Kind.UNGETC) & ret_ok & (ret >= 0)
    delta[m] = -1.0
    io_pos = kind == Kind.IO_POS
    delta[io_pos] = np.where(failed, 0.0, nbytes)[io_pos]
    return is_set, set_val, delta


def positions(
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
    step = np.where(k == Kind.OPEN, 1, np.where(k == Kind.CLOSE, -1, 0)).astype(np.int64)
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
