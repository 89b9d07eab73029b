"""Build the launcher command line for one sweep point (mpirun, MPICH, horovodrun, srun)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field

LAUNCHERS = ("mpirun", "mpirun-mpich", "horovodrun", "srun")


class LaunchError(ValueError):
    """A launcher that cannot run this point here (the message says why)."""


@dataclass
class LaunchSpec:
    launcher: str
    nodes: int
    ppn: int
    program: list[str]  # the per-rank command (the rank wrapper, then the training script)
    env_names: list[str] = field(default_factory=list)  # variables every rank must receive
    hosts: list[str] = field(default_factory=list)  # node names for multi-node runs outside SLURM
    extra_args: list[str] = field(default_factory=list)
    srun_mpi: str = "pmix"
    allow_run_as_root: bool = True
    oversubscribe: bool = True

    @property
    def ranks(self) -> int:
        return self.nodes * self.ppn


def in_slurm_allocation(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return "SLURM_JOB_ID" in env


def choose_launcher(kind: str, env: dict[str, str] | None = None) -> str:
    """``auto``: srun inside a SLURM allocation (ranks land on the allocated nodes), else mpirun."""
    if kind != "auto":
        if kind not in LAUNCHERS:
            raise LaunchError(f"unknown launcher {kind!r}; known: auto, {', '.join(LAUNCHERS)}")
        return kind
    return "srun" if in_slurm_allocation(env) and shutil.which("srun") else "mpirun"


def _host_list(spec: LaunchSpec) -> str:
    return ",".join(f"{h}:{spec.ppn}" for h in spec.hosts)


def build_command(spec: LaunchSpec, env: Mapping[str, str] | None = None) -> list[str]:
    """The argv that starts ``spec.ranks`` copies of ``spec.program``, ``spec.ppn`` per node."""
    env = os.environ if env is None else env
    if spec.nodes < 1 or spec.ppn < 1:
        raise LaunchError(f"nodes and ppn must be >= 1 (got nodes={spec.nodes}, ppn={spec.ppn})")
    multi = spec.nodes > 1
    if multi and not spec.hosts and not in_slurm_allocation(env):
        raise LaunchError(
            f"{spec.nodes} nodes requested but there is no SLURM allocation and no host list: "
            "run under SLURM (snakemake --profile slurm) or set launcher.hosts"
        )
    if multi and spec.hosts and len(spec.hosts) < spec.nodes:
        raise LaunchError(f"{spec.nodes} nodes requested but only {len(spec.hosts)} hosts given")
    n = str(spec.ranks)
    if spec.launcher == "mpirun":
        cmd = ["mpirun", "-np", n, "--map-by", f"ppr:{spec.ppn}:node", "--bind-to", "none"]
        if spec.hosts:
            cmd += ["--host", _host_list(spec)]
        if spec.oversubscribe:
            cmd.append("--oversubscribe")
        if spec.allow_run_as_root:
            cmd.append("--allow-run-as-root")
        for name in spec.env_names:
            cmd += ["-x", name]
    elif spec.launcher == "mpirun-mpich":
        # Hydra forwards the whole environment by default.
        cmd = ["mpiexec.hydra", "-n", n, "-ppn", str(spec.ppn)]
        if spec.hosts:
            cmd += ["-hosts", ",".join(spec.hosts)]
    elif spec.launcher == "horovodrun":
        hosts = _host_list(spec) if spec.hosts else f"localhost:{spec.ranks}"
        cmd = ["horovodrun", "-np", n, "-H", hosts]
        mpi_args = []
        if spec.oversubscribe:
            mpi_args.append("--oversubscribe")
        if spec.allow_run_as_root:
            mpi_args.append("--allow-run-as-root")
        if mpi_args:
            cmd += ["--mpi-args", " ".join(mpi_args)]
    elif spec.launcher == "srun":
        cmd = [
            "srun",
            f"--nodes={spec.nodes}",
            f"--ntasks={spec.ranks}",
            f"--ntasks-per-node={spec.ppn}",
            "--kill-on-bad-exit=1",
            "--export=ALL",
            # Runs inside a job whose CPUs a step may already hold (the SLURM executor wraps
            # a one-rank job in `srun -n1`): without --overlap the ranks' step never starts.
            "--overlap",
        ]
        if spec.srun_mpi != "none":
            cmd.append(f"--mpi={spec.srun_mpi}")
        if spec.hosts:
            cmd.append(f"--nodelist={','.join(spec.hosts[: spec.nodes])}")
    else:
        raise LaunchError(f"unknown launcher {spec.launcher!r}; known: {', '.join(LAUNCHERS)}")
    return [*cmd, *spec.extra_args, *spec.program]


@dataclass
class TorchrunSpec:
    """PyTorch's launcher: one torchrun agent per node, each starting ``ppn`` copies of
    ``program`` (``--no-python``: the rank wrapper, which then execs the training command)."""

    python: str  # an interpreter with torch: torchrun is ``python -m torch.distributed.run``
    nodes: int
    ppn: int
    program: list[str]
    endpoint: str = ""  # host:port of the rendezvous, for several nodes
    run_id: str = "iosweep"


def torchrun_command(spec: TorchrunSpec) -> list[str]:
    """The argv of one torchrun agent (a node's share of the ranks)."""
    if spec.nodes < 1 or spec.ppn < 1:
        raise LaunchError(f"nodes and ppn must be >= 1 (got nodes={spec.nodes}, ppn={spec.ppn})")
    cmd = [
        spec.python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={spec.nodes}",
        f"--nproc-per-node={spec.ppn}",
    ]
    if spec.nodes == 1:
        cmd.append("--standalone")
    elif not spec.endpoint:
        raise LaunchError("torchrun on several nodes needs a rendezvous host (first node)")
    else:
        cmd += [
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={spec.endpoint}",
            f"--rdzv-id={spec.run_id}",
        ]
    return [*cmd, "--no-python", *spec.program]
