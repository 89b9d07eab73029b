"""Units for text that people read: one formatting for the analysis and the report."""

import math


def human_bytes(n: float) -> str:
    """Decimal units, as in "47.0 MB" (the examples users quote from Darshan reports)."""
    n = float(n)
    if abs(n) < 1000:
        return f"{int(n)} B"
    for unit in ("kB", "MB", "GB", "TB", "PB"):
        n /= 1000.0
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.1f} {unit}"
    return f"{n:.1f} PB"


def rate_text(x: float | None, missing: str = "-") -> str:
    """A rate or a small figure as the tune's ledger states it: 3 significant digits below
    100 (0.912, 57.6), whole above (1234); ``missing`` where it is not known."""
    if x is None:
        return missing
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def whole_text(v: float | None, missing: str = "?") -> str:
    """A figure to the unit with thousands separators (1,234); ``missing`` where it is not
    known or not finite."""
    if v is None or not math.isfinite(v):
        return missing
    return f"{v:,.0f}"
