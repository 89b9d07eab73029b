"""This process's cgroups: the directories whose limit files bound it, from its own cgroup up
to each hierarchy's root. A SLURM job's cgroup is nested (``/slurm/uid_0/job_12/step_0``):
the root's files alone say nothing of it. Stdlib only: the rank wrapper's sampler of a rank's
processes (:mod:`iosweep.run.procstat`) runs under the job's interpreter."""

from __future__ import annotations

from pathlib import Path


def cgroup_dirs(
    controller: str,
    proc_cgroup: Path = Path("/proc/self/cgroup"),
    root: Path = Path("/sys/fs/cgroup"),
) -> list[tuple[Path, bool]]:
    """``(directory, v2)`` of this process's cgroup and each one above it, in the v2 hierarchy
    and in the v1 hierarchy holding ``controller`` (``memory``, ``cpu``); none where
    ``/proc/self/cgroup`` cannot be read."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return []
    out: list[tuple[Path, bool]] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy
            base, v2 = root, True
        elif controller in controllers.split(","):
            base, v2 = root / controllers, False  # mounted as its controllers: cpu,cpuacct
        else:
            continue
        rel = Path(path.lstrip("/"))
        out += [(base / d, v2) for d in (rel, *rel.parents)]
    return out
