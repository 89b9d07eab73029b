"""``iosweep show ANALYSIS...``: each run's answer again, on the terminal (the verdict, AU,
where the wait goes, the first lever, what the figures miss); ``--json`` for scripts.
An ANALYSIS is a run's analysis (``summary.json`` or its directory), or a directory holding
some (a sweep's output, the workflow's ``results``), or a tune's ``ledger.json``. In a
directory, a tune's runs are told by its ledger (``tune/ledger.json``), not one by one.
Colour only on a terminal (and never with NO_COLOR set).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from iosweep.analysis.findings.sweep import advised_levers
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.summary import AnalysisFailure, RunSummary, SummaryError
from iosweep.notebook import OpenError, Sweep
from iosweep.notebook import open as open_analysis
from iosweep.report.terminal import as_record, run_text
from iosweep.report.tune import ledger_text
from iosweep.tune.ledger import LedgerError, read_ledger


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "analyses",
        nargs="+",
        type=Path,
        metavar="ANALYSIS",
        help="run analyses (summary.json or its directory), or directories holding some",
    )
    p.add_argument("--json", action="store_true", help="one JSON list of the runs' answers")


def use_color(stream=None) -> bool:
    # sys.stdout when called, not when imported: it may have been replaced since
    stream = sys.stdout if stream is None else stream
    return stream.isatty() and not os.environ.get("NO_COLOR")


def show(
    summaries: list[tuple[RunSummary | AnalysisFailure, Path]],
    as_json: bool = False,
    settings: AnalysisSettings | None = None,
) -> None:
    """Print each run's answer (text, or one JSON list), its levers as the measurements of
    the runs shown together leave them (what the sweep's report advises too)."""
    runs = [sm for sm, _ in summaries if isinstance(sm, RunSummary)]
    advised = advised_levers(runs, settings)
    if as_json:
        print(
            json.dumps([as_record(sm, d, advised.get(sm.run_id)) for sm, d in summaries], indent=1)
        )
        return
    color = use_color()
    for sm, d in summaries:
        print(run_text(sm, d, color, advised.get(sm.run_id)))


def _ledgers(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(the tune ledgers among or under ``paths``, the other paths)."""
    ledgers, rest = [], []
    for p in paths:
        if p.is_file() and p.name == "ledger.json":
            ledgers.append(p)
            continue
        if p.is_dir() and (p / "tune" / "ledger.json").is_file():
            ledgers.append(p / "tune" / "ledger.json")
        rest.append(p)
    return ledgers, rest


def _tune_run(d: Path, given: list[Path]) -> bool:
    """A tune's run found by searching a directory (its ledger tells it)."""
    return d not in given and any(part.startswith("tune~") for part in d.parts)


def run(args: argparse.Namespace) -> int:
    found, failed = [], 0
    ledgers, paths = _ledgers(args.analyses)
    for path in ledgers:
        try:
            print(ledger_text(read_ledger(path)))
        except LedgerError as e:
            failed += 1
            print(f"iosweep show: {e}", file=sys.stderr)
    for p in paths:  # as iosweep.open finds them: the same search as iosweep report's
        try:
            opened = open_analysis(p)
        except OpenError as e:
            failed += 1
            print(f"iosweep show: {e}", file=sys.stderr)
            continue
        for r in opened.runs if isinstance(opened, Sweep) else [opened]:
            if r.analysis is None:
                failed += 1
                print(f"iosweep show: {r.store}: a trace store not analysed yet", file=sys.stderr)
            elif not _tune_run(r.analysis, args.analyses):
                try:
                    found.append((r.read(), r.analysis))
                except (OSError, SummaryError, ValueError) as e:
                    failed += 1
                    print(f"iosweep show: {r.analysis}: {e}", file=sys.stderr)
    show(found, args.json)
    return 1 if failed or not (found or ledgers) else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="iosweep show", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
