"""Writing results safely: every file a stage leaves is written under a temporary name and
renamed into place, so a file that exists is whole (a reader or a rerun never takes a
half-written Parquet table or JSON document as complete); and one JSON-safe form of the
values the stages hand on (numpy scalars to Python, NaN and infinities to null)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def atomic_write(path: Path | str, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp)`` on a temporary name beside ``path``, then rename it to ``path``;
    the temporary file is removed if writing fails."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text(path: Path | str, text: str) -> Path:
    return atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


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
