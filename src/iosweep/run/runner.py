"""Run one sweep point: launch the traced Horovod job, wait for every rank's log, write the manifest.

A point that cannot run (no Horovod for its framework) is *skipped*, a point whose job fails is
*failed*, one whose SLURM job lost a node is *lost*; either way a manifest is written and the
function returns normally, so the other points of the sweep go on and the report can say what
happened and why.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import iosweep
from iosweep.config import SweepPoint
from iosweep.files import write_text
from iosweep.provenance import git_revision
from iosweep.run import slurm
from iosweep.run.collect import (
    collect_procs,
    collect_progress,
    exited_ranks,
    read_json_files,
    signaled_ranks,
    tail,
    wait_for_traces,
)
from iosweep.run.hostinfo import host_info
from iosweep.run.launch import LaunchError
from iosweep.run.program import (
    Program,
    base_env,
    launch_command,
    launcher_argv,
    mpi_spec,
    placeholder_values,
    program,
    workload_python,
)
from iosweep.run.tracers import TracerError, TracerSpec, resolve_tracer
from iosweep.workloads import Workload, all_workloads

RUN_SUBDIRS = ("ranks", "traces", "progress", "checkpoints")
PROCS_WAIT = 10.0  # s for the samplers of the ranks' processes to write (procstat.MAX_INTERVAL+)


def _tool_version(argv: list[str]) -> str:
    if not shutil.which(argv[0]):
        return ""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return lines[0] if lines else ""


def _new_manifest(point: SweepPoint, data: dict[str, Any]) -> dict[str, Any]:
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
        "signaled_ranks": [],
        "steps": [],
        "phases": {},
        "metrics": {},
        "errors": {},
        "exit_codes": {},
        "timing": {},
        "workload": {},
        "versions": {
            "iosweep": iosweep.__version__,
            "iosweep_git": git_revision(),
            "platform": platform.platform(),
        },
        "command": [],
        "log_tail": "",
        "dataset": str(data.get("path", "")),
        "data": data,
        "staging": None,
        "tracer_warnings": [],
        "outputs": [],
        "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
        "slurm": {
            k.lower(): os.environ[f"SLURM_{k}"]
            for k in ("JOB_ID", "JOB_NODELIST", "JOB_NUM_NODES", "JOB_PARTITION", "CLUSTER_NAME")
            if f"SLURM_{k}" in os.environ
        },
    }


def describe_data(point: SweepPoint, dataset_dir: Path) -> dict[str, Any]:
    """What the ranks read: the dataset's description (``dataset.json``) with the directory
    the training script is given; ``status: failed`` (and why) if the dataset is unusable."""
    try:
        desc = json.loads((dataset_dir / "dataset.json").read_text())
    except OSError:  # a directory of files made elsewhere: the job finds out
        return {"workload": point.workload, "status": "unknown", "path": str(dataset_dir)}
    except ValueError as e:
        return {"workload": point.workload, "status": "failed", "reason": f"{dataset_dir}: {e}"}
    if point.workload == "mnist":
        files = desc.get("files") or {}
        return {
            "workload": "mnist",
            "status": "ok",
            "path": str(dataset_dir),
            "source": desc.get("source"),
            "files": len(files),
            "bytes": int(sum(files.values())),
        }
    # absolute, as the tracers' path filters need (a relative root: relative to the cwd)
    root = desc.get("root") or desc.get("path")
    return {**desc, "path": str(Path(root).resolve()) if root else ""}


class _Interrupted(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _interruptible():
    """Turn Ctrl-C, SIGTERM (Snakemake, SLURM's scancel) and SIGHUP (the login session
    ending) into :class:`_Interrupted` while the launcher runs; the launcher lives in its own
    session, so without this it would outlive us and keep writing into the run directory."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, _frame):
        raise _Interrupted(signum)

    previous = {s: signal.signal(s, interrupt) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _stop_group(proc: subprocess.Popen, grace: float) -> int:
    """TERM the launcher's process group, KILL it after ``grace`` seconds; its exit code."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def _run_launcher(
    cmd: list[str],
    env: dict[str, str],
    timeout: float | None,
    launcher_log: Path,
    cwd: Path | None = None,
) -> tuple[int, bool]:
    """(exit code, timed out): the launcher in its own session, killed as a group (TERM,
    then KILL after 30 s) when it outlives ``timeout``. If this process is told to stop,
    the launcher's group is stopped first, then the signal takes its usual course."""
    with open(launcher_log, "wb") as out, _interruptible():
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            return _stop_group(proc, 30), True
        except _Interrupted as stop:
            _stop_group(proc, 5)
            signum = stop.signum
    signal.raise_signal(signum)  # the handlers are restored: the usual course
    raise KeyboardInterrupt  # a signal that is ignored here still ends the point


class _Stop(Exception):
    """Ends a point early: its status (failed, skipped) and the reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _clean(run_dir: Path) -> None:
    """A rerun must not mix an earlier attempt's files into the new run."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for sub in (*RUN_SUBDIRS, "staging"):
        shutil.rmtree(run_dir / sub, ignore_errors=True)
    for stale in ("tracer.json", "darshan.conf", "launcher.log", "staging.log"):
        (run_dir / stale).unlink(missing_ok=True)


def staging_dir(config: dict[str, Any], run_dir: Path) -> Path:
    """Where a run's node-local copy goes: ``staging.dir`` (auto: /dev/shm, else /tmp) /
    ``iosweep-<hash of the run directory>``, the same path on every node."""
    d = config["staging"]["dir"]
    if d == "auto":
        d = "/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp"
    tag = hashlib.sha1(str(run_dir).encode()).hexdigest()[:12]
    return Path(d).expanduser() / f"iosweep-{tag}"


def _stage(config, point, run_dir, data, python, env, log) -> dict[str, Any]:
    """Copy the dataset into every node's local storage, one task per node; the copies'
    records (host, files, bytes, start, end) as the manifest's ``staging``."""
    dest = staging_dir(config, run_dir)
    prog = [
        python,
        "-m",
        "iosweep.run.stage",
        "copy",
        "--src",
        data["path"],
        "--dest",
        str(dest),
        "--record",
        str(run_dir / "staging"),
    ]
    cmd = launcher_argv(mpi_spec(config, point, 1, prog, env), env, python)
    log(f"{point.run_id}: staging {data['path']} -> {dest} on {point.nodes} node(s)")
    code, timed_out = _run_launcher(
        cmd, env, config["training"]["timeout"], run_dir / "staging.log"
    )
    records = read_json_files(run_dir / "staging", "*.json")
    if code != 0 or timed_out or len(records) < point.nodes:
        last = tail(run_dir / "staging.log", 5).strip()
        raise _Stop(
            "failed", f"staging into {dest} failed on some node: {last or f'exit code {code}'}"
        )
    return {
        "dir": str(dest),
        "command": cmd,
        "nodes": sorted(records, key=lambda r: r["host"]),
        "files": records[0]["files"],
        "bytes": records[0]["bytes"],
        "start": min(r["start"] for r in records),
        "end": max(r["end"] for r in records),
    }


def _unstage(config, point, run_dir, staging, python, env) -> None:
    if config["staging"]["keep"] or not staging:
        return
    prog = [python, "-m", "iosweep.run.stage", "remove", "--dest", staging["dir"]]
    cmd = launcher_argv(mpi_spec(config, point, 1, prog, env), env, python)
    with contextlib.suppress(OSError):
        _run_launcher(cmd, env, 600, run_dir / "unstage.log")


def _tracer(
    config, point, run_dir: Path, data: dict[str, Any], data_dirs: list[Path]
) -> TracerSpec:
    tc = config["tracer"]
    try:
        return resolve_tracer(
            point.tracer,
            run_dir,
            data_dirs=[*data_dirs, run_dir / "checkpoints"],
            darshan_lib=tc["darshan_lib"],
            exclude=[*tc["exclude"], f"^{run_dir}/(progress|ranks)/"],
            max_records=tc["max_records"],
            modmem_mb=tc["modmem_mb"],
            dataset_files=int(data.get("files") or 0),
        )
    except TracerError as e:
        raise _Stop("failed", str(e)) from None


_SIGNAL_HINTS = {
    "SIGKILL": ": the kernel's out-of-memory killer sends it; see `dmesg` on that host",
    "SIGSEGV": ": a crash in native code",
    "SIGBUS": ": a crash in native code, or a file it had mapped was truncated",
}


def _verdict(
    manifest: dict[str, Any],
    training: dict[str, Any],
    exit_code: int,
    timed_out: bool,
    trace_problems: dict[int, str],
) -> tuple[str, str]:
    if timed_out:
        return "failed", f"timed out after {training['timeout']} s (training.timeout)"
    if exit_code != 0 and (sig := manifest.get("signaled_ranks")):
        first = sig[0]
        return "failed", (
            f"rank {first['rank']} was killed by {first['name'] or 'signal'} (signal "
            f"{first['signal']}{_SIGNAL_HINTS.get(first['name'], '')}) on {first['host']}; "
            f"the launcher then ended the job (exit code {exit_code}); ranks that did not "
            f"finish: {manifest['failed_ranks'] or 'unknown'}"
        )
    if exit_code != 0:
        errors = manifest.get("errors") or {}
        first = (
            f"rank {min(errors, key=int)}: {errors[min(errors, key=int)]}"
            if errors
            else "see log_tail"
        )
        return "failed", (
            f"launcher exited with code {exit_code}; failed ranks: "
            f"{manifest['failed_ranks'] or 'unknown'}; {first}"
        )
    if manifest["failed_ranks"]:
        return "failed", f"ranks {manifest['failed_ranks']} did not finish"
    if trace_problems:
        detail = "; ".join(f"rank {r}: {p}" for r, p in sorted(trace_problems.items()))
        return "partial", f"traces incomplete after {training['collect_wait']} s: {detail}"
    return "ok", ""


def run_point(
    config: dict[str, Any],
    point: SweepPoint,
    run_dir: Path,
    dataset_dir: Path,
    log=lambda msg: print(msg, file=sys.stderr, flush=True),
    *,
    allocate: bool = False,
    rerun: str = "",
) -> dict[str, Any]:
    """Run ``point`` into ``run_dir`` and return (and write) its manifest. ``allocate``: run
    it as the command of a SLURM allocation of its own (``salloc``); ``rerun``: the command
    that redoes just this point, for the report when the point does not finish."""
    run_dir = Path(run_dir).resolve()
    dataset_dir = Path(dataset_dir).resolve()
    if allocate:
        return _run_in_allocation(config, point, run_dir, dataset_dir, rerun, log)
    _clean(run_dir)
    data = describe_data(point, dataset_dir)
    manifest = _new_manifest(point, data)
    manifest["rerun"] = rerun

    def finish(status: str, reason: str = "") -> dict[str, Any]:
        if status == "failed":  # a lost node ends a job too: say so
            status, reason = _lost_node(manifest, status, reason)
        manifest["status"], manifest["reason"] = status, reason
        _write_manifest(run_dir, manifest)
        log(f"{point.run_id}: {status}{': ' + reason if reason else ''}")
        return manifest

    try:
        return finish(*_run(config, point, run_dir, data, manifest, log))
    except _Stop as stop:
        return finish(stop.status, stop.reason)
    except LaunchError as e:
        return finish("failed", str(e))


def _write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Whole or not at all: the runner outside salloc reads it once salloc has ended."""
    write_text(run_dir / "manifest.json", json.dumps(manifest, indent=2) + "\n")


def rerun_command(argv: list[str], manifest: str | Path) -> str:
    """The workflow's command line ``argv`` made to redo the point of ``manifest`` and what
    depends on it (its analysis, the report); an earlier ``--forcerun`` list is dropped."""
    args, skipping = [], False
    for a in argv[1:]:
        if a in ("--forcerun", "-R"):
            skipping = True
            continue
        skipping = skipping and not a.startswith("-")
        if not skipping:
            args.append(a)
    return shlex.join([argv[0] if argv else "snakemake", *args, "--forcerun", str(manifest)])


def _run_in_allocation(config, point, run_dir, dataset_dir, rerun, log) -> dict[str, Any]:
    """The point run by ``python -m iosweep.run.runner`` under ``salloc``, on this host: if a
    node dies, SLURM ends the job but not salloc's command, which writes the manifest."""
    training = config["training"]
    req = slurm.Request(
        job_name=slurm.job_name(point.run_id),
        nodes=point.nodes,
        ppn=point.ppn,
        cpus_per_task=training["threads_per_rank"],
        minutes=slurm.minutes(training["timeout"]),
        extra_args=tuple(config["launcher"]["salloc_args"]),
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "manifest.json").unlink(missing_ok=True)
    args = run_dir / "runner.json"
    # the point itself, not its run id: a tune's points are no points of the sweep
    runner = {"config": config, "point": asdict(point), "dataset_dir": str(dataset_dir)}
    args.write_text(json.dumps(runner | {"rerun": rerun}))
    cmd = slurm.salloc_command(
        req, os.environ, [sys.executable, "-m", "iosweep.run.runner", str(args)]
    )
    log(f"{point.run_id}: {shlex.join(cmd)}")
    env = base_env(training["threads_per_rank"])  # iosweep importable in the runner
    code, _ = _run_launcher(cmd, env, None, run_dir / "salloc.log")
    salloc_log = (run_dir / "salloc.log").read_text(errors="replace")
    print(salloc_log, file=sys.stderr, end="", flush=True)  # into the rule's log
    try:
        return json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        pass
    last = [ln for ln in salloc_log.splitlines() if ln.startswith("salloc:")][-1:]
    manifest = _new_manifest(point, describe_data(point, dataset_dir))
    manifest |= {
        "rerun": rerun,
        "status": "failed",
        "log_tail": salloc_log[-4000:],
        "reason": f"salloc exited {code} before the point's runner wrote a manifest"
        + (f": {last[0]}" if last else ""),
    }
    _write_manifest(run_dir, manifest)
    log(f"{point.run_id}: failed: {manifest['reason']}")
    return manifest


def _lost_node(manifest: dict[str, Any], status: str, reason: str) -> tuple[str, str]:
    """A failed point whose SLURM job lost a node is *lost*, with SLURM's word for it."""
    job_id = manifest.get("slurm_job_id")
    if not job_id or not shutil.which("scontrol"):
        return status, reason
    loss = slurm.lost_node_report(str(job_id), os.environ)
    if loss is None:
        return status, reason
    manifest["slurm"] = {**(manifest.get("slurm") or {}), **loss}
    return "lost", slurm.describe_loss(loss)


def _workload_record(w: Workload, point: SweepPoint, prog: Program | None) -> dict[str, Any]:
    """What the manifest says of the workload: enough to see what ran and to run it again."""
    rec: dict[str, Any] = {
        "name": w.name,
        "builtin": w.builtin,
        "launch": w.launch,
        "timing": w.timing,
        "template": w.commands[point.framework],
    }
    if prog is not None:
        rec |= {"workdir": str(prog.cwd), "env": sorted(prog.env), "python": prog.values["python"]}
    return rec


def _prepare(config, point, w, run_dir, data, manifest, log):
    """The interpreter, staging, tracer and command of a point: (program, env, tracer,
    python, staged copy); the manifest filled in as far as that goes."""
    training = config["training"]
    python, versions, why = workload_python(w, point.framework, training)
    if python is None:
        if w.builtin:
            raise _Stop("skipped", why)
        raise _Stop("failed", f"{w.key('python')}: {why}")
    manifest["versions"].update(versions)
    manifest["versions"]["mpi"] = _tool_version(["mpirun", "--version"])
    manifest["versions"]["slurm"] = _tool_version(["srun", "--version"])
    env = base_env(training["threads_per_rank"])
    data_dir = str(data.get("path") or "")
    staged = None
    if point.staging == "node-local":
        staged = manifest["staging"] = _stage(config, point, run_dir, data, python, env, log)
        data_dir = staged["dir"]
    manifest["host_info"] = host_info(data_dir or str(run_dir))
    values = placeholder_values(
        point,
        w,
        python=python,
        run_dir=run_dir,
        data_dir=data_dir,
        threads=training["threads_per_rank"],
    )
    prog = program(point, w, values, run_dir)
    manifest["workload"] = _workload_record(w, point, prog)
    dirs = [Path(p) for p in (data.get("path"), data_dir) if p]
    if not w.builtin:
        dirs += [prog.cwd, *(Path(os.path.expanduser(d)).resolve() for d in w.trace_dirs)]
    tracer = _tracer(config, point, run_dir, data, dirs)
    manifest["tracer"] = asdict(tracer)
    manifest["tracer_warnings"] = tracer.warnings
    manifest["versions"]["tracer"] = f"{tracer.name} {tracer.version}".strip()
    if tracer.name != "none":
        (run_dir / "tracer.json").write_text(json.dumps(asdict(tracer)) + "\n")
    for w_ in tracer.warnings:
        log(f"{point.run_id}: warning: {w_}")
    env |= prog.env
    return prog, env, tracer, python, staged


def _run(config, point, run_dir, data, manifest, log) -> tuple[str, str]:
    """The point's job, filling ``manifest``; returns (status, reason)."""
    training = config["training"]
    w = all_workloads(config)[point.workload]
    manifest["workload"] = _workload_record(w, point, None)
    if data.get("status") == "failed":
        raise _Stop("failed", str(data.get("reason") or "the dataset could not be prepared"))
    staged, python, env = None, "", {}
    try:
        prog, env, tracer, python, staged = _prepare(config, point, w, run_dir, data, manifest, log)
        manifest["launcher"], cmd = launch_command(config, point, w, prog, env, python, run_dir)
        manifest["command"] = cmd
        log(f"{point.run_id}: {shlex.join(cmd)}")
        manifest["start_time"] = time.time()
        exit_code, timed_out = _run_launcher(
            cmd, env, training["timeout"], run_dir / "launcher.log", cwd=prog.cwd
        )
        manifest["end_time"] = time.time()
    finally:
        _unstage(config, point, run_dir, staged, python, env)
    manifest["exit_code"] = exit_code
    log(
        f"{point.run_id}: launcher exited with {exit_code} after "
        f"{manifest['end_time'] - manifest['start_time']:.1f} s"
    )
    return _collect(manifest, run_dir, point, w, tracer, training, exit_code, timed_out, log)


def _collect(
    manifest, run_dir, point, w, tracer, training, exit_code, timed_out, log
) -> tuple[str, str]:
    """Ranks, progress, traces and outputs after the job; the run's status."""
    ranks = collect_progress(manifest, run_dir, point.ranks, w.timing)
    output = ""
    with contextlib.suppress(OSError):
        output = (run_dir / "launcher.log").read_text(errors="replace")
    manifest["signaled_ranks"] = signaled_ranks(output)
    manifest["exit_codes"] = {str(r): c for r, c in sorted(exited_ranks(output).items())}
    for r, code in manifest["exit_codes"].items():
        manifest["errors"].setdefault(r, f"exited with code {code}")
    # a rank killed by SIGKILL never writes its log: waiting for it would only delay the report
    killed = {s["rank"]: s["name"] for s in manifest["signaled_ranks"] if s["name"] == "SIGKILL"}
    trace_problems = {
        r: f"killed by {name}: its tracer could not write" for r, name in killed.items()
    }
    if tracer.name != "none" and ranks:
        trace_problems |= wait_for_traces(
            run_dir,
            tracer.name,
            [r["rank"] for r in ranks if r["rank"] not in killed],
            training["collect_wait"],
            log,
        )
    manifest["trace_problems"] = {str(k): v for k, v in trace_problems.items()}
    manifest["procs"] = collect_procs(run_dir, ranks, PROCS_WAIT)
    # What the job wrote, as on disk: lets the analysis notice writes a tracer missed
    # (DFTracer does not see torch.save's checkpoint writes).
    manifest["outputs"] = [
        {"path": str(f), "size": f.stat().st_size}
        for f in sorted((run_dir / "checkpoints").rglob("*"))
        if f.is_file()
    ]
    manifest["log_tail"] = tail(run_dir / "launcher.log")
    return _verdict(manifest, training, exit_code, timed_out, trace_problems)


def main(argv: list[str] | None = None) -> int:
    """``python -m iosweep.run.runner RUNNER_JSON``: the point that file names (config, the
    point, dataset directory, rerun command), run here; salloc starts it this way."""
    (path,) = sys.argv[1:] if argv is None else argv
    args = json.loads(Path(path).read_text())
    fields = args["point"]
    point = SweepPoint(**{**fields, "extra": tuple(tuple(kv) for kv in fields["extra"])})
    run_point(
        args["config"], point, Path(path).parent, Path(args["dataset_dir"]), rerun=args["rerun"]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
