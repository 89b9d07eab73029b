"""A user workload's dataset: its ``prepare`` command run once, or its ``data`` described.

Either way ``dataset.json`` says where the data are, how many files and bytes (the tracer
settings and the completeness checks use them) and, when it could not be made, why:
every point of the workload then fails with that reason, and the rest of the sweep goes on.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from iosweep.files import write_text
from iosweep.run.program import workdir, workload_python
from iosweep.workloads import Workload, render

DESCRIPTION = "dataset.json"


def count_files(root: Path, log=print, every: int = 100_000) -> tuple[int, int]:
    """(files, bytes) under ``root`` (a file: itself), saying how far it got on big trees."""
    if root.is_file():
        return 1, root.stat().st_size
    files = size = 0
    for d, _, names in os.walk(root):
        for n in names:
            try:
                size += os.stat(os.path.join(d, n)).st_size
            except OSError:
                continue
            files += 1
            if files % every == 0:
                log(f"{root}: {files:,} files so far")
    return files, size


def _run_prepare(w: Workload, framework: str, data: Path, training: dict[str, Any], log) -> str:
    """Run the prepare command; '' when it succeeded, else why not."""
    python, _, why = workload_python(w, framework, training)
    if python is None:
        return f"{w.key('python')}: {why}"
    argv, env = render(
        w.prepare or "", {"python": python, "data": str(data), "workdir": str(workdir(w))}
    )
    data.mkdir(parents=True, exist_ok=True)
    log(f"{w.key('prepare')}: {shlex.join(argv)} (in {workdir(w)})")
    try:
        proc = subprocess.run(
            argv,
            cwd=workdir(w),
            env={**os.environ, **w.env, **env},
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as e:
        return f"{w.key('prepare')}: cannot run {argv[0]!r}: {e.strerror}"
    log(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        last = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        return f"{w.key('prepare')} exited with code {proc.returncode}: {last}"
    return ""


def prepare_workload_data(
    w: Workload, out: Path, training: dict[str, Any], log=print
) -> dict[str, Any]:
    """Write and return ``out/dataset.json`` for workload ``w``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    desc: dict[str, Any] = {"workload": w.name, "status": "ok", "reason": "", "path": ""}
    t0 = time.time()
    if w.prepare:
        data = (out / "data").resolve()
        why = _run_prepare(w, w.frameworks[0], data, training, log)
        desc |= {"source": "prepare", "path": str(data), "command": w.prepare}
        if why:
            desc |= {"status": "failed", "reason": why}
    elif w.data:
        data = Path(os.path.expanduser(w.data))
        data = (data if data.is_absolute() else workdir(w) / data).resolve()
        desc |= {"source": "data", "path": str(data)}
        if not data.exists():
            desc |= {"status": "failed", "reason": f"{w.key('data')}: {data} does not exist"}
    else:
        desc["source"] = "none"
    if desc["status"] == "ok" and desc["path"]:
        files, size = count_files(Path(desc["path"]), log)
        desc |= {"files": files, "bytes": size}
        log(f"{desc['path']}: {files:,} files, {size / 1e6:.1f} MB")
    desc["seconds"] = time.time() - t0
    if desc["reason"]:
        log(desc["reason"])
    write_text(out / DESCRIPTION, json.dumps(desc, indent=1) + "\n")
    return desc
