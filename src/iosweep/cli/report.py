"""``iosweep report ANALYSIS... [--sweep DIR] -o report.html``: render the HTML report.

An ANALYSIS is a run's analysis directory (with ``summary.json``), or any directory above
analyses (searched for ``summary.json``), e.g. the OUTDIR of ``iosweep analyze``: a directory
holding ``sweep.parquet``/``sweep.csv`` is also taken as the sweep analysis unless ``--sweep``
names one. Prints the report's path.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "analyses",
        nargs="+",
        type=Path,
        metavar="ANALYSIS",
        help="run analysis directories, or directories above them",
    )
    p.add_argument(
        "--sweep",
        type=Path,
        metavar="DIR",
        help="the sweep analysis (sweep.parquet, scaling.json, ...)",
    )
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        required=True,
        metavar="HTML",
        help="the report file; figures go beside it",
    )
    p.add_argument(
        "--anonymize",
        action="store_true",
        default=None,
        help="replace user names and path prefixes",
    )
    p.add_argument("--title", help="report title")
    p.add_argument(
        "--max-points", type=int, metavar="N", help="operations drawn per plot before sampling"
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="YAML",
        help="the workflow config the runs were made with: validated, shown under Provenance; its report: section gives the defaults",
    )


def run(args: argparse.Namespace) -> int:
    from iosweep.notebook import find_analyses
    from iosweep.report import ReportSettings, render_report

    config = None
    base: dict = {}
    if args.config is not None:
        from iosweep.config import ConfigError, load_config

        try:
            config = load_config(args.config)
        except (ConfigError, OSError) as e:
            print(f"iosweep report: {e}", file=sys.stderr)
            return 2
        base = dict(config.get("report") or {})
    for key, val in (
        ("title", args.title),
        ("anonymize", args.anonymize),
        ("max_points_per_plot", args.max_points),
    ):
        if val is not None:
            base[key] = val
    try:
        settings = ReportSettings.from_dict(base)
    except (KeyError, TypeError, ValueError) as e:
        print(f"iosweep report: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    dirs, found_sweep = find_analyses(list(args.analyses))
    if not dirs:
        print("iosweep report: no run analysis (summary.json) found", file=sys.stderr)
        return 2
    out = render_report(dirs, args.sweep or found_sweep, args.out, settings, config)
    print(out.resolve())
    return 0
