"""``iosweep tune``: prove the lever. Run the job at its start point, take the lever its rate
model predicts the most from, run that point with repeats, keep it or not, and go on until
the target AU is met, no lever predicts a gain above the spread of repeats, or the budget of
reruns is spent; then print the ledger (``<results>/tune/ledger.json``).

The runs are the workflow's (Snakemake's ``tune_step`` checkpoints): under ``--profile slurm``
each is a SLURM job like any other. Arguments after ``--`` go to Snakemake.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from iosweep.config import ConfigError, validate_config
from iosweep.tune.ledger import LedgerError, read_ledger
from iosweep.tune.points import tune_plan

PROG = "iosweep tune"
REPO = Path(__file__).resolve().parents[3]  # the Snakefile's folder (a source checkout)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = (
        "e.g. iosweep tune --configfile my.yaml --start workload=imagenet --start "
        "procs_per_node=1 --start loader_workers=0 -- --profile slurm"
    )
    p.add_argument(
        "--configfile",
        type=Path,
        help="your config (over config/config.yaml, as Snakemake takes it)",
    )
    p.add_argument(
        "--start",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the start point (tune.start): framework, workload, procs_per_node, loader_workers, "
        "...; params.NAME=VALUE for a workload's own parameter",
    )
    p.add_argument("--budget", type=int, help="reruns tune may run (tune.budget, default 3)")
    p.add_argument("--repeats", type=int, help="runs a point (tune.repeats, default 2)")
    p.add_argument("--target-au", type=float, help="the AU that needs no tuning (default 0.9)")
    p.add_argument("--cores", default="all", help="Snakemake's --cores (default: all)")
    p.add_argument("snakemake_args", nargs=argparse.REMAINDER, help="-- then Snakemake's own")


def _value(text: str) -> Any:
    return yaml.safe_load(text) if text else text


def tune_request(args: argparse.Namespace) -> dict[str, Any]:
    """The config keys this command sets: ``tune``, from its arguments."""
    start: dict[str, Any] = {}
    for item in args.start:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--start {item!r}: give KEY=VALUE (e.g. loader_workers=0)")
        if key.startswith("params."):
            start.setdefault("params", {})[key.removeprefix("params.")] = _value(value)
        else:
            start[key] = _value(value)
    tune: dict[str, Any] = {"enabled": True}
    if start:
        tune["start"] = start
    for key in ("budget", "repeats", "target_au"):
        if getattr(args, key) is not None:
            tune[key] = getattr(args, key)
    return {"tune": tune}


def merged_config(configfile: Path | None, request: dict[str, Any]) -> dict[str, Any]:
    """The config Snakemake will see: the default, then ``configfile``, then ``request``."""
    from snakemake.utils import update_config

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for extra in ([yaml.safe_load(configfile.read_text()) or {}] if configfile else []) + [request]:
        update_config(config, extra)
    return validate_config(config)


def run(args: argparse.Namespace) -> int:
    try:
        request = tune_request(args)
        config = merged_config(args.configfile, request)
        plan = tune_plan(config)
    except (ConfigError, OSError, yaml.YAMLError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    ledger = Path(config["results"]) / "tune" / "ledger.json"
    extra = [a for a in args.snakemake_args if a != "--"]
    print(
        f"{PROG}: {plan.workload.name} ({plan.start.framework}, {plan.start.ranks} rank"
        f"{'s' if plan.start.ranks != 1 else ''}) from loader workers "
        f"{plan.start.loader_workers}; up to {plan.budget} reruns of {plan.repeats} runs; "
        f"ledger: {ledger}",
        flush=True,
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="iosweep-tune-") as f:
        yaml.safe_dump(request, f)
        f.flush()
        files = [str(args.configfile)] if args.configfile else []
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            str(ledger),
            "--snakefile",
            str(REPO / "Snakefile"),
        ]
        cmd += ["--cores", str(args.cores), "--configfile", *files, f.name]
        began = time.time()
        code = subprocess.call([*cmd, "--rerun-incomplete", *extra])
    from iosweep.report.tune import ledger_text

    try:
        if code or ledger.stat().st_mtime < began - 1:
            raise LedgerError(f"Snakemake exited {code}; see its log above")
        print(ledger_text(read_ledger(ledger)))
    except (LedgerError, OSError) as e:
        print(f"{PROG}: the tune did not finish: {e}", file=sys.stderr)
        return 1
    return 0
