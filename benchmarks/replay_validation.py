"""How close a DLIO replay comes to the run it replays (docs/replay.md, "How close it comes").

    .venv/bin/python benchmarks/replay_validation.py [--workers 0 2 4] [--scale 2 4] [--out DIR]

For each loader-worker count: a real ImageNet-style run of 2 ranks (PyTorch + Horovod, traced by
DFTracer, 512 JPEGs, batch 32, 3 epochs, 32-pixel crops: decode-bound without workers), analysed;
its replay written with ``iosweep replay`` with and without the calibration pass; DLIO 2.0.0
(``.venv-dlio``) run on each at the run's 2 ranks and, calibrated, at each --scale times the
ranks (emulated on this machine); every DLIO run ingested and analysed as the real one was.
Printed: AU, samples/s, data wait per rank and verdict of each, real and replayed side by side.
Needs the machine to itself: the figures are wall times.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from iosweep.analysis import analyze_run
from iosweep.config import expand_sweep, validate_config
from iosweep.replay.dlio import run_dlio
from iosweep.replay.workload import write_replay
from iosweep.run.imagenet import prepare_imagenet
from iosweep.run.runner import run_point
from iosweep.trace.ingest import ingest

RANKS = 2
# enough training that start-up (imports, Horovod) stays under half the run (with 2 epochs of
# 8 steps a real run was once called start-up-dominated), and steps long enough that DLIO's
# own ~20 ms a step is a small part of them: the job of tests/test_replay.py
EPOCHS = 3


def real_run(base: Path, images: Path, workers: int) -> dict:
    config = validate_config(
        {
            "sweep": {"frameworks": ["pytorch"], "workloads": ["imagenet"],
                      "tracers": ["dftracer"], "procs_per_node": [RANKS], "epochs": [EPOCHS],
                      "steps_per_epoch": [0], "batch_size": [32], "loader_workers": [workers],
                      "staging": ["none"]},
            "training": {"collect_wait": 20, "timeout": 900, "imagenet": {"image_size": 32}},
        }
    )  # fmt: skip
    (point,) = expand_sweep(config)
    run_dir = base / f"real-w{workers}"
    man = run_point(config, point, run_dir, images, log=lambda m: None)
    if man["status"] not in ("ok", "partial"):
        raise SystemExit(f"the real run failed: {man.get('reason')}")
    # a run id of its own (the sweep's would be the same for every worker count: one point each)
    ingest([run_dir], run_dir / "store", manifest=run_dir / "manifest.json", run_id=run_dir.name)
    return analyze_run(run_dir / "store", run_dir / "analysis") | {"_store": run_dir / "store"}


def replayed(base: Path, name: str, ranks: int) -> dict:
    out = base / f"{name}-np{ranks}"
    run_dlio(base / "cfg", name, ranks, out)
    ingest([out], out / "store")
    return analyze_run(out / "store", out / "analysis")


def row(label: str, sm: dict) -> str:
    p = sm["pipeline"]
    t, d = p["totals"], (p.get("dlio") or {}).get("au_mean")
    theirs = f"{d:6.1%}" if d is not None else "     -"
    return (
        f"{label:28s} {t['ranks']:5d} {t['au']:7.1%} {theirs} {t['samples_per_s']:10.1f} "
        f"{t['wait_per_rank']:9.2f} {t['compute_per_rank']:9.2f}  {p['verdict']['kind']}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4])
    ap.add_argument("--scale", type=int, nargs="*", default=[2, 4])
    ap.add_argument("--out", type=Path, help="keep everything here (default: a temporary folder)")
    a = ap.parse_args()
    base = a.out or Path(tempfile.mkdtemp(prefix="iosweep-replay-"))
    images = base / "images"
    if not (images / "dataset.json").is_file():
        prepare_imagenet(images, classes=4, images_per_class=128, log=lambda m: None)
    print(f"{'run':28s} {'ranks':>5s} {'AU':>7s} {'DLIO':>6s} {'samples/s':>10s} "
          f"{'wait/rank':>9s} {'compute':>9s}  verdict")  # fmt: skip
    for w in a.workers:
        real = real_run(base, images, w)
        store = real.pop("_store")
        print(row(f"real, {w} workers", real), flush=True)
        for cal in (False, True):
            name = f"w{w}-{'cal' if cal else 'raw'}"
            write_replay(
                store, real, base / "cfg" / "workload" / f"{name}.yaml",
                data_folder=base / f"{name}-data", calibrate=base / f"{name}-cal" if cal else None,
                log=lambda m: None,
            )  # fmt: skip
            print(row(f"  replay{' calibrated' if cal else ''}", replayed(base, name, RANKS)))
            for k in a.scale if cal else []:
                print(row(f"  replay calibrated x{k}", replayed(base, name, RANKS * k)), flush=True)
    (base / "done.json").write_text(json.dumps({"workers": a.workers, "scale": a.scale}))
    print(f"outputs: {base}; all of them as one report (the replays beside their runs):")
    print(
        f"  iosweep analyze {base}/real-*/store {base}/*-np*/store -o {base}/sweep && iosweep report {base}/sweep -o report.html"
    )


if __name__ == "__main__":
    main()
