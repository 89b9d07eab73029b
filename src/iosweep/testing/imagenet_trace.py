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
that could not hold it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from iosweep.testing.stores import dictionary, run_meta, table
from iosweep.trace.schema import SIZE_BINS, TABLES, darshan_size_bin, empty_table
from iosweep.trace.store import ROW_GROUP_ROWS, RUN_JSON, rank_groups

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
# ranks: each row group repeats the path dictionary (72 MB at 1.28 M files), so smaller groups
# would make reading dearer than an ingested store's. Counters are wide (their null columns are
# allocated too): 8 M of them are ~4 GB held.
GROUP_ROWS = {"segments": ROW_GROUP_ROWS, "counters": ROW_GROUP_ROWS // 2}


class _Streams:
    """The segments and counters Parquet files, written a row group at a time, each group
    of whole ranks (:func:`rank_groups`) as a store's writer makes them."""

    def __init__(self, out: Path) -> None:
        self.writers = {
            name: pq.ParquetWriter(out / f"{name}.parquet", TABLES[name], compression="zstd")
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
            if sum(p.num_rows for p in parts) >= GROUP_ROWS[name]:
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
    step_rows: dict[str, list] = {k: [] for k in TABLES["steps"].names}
    # each epoch's sampler: the files of each rank (drawn first, so the store is the same
    # whatever order it is written in)
    perms = [rng.permutation(files)[: per_rank * ranks].reshape(ranks, per_rank) for _ in
             range(epochs)]  # fmt: skip
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
                    _segments(r, pid.repeat(4), f.repeat(4), off4[f].ravel(), len4[f].ravel(),
                              ts, ts + 1e-4, path_values, hosts, write=False),
                )  # fmt: skip
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
        "bench-imagenet", ranks, {r: hosts[r // RANKS_PER_NODE] for r in range(ranks)},
        pid=100_000, traced=False, tracer="darshan", start=0.0,
        end=20.0 + epochs * (epoch_len + 5.0),
        params={"framework": "pytorch", "workload": "imagenet", "nodes": -(-ranks // RANKS_PER_NODE),
                "ppn": RANKS_PER_NODE, "ranks": ranks, "loader_workers": workers,
                "batch_size": BATCH, "steps": 0, "rep": 0},
    )  # fmt: skip
    meta.write(out / RUN_JSON)  # last: the store is complete
    return Shape(streams.rows["segments"], streams.rows["counters"], files, ranks, workers, epochs)


def _checkpoint(streams: _Streams, epoch: int, t: float, files: int, paths, hosts) -> None:
    n = CKPT // (1 << 20)
    ck = np.arange(n)
    t0 = t + ck * 1e-3
    streams.add(
        "segments",
        _segments(0, np.full(n, 99_999), np.full(n, files + epoch), ck << 20, np.full(n, 1 << 20),
                  t0, t0 + 8e-4, paths, hosts, write=True),
    )  # fmt: skip


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


def _steps(rows: dict[str, list], rank: int, epoch: int, t_epoch: float, epoch_len: float,
           steps: int) -> None:  # fmt: skip
    """The manifest's steps of one rank's epoch: the epoch (step -1), then every step."""
    st = t_epoch + 0.5 + np.arange(steps) * STEP_COMPUTE * 1.15
    for k, v in (("rank", rank), ("epoch", epoch), ("samples", BATCH)):
        rows[k] += [v] * (steps + 1)
    rows["step"] += [-1, *range(steps)]
    rows["start"] += [t_epoch, *st.tolist()]
    rows["end"] += [t_epoch + epoch_len + 0.5, *(st + STEP_COMPUTE).tolist()]
    rows["wait_start"] += [None, *(st - 0.15 * STEP_COMPUTE).tolist()]
    rows["wait_end"] += [None, *st.tolist()]
