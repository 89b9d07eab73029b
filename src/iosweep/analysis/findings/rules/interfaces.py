"""Rules on the interfaces the job uses: MPI-IO (collective, blocking, its overhead above
POSIX, whether it is used at all) and STDIO."""

from __future__ import annotations

from typing import Any

from iosweep.analysis.findings.rules.base import (
    Context,
    Outcome,
    found,
    make_insight,
    not_applicable,
    not_checked,
    passed,
    when_no_io,
)
from iosweep.units import human_bytes


def _mpiio(c: Context, op: str) -> dict[str, Any]:
    return (c.summary.get("mpiio") or {}).get(op) or {}


def mpiio_use(c: Context) -> list[Outcome]:
    """An MPI job whose ranks write shared files through POSIX alone (Drishti's M01 says so
    of any job without MPI-IO; a training job, a single process, or ranks sharing only the
    input they read are not such a job)."""
    cid, title = "mpiio_use", "Shared files through MPI-IO"
    if none := when_no_io(c, cid, title):
        return none
    if c.summary.get("mpiio"):
        n = sum(int(_mpiio(c, d).get("ops") or 0) for d in ("read", "write"))
        return [
            passed(
                cid,
                title,
                f"the job uses MPI-IO ({n:,} reads and writes)",
                {"mpiio_ops": (n, "count")},
            )
        ]
    if c.training_job:
        return [
            not_applicable(
                cid,
                title,
                "a training job: its data loader reads whole "
                "samples; MPI-IO's collective calls do not fit it",
            )
        ]
    if c.who != "rank" or c.n_ranks < 2:
        return [
            not_applicable(
                cid,
                title,
                f"one {c.who}, or {c.whos} of no MPI job: MPI-IO needs an MPI communicator",
            )
        ]
    f = c.files
    shared = f[(f["n_writers"] >= 2) & (f["bytes_written"] > 0)] if len(f) else f
    moved = int(shared["bytes_written"].sum()) if len(shared) else 0
    floor = c.settings.imbalance_min_bytes
    numbers = {
        "shared_files": (len(shared), "count"),
        "bytes": (moved, "bytes"),
        "threshold_bytes": (floor, "bytes"),
    }
    if moved < floor:
        return [
            passed(
                cid,
                title,
                f"no MPI-IO, and no file written by several ranks with "
                f"{human_bytes(floor)} or more ({len(shared)} such files, "
                f"{human_bytes(moved)}); shared input read through POSIX needs none",
                numbers,
            )
        ]
    ins = make_insight(
        "mpiio_unused",
        "info",
        "Shared files written without MPI-IO",
        f"{len(shared):,} files are written by several ranks ({human_bytes(moved)}) through "
        f"{c.layers} alone: the job does not use MPI-IO",
        numbers,
        f"Several ranks writing one file through {c.layers} contend for its locks; MPI-IO "
        "(directly, or under HDF5 / PnetCDF) lets collective writes merge the ranks' "
        "requests and align them to the file system.",
    )
    return [found(cid, title, ins)]


def mpiio_independent(c: Context) -> list[Outcome]:
    """Independent MPI-IO where collective calls would let MPI-IO merge the ranks' requests
    (Drishti: more than half of a direction's MPI-IO calls, and more than 1000)."""
    out: list[Outcome] = []
    s = c.settings
    for name in ("read", "write"):
        cid, title = f"mpiio_independent.{name}", f"Collective MPI-IO {name}s"
        d = _mpiio(c, name)
        ops, indep = int(d.get("ops") or 0), int(d.get("independent") or 0)
        if not ops:
            out.append(not_applicable(cid, title, f"no MPI-IO {name}s"))
            continue
        share = indep / ops
        numbers = {
            "op": (name, "text"),
            "independent": (indep, "count"),
            "ops": (ops, "count"),
            "share": (share, "share"),
            "threshold_share": (s.mpiio_independent_share, "share"),
        }
        measured = f"{indep:,} of {ops:,} MPI-IO {name}s ({share:.1%}) are independent calls"
        if share <= s.mpiio_independent_share:
            out.append(
                passed(cid, title, f"{measured}: at most {s.mpiio_independent_share:.0%}", numbers)
            )
        elif indep <= s.mpiio_independent_min_count:
            out.append(
                not_applicable(
                    cid,
                    title,
                    f"{measured}: too few to matter (floor: more "
                    f"than {s.mpiio_independent_min_count:,})",
                    numbers,
                )
            )
        else:
            ins = make_insight(
                "mpiio_independent",
                "warn",
                f"Independent MPI-IO {name}s",
                measured,
                numbers,
                f"Use collective {name}s (MPI_File_{name}_all, MPI_File_{name}_at_all) so that "
                "MPI-IO can merge the ranks' requests, with one aggregator per compute node "
                "(the cb_nodes hint).",
            )
            out.append(found(cid, title, ins))
    return out


def mpiio_nonblocking(c: Context) -> list[Outcome]:
    """Blocking MPI-IO where non-blocking calls would help: only where a rank's blocking
    calls of a direction take more than io_time_share of the run, and at least
    mpiio_overhead_min_s, so that overlapping them with computation could win time back
    (Drishti's M06/M07 say so of any blocking call)."""
    out: list[Outcome] = []
    s = c.settings
    run = float((c.summary.get("headline") or {}).get("run_time") or 0.0)
    for name in ("read", "write"):
        cid, title = f"mpiio_nonblocking.{name}", f"MPI-IO {name}s overlapped with computation"
        d = _mpiio(c, name)
        ops, nb = int(d.get("ops") or 0), int(d.get("nonblocking") or 0)
        if not ops:
            out.append(not_applicable(cid, title, f"no MPI-IO {name}s"))
            continue
        mean = float((d.get("time") or {}).get("mean") or 0.0)
        share = mean / run if run > 0 else None
        numbers = {
            "op": (name, "text"),
            "nonblocking": (nb, "count"),
            "ops": (ops, "count"),
            "time_mean": (mean, "s"),
            "share_of_run": (share, "share"),
            "threshold_share": (s.io_time_share, "share"),
            "floor": (s.mpiio_overhead_min_s, "s"),
        }
        measured = f"{nb:,} of {ops:,} MPI-IO {name}s are non-blocking"
        if nb:
            out.append(passed(cid, title, f"{measured}: the job overlaps some", numbers))
        elif share is None:
            out.append(not_checked(cid, title, f"{measured}; the run's length is unknown"))
        elif share <= s.io_time_share:
            out.append(
                passed(
                    cid,
                    title,
                    f"{measured}, but a rank spends {share:.1%} of the "
                    f"run in them (at most {s.io_time_share:.0%}): overlapping them "
                    "would win little",
                    numbers,
                )
            )
        elif mean < s.mpiio_overhead_min_s:
            out.append(
                not_applicable(
                    cid,
                    title,
                    f"{measured}; a rank spends {share:.1%} of "
                    f"the run in them, but {mean:.3g} s: too little to matter "
                    f"(floor: {s.mpiio_overhead_min_s} s)",
                    numbers,
                )
            )
        else:
            ins = make_insight(
                "mpiio_blocking",
                "warn",
                f"Blocking MPI-IO {name}s take much of the run",
                f"{measured}, and a rank spends {mean:.2f} s in them on average, {share:.0%} of "
                "the run",
                numbers,
                f"Overlap the {name}s with computation: MPI_File_i{name}(_all) and a wait before "
                "the data is needed (or written again), or an asynchronous I/O library "
                "(HDF5's async VOL, ADIOS2).",
            )
            out.append(found(cid, title, ins))
    return out


def mpiio_overhead(c: Context) -> list[Outcome]:
    """Time in MPI-IO calls that the POSIX calls under them do not account for: the ranks
    wait inside MPI-IO (for each other, in two-phase exchanges, on locks), not on storage.
    mpi-io-test's writes: 5.37 s a rank in MPI-IO over 0.03 s of POSIX writes."""
    out: list[Outcome] = []
    s = c.settings
    for name in ("read", "write"):
        cid, title = f"mpiio_overhead.{name}", f"MPI-IO {name} time spent in the file system"
        d = _mpiio(c, name)
        t, gap = d.get("time"), d.get("gap_mean")
        if not int(d.get("ops") or 0):
            out.append(not_applicable(cid, title, f"no MPI-IO {name}s"))
            continue
        if not t or gap is None:
            out.append(
                not_applicable(
                    cid,
                    title,
                    f"the MPI-IO {name}s' times or the POSIX calls under them are unknown",
                )
            )
            continue
        numbers = {
            "op": (name, "text"),
            "mpiio_time_mean": (t["mean"], "s"),
            "mpiio_time_max": (t["max"], "s"),
            "posix_time_mean": (t["mean"] - gap, "s"),
            "gap_mean": (gap, "s"),
            "threshold_share": (s.mpiio_overhead_share, "share"),
        }
        measured = (
            f"a rank spends {t['mean']:.2f} s in MPI-IO {name}s on average and "
            f"{t['mean'] - gap:.2f} s in the POSIX {name}s under them"
        )
        if gap < s.mpiio_overhead_min_s:
            out.append(
                passed(cid, title, f"{measured}: a gap under {s.mpiio_overhead_min_s} s", numbers)
            )
        elif gap <= s.mpiio_overhead_share * t["mean"]:
            out.append(
                passed(
                    cid,
                    title,
                    f"{measured}: at most {s.mpiio_overhead_share:.0%} of the MPI-IO time",
                    numbers,
                )
            )
        else:
            out.append(found(cid, title, _overhead_insight(name, t, gap, numbers)))
    return out


def _overhead_insight(name: str, t: dict, gap: float, numbers: dict):
    posix = t["mean"] - gap
    return make_insight(
        "mpiio_overhead",
        "warn",
        f"MPI-IO {name}s wait above the file system",
        f"A rank spends {t['mean']:.2f} s in MPI-IO {name}s on average (min {t['min']:.2f} s, "
        f"max {t['max']:.2f} s) and {posix:.2f} s in the POSIX {name}s under them: "
        f"{gap / t['mean']:.0%} of the MPI-IO time is not spent in the file system",
        numbers,
        "The ranks wait inside MPI-IO: for the slowest rank to reach a collective call "
        "(balance the work before it), in two-phase collective buffering (the cb_nodes "
        "and cb_buffer_size hints), or on file locks (romio_ds_read/romio_ds_write). "
        "Time the ranks' arrival at the call to tell which.",
    )


def stdio_share(c: Context) -> list[Outcome]:
    """STDIO (fread/fwrite, buffered in user space) moving a large share of the bytes
    (Drishti's S01: 10%)."""
    cid, title = "stdio_share", "Bytes through STDIO"
    if none := when_no_io(c, cid, title):
        return none
    s = c.settings
    layers = {x["module"]: x for x in c.summary.get("layers") or [] if x.get("analysed")}
    total = sum(x["bytes_read"] + x["bytes_written"] for x in layers.values())
    st = layers.get("STDIO")
    moved = (st["bytes_read"] + st["bytes_written"]) if st else 0
    share = moved / total if total else 0.0
    numbers = {
        "stdio_bytes": (moved, "bytes"),
        "share": (share, "share"),
        "threshold_share": (s.stdio_share, "share"),
    }
    if not total:
        return [not_applicable(cid, title, "no bytes moved on the analysed layers")]
    if share <= s.stdio_share:
        where = "" if st else " (no STDIO on the analysed paths; terminal streams are left out)"
        return [
            passed(
                cid,
                title,
                f"STDIO moves {human_bytes(moved)}, {share:.1%} of the "
                f"analysed bytes (at most {s.stdio_share:.0%}){where}",
                numbers,
            )
        ]
    ins = make_insight(
        "stdio_share",
        "warn" if moved >= s.imbalance_min_bytes else "info",
        "Much of the I/O goes through STDIO",
        f"STDIO (fopen/fread/fwrite) moves {human_bytes(moved)}, {share:.1%} of the analysed bytes",
        numbers,
        "STDIO buffers in user space and cannot be tuned for a parallel file system: move the "
        "bulk I/O to POSIX reads and writes of large blocks, MPI-IO, or a high-level library.",
    )
    return [found(cid, title, ins)]
