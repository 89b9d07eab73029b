"""What a sweep point runs: its workload's command filled in, behind the rank wrapper, under
its launcher (mpirun / srun / horovodrun / MPICH, torchrun, or none), and in which folder.

The interpreters: a workload's ``python``, else its framework's stack (``training.python``,
else ``.venv`` / ``.venv-tf``, else the interpreter running this), probed once for the
versions the manifest records. iosweep's own workloads need Horovod in it; a user's job
needs only its framework.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import iosweep
from iosweep.config import SweepPoint
from iosweep.run.launch import (
    LaunchError,
    LaunchSpec,
    TorchrunSpec,
    build_command,
    choose_launcher,
    torchrun_command,
)
from iosweep.workloads import PerRank, Workload, render

SRC_DIR = Path(iosweep.__file__).resolve().parent.parent  # .../src, put on every rank's PYTHONPATH
REPO_DIR = SRC_DIR.parent
FRAMEWORK_MODULES = {"pytorch": "torch", "tensorflow": "tensorflow"}
HOROVOD_MODULES = {"pytorch": "horovod.torch", "tensorflow": "horovod.tensorflow"}
# Interpreters tried for a framework when the config does not name one.
DEFAULT_PYTHONS = {
    "pytorch": [REPO_DIR / ".venv" / "bin" / "python"],
    "tensorflow": [REPO_DIR / ".venv-tf" / "bin" / "python"],
}


def base_env(threads: int) -> dict[str, str]:
    """The launcher's environment: iosweep importable, the point's threads, MPI as root."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_DIR), env.get("PYTHONPATH", "")) if p)
    env["OMP_NUM_THREADS"] = str(threads)
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    # Open MPI refuses root without these; harmless for non-root users.
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def probe_python(python: str, framework: str, horovod: bool) -> tuple[dict[str, str] | None, str]:
    """Versions of the stack under ``python``, or (None, why it cannot run the framework)."""
    need = [FRAMEWORK_MODULES[framework], *([HOROVOD_MODULES[framework]] if horovod else [])]
    code = (
        "import importlib, json, sys\n"
        "out = {'python': sys.version.split()[0]}\n"
        f"for name in {need!r}:\n"
        "    importlib.import_module(name)\n"
        "for name in ('torch', 'tensorflow', 'horovod', 'numpy'):\n"
        "    m = sys.modules.get(name)\n"
        "    if m is None and name in ('horovod', 'numpy'):\n"
        "        try:\n"
        "            m = importlib.import_module(name)\n"
        "        except Exception:\n"
        "            continue\n"
        "    if m is not None:\n"
        "        out[name] = str(getattr(m, '__version__', '?'))\n"
        f"h = sys.modules.get({HOROVOD_MODULES[framework]!r})\n"
        "if h is not None:\n"
        "    out['horovod_mpi'] = str(h.mpi_built()); out['horovod_gloo'] = str(h.gloo_built())\n"
        "print(json.dumps(out))\n"
    )
    try:
        proc = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=300, env=base_env(1)
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{python}: {e}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, f"{python} cannot import {' and '.join(need)}: {last}"
    return json.loads(proc.stdout.strip().splitlines()[-1]), ""


def resolve_python(
    framework: str, configured: str | None, horovod: bool = True
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
        versions, why = probe_python(str(cand), framework, horovod)
        if versions is not None:
            return str(cand), versions, ""
        reasons.append(why)
    what = "Horovod " if horovod else ""
    hint = " (run `tools/setup.sh --with-tensorflow`)" if framework == "tensorflow" else ""
    return None, {}, f"no {what}{framework} stack found{hint}: " + "; ".join(reasons)


def workload_python(w: Workload, framework: str, training: dict[str, Any]):
    """The interpreter of a workload's ``{python}``: (path, versions, reason-if-none)."""
    configured = w.python or training["python"][framework]
    return resolve_python(framework, configured, horovod=w.builtin)


def workdir(w: Workload, run_dir: Path | None = None) -> Path:
    """Where the workload's command runs: a user's ``workdir`` (default: here); iosweep's own
    jobs run in their run folder (every path they are given is absolute), so that what a
    library leaves in the current folder (DFTracer's Python API: ``dft.log``) stays there."""
    if w.builtin and run_dir is not None:
        return run_dir
    return Path(os.path.expanduser(w.workdir or ".")).resolve()


@dataclass
class Program:
    """The per-rank command of a point: the rank wrapper, then the workload's command."""

    argv: list[str]
    env: dict[str, str]  # the workload's variables (config `env`, leading NAME=value words)
    cwd: Path
    template: str
    values: dict[str, Any] = field(default_factory=dict)


def placeholder_values(
    point: SweepPoint, w: Workload, *, python: str, run_dir: Path, data_dir: str, threads: int
) -> dict[str, Any]:
    return {
        "python": python,
        "data": data_dir,
        "run_dir": str(run_dir),
        "checkpoint_dir": str(run_dir / "checkpoints"),
        "workdir": str(workdir(w, run_dir)),
        "progress": PerRank(run_dir / "progress" / "rank-{rank}.json"),
        "threads": threads,
        "framework": point.framework,
        "tracer": point.tracer,
        "nodes": point.nodes,
        "procs_per_node": point.ppn,
        "ranks": point.ranks,
        "epochs": point.epochs,
        "steps_per_epoch": point.steps,
        "batch_size": point.batch_size,
        "loader_workers": point.loader_workers,
        "staging": point.staging,
        "rep": point.rep,
        **dict(point.extra),
    }


def program(point: SweepPoint, w: Workload, values: dict[str, Any], run_dir: Path) -> Program:
    template = w.commands[point.framework]
    argv, env = render(template, values)
    wrapper = [sys.executable, "-m", "iosweep.run.rank_wrapper", "--run-dir", str(run_dir)]
    if w.timing == "hooks":
        wrapper.append("--hooks")
    return Program([*wrapper, "--", *argv], {**w.env, **env}, workdir(w, run_dir), template, values)


def _first_node(env: dict[str, str], hosts: list[str]) -> str:
    if hosts:
        return hosts[0]
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    if nodelist:
        try:
            out = subprocess.run(
                ["scontrol", "show", "hostnames", nodelist],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout.split()
            return out[0] if out else ""
        except (OSError, subprocess.SubprocessError):
            return ""
    return ""


def launch_command(
    config: dict[str, Any],
    point: SweepPoint,
    w: Workload,
    prog: Program,
    env: dict[str, str],
    python: str,
    run_dir: Path,
) -> tuple[str, list[str]]:
    """(launcher name, argv) that starts the point's ranks."""
    lc = config["launcher"]
    if w.launch == "single":
        return "none", list(prog.argv)
    if w.launch == "torchrun":
        host = _first_node(env, list(lc["hosts"])) if point.nodes > 1 else ""
        port = 20000 + int(hashlib.sha1(str(run_dir).encode()).hexdigest(), 16) % 20000
        agent = torchrun_command(
            TorchrunSpec(
                python=python,
                nodes=point.nodes,
                ppn=point.ppn,
                program=prog.argv,
                endpoint=f"{host}:{port}" if host else "",
                run_id=hashlib.sha1(str(run_dir).encode()).hexdigest()[:16],
            )
        )
        if point.nodes == 1 and not lc["hosts"] and "SLURM_JOB_ID" not in env:
            return "torchrun", agent
        per_node = mpi_spec(config, point, 1, agent, env, list(prog.env))  # an agent per node
        return f"torchrun ({per_node.launcher})", launcher_argv(per_node, env, python)
    spec = mpi_spec(config, point, point.ppn, prog.argv, env, list(prog.env))
    return spec.launcher, launcher_argv(spec, env, python)


def mpi_spec(
    config: dict[str, Any],
    point: SweepPoint,
    ppn: int,
    argv: list[str],
    env: dict[str, str],
    extra_env: list[str] | None = None,
) -> LaunchSpec:
    """``argv`` started ``ppn`` times per node by ``launcher.kind``; ``extra_env``: more
    variables the ranks must receive (mpirun passes only those it is told to other nodes)."""
    lc = config["launcher"]
    names = ["PYTHONPATH", "PATH", "OMP_NUM_THREADS", "LD_LIBRARY_PATH", *(extra_env or [])]
    return LaunchSpec(
        launcher=choose_launcher(lc["kind"], env),
        nodes=point.nodes,
        ppn=ppn,
        program=argv,
        env_names=[v for v in dict.fromkeys(names) if v in env],
        hosts=list(lc["hosts"]),
        extra_args=list(lc["extra_args"]),
        srun_mpi=lc["srun_mpi"],
        allow_run_as_root=lc["allow_run_as_root"],
        oversubscribe=lc["oversubscribe"],
    )


def launcher_argv(spec: LaunchSpec, env: dict[str, str], python: str) -> list[str]:
    cmd = build_command(spec, env)
    # horovodrun lives in the framework's environment, which need not be on PATH
    beside = Path(python).parent / cmd[0]
    if cmd[0] == "horovodrun" and beside.exists():
        cmd[0] = str(beside)
    return cmd


__all__ = ["LaunchError", "Program", "base_env", "launch_command", "program", "resolve_python"]
