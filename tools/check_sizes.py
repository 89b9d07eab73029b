#!/usr/bin/env python3
"""Fail when a module of the package or the workflow is longer than the house allows.

    python tools/check_sizes.py [--max-lines 800] [PATH ...]

Modules stay short enough to find one's way in (800 lines); functions short enough to read
at once are ruff's PLR0915 (80 statements, pyproject.toml), which `make lint` runs too. Lines
are counted as the formatter writes them: a `# fmt: skip` (lines packed past the formatter to
stay under the cap) is refused too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATHS = [ROOT / "src" / "iosweep", ROOT / "workflow"]


def too_long(paths: list[Path], max_lines: int) -> list[tuple[Path, int]]:
    """(module, lines) of every ``.py`` / ``.smk`` file under ``paths`` past ``max_lines``."""
    out = []
    for root in paths:
        files = [root] if root.is_file() else sorted([*root.rglob("*.py"), *root.rglob("*.smk")])
        for f in files:
            n = len(f.read_text(errors="replace").splitlines())
            if n > max_lines:
                out.append((f, n))
    return out


def packed(paths: list[Path]) -> list[tuple[Path, int]]:
    """(module, line) of every ``# fmt: skip`` under ``paths``."""
    out = []
    for root in paths:
        files = [root] if root.is_file() else sorted([*root.rglob("*.py"), *root.rglob("*.smk")])
        for f in files:
            lines = f.read_text(errors="replace").splitlines()
            out += [(f, i + 1) for i, line in enumerate(lines) if "# fmt: skip" in line]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-lines", type=int, default=800)
    ap.add_argument("paths", nargs="*", type=Path, default=DEFAULT_PATHS)
    args = ap.parse_args(argv)
    bad = too_long(args.paths, args.max_lines)
    for f, n in bad:
        rel = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f
        print(f"{rel}: {n} lines, more than {args.max_lines}: split it along its seams")
    skipped = packed(args.paths)
    for f, line in skipped:
        rel = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f
        print(f"{rel}:{line}: # fmt: skip: let the formatter lay it out")
    return 1 if bad or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
