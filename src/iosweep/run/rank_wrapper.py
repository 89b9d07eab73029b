"""Per-rank wrapper: record who this rank is, put the tracer into its environment, exec the job.

The launcher starts ``python -m iosweep.run.rank_wrapper --run-dir DIR [--hooks] -- PROGRAM
ARGS...`` once per rank. The wrapper writes ``DIR/ranks/rank-R.json`` ({rank, local_rank, size,
pid, host, procstat}), fills ``{rank}``, ``{local_rank}`` and ``{world_size}`` in the arguments, and then
*execs* PROGRAM, so that pid is the traced process's pid: that is how the merge ties a
per-process log to its rank. Just before, it starts the sampler of the rank's processes and
host (:mod:`iosweep.run.procstat`; ``IOSWEEP_PROCSTAT=0`` leaves it out). ``--hooks`` puts
iosweep's step hooks on the program's Python path (:mod:`iosweep.run.hooks`), active in that
pid only. Stdlib only, so it runs under any interpreter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import sys
from pathlib import Path

from iosweep.workloads import fill_rank

# (rank, local_rank, size) variables of each launcher, most specific first. torchrun's come
# first: its workers also inherit the variables of the srun or mpirun that started torchrun.
_TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
_RANK_VARS = [
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),  # Open MPI
    ("PMIX_RANK", "SLURM_LOCALID", "SLURM_NTASKS"),  # srun --mpi=pmix
    ("PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),  # MPICH hydra, srun --mpi=pmi2
    ("HOROVOD_RANK", "HOROVOD_LOCAL_RANK", "HOROVOD_SIZE"),  # horovodrun --gloo
    ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),  # plain srun
]


def detect_rank(env: dict[str, str]) -> tuple[int, int, int]:
    """(rank, local_rank, size) from the launcher's environment variables."""
    if "TORCHELASTIC_RUN_ID" in env and _TORCHRUN_VARS[0] in env:
        rank, local, size = (int(env[v]) for v in _TORCHRUN_VARS)
        return rank, local, size
    for rank_var, local_var, size_var in _RANK_VARS:
        if rank_var in env:
            rank = int(env[rank_var])
            size = int(env.get(size_var, env.get("SLURM_NTASKS", "1")))
            local = int(env.get(local_var, env.get("SLURM_LOCALID", rank)))
            return rank, local, size
    return 0, 0, 1  # not launched by an MPI launcher: a single process


def prepare_darshan_logpath(trace_dir: Path, now: dt.datetime | None = None) -> None:
    """Darshan writes to LOGPATH/YYYY/M/D/ (unless built --with-logpath-by-env); create them.

    Tomorrow's directory too, for a run that ends after midnight.
    """
    now = now or dt.datetime.now()
    for day in (now, now + dt.timedelta(days=1)):
        (trace_dir / str(day.year) / str(day.month) / str(day.day)).mkdir(
            parents=True, exist_ok=True
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="iosweep.run.rank_wrapper", description=__doc__)
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--hooks", action="store_true", help="time the loop (step hooks)")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program to run after --")

    rank, local_rank, size = detect_rank(dict(os.environ))
    run_dir = args.run_dir
    (run_dir / "ranks").mkdir(parents=True, exist_ok=True)
    sampled = os.environ.get("IOSWEEP_PROCSTAT", "1") != "0"
    info = {
        "rank": rank,
        "local_rank": local_rank,
        "size": size,
        "pid": os.getpid(),  # exec keeps the pid: this is the traced process
        "host": socket.gethostname(),
        "procstat": sampled,  # its processes sampled (collect waits for that record)
    }
    (run_dir / "ranks" / f"rank-{rank}.json").write_text(json.dumps(info) + "\n")

    env = dict(os.environ)
    spec_file = run_dir / "tracer.json"
    if spec_file.exists():
        from iosweep.run.tracers import TracerSpec, rank_environment

        spec = TracerSpec(**json.loads(spec_file.read_text()))
        trace_dir = run_dir / "traces" / f"rank-{rank}"
        trace_dir.mkdir(parents=True, exist_ok=True)
        if spec.name == "darshan":
            prepare_darshan_logpath(trace_dir)
        env = rank_environment(spec, trace_dir, env)
    env["IOSWEEP_RANK"] = str(rank)
    if args.hooks:
        env = hooks_environment(env, run_dir, rank)
    program = fill_rank(program, rank, local_rank, size)
    sys.stdout.flush()
    if sampled:
        from iosweep.run import procstat

        procstat.start(run_dir / "progress" / f"procs-rank-{rank}.json", rank)
    try:
        os.execvpe(program[0], program, env)
    except OSError as e:  # what the launcher's log must say, rather than a traceback
        sys.exit(f"iosweep rank wrapper: cannot run {program[0]!r}: {e.strerror}")


def hooks_environment(env: dict[str, str], run_dir: Path, rank: int) -> dict[str, str]:
    """The step hooks' variables: their ``sitecustomize`` first on the path, the pid they
    record in (this one, which exec keeps), the file they write at exit."""
    from iosweep.run.hooks import SITE_DIR

    src = str(Path(__file__).resolve().parents[2])
    path = [str(SITE_DIR), src, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {
        **env,
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)),
        "IOSWEEP_RANK_PID": str(os.getpid()),
        "IOSWEEP_HOOKS_OUT": str(run_dir / "progress" / f"hooks-rank-{rank}.json"),
    }


if __name__ == "__main__":
    main()
