"""A SLURM allocation for a training point, and what SLURM says when a job's node is lost.

Under ``snakemake --profile slurm`` the runner of a training point runs on the submit host as
the command of ``salloc``; staging and the ranks are ``srun`` steps in that allocation. A
runner inside a batch job could not report a lost node: SLURM ends the whole job
(``NODE_FAIL``), the runner with it. salloc's command is not ended with the allocation, so
the runner sees its step fail, asks ``scontrol`` why, and writes the point's manifest.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Node states that mean the node is gone (``scontrol show node``: State=DOWN*+..., "*": not
# responding); a job on such a node is lost, whatever its own state says yet.
_LOST_NODE_STATES = ("DOWN", "FAIL", "NOT_RESPONDING", "POWERED_DOWN", "REBOOT")


@dataclass(frozen=True)
class Request:
    """What one training point asks SLURM for."""

    job_name: str
    nodes: int
    ppn: int
    cpus_per_task: int
    minutes: int
    extra_args: tuple[str, ...] = ()


def salloc_command(req: Request, env: Mapping[str, str], command: list[str]) -> list[str]:
    """``salloc`` running ``command`` in an allocation for ``req``; account and partition as
    for the other jobs (``SBATCH_ACCOUNT``/``SBATCH_PARTITION``, when salloc's own variables
    are not set)."""
    cmd = [
        "salloc",
        f"--job-name={req.job_name}",
        f"--nodes={req.nodes}",
        f"--ntasks-per-node={req.ppn}",
        f"--cpus-per-task={req.cpus_per_task}",
        f"--time={req.minutes}",
    ]
    for what in ("ACCOUNT", "PARTITION"):
        if env.get(f"SBATCH_{what}") and not env.get(f"SALLOC_{what}"):
            cmd.append(f"--{what.lower()}={env[f'SBATCH_{what}']}")
    return [*cmd, *req.extra_args, "--", *command]


def _scontrol(args: list[str], env: Mapping[str, str]) -> str:
    try:
        proc = subprocess.run(
            ["scontrol", *args],
            capture_output=True,
            text=True,
            env=dict(env),
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def _fields(line: str) -> dict[str, str]:
    """``Key=Value Key=Value`` as scontrol's one-line output writes them."""
    return {m.group(1): m.group(2) for m in re.finditer(r"(\w+)=(\S*)", line)}


def expand_nodelist(nodelist: str, env: Mapping[str, str]) -> list[str]:
    """``simnode[1-2]`` as names, by SLURM's own rule."""
    if not nodelist or nodelist in ("(null)", "None"):
        return []
    out = _scontrol(["show", "hostnames", nodelist], env)
    return out.split() or [nodelist]


def job_info(job_id: str, env: Mapping[str, str]) -> dict[str, str]:
    """scontrol's view of the job (JobState, Reason, NodeList, ...); {} once it is forgotten."""
    return _fields(_scontrol(["show", "job", "--oneliner", job_id], env))


def node_states(nodes: list[str], env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Each node's State and Reason."""
    if not nodes:
        return {}
    out = _scontrol(["show", "node", "--oneliner", ",".join(nodes)], env)
    states = {}
    for line in out.splitlines():
        f = _fields(line)
        if "NodeName" in f:
            reason = re.search(r"Reason=(.*?)(?: \[|$)", line)
            states[f["NodeName"]] = {
                "state": f.get("State", ""),
                "reason": reason.group(1) if reason else "",
            }
    return states


def lost_node_report(job_id: str, env: Mapping[str, str]) -> dict[str, Any] | None:
    """Why a job's step ended, if a node of the job was lost: SLURM's job state, its reason,
    and the lost nodes with their states. None if every node of the job is still up."""
    job = job_info(job_id, env)
    nodes = expand_nodelist(job.get("NodeList", ""), env)
    states = node_states(nodes, env)
    lost = {
        n: s
        for n, s in states.items()
        if any(x in s["state"].upper() for x in _LOST_NODE_STATES) or s["state"].endswith("*")
    }
    if job.get("JobState") != "NODE_FAIL" and not lost:
        return None
    return {
        "job_id": job_id,
        "state": job.get("JobState", "unknown"),
        "reason": job.get("Reason", ""),
        "nodes": nodes,
        "lost_nodes": [{"node": n, **s} for n, s in sorted(lost.items())],
    }


def describe_loss(loss: dict[str, Any]) -> str:
    """One sentence for the manifest's reason."""
    nodes = loss["lost_nodes"]
    which = ", ".join(
        f"{n['node']} ({n['state']}{': ' + n['reason'] if n['reason'] else ''})" for n in nodes
    )
    return (
        f"node {which or 'of the job'} was lost during the run; SLURM ended job "
        f"{loss['job_id']} with state {loss['state']}"
        + (f" (reason {loss['reason']})" if loss["reason"] not in ("", "None") else "")
    )


def minutes(timeout_s: int) -> int:
    """A job's time limit: the training timeout, plus room for staging and collection."""
    return max(1, timeout_s // 60 + 5)


def job_name(run_id: str) -> str:
    return "iosweep-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)[:100]
