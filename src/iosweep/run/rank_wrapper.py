"""Per-rank wrapper: record who this rank is, put the tracer into its environment, exec Python.

The launcher starts ``python -m iosweep.run.rank_wrapper --run-dir DIR -- PROGRAM ARGS...`` once
per rank. The wrapper writes ``DIR/ranks/rank-R.json`` ({rank, local_rank, size, pid, host})
and then *execs* PROGRAM, so that pid is the traced process's pid: that is how the merge ties a
per-process log to its rank. Stdlib only, so it runs under any framework's interpreter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import sys
from pathlib import Path

# (rank, local_rank, size) variables of each launcher, most specific first.
_RANK_VARS = [
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),  # Open MPI
    ("PMIX_RANK", "SLURM_LOCALID", "SLURM_NTASKS"),  # srun --mpi=pmix
    ("PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),  # MPICH hydra, srun --mpi=pmi2
    ("HOROVOD_RANK", "HOROVOD_LOCAL_RANK", "HOROVOD_SIZE"),  # horovodrun --gloo
    ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),  # plain srun
]


def detect_rank(env: dict[str, str]) -> tuple[int, int, int]:
    """(rank, local_rank, size) from the launcher's environment variables."""
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
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program to run after --")

    rank, local_rank, size = detect_rank(dict(os.environ))
    run_dir = args.run_dir
    (run_dir / "ranks").mkdir(parents=True, exist_ok=True)
    info = {
        "rank": rank,
        "local_rank": local_rank,
        "size": size,
        "pid": os.getpid(),  # exec keeps the pid: this is the traced process
        "host": socket.gethostname(),
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
    sys.stdout.flush()
    os.execvpe(program[0], program, env)


if __name__ == "__main__":
    main()
