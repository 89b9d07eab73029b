"""``iosweep analyze INPUT... -o OUTDIR``: analyse trace stores, and compare them across the sweep.

An INPUT is a trace store (a directory with ``run.json``), an ingest output split into one
store per job (``jobs.json``: each job is a run), or an existing run analysis (a directory
with ``summary.json``, or the file itself). With a single store and no ``--sweep``,
the run's analysis goes to OUTDIR. Otherwise every store is analysed into
``OUTDIR/runs/<run id>/`` and the sweep files (sweep.csv, scaling.json, ...) go to OUTDIR.
One bad input never stops the others; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import traceback
from pathlib import Path
from typing import Any

import yaml

from iosweep.analysis.budget import MemoryBudgetError
from iosweep.analysis.findings.sweep import analyze_sweep, load_summary
from iosweep.analysis.parts.analyze import analyze_run
from iosweep.analysis.sections import PartsError
from iosweep.analysis.settings import PHASE_HELP, AnalysisSettings, parse_phases
from iosweep.analysis.subset import RankSubsetError, parse_ranks
from iosweep.cli.show import show
from iosweep.files import NoSpaceError
from iosweep.trace.jobs import JOBS_JSON
from iosweep.trace.store import open_store


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "inputs", nargs="+", type=Path, metavar="INPUT", help="trace store(s) or run analyses"
    )
    p.add_argument("-o", "--out", type=Path, required=True, help="output directory")
    p.add_argument(
        "--config",
        type=Path,
        help="YAML: the workflow config (its analysis: section is used) or a mapping of analysis settings",
    )
    p.add_argument(
        "--sweep", action="store_true", help="write the sweep comparison even for one input"
    )
    p.add_argument(
        "--json", action="store_true", help="print the runs' answers as one JSON list (for scripts)"
    )
    p.add_argument(
        "--phase", action="append", default=[], metavar="KIND:cat=RX[:name=RX]", help=PHASE_HELP
    )
    p.add_argument(
        "--memory-gb",
        type=_positive,
        metavar="GIB",
        help="memory a run's analysis may take (analysis.memory_gb; default: 90%% of the "
        "machine's or cgroup's); a run that needs more is analysed in parts of whole ranks "
        "that fit, put together as the whole run's; a rank that alone needs more is refused "
        "with the figures",
    )
    p.add_argument(
        "--in-parts",
        action="store_true",
        help="(kept for scripts: a run over --memory-gb is analysed in parts without it)",
    )
    p.add_argument(
        "--jobs",
        type=_count,
        metavar="N",
        help="a run analysed in parts: parts at a time, each in its own process within an "
        "equal share of --memory-gb (default: one a CPU; fewer where a rank needs more)",
    )
    p.add_argument(
        "--ranks",
        type=_ranks,
        metavar="LIST",
        help="analyse only these ranks of one store (e.g. 0-7,12): each rank's figures are "
        "exact, totals count these ranks only (for a run too large to analyse whole)",
    )


def _ranks(text: str) -> list[int]:
    try:
        return parse_ranks(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, got {text!r}")
    return int(text)


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a number of GiB above 0, got {text!r}")
    return v


def phase_options(texts: list[str], prog: str) -> dict[str, list[dict[str, str]]]:
    """The ``--phase`` options, kind -> rules; SystemExit naming a bad one."""
    try:
        return parse_phases(texts)
    except ValueError as e:
        raise SystemExit(f"{prog}: {e}") from None


def load_settings(path: Path | None, phases: list[str] | None = None) -> AnalysisSettings:
    """The analysis settings of ``path`` (a workflow config or a settings mapping), with the
    ``--phase`` rules over its ``phases``."""
    given = phase_options(phases or [], "iosweep analyze")
    if path is None:
        return AnalysisSettings.from_dict({"phases": given} if given else {})
    try:
        d = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise SystemExit(f"iosweep analyze: cannot read config {path}: {e}") from e
    if not isinstance(d, dict):
        raise SystemExit(f"iosweep analyze: {path}: the config must be a mapping")
    # A workflow config carries the settings under analysis:; a settings file is the mapping.
    if "analysis" in d or "sweep" in d:
        d = d.get("analysis") or {}
    if given:
        d = {**d, "phases": {**(d.get("phases") or {}), **given}}
    try:
        return AnalysisSettings.from_dict(d)
    except (KeyError, TypeError, ValueError) as e:
        raise SystemExit(f"iosweep analyze: {path}: {e.args[0] if e.args else e}") from e


def _said(out: Path, answers: list, as_json: bool) -> None:
    """The run's answer on the terminal (iosweep.report.terminal), or kept for --json."""
    from iosweep.analysis.summary import read_summary

    pair = (read_summary(out), out)
    answers.append(pair)
    if not as_json:
        show([pair])


def _safe_name(run_id: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._~=-]+", "_", run_id.strip("/")) or "run"
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}-{i}"
    taken.add(name)
    return name


def _job_stores(path: Path) -> list[Path]:
    """The per-job stores an ingest of several jobs wrote under ``path`` (jobs.json)."""
    try:
        labels = json.loads((path / JOBS_JSON).read_text())["jobs"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"iosweep analyze: {path / JOBS_JSON}: unreadable ({e})", file=sys.stderr)
        return []
    return [path / str(label) for label in labels]


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config, args.phase)
    if args.memory_gb is not None:
        settings.memory_gb = args.memory_gb
    # over the phases a store was ingested with, too
    given = phase_options(args.phase, "iosweep analyze") or None
    out: Path = args.out
    stores, analyses, failed = [], [], 0
    answers: list = []
    for p in args.inputs:
        if (p / "run.json").is_file():
            stores.append(p)
        elif (p / JOBS_JSON).is_file():  # an ingest that split its logs into jobs
            jobs = _job_stores(p)
            stores.extend(jobs)
            failed += not jobs
        elif (p.is_dir() and (p / "summary.json").is_file()) or (
            p.is_file() and p.name.endswith(".json")
        ):
            analyses.append(p)
        else:
            print(
                f"iosweep analyze: {p}: neither a trace store (run.json) nor a run analysis (summary.json)",
                file=sys.stderr,
            )
            failed += 1

    one = "--ranks" if args.ranks is not None else "--in-parts" if args.in_parts else None
    if one and (len(stores) != 1 or analyses or args.sweep):
        raise SystemExit(f"iosweep analyze: {one} analyses one trace store, not a sweep")
    if args.ranks is not None and (args.in_parts or args.jobs is not None):
        raise SystemExit(
            "iosweep analyze: --ranks analyses its ranks as one part: no --in-parts, --jobs"
        )
    if len(stores) == 1 and not analyses and not args.sweep:
        try:
            sm = analyze_run(stores[0], out, settings, given, args.ranks, args.jobs)
        except Exception as e:  # report the culprit store and fail
            print(f"iosweep analyze: {stores[0]}: {e}", file=sys.stderr)
            expected = NoSpaceError | MemoryBudgetError | RankSubsetError | PartsError
            if not isinstance(e, expected):  # not bugs
                traceback.print_exc(file=sys.stderr)
            return 1
        _said(out, answers, args.json)
        if args.json:
            show(answers, as_json=True)
        return 1 if failed else 0

    summaries: list[dict[str, Any]] = []
    taken: set[str] = set()
    for st in stores:
        try:
            meta = open_store(st).meta
            run_out = out / "runs" / _safe_name(meta.run_id or st.name, taken)
            sm = analyze_run(st, run_out, settings, given, jobs=args.jobs)
            sm["_path"] = str(run_out / "summary.json")
            summaries.append(sm)
            _said(run_out, answers, args.json)
        except Exception as e:  # one bad store never stops the others
            failed += 1
            print(f"iosweep analyze: {st}: {e}", file=sys.stderr)
            summaries.append(
                {"run_id": str(st), "error": f"{type(e).__name__}: {e}", "analysis_status": "error"}
            )
    for a in analyses:
        try:
            summaries.append(load_summary(a))
        except (OSError, ValueError) as e:
            failed += 1
            print(f"iosweep analyze: {a}: {e}", file=sys.stderr)
    if summaries:
        res = analyze_sweep(summaries, out, settings)
        if args.json:
            show(answers, as_json=True)
        else:
            print(f"sweep: {res['runs']} runs -> {out}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="iosweep analyze", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
