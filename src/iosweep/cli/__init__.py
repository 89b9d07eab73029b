"""The ``iosweep`` command line: one subcommand per workflow stage.

Each subcommand is a :class:`Subcommand` in :data:`SUBCOMMANDS`: a help line, a function
that adds its arguments to an ``argparse`` parser and a function that runs it and returns
the exit status. Functions may be given as ``"module:function"`` strings: they are imported
only when that subcommand is used, so ``iosweep ingest`` does not load the analysis stack.
To add a subcommand, add an entry (``analyze``, ``report``, ``run-point`` ...).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

from iosweep.files import NoSpaceError

Fn = Callable | str


@dataclass(frozen=True)
class Subcommand:
    help: str
    add_arguments: Fn  # (parser) -> None
    run: Fn  # (args) -> exit status


def _resolve(fn: Fn) -> Callable:
    if callable(fn):
        return fn
    module, _, name = fn.partition(":")
    return getattr(importlib.import_module(module), name)


SUBCOMMANDS: dict[str, Subcommand] = {
    "ingest": Subcommand(
        "build a run's trace store from its Darshan/DFTracer logs",
        "iosweep.cli.ingest:add_arguments",
        "iosweep.cli.ingest:run",
    ),
    "merge": Subcommand(
        "write a store's per-process Darshan logs as one N-rank log (STORE/merged.darshan)",
        "iosweep.cli.merge:add_arguments",
        "iosweep.cli.merge:run",
    ),
    "analyze": Subcommand(
        "analyse trace stores and compare them across the sweep",
        "iosweep.cli.analyze:add_arguments",
        "iosweep.cli.analyze:run",
    ),
    "show": Subcommand(
        "print each run's answer again: verdict, AU, where the wait goes, the first lever",
        "iosweep.cli.show:add_arguments",
        "iosweep.cli.show:run",
    ),
    "timeline": Subcommand(
        "write a run's timeline for ui.perfetto.dev (Chrome trace-event JSON)",
        "iosweep.cli.timeline:add_arguments",
        "iosweep.cli.timeline:run",
    ),
    "replay": Subcommand(
        "write a DLIO workload that replays a measured run, at any scale",
        "iosweep.cli.replay:add_arguments",
        "iosweep.cli.replay:run",
    ),
    "tune": Subcommand(
        "run the lever the rate model predicts, measure it, keep it or not: a ledger",
        "iosweep.cli.tune:add_arguments",
        "iosweep.cli.tune:run",
    ),
    "report": Subcommand(
        "render the HTML report of run analyses and the sweep comparison",
        "iosweep.cli.report:add_arguments",
        "iosweep.cli.report:run",
    ),
}


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the ``selected`` subcommand's arguments are loaded."""
    p = argparse.ArgumentParser(
        prog="iosweep", description="Sweep instrumented Horovod training and compare its I/O."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=cmd.help, description=cmd.help)
        if name == selected:
            _resolve(cmd.add_arguments)(sp)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    selected = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(selected if selected in SUBCOMMANDS else None).parse_args(argv)
    try:
        return int(_resolve(SUBCOMMANDS[args.command].run)(args) or 0)
    except NoSpaceError as e:  # the one error a user fixes outside iosweep: no traceback
        print(f"iosweep {args.command}: {e.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
