"""``iosweep replay RUN -o workload.yaml``: a DLIO workload that replays a measured run.

RUN is a run's folder (``results/runs/<run id>``, with ``analysis/summary.json``) or its
analysis. The workload reads the run's own files (through links named as DLIO lists them)
and reproduces its loader (batch size, workers, shuffling, prefetch), the measured cost of one
sample and of one step with their spread, its epochs and its checkpoints; every key says
where it was measured. Run it with DLIO at any scale:
``mpirun -np N dlio_benchmark --config-dir DIR workload=NAME``. docs/replay.md: the mapping
and the fidelity limits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from iosweep.cli.timeline import store_and_summary
from iosweep.replay.dlio import DlioError
from iosweep.replay.measure import ReplayError
from iosweep.replay.workload import write_replay

PROG = "iosweep replay"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "docs/replay.md: which measured figure becomes which DLIO key, and the limits."
    p.add_argument("run", type=Path, metavar="RUN", help="a run's folder or its analysis")
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        required=True,
        help="the workload to write: DIR/workload/NAME.yaml (DLIO: --config-dir DIR workload=NAME)",
    )
    p.add_argument(
        "--data-folder",
        type=Path,
        help="where to make DLIO's dataset folder of links to the run's files "
        "(default: DIR/NAME-data)",
    )
    p.add_argument(
        "--calibrate",
        type=Path,
        metavar="OUTDIR",
        help="run the workload once with DLIO at the run's scale (outputs in OUTDIR), measure "
        "it as the run was measured, and correct the per-sample and per-step times by DLIO's "
        "own overheads",
    )


def _summary_of(run: Path) -> tuple[Path, dict]:
    if (run / "analysis" / "summary.json").is_file():
        run = run / "analysis"
    store, summary = store_and_summary(run, PROG)
    if summary is None:
        raise SystemExit(f"{PROG}: {run}: a trace store; give the run's analysis (summary.json)")
    return store, summary


def run(args: argparse.Namespace) -> int:
    store, summary = _summary_of(args.run)
    try:
        r = write_replay(
            store, summary, args.out, data_folder=args.data_folder, calibrate=args.calibrate
        )
    except (ReplayError, DlioError) as e:
        raise SystemExit(f"{PROG}: {args.run}: {e}") from None
    m = r.measures
    print(
        f"{args.out}: DLIO workload of {m.value('files'):,} files, batch {m.value('batch_size')}, "
        f"{m.value('loader_workers')} worker(s), {r.value('computation_time') * 1e3:.1f} ms a "
        f"step, {r.value('preprocess_time') * 1e3:.2f} ms preprocessing a sample; "
        f"{len(m.limits)} limits in its header"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
