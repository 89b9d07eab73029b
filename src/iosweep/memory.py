"""Keep the resident size of a long analysis near what it holds, not what it once held.

glibc serves arrays below its mmap threshold from the heap, and raises that threshold each
time a larger mapped block is freed (up to 32 MiB), so the analysis's many 10-30 MB numpy
temporaries (one per column at a million files) end up in heap holes that are not handed back:
measured on the ImageNet-scale benchmark, 1-2 GB more resident than live. A fixed threshold
maps such arrays and unmaps them when freed; ``release`` hands back what is free at a stage's
end. Both are no-ops where the C library is not glibc (Arrow keeps its own pool there).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
from collections.abc import Iterator

import pyarrow as pa

M_MMAP_THRESHOLD = -3  # mallopt parameter (glibc malloc.h)
MMAP_THRESHOLD = 1 << 20


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def map_large_arrays() -> None:
    """Serve allocations from 1 MiB up by mmap (freed: returned to the system at once), Arrow's
    buffers included (its default pool, mimalloc, keeps freed pages for reuse: measured, a few
    hundred MB more at the peak)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        pa.set_memory_pool(pa.system_memory_pool())


def release() -> None:
    """Hand free heap and Arrow-pool memory back to the system."""
    pa.default_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


@contextlib.contextmanager
def huge_pages() -> Iterator[None]:
    """Processes started within it have glibc's malloc ask for transparent huge pages for the
    blocks it maps (``glibc.malloc.hugetlb=1``, a tunable read when a process starts; glibc
    2.35 and later, others ignore it): :func:`map_large_arrays` maps every block of 1 MiB or
    more, and the page faults were a quarter of the analysis's CPU time. A part of the
    102.5 M run: 23.6 s, not 25.7 s, at the same peak."""
    old = os.environ.get(TUNABLES)
    if old is None or HUGE_PAGES.split("=")[0] not in old:
        os.environ[TUNABLES] = f"{old}:{HUGE_PAGES}" if old else HUGE_PAGES
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(TUNABLES, None)
        else:
            os.environ[TUNABLES] = old


TUNABLES, HUGE_PAGES = "GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"
