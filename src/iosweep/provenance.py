"""Where this iosweep came from: the source checkout's git revision, for manifests and reports."""

from __future__ import annotations

import subprocess
from pathlib import Path

import iosweep

REPO_DIR = Path(iosweep.__file__).resolve().parents[2]


def git_revision(repo: Path = REPO_DIR) -> str:
    """``<commit>`` or ``<commit>-dirty`` (tracked files changed); "" outside a git checkout."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10
        )

    try:
        rev = git("rev-parse", "HEAD")  # the full commit: enough to check it out again
        if rev.returncode != 0:
            return ""
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return rev.stdout.strip() + ("-dirty" if dirty else "")
