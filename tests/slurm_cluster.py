"""A real SLURM cluster on this machine, for tests: a thin wrapper of tools/slurm-cluster.sh.

Usage in a test (pure stdlib + pytest)::

    from slurm_cluster import skip_reason, slurm_cluster

    @pytest.mark.slurm
    def test_something(tmp_path_factory):
        if reason := skip_reason(nodes=2):
            unavailable(reason)   # conftest: a failure under CI
        base = tmp_path_factory.mktemp("slurm")      # keep it short: sockets live in it
        shared = base / "shared"
        shared.mkdir()
        with slurm_cluster(2, cpus=2, state_dir=base / "state", shared=[shared]) as cluster:
            out = cluster.run(["srun", "-N2", "-n2", "hostname"], cwd=shared).stdout

``cluster.env`` holds the variables to add for SLURM clients and Open MPI (SLURM_CONF,
OMPI_MCA_*); ``cluster.run`` runs a command with them. With ``nodes >= 2`` each node has a
private /tmp, so a job's working directory and files must be on a shared path: outside /tmp,
or a directory under /tmp passed in ``shared`` (pytest's tmp_path lives under /tmp).
The cluster is stopped in ``finally``, so also when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "slurm-cluster.sh"
MAX_STATE_DIR_LEN = 70  # unix socket paths (munge, slurmd spool) are built from it


@dataclass
class SlurmCluster:
    state_dir: Path
    nodes: list[str]
    env: dict[str, str]
    pids: dict[str, int] = field(default_factory=dict)  # "slurmctld", "slurmd-NODE", "munged"
    netns: list[str] = field(default_factory=list)  # network namespaces created by start
    links: list[str] = field(default_factory=list)  # bridge and veths created by start
    start_log: str = ""

    def client_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """os.environ plus the cluster's variables (plus ``extra``)."""
        return {**os.environ, **self.env, **(extra or {})}

    def run(
        self,
        args: Sequence[str],
        *,
        cwd: Path | str | None = None,
        timeout: float = 60,
        check: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a client command (srun, sbatch, squeue, ...) against this cluster."""
        proc = subprocess.run(
            list(args),
            cwd=cwd,
            env=self.client_env(extra_env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{shlex.join(args)} exited {proc.returncode}\n"
                f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
            )
        return proc

    def fail_node(self, node: str) -> str:
        """Lose ``node`` as a machine is lost (tools/slurm-cluster.sh fail-node)."""
        proc = subprocess.run(
            [str(SCRIPT), "fail-node", node, "--state-dir", str(self.state_dir)],
            capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if proc.returncode != 0:
            raise AssertionError(f"fail-node {node} failed:\n{proc.stderr}")
        return proc.stderr

    def log_tail(self, lines: int = 30) -> str:
        """The end of every daemon log, for failure messages."""
        out = []
        for log in sorted((self.state_dir / "log").glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"----- {log}\n" + "\n".join(text))
        return "\n".join(out)


def _run_quiet(args: Sequence[str]) -> bool:
    try:
        return (
            subprocess.run(list(args), capture_output=True, timeout=30, check=False).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def skip_reason(nodes: int = 2) -> str | None:
    """Why a ``nodes``-node cluster cannot be started here, or None if it can."""
    if not sys.platform.startswith("linux"):
        return "SLURM test cluster needs Linux"
    if os.geteuid() != 0:
        return "SLURM test cluster needs root (daemons, network namespaces)"
    if not SCRIPT.is_file():
        return f"{SCRIPT} is missing"
    have_apt = shutil.which("apt-get") is not None
    have_slurm = all(Path(p).exists() for p in ("/usr/sbin/slurmctld", "/usr/sbin/slurmd"))
    have_slurm = have_slurm and all(shutil.which(c) for c in ("srun", "sbatch", "sinfo"))
    have_munge = Path("/usr/sbin/munged").exists()
    if not (have_slurm and have_munge) and not have_apt:
        return "no SLURM/munge binaries and no apt-get to install them"
    if nodes > 1:
        if shutil.which("ip") is None and not have_apt:
            return "no 'ip' (iproute2) and no apt-get to install it"
        if shutil.which("unshare") is None or shutil.which("nsenter") is None:
            return "no unshare/nsenter (util-linux)"
        if not _run_quiet(["unshare", "--net", "--uts", "--mount", "true"]):
            return "cannot create network/UTS/mount namespaces here (unshare failed)"
        if shutil.which("ip") is not None and not _run_quiet(["ip", "netns", "list"]):
            return "'ip netns' is not supported here"
    return None


def _parse_exports(text: str) -> dict[str, str]:
    env = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("export "):
            continue
        key, _, value = line[len("export ") :].partition("=")
        env[key] = shlex.split(value)[0] if value else ""
    return env


def _read_state(state_dir: Path, stdout: str, stderr: str) -> SlurmCluster:
    env = _parse_exports(stdout) or _parse_exports((state_dir / "env.sh").read_text())
    nodes = (state_dir / "nodes.list").read_text().split()
    pids = {}
    for f in (state_dir / "pids").glob("*.pid"):
        if f.name.endswith(".slurm.pid"):  # slurm's own copies
            continue
        with contextlib.suppress(ValueError, OSError):
            pids[f.stem] = int(f.read_text().strip())
    netns, links = [], []
    created = state_dir / "created"
    if created.exists():
        for line in created.read_text().splitlines():
            kind, _, name = line.partition(" ")
            if kind == "netns":
                netns.append(name)
            elif kind == "link":
                links.append(name)
    return SlurmCluster(state_dir, nodes, env, pids, netns, links, stderr)


@contextlib.contextmanager
def slurm_cluster(
    nodes: int = 1,
    cpus: int | None = None,
    state_dir: Path | str = "/var/tmp/iosweep-slurm",
    *,
    shared: Sequence[Path | str] = (),
    mem_mb: int | None = None,
    slurmd_timeout: int | None = None,
    timeout: float = 240,
) -> Iterator[SlurmCluster]:
    """Start a ``nodes``-node cluster (``cpus`` CPUs per node), yield it, always stop it.

    ``shared``: directories under /tmp that the nodes must see (only matters for nodes >= 2).
    ``timeout`` covers a first run that still has to apt-get install the packages.
    """
    state_dir = Path(state_dir).resolve()
    if len(str(state_dir)) > MAX_STATE_DIR_LEN:
        raise ValueError(
            f"state_dir {state_dir} is longer than {MAX_STATE_DIR_LEN} characters; "
            "use a shorter one (e.g. tmp_path_factory.mktemp('slurm') / 'state')"
        )
    cmd = [str(SCRIPT), "start", "--nodes", str(nodes), "--state-dir", str(state_dir)]
    if cpus is not None:
        cmd += ["--cpus", str(cpus)]
    if mem_mb is not None:
        cmd += ["--mem", str(mem_mb)]
    if slurmd_timeout is not None:
        cmd += ["--slurmd-timeout", str(slurmd_timeout)]
    for d in shared:
        cmd += ["--share", str(d)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{shlex.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-6000:]}"
            )
        yield _read_state(state_dir, proc.stdout, proc.stderr)
    finally:
        stop = subprocess.run(
            [str(SCRIPT), "stop", "--state-dir", str(state_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        if stop.returncode != 0:
            msg = f"slurm-cluster.sh stop failed (exit {stop.returncode}):\n{stop.stderr}"
            if sys.exc_info()[0] is None:
                raise RuntimeError(msg)
            print(msg, file=sys.stderr)  # do not hide the test's own failure


def pid_alive(pid: int) -> bool:
    """True if ``pid`` runs and is not a zombie (stopped daemons are reaped by init later)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def netns_list() -> list[str]:
    proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def link_exists(name: str) -> bool:
    return _run_quiet(["ip", "link", "show", name])
