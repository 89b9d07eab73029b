"""``iosweep merge STORE``: the store's per-process Darshan logs as one N-rank Darshan log,
``STORE/merged.darshan``, for darshan-parser, PyDarshan, Drishti and DXT Explorer."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("stores", nargs="+", type=Path, metavar="STORE", help="trace store(s)")


def run(args: argparse.Namespace) -> int:
    from iosweep.trace.ingest import MERGED_DARSHAN, write_merged_darshan
    from iosweep.trace.store import RUN_JSON

    failed = 0
    for store in args.stores:
        if not (store / RUN_JSON).is_file():
            print(f"iosweep merge: {store}: not a trace store (no {RUN_JSON})", file=sys.stderr)
            failed += 1
            continue
        try:
            issues = write_merged_darshan(store)
        except ValueError as e:
            print(f"iosweep merge: {e}", file=sys.stderr)
            failed += 1
            continue
        out = store / MERGED_DARSHAN
        for i in issues:
            print(f"iosweep merge: {i.severity}: {i.message}", file=sys.stderr)
        if out.exists():
            print(f"iosweep merge: wrote {out}")
        elif not issues:
            print(
                f"iosweep merge: {store}: no per-process Darshan log to merge (an MPI job's "
                "own log already is one job)"
            )
        failed += int(not out.exists() and bool(issues))
    return 1 if failed else 0
