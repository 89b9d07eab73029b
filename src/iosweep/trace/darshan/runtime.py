"""What darshan-runtime does while it traces, which shapes what its logs can hold.

Shared by the tracer settings (``iosweep.run.tracers``, which work around it) and the
analysis (``iosweep.analysis.pipeline.completeness``, which explains a trace that lacks I/O).
"""

from __future__ import annotations

# darshan-core's built-in exclusions (darshan-runtime 3.5.0, darshan_path_exclusions): files
# whose path starts with one of these are not traced at all. DARSHAN_EXCLUDE_DIRS replaces
# the list as a whole; a NAME_INCLUDE regex of the config file overrides any exclusion.
DEFAULT_EXCLUDES = (
    "/etc/",
    "/dev/",
    "/usr/",
    "/bin/",
    "/boot/",
    "/lib/",
    "/opt/",
    "/sbin/",
    "/sys/",
    "/proc/",
    "/var/",
)


def excluded_by_default(path: str) -> str | None:
    """The built-in exclusion that hides ``path`` from a default Darshan, if any."""
    p = path.rstrip("/") + "/"
    return next((e for e in DEFAULT_EXCLUDES if p.startswith(e)), None)
