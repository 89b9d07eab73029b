"""Number formatting for the report: bytes, seconds, shares, counts, by metric name."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from iosweep import units

MISSING = "\u2013"  # an en dash: the value is not there


def _bad(v: Any) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def human_bytes(n: Any) -> str:
    """Decimal units, as the analysis and Darshan's reports write them ("47.0 MB")."""
    return MISSING if _bad(n) else units.human_bytes(n)


def seconds(v: Any) -> str:
    if _bad(v):
        return MISSING
    v = float(v)
    if v == 0:
        return "0 s"
    if abs(v) < 1e-3:
        return f"{v * 1e6:.0f} µs"
    if abs(v) < 1:
        return f"{v * 1e3:.1f} ms"
    return f"{v:.2f} s"


def share(v: Any) -> str:
    if _bad(v):
        return MISSING
    return f"{float(v):.1%}"


def number(v: Any) -> str:
    if _bad(v):
        return MISSING
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return f"{int(v):,}"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def metric_kind(name: str) -> str:
    """bytes | rate | seconds | share | count, from a metric's name (the analysis's naming)."""
    n = name.lower()
    if "bandwidth" in n:
        return "rate"
    if "share" in n or n.startswith("imbalance") or "completeness" in n or n.endswith("_overhead"):
        return "share"
    if (
        "bytes" in n
        or n.endswith("_size_median")
        or n.startswith("read_size")
        or n.endswith("size_median")
    ):
        return "bytes"
    if n.endswith("_time") or "_time_" in n or n.startswith("time") or n.endswith("duration_mean"):
        return "seconds"
    return "count"


def metric(name: str, v: Any) -> str:
    if isinstance(v, str):
        return v
    kind = metric_kind(name)
    if kind == "bytes":
        return human_bytes(v)
    if kind == "rate":
        return MISSING if _bad(v) else human_bytes(v) + "/s"
    if kind == "seconds":
        return seconds(v)
    if kind == "share":
        return share(v)
    return number(v)


def iso_time(epoch: Any) -> str:
    if _bad(epoch) or not isinstance(epoch, int | float):
        return MISSING
    return dt.datetime.fromtimestamp(float(epoch), dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def with_unit(v: Any, unit: str) -> str:
    """A number as the analysis declared it (units of iosweep.analysis.summary.Unit)."""
    if isinstance(v, list):
        shown = ", ".join(with_unit(x, unit) for x in v[:12]) + (" ..." if len(v) > 12 else "")
        return shown or "none"
    if unit == "bytes":
        return human_bytes(v)
    if unit == "bytes/s":
        return MISSING if _bad(v) else human_bytes(v) + "/s"
    if unit == "s":
        return seconds(v)
    if unit == "share":
        return share(v)
    if unit == "ranks":
        return MISSING if _bad(v) else str(v)
    if unit == "text":
        return MISSING if v is None else str(v)
    return number(v)
