"""Real SLURM clusters on this machine (tools/slurm-cluster.sh): one node, and two emulated
nodes in network/UTS/mount namespaces with MPI (PMIx) across them. Needs root."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from conftest import unavailable

try:
    from slurm_cluster import link_exists, netns_list, pid_alive, skip_reason, slurm_cluster
except ImportError:  # tests/ imported as a package
    from tests.slurm_cluster import (
        link_exists,
        netns_list,
        pid_alive,
        skip_reason,
        slurm_cluster,
    )

pytestmark = pytest.mark.slurm

PRINT_HOST_RANK = (
    "import os, socket; print(socket.gethostname(), os.environ['SLURM_PROCID'], flush=True)"
)


def _need(nodes: int) -> None:
    reason = skip_reason(nodes)
    if reason:
        unavailable(reason)


def _assert_stopped(cluster) -> None:
    assert cluster.pids, "start recorded no daemon pids"
    left = {name: pid for name, pid in cluster.pids.items() if pid_alive(pid)}
    assert not left, f"daemons still running after stop: {left}"
    assert not set(cluster.netns) & set(netns_list()), "network namespaces left behind"
    assert not [link for link in cluster.links if link_exists(link)], "bridge/veth left behind"


def test_one_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> None:
    _need(1)
    base = tmp_path_factory.mktemp("slurm1")
    with slurm_cluster(1, cpus=2, state_dir=base / "state") as cluster:
        assert len(cluster.nodes) == 1
        assert "SLURM_CONF" in cluster.env
        assert {"slurmctld", "munged", f"slurmd-{cluster.nodes[0]}"} <= set(cluster.pids)

        out = cluster.run(["srun", "-n2", "hostname"], cwd=base).stdout.split()
        assert out == [cluster.nodes[0]] * 2

        script = base / "job.sh"
        script.write_text(
            "#!/bin/bash\n#SBATCH -n 1\n"
            f"#SBATCH -o {base}/job-%j.out\n"
            'echo "batch on $(hostname) job $SLURM_JOB_ID"\n'
        )
        job_id = cluster.run(["sbatch", "--wait", "--parsable", str(script)], cwd=base)
        job_id = job_id.stdout.strip().split(";")[0]
        text = (base / f"job-{job_id}.out").read_text()
        assert text.strip() == f"batch on {cluster.nodes[0]} job {job_id}"
        # no slurmdbd: scontrol is the source of job state
        show = cluster.run(["scontrol", "show", "job", job_id]).stdout
        assert "JobState=COMPLETED" in show
    _assert_stopped(cluster)


def test_two_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> None:
    _need(2)
    base = tmp_path_factory.mktemp("slurm2")
    shared = base / "shared"  # under /tmp: must be passed as shared to be seen by the nodes
    shared.mkdir()
    with slurm_cluster(2, cpus=2, state_dir=base / "state", shared=[shared]) as cluster:
        assert cluster.nodes == ["simnode1", "simnode2"]
        assert cluster.netns, "no network namespaces recorded"

        proc = cluster.run(
            [
                "srun",
                "--mpi=pmix",
                "-N2",
                "-n4",
                "--ntasks-per-node=2",
                "python3",
                "-c",
                PRINT_HOST_RANK,
            ],
            cwd=shared,
        )
        rows = [line.split() for line in proc.stdout.splitlines() if line.strip()]
        by_rank = {int(rank): host for host, rank in rows}
        assert sorted(by_rank) == [0, 1, 2, 3], proc.stdout
        assert set(by_rank.values()) == {"simnode1", "simnode2"}, proc.stdout
        assert [list(by_rank.values()).count(h) for h in ("simnode1", "simnode2")] == [2, 2]

        def on(node: str, shell: str) -> str:
            args = ["srun", "-N1", "-n1", "-w", node, "bash", "-c", shell]
            return cluster.run(args, cwd=shared).stdout.strip()

        # /tmp is node-local ...
        probe = f"/tmp/iosweep-slurm-probe-{uuid.uuid4().hex}"
        seen = f"test -e {probe} && echo seen || echo absent"
        on("simnode1", f"echo x > {probe}")
        assert on("simnode1", seen) == "seen"
        assert on("simnode2", seen) == "absent"
        assert not Path(probe).exists(), "node /tmp leaked into the host's /tmp"
        # ... while the shared directory is the same everywhere
        on("simnode1", f"hostname > {shared}/written-by")
        assert on("simnode2", f"cat {shared}/written-by") == "simnode1"
        assert (shared / "written-by").read_text().strip() == "simnode1"
    _assert_stopped(cluster)
