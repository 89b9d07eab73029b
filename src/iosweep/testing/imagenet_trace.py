"""The trace store of an ImageNet-shaped data-parallel training run, of any size, streamed to disk.

As Darshan records a ResNet/ImageNet job: ``files`` JPEGs in class folders of 1,281; ``ranks``
ranks with ``workers`` forked loader workers each (new worker processes every epoch); every
epoch the sampler gives each rank another part of the files, so each file is opened once per
epoch by one worker of one rank and read as PIL reads a JPEG (4 KiB at 0, 60 KiB, the rest,
0 B at end of file: 4 segments); Darshan's counters per (process, file); the manifest's steps
(batch 256, compute and wait timed apart); rank 0 saves a 100 MB checkpoint after each epoch
in 1 MiB writes. Seeded: the same arguments give the same store.

The segments and counters go to Parquet as they are made: the writer holds at most one row
group (``GROUP_ROWS``), never the run, so a store of 100 M segments is written on a machine
that could not hold it. :func:`write_imagenet_logs` writes the same run as the workflow's run
directory of real-format Darshan logs (one per loader worker and epoch, through
libdarshan-util's writer), for timing ingest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from iosweep.testing.stores import dictionary, run_meta, table
from iosweep.trace.schema import SIZE_BINS, STORE_TABLES, darshan_size_bin, empty_table
from iosweep.trace.store import GROUP_MIN_ROWS, ROW_GROUP_ROWS, RUN_JSON, rank_groups, writer

PER_CLASS = 1281
BATCH = 256
STEP_COMPUTE = 0.30  # seconds of compute per step (an accelerator fed in time)
CKPT = 100_000_000
READS_PER_FILE = 4
RANKS_PER_NODE = 4


@dataclass
class Shape:
    """What the store holds, counted as it was written."""

    segments: int
    counter_records: int
    files: int
    ranks: int
    workers: int
    epochs: int


def epochs_for(segments: int, files: int) -> int:
    """Epochs of a run of about ``segments`` reads (each file is read 4 times an epoch)."""
    return max(1, round(segments / (files * READS_PER_FILE)))


def reads_of(size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per file, the four reads PIL makes: (offsets, lengths) as (n, 4) arrays."""
    first = np.full(len(size), 4096)
    second = np.minimum(61_440, size - 4096)
    third = size - 4096 - second
    off = np.stack([np.zeros(len(size)), np.full(len(size), 4096), 4096 + second, size], 1)
    ln = np.stack([first, second, third, np.zeros(len(size))], 1)
    return off.astype(np.int64), ln.astype(np.int64)


# Rows per row group at most, as the store's writer (ingest) writes them, and like it in whole
# ranks (a group ends at the first rank's end past GROUP_MIN_ROWS). Counters are wide (their
# null columns are allocated too): 8 M of them are ~4 GB held.
GROUP_ROWS = {"segments": ROW_GROUP_ROWS, "counters": ROW_GROUP_ROWS // 2}


class _Streams:
    """The segments and counters Parquet files, written a row group at a time, each group
    of whole ranks (:func:`rank_groups`) as a store's writer makes them."""

    def __init__(self, out: Path) -> None:
        self.writers = {
            name: writer(out / f"{name}.parquet", STORE_TABLES[name])
            for name in ("segments", "counters")
        }
        self.pending: dict[str, list[pa.Table]] = {"segments": [], "counters": []}
        self.rows = {"segments": 0, "counters": 0}

    def add(self, name: str, t: pa.Table) -> None:
        self.pending[name].append(t)
        self.rows[name] += t.num_rows

    def rank_done(self) -> None:
        """A rank's rows are all added: write the full groups held."""
        for name, parts in self.pending.items():
            if sum(p.num_rows for p in parts) >= GROUP_MIN_ROWS:
                self.flush(name, keep_last=True)

    def flush(self, name: str, keep_last: bool = False) -> None:
        """Write what is held in row groups of whole ranks, but for the last if ``keep_last``
        (more ranks may join it)."""
        if not self.pending[name]:
            return
        t = pa.concat_tables(self.pending[name])
        sizes = rank_groups(t.column("rank").to_numpy(), GROUP_ROWS[name])
        offset = 0
        for n in sizes[:-1] if keep_last else sizes:
            self.writers[name].write_table(t.slice(offset, n), row_group_size=n)
            offset += n
        self.pending[name] = [t.slice(offset)] if offset < t.num_rows else []

    def close(self) -> None:
        for name, w in self.writers.items():
            self.flush(name)
            w.close()


def write_imagenet_store(
    out: Path, files: int, ranks: int, workers: int, epochs: int, seed: int = 7
) -> Shape:
    """Write the run's store into ``out`` (see the module's docstring); return its shape."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / RUN_JSON).unlink(missing_ok=True)
    rng = np.random.default_rng(seed)
    size = rng.integers(70_000, 150_000, files)
    off4, len4 = reads_of(size)
    paths = [
        f"/lustre/imagenet/train/n{c:08d}/n{c:08d}_{k}.JPEG"
        for c in range(files // PER_CLASS + 1)
        for k in range(PER_CLASS)
    ][:files]
    paths += [f"/lustre/run/checkpoints/checkpoint-{e}.pt" for e in range(epochs)]
    path_values = pa.array(paths)
    hosts = [f"node{h:03d}" for h in range(ranks // RANKS_PER_NODE + 1)]
    per_rank = files // ranks
    steps = -(-per_rank // BATCH)
    epoch_len = steps * STEP_COMPUTE * 1.15
    streams = _Streams(out)
    step_rows: dict[str, list] = {k: [] for k in STORE_TABLES["steps"].names}
    # each epoch's sampler: the files of each rank (drawn first, so the store is the same
    # whatever order it is written in)
    perms = [
        rng.permutation(files)[: per_rank * ranks].reshape(ranks, per_rank) for _ in range(epochs)
    ]
    jitter = rng.random((ranks, epochs, per_rank)) * 1e-3
    try:
        for r in range(ranks):  # the store's rows in rank order, as a store is written
            for e in range(epochs):
                f = perms[e][r]
                t_epoch = 10.0 + e * (epoch_len + 5.0)
                pid = 100_000 + (e * ranks + r) * (workers + 1) + 1 + np.arange(per_rank) % workers
                t = t_epoch + np.arange(per_rank) / per_rank * epoch_len + jitter[r, e]
                ts = (t[:, None] + np.arange(READS_PER_FILE)[None, :] * 2e-4).ravel()
                streams.add(
                    "segments",
                    _segments(
                        r,
                        pid.repeat(4),
                        f.repeat(4),
                        off4[f].ravel(),
                        len4[f].ravel(),
                        ts,
                        ts + 1e-4,
                        path_values,
                        hosts,
                        write=False,
                    ),
                )
                streams.add("counters", _counters(r, pid, f, t, size, len4, path_values, hosts))
                _steps(step_rows, r, e, t_epoch, epoch_len, steps)
                if r == 0:  # rank 0's checkpoint after the epoch, in 1 MiB writes
                    _checkpoint(streams, e, t_epoch + epoch_len + 1.0, files, path_values, hosts)
            streams.rank_done()
    finally:
        streams.close()
    pq.write_table(table("steps", step_rows), out / "steps.parquet", compression="zstd")
    pq.write_table(empty_table("app_events"), out / "app_events.parquet")
    meta = run_meta(
        "bench-imagenet",
        ranks,
        {r: hosts[r // RANKS_PER_NODE] for r in range(ranks)},
        pid=100_000,
        traced=False,
        tracer="darshan",
        start=0.0,
        end=20.0 + epochs * (epoch_len + 5.0),
        params={
            "framework": "pytorch",
            "workload": "imagenet",
            "nodes": -(-ranks // RANKS_PER_NODE),
            "ppn": RANKS_PER_NODE,
            "ranks": ranks,
            "loader_workers": workers,
            "batch_size": BATCH,
            "steps": 0,
            "rep": 0,
        },
    )
    meta.write(out / RUN_JSON)  # last: the store is complete
    return Shape(streams.rows["segments"], streams.rows["counters"], files, ranks, workers, epochs)


def _checkpoint(streams: _Streams, epoch: int, t: float, files: int, paths, hosts) -> None:
    n = CKPT // (1 << 20)
    ck = np.arange(n)
    t0 = t + ck * 1e-3
    streams.add(
        "segments",
        _segments(
            0,
            np.full(n, 99_999),
            np.full(n, files + epoch),
            ck << 20,
            np.full(n, 1 << 20),
            t0,
            t0 + 8e-4,
            paths,
            hosts,
            write=True,
        ),
    )


def _segments(rank, pid, file, offset, length, start, end, paths, hosts, write) -> pa.Table:
    n = len(pid)
    return table(
        "segments",
        {
            "rank": pa.array(np.full(n, rank), pa.int32()),
            "host": dictionary(np.full(n, rank // RANKS_PER_NODE, np.int32), hosts),
            "pid": pa.array(pid, pa.int64()),
            "path": pa.DictionaryArray.from_arrays(pa.array(file, pa.int32()), paths),
            "module": dictionary(np.zeros(n, np.int32), ["POSIX"]),
            "op": dictionary(np.full(n, int(write), np.int32), ["read", "write"]),
            "offset": pa.array(offset, pa.int64()),
            "length": pa.array(length, pa.int64()),
            "start": pa.array(start),
            "end": pa.array(end),
        },
    )


def _counters(rank, pid, file, t, size, len4, paths, hosts) -> pa.Table:
    n = len(pid)
    bins = darshan_size_bin(len4[file])
    cols = {
        "rank": pa.array(np.full(n, rank), pa.int32()),
        "host": dictionary(np.full(n, rank // RANKS_PER_NODE, np.int32), hosts),
        "pid": pa.array(pid, pa.int64()),
        "path": pa.DictionaryArray.from_arrays(pa.array(file, pa.int32()), paths),
        "module": dictionary(np.zeros(n, np.int32), ["POSIX"]),
        "opens": pa.array(np.ones(n, np.int64)),
        "reads": pa.array(np.full(n, READS_PER_FILE, np.int64)),
        "bytes_read": pa.array(size[file]),
        "max_byte_read": pa.array(size[file] - 1),
        "read_time": pa.array(np.full(n, 4e-4)),
        "meta_time": pa.array(np.full(n, 5e-5)),
        "open_start": pa.array(t),
        "close_end": pa.array(t + 1e-3),
    }
    for b, name in enumerate(SIZE_BINS):
        cols[f"size_read_{name}"] = pa.array((bins == b).sum(axis=1).astype(np.int64))
    return table("counters", cols)


def _steps(
    rows: dict[str, list], rank: int, epoch: int, t_epoch: float, epoch_len: float, steps: int
) -> None:
    """The manifest's steps of one rank's epoch: the epoch (step -1), then every step."""
    st = t_epoch + 0.5 + np.arange(steps) * STEP_COMPUTE * 1.15
    for k, v in (("rank", rank), ("epoch", epoch), ("samples", BATCH)):
        rows[k] += [v] * (steps + 1)
    rows["step"] += [-1, *range(steps)]
    rows["start"] += [t_epoch, *st.tolist()]
    rows["end"] += [t_epoch + epoch_len + 0.5, *(st + STEP_COMPUTE).tolist()]
    rows["wait_start"] += [None, *(st - 0.15 * STEP_COMPUTE).tolist()]
    rows["wait_end"] += [None, *st.tolist()]


CLOCK = 1_700_000_000.0  # the logs' epoch seconds at the run's time 0
SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])


def write_imagenet_logs(
    out: Path, files: int, ranks: int, workers: int, epochs: int, seed: int = 7
) -> Shape:
    """The run of :func:`write_imagenet_store` as the workflow's run directory: ``manifest.json``
    (steps, ranks), ``ranks/rank-R.json`` and ``traces/rank-R/*.darshan``: a log per loader
    worker and epoch (forked by its rank: the rank's pid is the log's job id), each file's
    four reads as DXT segments and a POSIX record; rank 0's own log holds the checkpoint
    writes. Returns the shape written."""
    from iosweep.trace.darshan.write import DxtFile, write_darshan_log

    out = Path(out)
    rng = np.random.default_rng(seed)
    size = rng.integers(70_000, 150_000, files)
    off4, len4 = reads_of(size)
    per_rank = files // ranks
    steps = -(-per_rank // BATCH)
    epoch_len = steps * STEP_COMPUTE * 1.15
    host = [f"node{r // RANKS_PER_NODE:03d}" for r in range(ranks)]
    rank_pid = [50_000 + r for r in range(ranks)]
    step_rows: dict[str, list] = {k: [] for k in STORE_TABLES["steps"].names}
    segments = records = 0
    for e in range(epochs):
        perm = rng.permutation(files)[: per_rank * ranks].reshape(ranks, per_rank)
        t_epoch = 10.0 + e * (epoch_len + 5.0)
        for r in range(ranks):
            t = t_epoch + np.arange(per_rank) / per_rank * epoch_len + rng.random(per_rank) * 1e-3
            for w in range(workers):
                pid = 100_000 + (e * ranks + r) * (workers + 1) + 1 + w
                mine = np.arange(w, per_rank, workers)
                dxt = []
                for k in mine.tolist():
                    f = perm[r, k]
                    seg = np.empty(READS_PER_FILE, SEGMENT)
                    seg["offset"], seg["length"] = off4[f], len4[f]
                    seg["start"] = t[k] - t_epoch + np.arange(READS_PER_FILE) * 2e-4
                    seg["end"] = seg["start"] + 1e-4
                    dxt.append(DxtFile(_jpeg(f), seg, rank=0, host=host[r]))
                log = (
                    out / "traces" / f"rank-{r}" / f"root_python_id{rank_pid[r]}-{pid}_{e}.darshan"
                )
                log.parent.mkdir(parents=True, exist_ok=True)
                write_darshan_log(
                    log,
                    dxt,
                    start=CLOCK + t_epoch,
                    end=CLOCK + t_epoch + epoch_len,
                    exe="python train_resnet50.py",
                    jobid=rank_pid[r],
                    metadata={"fork_parent": str(rank_pid[r])},
                )
                segments += READS_PER_FILE * len(mine)
                records += len(mine)
            _steps(step_rows, r, e, t_epoch, epoch_len, steps)
    segments += _rank_logs(out, epochs, epoch_len, rank_pid, host)
    records += ranks + epochs  # each rank's config file, rank 0's checkpoints
    _run_files(out, step_rows, ranks, rank_pid, host, workers, epochs, epoch_len)
    return Shape(segments, records, files, ranks, workers, epochs)


def _jpeg(f: int) -> str:
    c, k = divmod(int(f), PER_CLASS)
    return f"/lustre/imagenet/train/n{c:08d}/n{c:08d}_{k}.JPEG"


def _rank_logs(out: Path, epochs: int, epoch_len: float, pids: list[int], hosts: list[str]) -> int:
    """Each rank's own log (Darshan writes one per process): every rank reads its config file
    (one 2 KiB read); rank 0 writes a checkpoint after every epoch in 1 MiB writes. Returns the
    segments written."""
    from iosweep.trace.darshan.write import DxtFile, write_darshan_log

    n = CKPT // (1 << 20)
    end = CLOCK + 20.0 + epochs * (epoch_len + 5.0)
    config = np.array([(0, 2048, 1.0, 1.0001)], SEGMENT)
    for r, (pid, host) in enumerate(zip(pids, hosts, strict=True)):
        dxt = [DxtFile("/lustre/run/config.yaml", config, host=host)]
        for e in range(epochs if r == 0 else 0):
            seg = np.empty(n, SEGMENT)
            seg["offset"], seg["length"] = np.arange(n) << 20, 1 << 20
            seg["start"] = 10.0 + e * (epoch_len + 5.0) + epoch_len + 1.0 + np.arange(n) * 1e-3
            seg["end"] = seg["start"] + 8e-4
            path = f"/lustre/run/checkpoints/checkpoint-{e}.pt"
            dxt.append(DxtFile(path, seg, writes=n, host=host))
        log = out / "traces" / f"rank-{r}" / f"root_python_id{pid}-{pid}_main.darshan"
        log.parent.mkdir(parents=True, exist_ok=True)
        write_darshan_log(log, dxt, start=CLOCK, end=end, exe="python train_resnet50.py", jobid=pid)
    return n * epochs + len(pids)


def _run_files(
    out: Path,
    step_rows: dict[str, list],
    ranks: int,
    rank_pid: list[int],
    host: list[str],
    workers: int,
    epochs: int,
    epoch_len: float,
) -> None:
    """The run's manifest (steps on the logs' clock) and rank files, as the workflow writes."""
    infos = [
        {
            "rank": r,
            "local_rank": r % RANKS_PER_NODE,
            "size": ranks,
            "pid": rank_pid[r],
            "host": host[r],
        }
        for r in range(ranks)
    ]
    (out / "ranks").mkdir(parents=True, exist_ok=True)
    for info in infos:
        (out / "ranks" / f"rank-{info['rank']}.json").write_text(json.dumps(info))
    n = len(step_rows["rank"])
    steps = [{k: step_rows[k][i] for k in step_rows} for i in range(n)]
    for st in steps:
        for k in ("start", "end", "wait_start", "wait_end"):
            if st[k] is not None:
                st[k] += CLOCK
    params = {
        "framework": "pytorch",
        "workload": "imagenet",
        "tracer": "darshan",
        "nodes": -(-ranks // RANKS_PER_NODE),
        "ppn": RANKS_PER_NODE,
        "ranks": ranks,
        "loader_workers": workers,
        "batch_size": BATCH,
    }
    manifest = {
        "run_id": "bench-imagenet",
        "params": params,
        "status": "ok",
        "start_time": CLOCK,
        "end_time": CLOCK + 20.0 + epochs * (epoch_len + 5.0),
        "ranks": infos,
        "steps": steps,
    }
    (out / "manifest.json").write_text(json.dumps(manifest))  # last: the run is complete
