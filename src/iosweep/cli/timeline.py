"""``iosweep timeline RUN -o FILE``: a run as a timeline (Chrome trace-event JSON, gzip) for
ui.perfetto.dev or Perfetto's trace processor. RUN is a run's analysis (a directory with
``summary.json``: its store, verdict and checkpoints) or a trace store (``run.json``: no
verdict in the file). ``iosweep analyze`` writes the same file beside each analysis.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.timeline import export
from iosweep.notebook import linked_store

EPILOG = (
    "One process per rank: its training loop (steps, data waits) and each of its processes "
    "and threads (loader workers too) as tracks; reads, writes and metadata calls as slices "
    "with file, offset and size; epochs and checkpoints as markers. Past --max-steps steps of "
    "every rank (or outside --window, or past --max-events slices) the file is cut, and says "
    "so in its metadata and with a marker. "
    + export.HOW_TO_OPEN[0].upper()
    + export.HOW_TO_OPEN[1:]
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.add_argument("run", type=Path, metavar="RUN", help="a run's analysis or its trace store")
    p.add_argument("-o", "--out", type=Path, required=True, help="the file to write (.json.gz)")
    d = AnalysisSettings().timeline
    p.add_argument(
        "--max-steps",
        type=int,
        default=d["max_steps"],
        help=f"steps of every rank before the cut (default {d['max_steps']})",
    )
    p.add_argument(
        "--window",
        metavar="START:END",
        help="only this window, seconds from the run's start (replaces --max-steps)",
    )
    p.add_argument(
        "--max-events",
        type=int,
        default=d["max_events"],
        help=f"most slices in the file (default {d['max_events']:,})",
    )


def _window(text: str | None) -> list[float] | None:
    if not text:
        return None
    try:
        lo, hi = (float(v) for v in text.split(":"))
    except ValueError:
        raise SystemExit(
            f"iosweep timeline: --window {text!r}: expected START:END in seconds"
        ) from None
    if not 0 <= lo < hi:
        raise SystemExit(f"iosweep timeline: --window {text!r}: expected 0 <= START < END")
    return [lo, hi]


def store_and_summary(
    run: Path, prog: str = "iosweep timeline"
) -> tuple[Path, dict[str, Any] | None]:
    """(trace store, summary or None) of RUN: a run's analysis, or its trace store."""
    if (run / "run.json").is_file():
        return run, None
    f = run if run.is_file() else run / "summary.json"
    try:
        sm = json.loads(f.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(
            f"{prog}: {run}: neither a trace store (run.json) nor a "
            f"run analysis (summary.json): {e}"
        ) from None
    store = linked_store(f.parent, sm.get("store", ""), sm.get("store_relative"))
    if not (store / "run.json").is_file():
        raise SystemExit(f"{prog}: {run}: its trace store {store} is gone")
    return store, sm


def run(args: argparse.Namespace) -> int:
    timeline = {
        "enabled": True,
        "max_steps": args.max_steps,
        "max_events": args.max_events,
        "window": _window(args.window),
    }
    try:
        settings = AnalysisSettings.from_dict({"timeline": timeline})
    except (KeyError, TypeError, ValueError) as e:
        raise SystemExit(f"iosweep timeline: {e.args[0] if e.args else e}") from None
    store, summary = store_and_summary(args.run)
    rd, tl = export.from_store(store, settings)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    export.write(rd.meta, tl, summary or {}, args.out)
    print(f"{args.out}: {len(tl.slices):,} slices" + (f"; cut {tl.cut}" if tl.cut else ""))
    if summary is None:
        print("  no verdict in it: RUN is a trace store (give its analysis for the verdict)")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="iosweep timeline", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
