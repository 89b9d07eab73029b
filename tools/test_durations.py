#!/usr/bin/env python3
"""Where the suite's time goes, from pytest's JUnit XML (``pytest --junitxml=FILE``): each test
file's summed time and share, its test count, and the slowest tests, as the Markdown tables of
docs/testing.md. A test's time is its setup, call and teardown (pytest's default), so a module
fixture (a training run) is counted in the first test that asks for it.

    .venv/bin/pytest -n 2 --dist loadfile --junitxml=/tmp/suite.xml
    python tools/test_durations.py /tmp/suite.xml [--slowest 10]
    JUNIT_DIR=/tmp/junit make test; python tools/test_durations.py /tmp/junit/*.xml
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def cases(xml: Path) -> list[tuple[str, str, float]]:
    """(test file, test name, seconds) of every test case in the report."""
    out = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        path = "/".join(p for p in module if not p[:1].isupper()) + ".py"
        out.append((path, case.get("name", ""), float(case.get("time") or 0)))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("xml", type=Path, nargs="+", help="one file, or one a phase (JUNIT_DIR)")
    ap.add_argument("--slowest", type=int, default=10)
    a = ap.parse_args(argv)
    found = [c for xml in a.xml for c in cases(xml)]
    total = sum(t for _, _, t in found)
    per_file: dict[str, list[float]] = defaultdict(list)
    for path, _, t in found:
        per_file[path].append(t)
    print(f"{len(found)} tests, {total:.0f} s of test time in all (summed over workers)\n")
    print("| test file | tests | time (s) | share |\n|---|---|---|---|")
    for path, times in sorted(per_file.items(), key=lambda kv: -sum(kv[1])):
        print(f"| `{path}` | {len(times)} | {sum(times):.0f} | {sum(times) / total:.1%} |")
    print(f"\n| the {a.slowest} slowest tests | time (s) |\n|---|---|")
    for path, name, t in sorted(found, key=lambda c: -c[2])[: a.slowest]:
        print(f"| `{path}::{name}` | {t:.0f} |")


if __name__ == "__main__":
    main()
