"""How close ``iosweep tune`` comes to the best point of a full grid, and how well each of its
predictions held (docs/analysis.md "Tuning").

    .venv/bin/python benchmarks/bench_tune.py [--out DIR] [--cases NAME ...]

For each case, in one run on this machine: the full grid of loader workers (0, 1, 2, 3, 4, 6,
8; 2 runs each) through the workflow, then ``iosweep tune`` from 0 loader workers (2 runs a
point, a budget of 3 reruns) in results of its own, so it reuses no run of the grid. Printed:
the grid's steady-state samples/s per worker count (the runs' own summaries), the start and
the best, the tune's steps (each prediction beside its measurement, the error), the point it
recommends with the grid's figure for it as a share of the grid's best, and the reruns it
used. Cases: ``pytorch`` and ``tensorflow`` (the ImageNet-style job at 1 rank with a heavy
decode: tests/configs/tune.yaml, TensorFlow's JPEGs 4x the sides, its step being 4x
PyTorch's), ``own-job`` (examples/own-job at 1 rank: a user's command template with
``{loader_workers}``), and ``default`` (the default sweep's ImageNet-style point, 2 ranks on
this machine's cores: a tune only). Needs the machine to itself: they are wall times.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from statistics import mean

import yaml

ROOT = Path(__file__).resolve().parents[1]
GRID = [0, 1, 2, 3, 4, 6, 8]
TUNE_CFG = ROOT / "tests" / "configs" / "tune.yaml"
CASES = {  # name -> (base config, overrides, tune --start arguments)
    "pytorch": (TUNE_CFG, {}, []),
    "tensorflow": (
        TUNE_CFG,
        {"sweep": {"frameworks": ["tensorflow"]}, "dataset": {"imagenet": {"image_scale": 4}}},
        [],
    ),
    "own-job": (
        ROOT / "examples" / "own-job" / "config.yaml",
        {
            "sweep": {"procs_per_node": [1], "tracers": ["none"]},
            "workloads": {"mytrain": {"params": {"lr": [0.05]}}},
        },
        [],
    ),
    "default": (
        ROOT / "config" / "config.yaml",
        {
            "sweep": {
                "workloads": ["imagenet"],
                "procs_per_node": [2],
                "frameworks": ["pytorch"],
                "steps_per_epoch": [0],
                "batch_size": [32],
                "include": [],
            },
        },
        [],
    ),
}


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out.get(k) or {}, v) if isinstance(v, dict) else v
    return out


def _config(case: str, out: Path, extra: dict) -> Path:
    base, over, _ = CASES[case]
    cfg = _merge(yaml.safe_load(base.read_text()), over)
    cfg = _merge(cfg, extra)
    path = out / f"{case}-{extra['results'].rsplit('/', 1)[-1]}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _steady(summary: Path) -> float | None:
    t = json.loads(summary.read_text())["pipeline"]["totals"]
    if not t or not t.get("steady_time_per_rank"):
        return None
    return t["steady_samples_per_rank"] / t["steady_time_per_rank"] * t["ranks"]


def grid(case: str, out: Path) -> dict[int, list[float]]:
    results = out / case / "grid"
    cfg = _config(
        case,
        out,
        {
            "results": str(results),
            "repeats": 2,
            "sweep": {"loader_workers": GRID},
            "tune": {"enabled": False},
        },
    )
    from iosweep.cli.tune import merged_config
    from iosweep.config import expand_sweep

    points = expand_sweep(merged_config(cfg, {}))
    cmd = [str(ROOT / ".venv/bin/snakemake")]
    cmd += [str(results / "runs" / p.run_id / "analysis" / "summary.json") for p in points]
    cmd += ["--configfile", str(cfg), "--cores", "2", "--keep-going", "--quiet", "rules"]
    print(f"[{case}] grid: {len(points)} runs:", " ".join(cmd[:2]), "...", flush=True)
    subprocess.run(cmd, cwd=ROOT, check=False)
    by: dict[int, list[float]] = {}
    for s in sorted(results.glob("runs/**/analysis/summary.json")):
        sm = json.loads(s.read_text())
        rate = _steady(s)
        if rate is not None and sm["status"] == "ok":
            by.setdefault(int(sm["params"]["loader_workers"]), []).append(rate)
    return by


def tune(case: str, out: Path) -> dict:
    results = out / case / "tune"
    cfg = _config(case, out, {"results": str(results), "tune": {"start": {"loader_workers": 0}}})
    cmd = [sys.executable, "-m", "iosweep", "tune", "--configfile", str(cfg), *CASES[case][2]]
    cmd += ["--cores", "2", "--", "--quiet", "rules"]
    print(f"[{case}] tune:", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=False)
    return json.loads((results / "tune" / "ledger.json").read_text())


def _n(v: float | None) -> str:
    return "?" if v is None else f"{v:,.1f}"


def report(case: str, by: dict[int, list[float]], ledger: dict) -> list[float]:
    print(f"\n== {case}")
    errors = []
    if by:
        print(f"{'workers':>8} {'grid samples/s (mean of runs)':>32}")
        for w in sorted(by):
            print(f"{w:>8} {_n(mean(by[w])):>14}  [{', '.join(_n(x) for x in by[w])}]")
        best_w = max(by, key=lambda w: mean(by[w]))
        start = mean(by.get(0, [float("nan")]))
        print(
            f"grid: start {_n(start)}, best loader workers {best_w}: {_n(mean(by[best_w]))} "
            f"({mean(by[best_w]) / start:.2f}x the start)"
        )
    for s in ledger["steps"]:
        m, p = s["measured"], s["prediction"]
        pred = f"predicted {_n(p['samples_per_s'])}" if p else "start"
        err = f", error {s['error']:+.1%}" if s["error"] is not None else ""
        print(
            f"  tune step {s['step']}: loader workers {m['loader_workers']}: {pred}, measured "
            f"{_n(m['samples_per_s'])}{err} -> {s['outcome']}"
        )
        if s["error"] is not None:
            errors.append(abs(s["error"]))
    chosen = (
        ledger["steps"][ledger["best_step"]]["measured"]
        if ledger["best_step"] is not None
        else None
    )
    reruns = len(ledger["steps"]) - 1
    print(f"  stopped: {ledger['stop']}; reruns used: {reruns} of {ledger['budget']}")
    if chosen and by:
        w = chosen["loader_workers"]
        best = max(mean(v) for v in by.values())
        in_grid = mean(by[w]) / best if w in by else float("nan")
        print(
            f"  recommends loader workers {w}: the grid measured {in_grid:.0%} of its best there; "
            f"the tune measured {chosen['samples_per_s'] / best:.0%} of the grid's best"
        )
    return errors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("/tmp/bench-tune"))
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    errors = []
    for case in args.cases:
        by = grid(case, args.out) if case != "default" else {}
        errors += report(case, by, tune(case, args.out))
    if errors:
        print(
            f"\nprediction errors (|predicted - measured| / measured): {len(errors)} predictions, "
            f"largest {max(errors):.1%}, mean {mean(errors):.1%}; "
            f"{sum(e <= 0.15 for e in errors)} of {len(errors)} within 15%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
