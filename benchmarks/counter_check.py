"""iosweep's statements on a Darshan log checked against the log's own counters, read by
PyDarshan (an independent reader: libdarshan-util through PyDarshan's own code, not
iosweep's): for each statement that rests on a counter, the figure PyDarshan reads and
whether the statement holds. Used by drishti_comparison.py; each check names the issue-50
statement it guards (a statement found false on a real log).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import darshan
import numpy as np
import pandas as pd

FILE_LAYERS = ("POSIX", "STDIO")
MiB = 1 << 20


@dataclass
class Checked:
    statement: str  # which statement (a check id and what it claims)
    holds: bool
    why: str  # the counters' figure


@dataclass
class Counters:
    """The log's file-layer records as PyDarshan reads them (one frame per module)."""

    records: dict[str, pd.DataFrame]
    run_time: float
    nprocs: int
    dxt: bool  # the log holds DXT traces (per-operation extents: no counter check needed)

    @classmethod
    def read(cls, log: Path) -> Counters:
        with darshan.DarshanReport(str(log), read_all=True) as rep:
            recs = {}
            for m in rep.modules:
                if m not in (*FILE_LAYERS, "MPI-IO", "DFS"):
                    continue
                df = rep.records[m].to_df()
                recs[m] = pd.concat(
                    [df["counters"], df["fcounters"].drop(columns=["id", "rank"])], axis=1
                )
            job = rep.metadata["job"]
            dxt = any(m.startswith("DXT") for m in rep.modules)
            return cls(recs, float(job["run_time"]), int(job["nprocs"]), dxt)

    def total(self, what: str, modules=FILE_LAYERS) -> int:
        """A counter summed over the records of ``modules`` (e.g. ``READS``)."""
        out = 0
        for m in modules:
            df = self.records.get(m)
            prefix = "MPIIO" if m == "MPI-IO" else m
            if df is not None and f"{prefix}_{what}" in df:
                out += int(df[f"{prefix}_{what}"].clip(lower=0).sum())
        return out


def _by_id(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in checks}


def check_statements(log: Path, sm: dict[str, Any]) -> list[Checked]:
    """Every statement of ``sm`` (iosweep's summary of ``log``) that rests on a counter."""
    c = Counters.read(log)
    checks = _by_id(sm.get("checks", []))
    out: list[Checked] = []
    out += _directions_exist(c, checks)
    out += _re_reads(c, checks)
    out += _rewrites(c, checks)
    out += _shared_metadata(c, checks)
    out += _layer_named(c, checks)
    out += _run_time(c, sm)
    out += _shares(sm)
    out += _collective_buffering(c, checks)
    return out


def _directions_exist(c: Counters, checks: dict[str, dict]) -> list[Checked]:
    """'no reads' / 'no writes' (small_requests, redundant_*): the counters count none."""
    out = []
    for op, counter in (("read", "READS"), ("write", "WRITES")):
        for cid in (f"small_requests.{op}", f"redundant_{op}s"):
            ch = checks.get(cid)
            if ch and ch["reason"] == f"no {op}s":
                n = c.total(counter)
                out.append(Checked(f"{cid}: no {op}s", n == 0, f"POSIX+STDIO {counter} = {n:,}"))
    return out


def _re_reads(c: Counters, checks: dict[str, dict]) -> list[Checked]:
    """redundant_reads passed: no shared record read beyond its extent by >= 1 MiB (the
    bytes beyond the furthest byte were read more than once: e3sm's i_case_1344p.nc)."""
    ch = checks.get("redundant_reads")
    if not ch or ch["outcome"] != "passed":
        return []
    worst = 0
    for m in FILE_LAYERS:
        df = c.records.get(m)
        if df is None or f"{m}_MAX_BYTE_READ" not in df:
            continue
        shared = df[df["rank"] < 0] if "rank" in df else df.iloc[0:0]
        beyond = shared[f"{m}_BYTES_READ"] - (shared[f"{m}_MAX_BYTE_READ"] + 1)
        worst = max(worst, int(beyond.max()) if len(beyond) else 0)
    return [
        Checked(
            "redundant_reads passed",
            worst < MiB,
            f"most bytes a shared record read beyond its extent: {worst:,}",
        )
    ]


def _rewrites(c: Counters, checks: dict[str, dict]) -> list[Checked]:
    """redundant_writes found from counters: some record's bytes written exceed its extent
    (DFS keeps no extent: snyder_ior-DFS's 'rewrites' were invented)."""
    ch = checks.get("redundant_writes")
    if not ch or ch["outcome"] != "found" or c.dxt:
        return []
    beyond = 0
    for m in FILE_LAYERS:
        df = c.records.get(m)
        if df is not None and f"{m}_MAX_BYTE_WRITTEN" in df:
            excess = df[f"{m}_BYTES_WRITTEN"] - (df[f"{m}_MAX_BYTE_WRITTEN"] + 1)
            beyond = max(beyond, int(excess.max()) if len(df) else 0)
    return [
        Checked("redundant_writes found", beyond > 0, f"most written beyond an extent: {beyond:,}")
    ]


def _shared_metadata(c: Counters, checks: dict[str, dict]) -> list[Checked]:
    """metadata_heavy stating a rank's metadata time as measured: no reduced record holds
    metadata time (a sum over the ranks: skew-autobench's 212.6 s)."""
    ch = checks.get("metadata_heavy")
    if not ch or "the busiest rank spends" not in ch["reason"] or "at least" in ch["reason"]:
        return []
    if c.nprocs < 2:  # (a record of one process's job is that process's own)
        return []
    summed = 0.0
    for m in FILE_LAYERS:
        df = c.records.get(m)
        if df is not None and f"{m}_F_META_TIME" in df:
            summed += float(df.loc[df["rank"] < 0, f"{m}_F_META_TIME"].clip(lower=0).sum())
    return [
        Checked(
            "metadata_heavy: a rank's metadata time as measured",
            summed == 0,
            f"metadata seconds in reduced records: {summed:.3g}",
        )
    ]


def _layer_named(c: Counters, checks: dict[str, dict]) -> list[Checked]:
    """mpiio_use 'through POSIX alone': the shared files were written through POSIX."""
    ch = checks.get("mpiio_use")
    if not ch or ch["outcome"] != "found" or "through POSIX" not in ch["reason"]:
        return []
    n = c.total("BYTES_WRITTEN", ("POSIX",))
    return [Checked("mpiio_use: written through POSIX", n > 0, f"POSIX_BYTES_WRITTEN = {n:,}")]


def _run_time(c: Counters, sm: dict[str, Any]) -> list[Checked]:
    """The run's length: Darshan's own (PyDarshan's run_time), or not known; never shorter
    than a second when Darshan counts one (21 logs said 0 s)."""
    rt = (sm.get("run") or {}).get("run_time")
    holds = rt is None or abs(rt - c.run_time) <= 1.0
    return [Checked("run time", holds, f"iosweep {rt}, PyDarshan run_time {c.run_time}")]


def _shares(sm: dict[str, Any]) -> list[Checked]:
    """Shares of the run or of the I/O: within [0, 1] ('141.4% of the run')."""
    h = sm.get("headline") or {}
    out = []
    for k in ("io_share_max", "small_read_share", "small_write_share", "random_share"):
        v = h.get(k)
        if v is not None:
            out.append(Checked(f"headline {k}", 0 <= v <= 1, f"{v}"))
    return out


def _collective_buffering(c: Counters, checks: dict[str, dict]) -> list[Checked]:
    """imbalance found with stragglers among ranks of a reduced POSIX record whose byte
    variance puts its bytes on a few ranks (skew-autobench: 56 aggregators, 'stragglers:
    ranks [1024]'): not an imbalance when every rank asked MPI-IO for the same bytes."""
    ch = checks.get("imbalance")
    px, mp = c.records.get("POSIX"), c.records.get("MPI-IO")
    if not ch or ch["outcome"] != "found" or px is None or mp is None:
        return []
    red = px[px["rank"] < 0]
    if not len(red) or "POSIX_F_VARIANCE_RANK_BYTES" not in red:
        return []
    n = c.nprocs
    total = (red["POSIX_BYTES_READ"] + red["POSIX_BYTES_WRITTEN"]).to_numpy(np.float64)
    sum_sq = n * (red["POSIX_F_VARIANCE_RANK_BYTES"].to_numpy() + (total / n) ** 2)
    movers = np.divide(total**2, sum_sq, out=np.full(len(red), np.inf), where=sum_sq > 0)
    few = bool((movers < n / 2).any())
    even = float(mp["MPIIO_F_VARIANCE_RANK_BYTES"].max()) == 0.0
    return [
        Checked(
            "imbalance found on a collective-buffering job",
            not (few and even),
            f"POSIX bytes on about {movers.min():.0f} of {n} ranks; MPI-IO byte variance "
            f"{float(mp['MPIIO_F_VARIANCE_RANK_BYTES'].max()):g}",
        )
    ]
