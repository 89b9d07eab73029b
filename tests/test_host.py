"""The host's figures and the rules that rest on them, on hand-made sampler records whose
figures are computed by hand below; and the sampler itself on a process tree of this test's
making, against what the test did (CPU burnt, bytes read, a file mapped)."""

from __future__ import annotations

import json
import mmap
import multiprocessing as mp
import os
import time

import numpy as np
import pandas as pd
import pytest

from iosweep.analysis.pipeline.host import blind_storage, host_bound, host_summary
from iosweep.run import procstat

CLOCK = 1000.0  # the run's clock zero (Unix s)


def _record(host_busy_per_s=1.8, cores=2, mapped=None, **rates):
    """A rank's sampler record over t = 0..10 s (Unix 1000..1010): each cumulative series
    grows by ``rates[name]`` a second (defaults below)."""
    r = {"rank_cpu": 0.5, "cpu": 0.9, "rank_runq": 0.1, "runq": 0.5, "majflt": 100.0,
         "minflt": 1000.0, "rchar": 1e6, "read_bytes": 5e5, **rates}  # fmt: skip
    t = np.arange(11.0)
    series = {"t": list(CLOCK + t), "host_busy": list(5000 + host_busy_per_s * t)}
    series |= {k: list(v * t) for k, v in r.items()}
    return {"host": "n1", "pid": 7, "interval_s": 1.0, "io_readable": True,
            "overhead_cpu_s": 0.01, "processes_seen": 3, "series": series,
            "cores": {"usable": cores}, "mapped_files": mapped or {}}  # fmt: skip


def _epochs(windows):
    """The (rank, epoch) table's bounds: rank -> [(start, end)] in s from clock zero."""
    return pd.DataFrame([{"rank": r, "epoch": e, "start": lo, "end": hi}
                         for r, ws in windows.items() for e, (lo, hi) in enumerate(ws)])  # fmt: skip


def test_figures_over_each_ranks_training_window_by_hand():
    # rank 0 trains 2..6 s (two epochs), rank 1 3..5 s; the series are linear, so each
    # figure is its rate x the window (interpolated at the bounds)
    procs = {"0": _record(), "1": _record(rank_cpu=1.0, cpu=1.0, runq=0.25)}
    h = host_summary(procs, CLOCK, _epochs({0: [(2, 4), (4, 6)], 1: [(3, 5)]}))
    r0, r1 = h["ranks"]
    assert (r0["window_s"], r1["window_s"]) == (4.0, 2.0)
    assert r0["rank_cores"] == pytest.approx(0.5) and r0["other_cores"] == pytest.approx(0.4)
    assert r0["rank_runq_share"] == pytest.approx(0.1)
    assert r0["core_wait_share"] == pytest.approx(0.5 / (0.9 + 0.5))  # runq / (cpu + runq)
    assert r1["other_cores"] == pytest.approx(0.0)
    assert r1["core_wait_share"] == pytest.approx(0.25 / 1.25)
    assert r0["majflt"] == pytest.approx(400) and r1["rchar"] == pytest.approx(2e6)
    assert h["nodes"] == [{"host": "n1", "ranks": 2, "cores_usable": 2,
                           "busy_share": pytest.approx(0.9), "job_cores": pytest.approx(1.9)}]  # fmt: skip
    assert h["majflt"] == pytest.approx(600) and h["read_bytes"] == pytest.approx(3e6)


def test_unknown_is_not_zero():
    none = host_summary({}, CLOCK, _epochs({0: [(2, 4)]}))
    assert not none["available"] and none["reason"].startswith("not measured")
    lost = host_summary({"0": {"error": "the sampler of the rank's processes left no record"}},
                        CLOCK, _epochs({0: [(2, 4)]}))  # fmt: skip
    assert not lost["available"] and "rank 0: the sampler" in lost["reason"]
    unreadable = _record()
    unreadable["io_readable"] = False
    h = host_summary({"0": unreadable}, CLOCK, _epochs({0: [(2, 4)]}))
    assert h["ranks"][0]["rchar"] is None and h["rchar"] is None


def _verdict(kind):
    return {"kind": kind, "title": kind, "numbers": {},
            "text": "the ranks compute 50% of their epoch time ... and wait 1.0 s of 4.0 s for data; the rest",
            "levers": ["more loader workers"]}  # fmt: skip


@pytest.mark.parametrize(
    ("busy", "runq", "kind", "expected"),
    [
        (1.82, 0.5, "input-bound-preprocessing", "host-cpu-bound"),  # 91% busy, waits 36%
        (1.78, 0.5, "input-bound-preprocessing", "input-bound-preprocessing"),  # 89% busy
        (1.82, 0.29, "loop-bound", "loop-bound"),  # waits 0.29 / 1.19 = 24%: under 25%
        (1.82, 0.31, "loop-bound", "host-cpu-bound"),  # 0.31 / 1.21 = 26%
        (1.82, 0.5, "input-bound-storage", "input-bound-storage"),  # its cause is elsewhere
        (1.82, 0.5, "compute-bound", "compute-bound"),  # its data keep up: said, not changed
    ],
)
def test_host_cpu_bound_where_no_core_was_free_and_threads_waited_for_one(
    busy, runq, kind, expected
):
    h = host_summary({"0": _record(host_busy_per_s=busy, runq=runq)}, CLOCK, _epochs({0: [(1, 9)]}))
    v = host_bound(_verdict(kind), h, {"loader_workers": 4})
    assert v["kind"] == expected
    if kind == "compute-bound":
        assert v["text"].endswith("the compute itself is slowed by sharing cores")
    if expected == "host-cpu-bound":
        assert "1 rank(s) x (1 + 4 loader workers) share 2 cores" in v["levers"][0]["text"]
        assert f"their threads waited for a core {runq / (0.9 + runq):.0%}" in v["text"]
        # the title answers whether the loop waits for its data first; the host is its cause
        assert v["title"] == (
            "input-bound-preprocessing, on a host with no core to spare"
            if kind == "input-bound-preprocessing"
            else "Held back by the host's CPU"
        )


def test_a_host_held_job_without_loader_workers_is_offered_them_first():
    h = host_summary({"0": _record(host_busy_per_s=1.82, runq=0.5)}, CLOCK, _epochs({0: [(1, 9)]}))
    v = host_bound(_verdict("input-bound-preprocessing"), h, {"loader_workers": 0})
    assert v["kind"] == "host-cpu-bound" and v["trace_kind"] == "input-bound-preprocessing"
    assert v["levers"][0]["text"].startswith("loader workers (DataLoader num_workers > 0")
    assert (v["levers"][0]["param"], v["levers"][0]["direction"]) == ("loader_workers", "more")
    assert v["levers"][1]["text"].startswith("fewer processes per core: 1 rank(s) share 2 cores")


def test_a_host_whose_cores_other_work_took_says_so_and_asks_for_the_host_first():
    # the host 1.82 of 2 cores busy, the job's processes 0.1 + 0.1 of them: 1.62 cores to
    # processes outside the job (more than half the host), its rank waiting for a core 50%
    rec = _record(host_busy_per_s=1.82, rank_cpu=0.1, cpu=0.2, runq=0.2)
    h = host_summary({"0": rec}, CLOCK, _epochs({0: [(1, 9)]}))
    v = host_bound(_verdict("input-bound-preprocessing"), h, {"loader_workers": 0})
    assert v["kind"] == "host-cpu-bound"
    assert "1.62 of its cores went to processes outside the job" in v["text"]
    assert v["text"].endswith("the host's other work leaves the job too little CPU")
    assert v["levers"][1]["text"].startswith("a host to itself")  # after loader workers
    # its own 1 x (1 + 4 loader workers) processes past the 2 cores: that lever first
    busy = host_bound(_verdict("input-bound-preprocessing"), h, {"loader_workers": 4})
    assert "1.62 of its cores went to processes outside the job" in busy["text"]
    assert busy["text"].endswith("the ranks and their workers want more CPU than the host gives")
    assert busy["levers"][0]["text"].startswith("fewer processes per core")
    assert busy["levers"][1]["text"].startswith("a host to itself")
    # the job itself using most of what the host gave: its own processes, as before
    mine = host_bound(_verdict("input-bound-preprocessing"), host_summary(
        {"0": _record(host_busy_per_s=1.82, runq=0.5)}, CLOCK, _epochs({0: [(1, 9)]})),
        {"loader_workers": 4})  # fmt: skip
    assert "outside the job" not in mine["text"] and mine["levers"][0]["text"].startswith("fewer")


def test_a_loop_held_back_by_its_checkpoints_keeps_its_reading_on_a_busy_host():
    h = host_summary({"0": _record(host_busy_per_s=1.82, runq=0.5)}, CLOCK, _epochs({0: [(1, 9)]}))
    v = _verdict("loop-bound")
    # 3.0 s a rank not computing, 0.1 s of it waiting, 2.0 s in checkpoints: 2.0 >= 0.5 x 2.9
    v["numbers"] = {"idle_per_rank_s": 3.0, "wait_per_rank_s": 0.1, "checkpoint_per_rank_s": 2.0}
    assert host_bound(v, h, {"loader_workers": 4}) is v
    v["numbers"]["checkpoint_per_rank_s"] = 1.4  # under half of the 2.9 s: the host's again
    assert host_bound(v, h, {"loader_workers": 4})["kind"] == "host-cpu-bound"


def test_a_wait_with_storage_reads_outside_the_trace_is_storages():
    mapped = {"/data/train.npy": 1 << 30}
    # 2 MB/s from storage over 8 s = 16 MB: the floor, against 1 MB traced
    cold = host_summary(
        {"0": _record(read_bytes=2 * 2**20, mapped=mapped)}, CLOCK, _epochs({0: [(1, 9)]})
    )
    v = blind_storage(_verdict("input-bound-preprocessing"), cold, traced=1 << 20)
    assert v["kind"] == "input-bound-storage" and "memory-mapped (/data/train.npy" in v["text"]
    # warm: little from storage; or no sign of blind reads at all: preprocessing stands
    warm = host_summary(
        {"0": _record(read_bytes=1e5, mapped=mapped)}, CLOCK, _epochs({0: [(1, 9)]})
    )
    assert blind_storage(_verdict("input-bound-preprocessing"), warm, 1 << 20)["kind"] == (
        "input-bound-preprocessing"
    )
    seen = host_summary({"0": _record(read_bytes=2 * 2**20)}, CLOCK, _epochs({0: [(1, 9)]}))
    # 8 MB through read calls, 7.5 MB traced: the trace holds them
    assert blind_storage(_verdict("input-bound-preprocessing"), seen, 7_500_000)["kind"] == (
        "input-bound-preprocessing"
    )


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_the_sampler_sees_a_process_tree_as_the_kernel_counts_it(tmp_path):
    """A parent reads 8 MiB through read calls and maps a file; a child burns 1 s of CPU.
    The sampler, watching from its own process, must find both processes, about that CPU,
    at least those bytes, and the mapped file with its size on disk."""
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(8 << 20))
    mapped = tmp_path / "mapped.npy"
    np.save(mapped, np.ones((1024, 1024), np.float32))
    out = tmp_path / "procs.json"
    ctx = mp.get_context("fork")
    ready = ctx.Event()

    def job():
        ready.wait()
        child = ctx.Process(target=_burn, args=(1.0,))
        child.start()
        data.read_bytes()
        arr = np.load(mapped, mmap_mode="r")
        float(arr.sum())  # page it in
        child.join()
        time.sleep(1.2)  # the sampler sees the mapping grow, and the child's last sample

    proc = ctx.Process(target=job)
    proc.start()
    watcher = ctx.Process(target=procstat.watch, args=(proc.pid, out, 0, 0.2))
    watcher.start()
    time.sleep(0.3)
    ready.set()
    proc.join()
    watcher.join(30)
    doc = json.loads(out.read_text())
    assert doc["format"] == procstat.FORMAT and doc["pid"] == proc.pid
    roles = sorted(p["role"] for p in doc["procs"].values())
    assert roles == ["child", "rank"], doc["procs"]
    child = next(p for p in doc["procs"].values() if p["role"] == "child")
    assert 0.7 <= child["cpu_s"] <= 1.3, child
    rank = doc["procs"][str(proc.pid)]
    assert rank["rchar"] >= 8 << 20
    assert doc["mapped_files"] == {str(mapped): mapped.stat().st_size}
    assert doc["cores"]["usable"] == min(v for k, v in doc["cores"].items() if v and k != "usable")


def test_the_mpi_runtimes_shared_memory_is_no_data_file(tmp_path):
    # Open MPI's session directory maps PMIx's data store into every rank (found by make run:
    # it was called a memory-mapped dataset the trace missed); a data file beside it counts
    seg = tmp_path / "ompi.vm.0" / "pid.7374" / "pmix_dstor_ds21_7374" / "smdataseg-1882193921-0"
    seg.parent.mkdir(parents=True)
    data = tmp_path / "shard.bin"
    for f in (seg, data):
        f.write_bytes(b"x" * (1 << 20))
    with seg.open("rb") as a, data.open("rb") as b:
        maps = [mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) for f in (a, b)]
        found = procstat.mapped_files(os.getpid())
        for m in maps:
            m.close()
    assert str(data) in found and str(seg) not in found
