"""Writing results safely: every file a stage leaves is written under a temporary name and
renamed into place, so a file that exists is whole (a reader or a rerun never takes a
half-written Parquet table or JSON document as complete); and one JSON-safe form of the
values the stages hand on (numpy scalars to Python, NaN and infinities to null)."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from iosweep.units import human_bytes


class NoSpaceError(OSError):
    """The file system filled up while a result was written; nothing half-written is left."""


def _no_space(path: Path, tmp: Path, need: int | None, error: OSError) -> NoSpaceError:
    try:
        written = tmp.stat().st_size
    except OSError:
        written = 0
    tmp.unlink(missing_ok=True)
    free = shutil.disk_usage(path.parent).free
    needs = f"it needs up to {human_bytes(need)}" if need else "its size is not known beforehand"
    got = f", {human_bytes(written)} were written when the disk filled" if written else ""
    return NoSpaceError(
        error.errno,
        f"{path}: no space left on device: {human_bytes(free)} free, {needs}{got}; nothing "
        "half-written was left: free space or point `results` to a larger file system, "
        "then rerun",
    )


def is_full(e: OSError) -> bool:
    """Whether ``e`` is a full file system or quota (Arrow's writers say it only in words)."""
    return e.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(e)


@contextlib.contextmanager
def no_space_named(folder: Path, what: str) -> Iterator[None]:
    """A full file system (or quota) while ``what`` is written under ``folder`` raised as
    :class:`NoSpaceError` naming it and the space free (for writers that are not
    :func:`atomic_write`'s: the caller removes what was half-written)."""
    try:
        yield
    except NoSpaceError:
        raise
    except OSError as e:
        if is_full(e):
            free = shutil.disk_usage(folder if folder.exists() else folder.parent).free
            raise NoSpaceError(
                e.errno,
                f"{folder}: no space left on device writing {what}: {human_bytes(free)} free; "
                "free space or point the output to a larger file system, then rerun",
            ) from e
        raise


def atomic_write(path: Path | str, write: Callable[[Path], Any], need: int | None = None) -> Path:
    """Call ``write(tmp)`` on a temporary name beside ``path``, then rename it to ``path``;
    the temporary file is removed if writing fails. A full file system (or quota) raises
    :class:`NoSpaceError` naming ``path``, the space free and ``need`` (an upper bound of
    the file's size, when the caller knows one)."""
    return atomic_writes([Path(path)], lambda tmps: write(tmps[0]), need)[0]


def atomic_writes(
    paths: list[Path], write: Callable[[list[Path]], Any], need: int | None = None
) -> list[Path]:
    """:func:`atomic_write` of several files written together by one ``write(tmps)``: each
    renamed into place only once all are written; none is left where writing fails (a full
    file system is said naming the first)."""
    tmps = [p.with_name(p.name + ".tmp") for p in paths]
    try:
        write(tmps)
        for tmp, p in zip(tmps, paths, strict=True):
            os.replace(tmp, p)
    except OSError as e:
        if is_full(e):
            raise _no_space(paths[0], tmps[0], need, e) from e
        raise
    finally:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
    return paths


def shown(path: Path | str) -> str:
    """A path (or text holding one) as text any UTF-8 file can hold: a file name's bytes that
    are not UTF-8 (kept by Python as lone surrogates) written as ``\\xNN``, where a JSON, Arrow
    or HTML writer would refuse them."""
    text = os.fsdecode(path) if isinstance(path, Path) else path
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", "backslashreplace")
    return text


def write_text(path: Path | str, text: str) -> Path:
    data = text.encode("utf-8")
    return atomic_write(path, lambda p: p.write_bytes(data), need=len(data))


def write_json(path: Path | str, obj: Any) -> Path:
    """``obj`` as indented JSON (through :func:`json_safe`), atomically."""
    return write_text(path, json.dumps(json_safe(obj), indent=1) + "\n")


def json_safe(o: Any) -> Any:
    """JSON-safe: numpy scalars and arrays to Python, NaN/inf and pandas' NA/NaT to null."""
    if isinstance(o, dict):
        return {str(k): json_safe(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [json_safe(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating | float):
        f = float(o)
        return f if math.isfinite(f) else None
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return json_safe(o.tolist())
    if o is pd.NA or o is pd.NaT:
        return None
    return o
