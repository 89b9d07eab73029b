"""Synthetic trace stores for the tests, built with :mod:`iosweep.testing.stores` (whose
columns come from the data model). Rows are written the way the tests state their facts:
segments as tuples, counters as mappings, steps as tuples."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from iosweep.testing.stores import build_store, run_meta, table
from iosweep.trace.schema import STORE_TABLES, RankInfo, RunMeta
from iosweep.trace.store import write_store

SEGMENT_FIELDS = ("rank", "path", "op", "offset", "length", "start", "end", "pid", "host", "module")


def seg_table(rows: list[tuple]) -> pa.Table:
    """rows: (rank, path, op, offset, length, start, end[, pid[, host[, module]]]); the pid
    defaults to 1000 + rank, the host to n0, the module to POSIX."""
    out = []
    for r in rows:
        rank, *_ = r
        full = (*r, *(1000 + rank, "n0", "POSIX")[len(r) - 7 :])
        out.append(dict(zip(SEGMENT_FIELDS, full, strict=True)))
    return table("segments", out)


def ctr_table(rows: list[dict]) -> pa.Table:
    """rows: dicts with rank, path and any counters column; the others 0 (times 0.0, open and
    close times null, a reduced shared record's and MPI-IO's columns null), pid 1000 + rank,
    host n0, module POSIX."""
    full = [
        {"host": "n0", "module": "POSIX", **r, "pid": r.get("pid") or 1000 + r["rank"]}
        for r in rows
    ]
    zeros = {
        f.name: (0.0 if pa.types.is_floating(f.type) else 0)
        for f in table("counters", []).schema
        if (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
        and f.name not in ("rank", "pid", "open_start", "close_end", "file_id")
        and not f.name.startswith(("fastest_", "slowest_", "variance_", "collective_"))
    }
    return table("counters", full, fill=zeros)


EVENT_FIELDS = ("rank", "cat", "name", "start", "end", "path")


def events_table(rows: list[tuple | dict]) -> pa.Table:
    """rows: (rank, cat, name, start, end[, path]) of the app events (DFTracer's calls that
    are not reads or writes, and annotations), or mappings that name any column (pid, step,
    epoch ...); what a row leaves out is null."""
    return table(
        "app_events",
        [r if isinstance(r, dict) else dict(zip(EVENT_FIELDS, r, strict=False)) for r in rows],
    )


def steps_table(rows: list[tuple]) -> pa.Table:
    """rows: (rank, epoch, step, start, end)."""
    return table(
        "steps",
        [dict(zip(("rank", "epoch", "step", "start", "end"), r, strict=True)) for r in rows],
    )


def make_store(
    path: Path,
    segs: list[tuple] | None = None,
    n_ranks: int = 1,
    counters: list[dict] | None = None,
    steps: list[tuple] | None = None,
    hosts: dict[int, str] | None = None,
    processes: bool = True,
    app_events: list[tuple | dict] | None = None,
    **meta_kw,
) -> Path:
    """A store of ``n_ranks`` ranks (pids 1000 + r) over [0, 100] s, traced by Darshan."""
    meta_kw.setdefault("start", 0.0)
    meta_kw.setdefault("end", 100.0)
    meta_kw.setdefault("tracer", "darshan")
    meta = run_meta(
        meta_kw.pop("run_id", path.name), n_ranks, hosts, traced=bool(processes), **meta_kw
    )
    return build_store(
        path,
        meta,
        segments=seg_table(segs) if segs else None,
        counters=ctr_table(counters) if counters else None,
        steps=steps_table(steps) if steps else None,
        app_events=events_table(app_events) if app_events else None,
    )


def synthetic_store(
    path: Path,
    n: int,
    paths: list[str],
    host: str = "n0",
    run_id: str = "framework~pytorch/nodes~1/ppn~4/rep~0",
    steps: pa.Table | None = None,
    checkpoint_writes: bool = True,
    **meta,
) -> Path:
    """A store of ``n`` reads spread over 4 ranks and ``paths``, plus 2 checkpoint writes by rank 0."""
    rng = np.random.default_rng(0)
    ranks = np.arange(n) % 4
    t = np.sort(rng.uniform(0, 100, n))
    f = rng.integers(0, len(paths), n)
    length = 2 ** rng.integers(8, 22, n)
    offset = (rng.integers(0, 1 << 12, n) * 4096).astype(np.int64)
    ck = "/ckpt/checkpoint-0.pt"
    seg = table(
        "segments",
        {
            "rank": np.concatenate([ranks, [0, 0]]),
            "host": [host] * (n + 2),
            "path": [paths[i] for i in f] + [ck, ck],
            "module": ["POSIX"] * (n + 2),
            "op": ["read"] * n + ["write", "write"],
            "offset": np.concatenate([offset, [0, 1 << 20]]),
            "length": np.concatenate([length, [1 << 20, 4096]]),
            "start": np.concatenate([t, [50.0, 50.1]]),
            "end": np.concatenate([t + 1e-4, [50.05, 50.11]]),
        },
    )
    m = RunMeta(
        run_id=run_id,
        clock_zero=1.7e9,
        tracer="darshan",
        start=0.0,
        end=101.0,
        params={
            "framework": "pytorch",
            "tracer": "darshan",
            "nodes": 1,
            "ppn": 4,
            "ranks": 4,
            "rep": 0,
        },
        ranks=[RankInfo(r, r, 4, 100 + r, host) for r in range(4)],
        **meta,
    )
    if not checkpoint_writes:  # as DFTracer records a run: torch.save's writes are not seen
        seg = seg.slice(0, n)
    return write_store(path, m, {"segments": seg, "steps": steps})


def pfw_events(path: Path) -> list[dict]:
    """The JSON events of a DFTracer trace (``.pfw.gz``), read line by line here, apart from
    the reader under test: one object a line, the array's brackets and commas dropped."""
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    return [json.loads(s.rstrip(",")) for ln in lines if (s := ln.strip()).startswith("{")]


def one_rank_budget_gb(store: Path) -> float:
    """A budget (GiB) that the store's largest rank fits and no two ranks do: each rank's need
    counted as the analysis plan counts it (rank 0 with the rows tied to no rank), a byte
    over (the GiB figure is a float)."""
    from iosweep.analysis import budget
    from iosweep.analysis.subset import select
    from iosweep.trace.store import open_store

    ranks = [r.rank for r in open_store(store).meta.ranks]
    one = max(
        budget.need_of(store, select(open_store(store), [r], unranked=r == 0)).bytes for r in ranks
    )
    return (one + 1) / budget.GIB


def store_frames(store: Path) -> dict[str, pd.DataFrame]:
    """A store's tables as frames to compare, its dictionary columns as plain values (their
    codes depend on the row group)."""
    out = {}
    for name in STORE_TABLES:
        df = pq.read_table(store / f"{name}.parquet").to_pandas()
        for c in df.columns:
            if isinstance(df[c].dtype, pd.CategoricalDtype):
                df[c] = df[c].astype(object)
        out[name] = df
    return out
