"""Keep the resident size of a long analysis near what it holds, not what it once held; and
the memory a step may take (the machine's, or its cgroup's, or a budget given by hand).

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
from pathlib import Path

import pyarrow as pa

from iosweep.cgroups import cgroup_dirs

GIB = 1 << 30
# Of the machine's memory, what a step (an ingest, an analysis) may take by default: the rest
# is the system's.
MACHINE_SHARE = 0.9


class MemoryBudgetError(RuntimeError):
    """A step (a run's analysis, its ingest) would need more memory than the budget allows."""


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


def cgroup_limit(
    proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")
) -> int | None:
    """The tightest memory limit on this process's cgroup or those above it (v2
    ``memory.max``, v1 ``memory.limit_in_bytes``); None without one. A SLURM job's cgroup is
    nested (``/slurm/uid_0/job_12/step_0``): the root's file alone says nothing of it."""
    limits = []
    for d, v2 in cgroup_dirs("memory", proc_cgroup, root):
        try:
            text = (d / ("memory.max" if v2 else "memory.limit_in_bytes")).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return min(limits) if limits else None


def machine_bytes() -> int:
    """The memory this process may use: its cgroup's limit (a SLURM job's ``--mem``, a
    container's) where there is one, else the machine's."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = cgroup_limit()
    return min(total, limit) if limit is not None else total


def budget_bytes(memory_gb: float | None) -> int:
    """The budget: ``memory_gb`` GiB, or by default a share of the machine's memory."""
    if memory_gb is not None:
        return int(memory_gb * GIB)
    return int(machine_bytes() * MACHINE_SHARE)
