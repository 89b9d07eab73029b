"""A DLIO workload that replays a measured run (``iosweep replay``), and running DLIO on it.

DLIO (Argonne's deep-learning I/O benchmark, MLPerf Storage's engine; 2.0.0 in ``.venv-dlio``)
emulates a training job's data loading at any scale, the compute replaced by a sleep per
step. :func:`workload_text` writes its workload config (hydra YAML, DLIO's keys) from the
figures iosweep measured on the run (iosweep.replay.measure), each key with a comment saying
where its value was measured, and the header listing what DLIO cannot express.

The replay reads the run's own files where they still exist: DLIO's image reader really
decodes them (``np.asarray(Image.open(f))``), so the decode's cost is real; what the run spent
per sample beyond that decode (augmentation, conversion, collation) becomes DLIO's
``preprocess_time``. That split is calibrated here (:func:`calibrate_decode`): DLIO's own read
and decode of a sample of the files, timed on this machine. DLIO lists the files of
``<data_folder>/train/<folder>/*.<format>`` with the format in lower case, so
:func:`link_dataset` gives it a tree of symbolic links named that way to the real files.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from iosweep.analysis.parts.run import load_analysed
from iosweep.replay.measure import Measured, ReplayError, ReplayMeasures, measure_replay
from iosweep.run.launch import LaunchSpec, build_command
from iosweep.run.program import REPO_DIR, base_env
from iosweep.trace.dlio import read_dlio_output
from iosweep.trace.ingest import ingest

#: file suffix -> DLIO's dataset.format, for the formats whose reader decodes like the run did
FORMATS = {".jpeg": "jpeg", ".jpg": "jpeg", ".png": "png"}
DLIO_EXE = "dlio_benchmark"
CALIBRATION_FILES = 64


def dlio_format(m: ReplayMeasures) -> str:
    suffix = str(m.value("suffix"))
    if suffix not in FORMATS:
        raise ReplayError(
            f"the dataset's files are {suffix or 'without a suffix'}: the replay supports one "
            f"image per file ({', '.join(sorted(FORMATS))}), whose DLIO reader decodes as the run did"
        )
    return FORMATS[suffix]


def calibrate_decode(paths: list[str], n: int = CALIBRATION_FILES) -> Measured:
    """DLIO's cost of one sample on this machine: its image reader's open, read and decode
    (``np.asarray(Image.open(path))``) of up to ``n`` of the files (which must be here), each
    read once before so that the page cache is as warm as in the replay."""
    import numpy as np
    from PIL import Image

    if not paths:
        raise ReplayError("no dataset files to calibrate on")
    pick = paths[:: max(1, len(paths) // n)][:n]
    times = []
    for p in pick:
        Path(p).read_bytes()
        t = time.perf_counter()
        np.asarray(Image.open(p))
        times.append(time.perf_counter() - t)
    return Measured(
        statistics.median(times),
        f"DLIO's image reader's open, read and decode, timed here on {len(pick)} of the files",
        statistics.pstdev(times),
    )


def link_dataset(m: ReplayMeasures, fmt: str, out: Path) -> Path:
    """``out/train/<folder>/<name>.<fmt>`` -> each dataset file the run read (its folders as
    they are under the dataset's root), and an empty ``out/valid``; ``out`` is made anew."""
    root = str(m.value("data_root"))
    if out.exists():
        shutil.rmtree(out)
    for p in m.paths:
        rel = Path(os.path.relpath(p, root))
        dest = out / "train" / rel.parent / f"{rel.stem}.{fmt}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(p)
    (out / "valid").mkdir()  # DLIO lists it even with evaluation off
    return out


def _subfolders(out: Path) -> int:
    train = out / "train"
    folders = [d for d in train.iterdir() if d.is_dir()]
    if folders and any(f.is_file() or f.is_symlink() for f in train.iterdir() if not f.is_dir()):
        raise ReplayError(f"{train}: files beside folders; DLIO reads one or the other")
    if any(any(c.is_dir() for c in d.iterdir()) for d in folders):
        raise ReplayError(f"{train}: folders within folders; DLIO reads one level of folders")
    return len(folders)


GENERATE = {
    False: "the replay reads the run's own files",
    True: "the run's files are not here: DLIO makes files of the measured size and count",
}
FOLDER = {
    False: "links to the run's files, named as DLIO lists them",
    True: "where DLIO makes the files",
}
Entry = tuple[str, str, Any, str]  # (section or "", key, value, where it was measured)


def _round(v: Any) -> Any:
    return float(f"{v:.6g}") if isinstance(v, float) else v


def _sleep_per_sample(m: ReplayMeasures, decode: Measured, fix: Measured | None) -> float:
    """The sleep per sample that makes DLIO's load last the run's: negative where DLIO's own
    load is already the longer (then the workload can only say 0)."""
    return float(m.figures["sample_time"].value) - float(decode.value) + (fix.value if fix else 0.0)


def _preprocess(m: ReplayMeasures, decode: Measured, fix: Measured | None) -> tuple[float, str]:
    sample = m.figures["sample_time"]
    pre = max(0.0, _sleep_per_sample(m, decode, fix))
    why = (
        f"the run's load of one sample ({sample.value * 1e3:.2f} ms: {sample.source}) less "
        f"DLIO's own ({decode.value * 1e3:.2f} ms: {decode.source})"
    )
    return pre, why + (f"; {fix.value * 1e3:+.2f} ms: {fix.source}" if fix else "")


def calibration_shortfall(m: ReplayMeasures, decode: Measured, fix: Measured) -> str | None:
    """What the replay cannot follow when the calibrated sleep per sample would be negative:
    DLIO's own load of a sample (its decode, profiler and loop) is longer than the run's whole
    load, so its waits are longer than the run's; None where the sleep is not negative."""
    run = float(m.figures["sample_time"].value)
    short = -_sleep_per_sample(m, decode, fix)
    if short <= 0:
        return None
    return (
        f"DLIO's own load of a sample is longer than the run's ({run * 1e3:.2f} ms) by "
        f"{short * 1e3:.2f} ms in the calibration pass, which no sleep can shorten "
        f"(preprocess_time 0): the replay waits longer for its data than the run did"
    )


def _compute(m: ReplayMeasures, fix: Measured | None) -> tuple[float, str]:
    c = m.figures["computation_time"]
    value = max(0.0, float(c.value) + (fix.value if fix else 0.0))
    return value, c.source + (f"; {fix.value * 1e3:+.2f} ms: {fix.source}" if fix else "")


def replay_entries(
    m: ReplayMeasures,
    *,
    decode: Measured,
    data_folder: Path,
    generate: bool = False,
    checkpoint_folder: Path,
    au_threshold: float = 0.9,
    fixes: dict[str, Measured] | None = None,
) -> list[Entry]:
    """The DLIO workload's keys, each with its value and where that was measured; ``fixes``
    (from :func:`calibrate`) correct ``sample_time`` and ``computation_time`` by DLIO's own
    overheads."""
    fixes = fixes or {}
    fmt = dlio_format(m)
    m.require()
    f = m.figures
    folders = int(f["folders"].value) if generate else _subfolders(data_folder)
    if "batch_size" not in f:
        raise ReplayError("the run's batch size is unknown (no parameter, no samples per step)")
    fw = str(f["framework"].value) if "framework" in f else "pytorch"
    workers = int(f["loader_workers"].value)
    pre, pre_why = _preprocess(m, decode, fixes.get("sample_time"))
    comp, comp_why = _compute(m, fixes.get("computation_time"))
    ck = "checkpoint_bytes" in f and f["checkpoint_bytes"].value > 0
    e: list[Entry] = [
        ("", "model", "iosweep_replay_" + re.sub(r"\W+", "_", m.run_id), "names DLIO's outputs"),
        ("", "framework", fw, f.get("framework", Measured(fw, "default")).source),
        ("workflow", "generate_data", generate, GENERATE[generate]),
        ("workflow", "train", True, ""),
        ("workflow", "evaluation", False, "the run's evaluation is not traced as training"),
        (
            "workflow",
            "checkpoint",
            bool(ck),
            "the run's checkpoint writes" if ck else "none traced",
        ),
        ("dataset", "data_folder", str(data_folder), FOLDER[generate]),
        ("dataset", "format", fmt, f["suffix"].source),
        ("dataset", "num_files_train", int(f["files"].value), f["files"].source),
        ("dataset", "num_samples_per_file", 1, "one image per file"),
        ("dataset", "num_subfolders_train", folders, f["folders"].source),
        ("dataset", "record_length", _round(f["record_length"].value), f["record_length"].source),
        ("dataset", "record_length_stdev", _round(f["record_length"].stdev), "their spread"),
        ("reader", "data_loader", fw, "the run's framework's loader"),
        ("reader", "batch_size", int(f["batch_size"].value), f["batch_size"].source),
        ("reader", "read_threads", workers, f"loader workers: {f['loader_workers'].source}"),
        ("reader", "computation_threads", 1, "DLIO's default"),
        ("reader", "sample_shuffle", "seed", "the run shuffled its samples"),
        (
            "reader",
            "transfer_size",
            int(f["request_size"].value),
            f["request_size"].source + " (Pillow's buffering sets the image reader's requests)",
        ),
        ("reader", "preprocess_time", _round(pre), pre_why),
        (
            "reader",
            "preprocess_time_stdev",
            _round(f["sample_time"].stdev),
            "the spread of the run's loads",
        ),
        ("train", "epochs", int(f["epochs"].value), f["epochs"].source),
        ("train", "computation_time", _round(comp), comp_why),
        ("train", "computation_time_stdev", _round(f["computation_time"].stdev), "their spread"),
        ("train", "seed_change_epoch", True, "a new order each epoch, as the run's sampler"),
        ("metric", "au", au_threshold, "iosweep's AU threshold (analysis.au_threshold)"),
        (
            "iosweep",
            "replay_of",
            m.run_id,
            "DLIO ignores this section; iosweep's analysis of "
            "a DLIO run sets the replayed run's answer beside the replay's",
        ),
        ("iosweep", "ranks", int(f["ranks"].value), f["ranks"].source),
        ("iosweep", "calibrated", bool(fixes), "whether a calibration pass corrected the times"),
        *[
            ("iosweep", k, _round(f[k].value), f[k].source)
            for k in ("au", "samples_per_s", "wait_per_rank", "verdict")
        ],
        ("iosweep", "limits", list(m.limits), "the header's list, for the report"),
    ]
    if workers > 0:
        e.insert(
            17, ("reader", "prefetch_size", 2 * workers, "torch's default: 2 batches a worker")
        )
    if ck:
        one = f["checkpoint_writers"].value <= 1
        e += [
            ("checkpoint", "checkpoint_folder", str(checkpoint_folder), "a folder of the replay's"),
            (
                "checkpoint",
                "type",
                "rank_zero" if one else "all_ranks",
                f["checkpoint_writers"].source,
            ),
            (
                "checkpoint",
                "model_size",
                int(f["checkpoint_bytes"].value),
                f["checkpoint_bytes"].source,
            ),
            (
                "checkpoint",
                "checkpoint_after_epoch",
                int(f["checkpoint_first_epoch"].value),
                f["checkpoint_first_epoch"].source,
            ),
            (
                "checkpoint",
                "epochs_between_checkpoints",
                int(f["checkpoint_every_epochs"].value),
                f["checkpoint_every_epochs"].source,
            ),
        ]
    return e


def _scalar(v: Any) -> str:
    text = yaml.safe_dump(v, default_flow_style=True, width=float("inf"))
    return text.strip().removesuffix("...").strip()


def workload_text(m: ReplayMeasures, entries: list[Entry], header: list[str]) -> str:
    """The workload file: a header (how it was made, the run's own answer, what DLIO cannot
    express), then every key with the comment saying where it was measured."""
    lines = [f"# {h}" if h else "#" for h in header]
    lines.append("# What DLIO cannot express, and how the replay stands in for it:")
    lines += [f"#  - {lim}" for lim in m.limits]
    section = None
    for sec, key, value, why in entries:
        if sec and sec != section:
            lines.append(f"{sec}:")
            section = sec
        pad = "  " if sec else ""
        text = f"{pad}{key}: {_scalar(value)}"
        lines.append(f"{text}  # {why}" if why else text)
    return "\n".join(lines) + "\n"


class DlioError(RuntimeError):
    """DLIO did not run, or ran no training step; the message holds its output's tail."""


def dlio_exe() -> str:
    """DLIO's launcher script: ``.venv-dlio`` (tools/setup.sh --with-tensorflow), else PATH."""

    venv = REPO_DIR / ".venv-dlio" / "bin" / DLIO_EXE
    if venv.is_file():
        return str(venv)
    found = shutil.which(DLIO_EXE)
    if not found:
        raise DlioError(f"no DLIO: {venv} is missing (tools/setup.sh --with-tensorflow makes it)")
    return found


def run_dlio(
    config_dir: Path, name: str, ranks: int, out: Path, *overrides: str, timeout: float = 1800
) -> Path:
    """Run DLIO's workload ``name`` (``config_dir/workload/name.yaml``) on ``ranks`` ranks of
    this machine under mpirun, traced by its DFTracer with file metadata on; its outputs and
    traces land in ``out``. A run without a training step is a failed run, as is a
    non-zero exit."""
    import subprocess

    program = [dlio_exe(), "--config-dir", str(config_dir), f"workload={name}"]
    program += [f"hydra.run.dir={out}", *overrides]
    cmd = build_command(LaunchSpec(launcher="mpirun", nodes=1, ppn=ranks, program=program))
    env = {**base_env(1), "DFTRACER_ENABLE": "1", "DFTRACER_INC_METADATA": "1"}
    env.pop("PYTHONPATH", None)  # DLIO's venv, not iosweep's sources
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "dlio-launch.log", "w") as log:
        p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout)
    tail = (out / "dlio-launch.log").read_text(errors="replace")[-3000:]
    if p.returncode != 0:
        raise DlioError(f"DLIO exited with {p.returncode} ({' '.join(cmd)}):\n{tail}")
    rec, _ = read_dlio_output(out)
    steps = sum(e["steps"] for r in rec["dlio"]["ranks"].values() for e in r.values())
    if not steps:
        raise DlioError(f"DLIO ran no training step (its output: {out}):\n{tail}")
    return out


def calibrate(
    m: ReplayMeasures, config_dir: Path, name: str, out: Path, settings: Any
) -> dict[str, Measured]:
    """One pass of the workload at the run's scale, measured as the run was: the
    corrections that make DLIO's load of one sample and its step last what the run's did.
    DLIO adds overheads of its own to both (its profiler, its
    sampler, the sleep's overshoot)."""

    run_dlio(config_dir, name, int(m.value("ranks")), out)
    ingest([out], out / "store")
    got = measure_replay(load_analysed(out / "store", settings), {})
    fixes = {}
    for key, what in (("sample_time", "one sample's load"), ("computation_time", "a step")):
        mine, theirs = float(m.value(key)), float(got.value(key))
        fixes[key] = Measured(
            mine - theirs,
            f"calibrated: a pass of this workload at {m.value('ranks')} rank(s) took "
            f"{theirs * 1e3:.2f} ms for {what}, the run {mine * 1e3:.2f} ms",
        )
    return fixes
