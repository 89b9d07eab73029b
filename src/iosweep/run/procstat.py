"""The rank's processes and its host's cores, sampled from ``/proc`` while the rank runs.

What a tracer does not see: CPU time of the rank's process and of every process below it
(loader workers, anything the job starts), the time their threads waited for a core (the
scheduler's run-queue wait, ``/proc/PID/task/TID/schedstat``), page faults, and bytes read
both through read calls (``rchar``: the page cache included) and from storage
(``read_bytes``: memory-mapped pages too); beside them the host's CPU use and the cores the
rank may use (affinity, the cgroup's quota, SLURM's CPUs per task).

The rank wrapper starts :func:`start` just before it execs the job: a detached process (a
grandchild, so the job has no child it did not start) that samples every ``interval`` s until
the rank's process is gone, then writes ``progress/procs-rank-R.json``. Counters are
cumulative; a process is kept with its last sample after it ends, so a short-lived process
(under one interval) or a process's last interval may be missed, which the record says.
Stdlib only: it runs under the job's interpreter.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from iosweep.cgroups import cgroup_dirs

FORMAT = "iosweep.procs/1"
INTERVAL = 0.5  # seconds between samples
MAX_SAMPLES = 1200  # past it, every other sample goes and the interval doubles, up to:
MAX_INTERVAL = 4.0
FLUSH_S = 5.0  # the record is written this often while the rank runs
# a process's mappings (a long file) are read when it is first seen and whenever its resident
# file pages grew by this much since: a memory-mapped data file being read grows them
MAPS_GROWTH = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# cumulative, the tree's: CPU s (rank_cpu: its own process), run-queue wait s (rank_runq: its
# main thread), faults, bytes; host_busy/host_iowait: the host's CPU s since boot; rss_file:
# the file pages resident in the live processes' mappings now (not cumulative)
SERIES = (
    "t",
    "host_busy",
    "host_iowait",
    "rank_cpu",
    "cpu",
    "rank_runq",
    "runq",
    "majflt",
    "minflt",
    "rchar",
    "read_bytes",
    "rss_file",
    "procs",
)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def proc_stat(pid: int) -> dict[str, Any] | None:
    """``/proc/PID/stat``'s fields that matter here; None if the process is gone or a zombie."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    name = text[text.find("(") + 1 : text.rfind(")")]
    f = text[text.rfind(")") + 2 :].split()
    if f[0] in ("Z", "X"):
        return None
    return {
        "name": name,
        "ppid": int(f[1]),
        "minflt": int(f[7]),
        "majflt": int(f[9]),
        "cpu": (int(f[11]) + int(f[12])) / CLK_TCK,
        "threads": int(f[17]),
    }


def proc_io(pid: int) -> tuple[int, int] | None:
    """(rchar, read_bytes) of ``/proc/PID/io``; None where it cannot be read."""
    text = _read(f"/proc/{pid}/io")
    if text is None:
        return None
    vals = dict(ln.split(": ", 1) for ln in text.splitlines() if ": " in ln)
    try:
        return int(vals["rchar"]), int(vals["read_bytes"])
    except (KeyError, ValueError):
        return None


def rss_file(pid: int) -> int | None:
    """Bytes of file pages resident in the process's mappings (``RssFile``): memory-mapped
    data read by page faults show here, and in no read call."""
    for line in (_read(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    return None


# mappings that are code or the runtime's, not data: shared libraries, Python's own files,
# shared memory (torch's tensors between processes; the MPI runtime's segments: Open MPI's
# session directory with PMIx's data store, its shared-memory transports), devices,
# anonymous and special regions
_NOT_DATA = (
    "/ompi.",
    "/openmpi-sessions",
    "pmix",
    "/vader",
    "/psm2",
    "/ucx",
    "/nccl-",
    ".so",
    "/lib/python",
    "/site-packages/",
    "/dist-packages/",
    "/usr/lib",
    "/lib/",
    "/usr/share/",
    "/dev/",
    "/proc/",
    "/sys/",
    "/memfd:",
    "/SYSV",
    "/torch_",
    "/i18n/",
)


@functools.lru_cache(maxsize=4096)
def _executable(path: str) -> bool:
    """A program or library file (any execute bit), or one that cannot be looked at."""
    try:
        return bool(os.stat(path).st_mode & 0o111)
    except OSError:
        return True


def _size_on_disk(path: str, default: int) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return default


def mapped_files(pid: int) -> dict[str, int]:
    """Regular files the process has memory-mapped that are not code: path -> bytes mapped."""
    out: dict[str, int] = {}
    for line in (_read(f"/proc/{pid}/maps") or "").splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/") or parts[5].endswith(" (deleted)"):
            continue
        path = parts[5]
        if any(x in path for x in _NOT_DATA) or "x" in parts[1] or _executable(path):
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        out[path] = out.get(path, 0) + hi - lo
    return out


def runq_wait(pid: int) -> float | None:
    """Seconds the process's threads have waited on a run queue for a core (schedstat)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total, seen = 0, False
    for tid in tids:
        text = _read(f"/proc/{pid}/task/{tid}/schedstat")
        if text:
            parts = text.split()
            if len(parts) >= 2:
                total += int(parts[1])
                seen = True
    return total / 1e9 if seen else None


def main_thread_runq(pid: int) -> float | None:
    """Seconds the process's main thread has waited on a run queue for a core."""
    text = _read(f"/proc/{pid}/task/{pid}/schedstat")
    parts = text.split() if text else []
    return int(parts[1]) / 1e9 if len(parts) >= 2 else None


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (``/proc/PID/task/TID/children``; a scan where absent)."""
    out: list[int] = []
    todo = [pid]
    have_children_files = os.path.exists(f"/proc/{pid}/task/{pid}/children")
    if not have_children_files:
        return _scan_descendants(pid)
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            text = _read(f"/proc/{p}/task/{tid}/children") or ""
            kids = [int(c) for c in text.split()]
            out += kids
            todo += kids
    return out


def _scan_descendants(pid: int) -> list[int]:
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := proc_stat(int(d))) is not None:
            parent[int(d)] = st["ppid"]
    out, frontier = [], {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier}
        out += sorted(frontier)
    return out


def host_cpu() -> tuple[float, float, float] | None:
    """(busy, iowait, total) CPU seconds of the host since boot, all cores (``/proc/stat``)."""
    text = _read("/proc/stat")
    if not text or not text.startswith("cpu "):
        return None
    v = [int(x) for x in text.splitlines()[0].split()[1:]]
    idle, iowait = v[3], v[4] if len(v) > 4 else 0
    total = sum(v[:8])  # guest time is counted in user already
    return (total - idle - iowait) / CLK_TCK, iowait / CLK_TCK, total / CLK_TCK


def cgroup_cpu_quota() -> float | None:
    """Cores the process's cgroup may use (cgroup v2 ``cpu.max``, v1 CFS quota), the tightest
    up its hierarchy; None: no limit."""
    quotas = [q for d, _ in cgroup_dirs("cpu") if (q := _quota(d)) is not None]
    return min(quotas) if quotas else None


def _quota(d: Path) -> float | None:
    v2 = _read(str(d / "cpu.max"))
    if v2:
        quota, period = [*v2.split(), "100000"][:2]
        return None if quota == "max" else int(quota) / int(period)
    q, p = _read(str(d / "cpu.cfs_quota_us")), _read(str(d / "cpu.cfs_period_us"))
    if q and p and int(q) > 0:
        return int(q) / int(p)
    return None


def cores(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The cores this process may use, and what limits them."""
    env = dict(os.environ) if env is None else env
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    slurm = env.get("SLURM_CPUS_PER_TASK")
    out = {
        "online": os.cpu_count(),
        "affinity": affinity,
        "cgroup_quota": cgroup_cpu_quota(),
        "slurm_cpus_per_task": int(slurm) if slurm and slurm.isdigit() else None,
    }
    limits = [v for k, v in out.items() if k != "online" and v]
    out["usable"] = min([*limits, out["online"] or 0]) or None
    return out


class Sampler:
    """Samples the process tree under ``pid`` and the host, keeping every series cumulative."""

    def __init__(self, pid: int, interval: float = INTERVAL):
        self.pid, self.interval = pid, interval
        self.procs: dict[int, dict[str, Any]] = {}
        self.series: dict[str, list[float]] = {k: [] for k in SERIES}
        self.start = time.time()
        self.mapped: dict[str, int] = {}  # data files memory-mapped: their size on disk
        self.sampling_cpu = 0.0  # CPU seconds spent sampling (the sampler's cost to the host)

    def _proc(self, pid: int, now: float) -> None:
        st = proc_stat(pid)
        if st is None:
            return
        rec = self.procs.get(pid)
        if rec is None:
            rec = self.procs[pid] = {
                "role": "rank" if pid == self.pid else "child",
                "name": st["name"],
                "ppid": st["ppid"],
                "first": now,
                "threads_max": 0,
                "rchar": None,
                "read_bytes": None,
                "runq_s": None,
                "rss_file_max": None,
            }
        io, rq = proc_io(pid), runq_wait(pid)
        rss = rss_file(pid)
        if rec["first"] == now or (rss or 0) - rec.get("rss_at_maps", 0) >= MAPS_GROWTH:
            rec["rss_at_maps"] = rss or 0
            for path, size in mapped_files(pid).items():
                self.mapped[path] = _size_on_disk(path, size)
        rec.update(
            last=now,
            cpu_s=st["cpu"],
            majflt=st["majflt"],
            minflt=st["minflt"],
            name=st["name"],
            threads_max=max(rec["threads_max"], st["threads"]),
        )
        if io is not None:
            rec["rchar"], rec["read_bytes"] = io
        if rq is not None:
            rec["runq_s"] = rq
        if rss is not None:
            rec["rss_file"] = rss
            rec["rss_file_max"] = max(rec["rss_file_max"] or 0, rss)
        if pid == self.pid:
            rec["main_runq_s"] = main_thread_runq(pid)

    def sample(self) -> bool:
        """One sample; False once the rank's process is gone."""
        cpu0 = time.process_time()
        try:
            return self._sample()
        finally:
            self.sampling_cpu += time.process_time() - cpu0

    def _sample(self) -> bool:
        now = time.time()
        if proc_stat(self.pid) is None:
            return False
        for pid in (self.pid, *descendants(self.pid)):
            self._proc(pid, now)
        host = host_cpu()
        procs = self.procs.values()
        rank = self.procs.get(self.pid, {})
        row = {
            "t": now,
            "host_busy": host[0] if host else None,
            "host_iowait": host[1] if host else None,
            "rank_cpu": rank.get("cpu_s"),
            "cpu": sum(p["cpu_s"] for p in procs),
            "rank_runq": rank.get("main_runq_s"),
            "runq": sum(p["runq_s"] or 0 for p in procs),
            "majflt": sum(p["majflt"] for p in procs),
            "minflt": sum(p["minflt"] for p in procs),
            "rchar": sum(p["rchar"] or 0 for p in procs),
            "read_bytes": sum(p["read_bytes"] or 0 for p in procs),
            "rss_file": sum(p.get("rss_file") or 0 for p in procs if p["last"] == now),
            "procs": sum(1 for p in procs if p["last"] == now),
        }
        for k in SERIES:
            self.series[k].append(row[k])
        if len(self.series["t"]) > MAX_SAMPLES:
            for k in SERIES:
                self.series[k] = self.series[k][::2]
            self.interval = min(self.interval * 2, MAX_INTERVAL)
        return True

    def document(self, rank: int) -> dict[str, Any]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "format": FORMAT,
            "rank": rank,
            "pid": self.pid,
            "host": socket.gethostname(),
            "start": self.start,
            "end": time.time(),
            "interval_s": self.interval,
            "cores": cores(),
            "io_readable": any(p["rchar"] is not None for p in self.procs.values()),
            "overhead_cpu_s": self.sampling_cpu,  # the samples' cost, start-up aside
            "process_cpu_s": usage.ru_utime + usage.ru_stime,
            "procs": {str(k): v for k, v in self.procs.items()},
            "series": self.series,
            "mapped_files": self.mapped,
        }


def _write(sampler: Sampler, out: Path, rank: int) -> None:
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(sampler.document(rank)))
    os.replace(tmp, out)


def watch(pid: int, out: Path, rank: int, interval: float = INTERVAL) -> None:
    """Sample until ``pid`` is gone (or this process is told to stop), then write ``out``;
    written every ``FLUSH_S`` before that too, so that a sampler killed with its job (a SLURM
    step's processes when its task ends, a run stopped at its timeout) leaves what it saw."""
    sampler = Sampler(pid, interval)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    flushed = time.monotonic()
    while not stop and sampler.sample():
        if time.monotonic() - flushed >= FLUSH_S:
            _write(sampler, out, rank)
            flushed = time.monotonic()
        time.sleep(sampler.interval)
    _write(sampler, out, rank)


def start(out: Path, rank: int, interval: float = INTERVAL) -> None:
    """Watch this process (the one about to exec the job) from a detached grandchild."""
    pid = os.getpid()
    child = os.fork()
    if child:
        os.waitpid(child, 0)  # the intermediate child exits at once: no zombie, no child left
        return
    try:
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # never hold the launcher's pipes or sockets open
                os.dup2(devnull, fd)
            os.closerange(3, 65536)
            try:
                watch(pid, out, rank, interval)
            except Exception as e:  # said in the record's place; the job is never stopped
                out.with_suffix(".error").write_text(f"{type(e).__name__}: {e}\n")
    finally:
        os._exit(0)


if __name__ == "__main__":  # python -m iosweep.run.procstat PID OUT: watch a running process
    watch(int(sys.argv[1]), Path(sys.argv[2]), 0)
