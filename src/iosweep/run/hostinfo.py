"""What explains the numbers a run gives, recorded in its manifest before it runs: the host's
cores and memory (are the ranks and their loader workers oversubscribed?), the file system
the data are on, and how much of the data the page cache already held (a warm cache makes
storage look fast)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

SAMPLE_FILES = 256  # files whose page-cache residency is measured


def fs_type(path: str | Path) -> str:
    """The type of the file system holding ``path`` (the longest mount point above it)."""
    p = str(Path(path).resolve())
    best, kind = "", ""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return ""
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3:
            mnt = parts[1].replace("\\040", " ")
            inside = p == mnt or p.startswith(mnt.rstrip("/") + "/")
            if inside and len(mnt) >= len(best):
                best, kind = mnt, parts[2]
    return kind


def _sample(path: Path) -> list[str]:
    out: list[str] = []
    for dirpath, _dirs, names in os.walk(path):
        for n in sorted(names):
            out.append(os.path.join(dirpath, n))
            if len(out) >= SAMPLE_FILES:
                return out
    return out


def page_cache_share(path: str | Path) -> float | None:
    """The share of a sample of the data's bytes already in the page cache (util-linux
    ``fincore``); None where it cannot be measured."""
    exe = shutil.which("fincore")
    p = Path(path)
    files = [str(p)] if p.is_file() else _sample(p) if p.is_dir() else []
    if not exe or not files:
        return None
    try:
        out = subprocess.run(
            [exe, "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", *files],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    res = size = 0
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            res, size = res + int(parts[0]), size + int(parts[1])
    return min(res / size, 1.0) if size else None


def host_info(data_path: str | Path | None) -> dict[str, Any]:
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = None
    out: dict[str, Any] = {"cpus": os.cpu_count(), "memory_bytes": memory}
    if data_path:
        out["data_fs"] = fs_type(data_path)
        out["data_page_cache_share"] = page_cache_share(data_path)
    return out
