"""Units for text that people read: one formatting for the analysis and the report."""


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
