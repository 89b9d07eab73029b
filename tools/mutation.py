"""Mutation testing of the analysis, trace and config-validation code (`make mutation`).

mutmut ([tool.mutmut] in pyproject.toml) writes every mutant of those packages into
mutants/ and runs, per mutant, the fast tests that reach the mutated function. All of them
(about 44,000) take hours on a few cores, so by default this runs a seeded random sample of
SAMPLE mutants per package (100) and prints each package's killed share with its 95% interval;
SAMPLE=0 runs them all. mutmut keeps its results in mutants/: a second run with the same
seed re-checks the same mutants (after new tests, say), `--resume` checks only those of the
last run's sample not checked yet, and `--score` only prints.

Usage: python tools/mutation.py [--sample N] [--seed S] [--score] [--survivors] [--resume]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
LAST_SAMPLE = MUTANTS / "iosweep-sample.json"  # the last run's sample and seed, for --score
MUTMUT = Path(sys.executable).with_name("mutmut")
PACKAGES = ("analysis", "trace", "config")
# mutmut's own reading of a mutant's exit code; detected = a test failed, timed out or crashed
DETECTED = {"killed", "timeout", "segfault"}
UNDETECTED = {"survived", "no tests"}


def package(meta: Path) -> str:
    """analysis, trace or config, from a mutants/src/iosweep/... .meta path."""
    parts = meta.relative_to(MUTANTS / "src/iosweep").parts
    return parts[0] if parts[0] in ("analysis", "trace") else "config"


def load() -> dict[str, tuple[str, int | None]]:
    """Every mutant mutmut made: name -> (package, exit code or None when not checked)."""
    out = {}
    for meta in sorted((MUTANTS / "src/iosweep").rglob("*.py.meta")):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            out[name] = (package(meta), code)
    return out


def prepare() -> None:
    """What mutmut's copy misses: the report templates (a symlink in the package, which its
    walk does not follow) and the tools venv the merged-log tests open logs with."""
    (MUTANTS / "src/iosweep/report").mkdir(parents=True, exist_ok=True)
    link = MUTANTS / "src/iosweep/report/templates"
    if not link.is_symlink():
        link.symlink_to(os.readlink(ROOT / "src/iosweep/report/templates"))
    tools = MUTANTS / ".venv-tools"
    if not tools.is_symlink() and (ROOT / ".venv-tools").exists():
        tools.symlink_to(ROOT / ".venv-tools")


def mutmut(*names: str) -> None:
    env = dict(os.environ, IOSWEEP_STRICT="1")
    env.setdefault("IOSWEEP_SHARED", str(ROOT.parent / "shared"))
    res = subprocess.run([str(MUTMUT), "run", *names], cwd=ROOT, env=env)
    if res.returncode:
        sys.exit(f"mutation: mutmut run failed (exit {res.returncode})")


def chosen_sample(n: int | None, seed: int | None, last: bool) -> tuple[int, int]:
    """The sample size and seed: as given, else (reading scores) the last run's, else $SAMPLE
    and $SEED, else 100 and 1. Without the last run's, --score after `SAMPLE=200 SEED=4`
    scored seed 1's 100 a package: other mutants, most of them never checked."""
    before = json.loads(LAST_SAMPLE.read_text()) if last and LAST_SAMPLE.exists() else {}
    if n is None:
        n = int(before.get("sample", os.environ.get("SAMPLE", 100)))
    if seed is None:
        seed = int(before.get("seed", os.environ.get("SEED", 1)))
    return n, seed


def sample(mutants: dict[str, tuple[str, int | None]], n: int, seed: int) -> list[str]:
    """The ``n`` mutants of each package that come first in an order set by a hash of the seed
    and each mutant's own name: a smaller sample of a seed is part of a larger one, and a
    change elsewhere in the code (mutants added or gone) leaves the others' places alone."""
    chosen = []
    for pkg in PACKAGES:
        names = sorted(
            (k for k, (p, _) in mutants.items() if p == pkg),
            key=lambda k: hashlib.sha256(f"{seed}/{k}".encode()).digest(),
        )
        chosen += names if n <= 0 else names[:n]
    return chosen


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% interval of a share of k in n (Wilson's score interval)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return mid - half, mid + half


def score(mutants: dict[str, tuple[str, int | None]], names: list[str]) -> None:
    print(
        f"{'package':<9} {'mutants':>8} {'checked':>8} {'killed':>7} {'survived':>9} "
        f"{'no tests':>9} {'score':>7}  95% interval"
    )
    for pkg in PACKAGES:
        codes = [mutants[n][1] for n in names if mutants[n][0] == pkg]
        total = sum(1 for p, _ in mutants.values() if p == pkg)
        done = [c for c in codes if c is not None]
        what = Counter(status_by_exit_code[c] for c in done)
        killed = sum(what[s] for s in DETECTED)
        lo, hi = wilson(killed, len(done))
        share = killed / len(done) if done else float("nan")
        print(
            f"{pkg:<9} {total:>8} {len(done):>8} {killed:>7} {what['survived']:>9} "
            f"{what['no tests']:>9} {share:>7.1%}  {lo:.1%} .. {hi:.1%}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sample",
        type=int,
        default=None,
        help="mutants per package (0: all); default 100 or $SAMPLE (--score: the last run's)",
    )
    ap.add_argument(
        "--seed", type=int, default=None, help="default 1 or $SEED (--score: the last run's)"
    )
    ap.add_argument("--score", action="store_true", help="print the scores of the last run")
    ap.add_argument("--survivors", action="store_true", help="list the sample's survivors")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="check only the sample's mutants not checked yet: an interrupted run goes on "
        "(mutmut checks every mutant it is named again); sample and seed: the last run's",
    )
    a = ap.parse_args()
    start = time.monotonic()
    reading = a.score or a.survivors
    a.sample, a.seed = chosen_sample(a.sample, a.seed, last=reading or a.resume)
    if not reading:
        prepare()
        if not any((MUTANTS / "src/iosweep").rglob("*.py.meta")):
            # makes every mutant and the tests' stats; checks a few (mutmut needs a match)
            mutmut("iosweep.config.x_check*__mutmut_1")
        known = load()
        names = sample(known, a.sample, a.seed)
        if a.resume:
            names = [n for n in names if known[n][1] is None]
        print(f"mutation: {len(names)} mutants (sample {a.sample or 'all'}, seed {a.seed})")
        LAST_SAMPLE.write_text(json.dumps({"sample": a.sample, "seed": a.seed}))
        if names:  # mutmut named none checks every mutant
            mutmut(*names)
    mutants = load()
    names = sample(mutants, a.sample, a.seed)
    if a.survivors:
        for n in names:
            code = mutants[n][1]
            if code is not None and status_by_exit_code[code] in UNDETECTED:
                print(n, status_by_exit_code[code])
        return
    score(mutants, names)
    if not a.score:
        print(f"mutation: {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
