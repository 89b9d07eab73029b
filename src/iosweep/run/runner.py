"""Run one sweep point: launch the traced Horovod job, wait for every rank's log, write the manifest.

A point that cannot run (no Horovod for its framework) is *skipped*, a point whose job fails is
*failed*; either way a manifest is written and the function returns normally, so the other
points of the sweep go on and the report can say what happened and why.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import iosweep
from iosweep.config import SweepPoint
from iosweep.provenance import git_revision
from iosweep.run.launch import LaunchError, LaunchSpec, build_command, choose_launcher
from iosweep.run.tracers import TracerError, resolve_tracer

SRC_DIR = Path(iosweep.__file__).resolve().parent.parent  # .../src, put on every rank's PYTHONPATH
REPO_DIR = SRC_DIR.parent

TRAINING_MODULES = {
    "pytorch": ("iosweep.run.training.pytorch_mnist", "horovod.torch", "torch"),
    "tensorflow": ("iosweep.run.training.tensorflow2_mnist", "horovod.tensorflow", "tensorflow"),
}
# Interpreters tried for a framework when the config does not name one.
DEFAULT_PYTHONS = {
    "pytorch": [REPO_DIR / ".venv" / "bin" / "python"],
    "tensorflow": [REPO_DIR / ".venv-tf" / "bin" / "python"],
}
RUN_SUBDIRS = ("ranks", "traces", "progress", "checkpoints")


def _probe_python(python: str, framework: str) -> tuple[dict[str, str] | None, str]:
    """Versions of the framework stack under ``python``, or (None, why it cannot run)."""
    _, hvd_module, fw_module = TRAINING_MODULES[framework]
    code = (
        "import json, sys, numpy\n"
        f"import {fw_module} as fw\n"
        f"import {hvd_module} as hvd\n"
        "import horovod\n"
        "print(json.dumps({'python': sys.version.split()[0], "
        f"'{fw_module}': fw.__version__, 'horovod': horovod.__version__, "
        "'numpy': numpy.__version__, 'horovod_mpi': str(hvd.mpi_built()), "
        "'horovod_gloo': str(hvd.gloo_built())}))\n"
    )
    try:
        proc = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=300, env=_base_env(1)
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{python}: {e}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, f"{python} cannot import {hvd_module}: {last}"
    return json.loads(proc.stdout.strip().splitlines()[-1]), ""


def resolve_python(
    framework: str, configured: str | None
) -> tuple[str | None, dict[str, str], str]:
    """(interpreter, versions, reason-if-none) for ``framework``."""
    candidates = [Path(configured).expanduser()] if configured else DEFAULT_PYTHONS[framework]
    if not configured:
        candidates = [*candidates, Path(sys.executable)]  # e.g. a conda env made by --sdm conda
    reasons = []
    for cand in candidates:
        if not cand.exists():
            reasons.append(f"{cand}: not found")
            continue
        versions, why = _probe_python(str(cand), framework)
        if versions is not None:
            return str(cand), versions, ""
        reasons.append(why)
    hint = " (run `tools/setup.sh --with-tensorflow`)" if framework == "tensorflow" else ""
    return None, {}, f"no Horovod {framework} stack found{hint}: " + "; ".join(reasons)


def _base_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_DIR), env.get("PYTHONPATH", "")) if p)
    env["OMP_NUM_THREADS"] = str(threads)
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    # Open MPI refuses root without these; harmless for non-root users.
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def _tool_version(argv: list[str]) -> str:
    if not shutil.which(argv[0]):
        return ""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return lines[0] if lines else ""


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _trace_files(trace_dir: Path, tracer: str) -> tuple[list[Path], list[Path]]:
    """(finished logs, logs still being written) under one rank's trace directory."""
    if tracer == "darshan":
        done = sorted(trace_dir.rglob("*.darshan"))
        partial = sorted(trace_dir.rglob("*.darshan_partial"))
    else:
        done = sorted([*trace_dir.rglob("*.pfw.gz"), *trace_dir.rglob("*.pfw")])
        partial = []
    return done, partial


def wait_for_traces(
    run_dir: Path, tracer: str, ranks: list[int], timeout: float, log
) -> dict[int, str]:
    """Wait until every rank has a finished log and sizes stop changing; returns {rank: problem}.

    Tracers write at process exit, which can be seconds after the launcher returns.
    """
    deadline = time.monotonic() + timeout
    last_sizes: dict[Path, int] | None = None
    while True:
        problems, sizes = {}, {}
        for r in ranks:
            done, partial = _trace_files(run_dir / "traces" / f"rank-{r}", tracer)
            if partial:
                problems[r] = f"log still partial: {partial[0].name}"
            elif not done:
                problems[r] = "no log written"
            for f in (*done, *partial):
                with contextlib.suppress(OSError):  # renamed .darshan_partial -> .darshan meanwhile
                    sizes[f] = f.stat().st_size
        stable = sizes == last_sizes
        if (not problems and stable) or time.monotonic() >= deadline:
            return problems
        if problems:
            log(
                f"waiting for traces: {len(problems)} of {len(ranks)} ranks not finished "
                f"({int(deadline - time.monotonic())} s left)"
            )
        last_sizes = sizes
        time.sleep(1.0)


def _read_json_files(directory: Path, pattern: str) -> list[dict[str, Any]]:
    out = []
    for f in sorted(directory.glob(pattern)):
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # a rank killed while writing; the manifest reports the rank as missing
    return out


def _new_manifest(point: SweepPoint, dataset_dir: Path) -> dict[str, Any]:
    """The manifest before the job runs (docs/data-model.md lists its fields)."""
    return {
        "run_id": point.run_id,
        "params": point.params(),
        "status": "ok",
        "reason": "",
        "exit_code": None,
        "start_time": None,
        "end_time": None,
        "host": socket.gethostname(),
        "tracer": {"name": "none"},
        "ranks": [],
        "failed_ranks": [],
        "steps": [],
        "phases": {},
        "metrics": {},
        "versions": {
            "iosweep": iosweep.__version__,
            "iosweep_git": git_revision(),
            "platform": platform.platform(),
        },
        "command": [],
        "log_tail": "",
        "dataset": str(dataset_dir),
        "outputs": [],
        "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
        "slurm": {
            k.lower(): os.environ[f"SLURM_{k}"]
            for k in ("JOB_ID", "JOB_NODELIST", "JOB_NUM_NODES", "JOB_PARTITION", "CLUSTER_NAME")
            if f"SLURM_{k}" in os.environ
        },
    }


def _program(
    python: str, point: SweepPoint, training: dict[str, Any], run_dir: Path, dataset_dir: Path
) -> list[str]:
    """What the launcher starts on every rank: the rank wrapper, then the training script."""
    module = TRAINING_MODULES[point.framework][0]
    program = [
        python, "-m", "iosweep.run.rank_wrapper", "--run-dir", str(run_dir), "--",
        python, "-m", module,
        "--data", str(dataset_dir),
        "--epochs", str(point.epochs),
        "--steps-per-epoch", str(point.steps),
        "--batch-size", str(point.batch_size),
        "--lr", str(training["learning_rate"]),
        "--threads", str(training["threads_per_rank"]),
        "--progress", str(run_dir / "progress" / "rank-{rank}.json"),
    ]  # fmt: skip
    if training["checkpoint"]:
        program += ["--checkpoint-dir", str(run_dir / "checkpoints")]
    if point.framework == "pytorch":
        program += ["--loader-workers", str(training["loader_workers"])]
    return program


def _run_launcher(
    cmd: list[str], env: dict[str, str], timeout: float, launcher_log: Path
) -> tuple[int, bool]:
    """(exit code, timed out): the launcher in its own session, killed as a group (TERM,
    then KILL after 30 s) when it outlives ``timeout``."""
    timed_out = False
    with open(launcher_log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            exit_code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                exit_code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                exit_code = proc.wait()
    return exit_code, timed_out


def _collect_progress(manifest: dict[str, Any], run_dir: Path, n_ranks: int) -> list[dict]:
    """Fill the manifest's ranks, steps, phases, metrics and failed ranks from the rank and
    progress files; return the rank records."""
    ranks = _read_json_files(run_dir / "ranks", "rank-*.json")
    manifest["ranks"] = sorted(ranks, key=lambda r: r["rank"])
    for doc in _read_json_files(run_dir / "progress", "rank-*.json"):
        manifest["steps"] += [{"rank": doc["rank"], **s} for s in doc["steps"]]
        manifest["phases"][str(doc["rank"])] = doc["phases"]
        if doc["rank"] == 0:
            manifest["metrics"] = doc["metrics"]
    finished = {int(r) for r in manifest["phases"]}
    expected = list(range(n_ranks))
    missing_rank = [r for r in expected if r not in {x["rank"] for x in ranks}]
    unfinished = [r for r in expected if r not in finished]
    manifest["failed_ranks"] = sorted(set(missing_rank) | set(unfinished))
    return ranks


def run_point(
    config: dict[str, Any],
    point: SweepPoint,
    run_dir: Path,
    dataset_dir: Path,
    log=lambda msg: print(msg, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    """Run ``point`` into ``run_dir`` and return (and write) its manifest."""
    run_dir = Path(run_dir).resolve()
    dataset_dir = Path(dataset_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    for sub in RUN_SUBDIRS:  # a rerun must not mix old ranks' logs into the new run
        shutil.rmtree(run_dir / sub, ignore_errors=True)
    for stale in ("tracer.json", "darshan.conf", "launcher.log"):
        (run_dir / stale).unlink(missing_ok=True)
    training, launcher_cfg, tracer_cfg = config["training"], config["launcher"], config["tracer"]
    manifest = _new_manifest(point, dataset_dir)

    def finish(status: str, reason: str = "") -> dict[str, Any]:
        manifest["status"], manifest["reason"] = status, reason
        (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        log(f"{point.run_id}: {status}{': ' + reason if reason else ''}")
        return manifest

    python, versions, why = resolve_python(point.framework, training["python"][point.framework])
    if python is None:
        return finish("skipped", why)
    manifest["versions"].update(versions)
    manifest["versions"]["mpi"] = _tool_version(["mpirun", "--version"])
    manifest["versions"]["slurm"] = _tool_version(["srun", "--version"])

    try:
        tracer = resolve_tracer(
            point.tracer,
            run_dir,
            data_dirs=[dataset_dir, run_dir / "checkpoints"],
            darshan_lib=tracer_cfg["darshan_lib"],
            exclude=[*tracer_cfg["exclude"], f"^{run_dir}/(progress|ranks)/"],
            max_records=tracer_cfg["max_records"],
            modmem_mb=tracer_cfg["modmem_mb"],
        )
    except TracerError as e:
        return finish("failed", str(e))
    manifest["tracer"] = asdict(tracer)
    manifest["versions"]["tracer"] = f"{tracer.name} {tracer.version}".strip()
    if tracer.name != "none":
        (run_dir / "tracer.json").write_text(json.dumps(asdict(tracer)) + "\n")

    program = _program(python, point, training, run_dir, dataset_dir)
    env = _base_env(training["threads_per_rank"])
    try:
        launcher = choose_launcher(launcher_cfg["kind"], env)
        spec = LaunchSpec(
            launcher=launcher,
            nodes=point.nodes,
            ppn=point.ppn,
            program=program,
            env_names=[
                v for v in ("PYTHONPATH", "PATH", "OMP_NUM_THREADS", "LD_LIBRARY_PATH") if v in env
            ],
            hosts=list(launcher_cfg["hosts"]),
            extra_args=list(launcher_cfg["extra_args"]),
            srun_mpi=launcher_cfg["srun_mpi"],
            allow_run_as_root=launcher_cfg["allow_run_as_root"],
            oversubscribe=launcher_cfg["oversubscribe"],
        )
        cmd = build_command(spec, env)
        # horovodrun lives in the framework's environment, which need not be on PATH
        beside = Path(python).parent / cmd[0]
        if cmd[0] == "horovodrun" and beside.exists():
            cmd[0] = str(beside)
    except LaunchError as e:
        return finish("failed", str(e))
    manifest["launcher"] = launcher
    manifest["command"] = cmd
    log(f"{point.run_id}: {shlex.join(cmd)}")

    launcher_log = run_dir / "launcher.log"
    manifest["start_time"] = time.time()
    exit_code, timed_out = _run_launcher(cmd, env, training["timeout"], launcher_log)
    manifest["end_time"] = time.time()
    manifest["exit_code"] = exit_code
    log(
        f"{point.run_id}: launcher exited with {exit_code} after "
        f"{manifest['end_time'] - manifest['start_time']:.1f} s"
    )

    ranks = _collect_progress(manifest, run_dir, point.ranks)

    trace_problems = {}
    if tracer.name != "none" and ranks:
        trace_problems = wait_for_traces(
            run_dir, tracer.name, [r["rank"] for r in ranks], training["collect_wait"], log
        )
    manifest["trace_problems"] = {str(k): v for k, v in trace_problems.items()}
    # What the job wrote, as on disk: lets the analysis notice writes a tracer missed
    # (DFTracer does not see torch.save's checkpoint writes).
    manifest["outputs"] = [
        {"path": str(f), "size": f.stat().st_size}
        for f in sorted((run_dir / "checkpoints").rglob("*"))
        if f.is_file()
    ]
    manifest["log_tail"] = _tail(launcher_log)

    if timed_out:
        return finish("failed", f"timed out after {training['timeout']} s (training.timeout)")
    if exit_code != 0:
        return finish(
            "failed",
            f"launcher exited with code {exit_code}; failed ranks: "
            f"{manifest['failed_ranks'] or 'unknown'}; see log_tail",
        )
    if manifest["failed_ranks"]:
        return finish("failed", f"ranks {manifest['failed_ranks']} did not finish")
    if trace_problems:
        detail = "; ".join(f"rank {r}: {p}" for r, p in sorted(trace_problems.items()))
        return finish("partial", f"traces incomplete after {training['collect_wait']} s: {detail}")
    return finish("ok")
