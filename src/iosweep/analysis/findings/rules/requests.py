"""Rules on the requests themselves: their size, order, alignment, and bytes moved twice."""

from __future__ import annotations

from typing import Any

import pandas as pd

from iosweep.analysis.findings.rules.base import (
    Context,
    Outcome,
    files,
    found,
    make_insight,
    not_applicable,
    not_checked,
    passed,
    span,
    when_no_io,
)
from iosweep.analysis.settings import OTHER
from iosweep.units import human_bytes


def small_requests(c: Context) -> list[Outcome]:
    """Small requests (Drishti's: < 1 MiB, > 10% and > 1000 requests), per direction."""
    out: list[Outcome] = []
    for op in ("read", "write"):
        cid, title = f"small_requests.{op}", f"Small {op} requests"
        if none := when_no_io(c, cid, title):
            out += none
            continue
        d = c.summary["sizes"]["by_class"].get("all", {}).get(op)
        done = int(c.files[f"{op}s"].sum()) if f"{op}s" in c.files else 0
        if not d and done:  # (STDIO's counters have no size histogram, and no DXT here)
            why = f"{done:,} {op}s without their sizes: no size histogram and no traced {op}s"
            out.append(not_checked(cid, title, why))
            continue
        if not d:
            out.append(not_applicable(cid, title, c.none_of(f"{op}s")))
            continue
        out.append(_small(c, op, d, cid, title))
    return out


def _small(c: Context, op: str, d: dict[str, Any], cid: str, title: str) -> Outcome:
    s = c.settings
    zero = int(d.get("zero_length") or 0)
    sized = d["ops"] - zero
    small, maybe = int(d["small"]), int(d.get("small_undecided") or 0)
    lo, hi = (small / sized, (small + maybe) / sized) if sized else (0.0, 0.0)
    thr = human_bytes(s.small_request_bytes)
    numbers = {
        "small": (small, "count"),
        "undecided": (maybe, "count"),
        "ops": (sized, "count"),
        "share": (lo, "share"),
        "threshold_share": (s.small_requests_share, "share"),
        "floor": (s.small_requests_min_count, "count"),
    }
    measured = f"{small:,} of {sized:,} {op}s ({lo:.1%}) are smaller than {thr}"
    if hi <= s.small_requests_share:
        return passed(
            cid,
            title,
            measured
            + (f" (at most {small + maybe:,})" if maybe else "")
            + f": not above {s.small_requests_share:.0%}",
            numbers,
        )
    if small + maybe < s.small_requests_min_count:
        return not_applicable(
            cid,
            title,
            f"{measured}: too few to matter (floor: {s.small_requests_min_count:,} requests)",
            numbers,
        )
    if lo <= s.small_requests_share or small < s.small_requests_min_count:
        return not_checked(
            cid,
            title,
            f"{small:,} to {small + maybe:,} of {sized:,} {op}s are smaller than "
            f"{thr}: Darshan's 100K_1M bin holds {maybe:,} requests of 1 MiB or less that "
            "neither DXT nor the four most common sizes (ACCESS1..4) tell apart",
            numbers,
        )
    return found(cid, title, _small_insight(c, op, d, sized, zero))


def _small_insight(c: Context, op: str, d: dict[str, Any], sized: int, zero: int):
    s = c.settings
    classes = [
        (k, v[op]) for k, v in c.summary["sizes"]["by_class"].items() if k != "all" and op in v
    ]
    worst = max(classes, key=lambda kv: kv[1]["small"], default=(None, None))
    where = f"; most go to {worst[0]} files" if worst[0] else ""
    if worst[0] == OTHER:  # (the class of files no rule names: not a kind of file to name)
        where = "; most go to files outside the named classes" if len(classes) > 1 else ""
    return make_insight(
        "small_requests",
        "warn",
        f"Many small {op} requests",
        f"{d['small']:,} of {sized:,} {op} requests ({d['small_share']:.1%}) are smaller than "
        f"{human_bytes(s.small_request_bytes)}"
        + where
        + (f" ({zero:,} zero-byte reads at end of file, not counted)" if zero else ""),
        {
            "op": (op, "text"),
            "small": (d["small"], "count"),
            "ops": (sized, "count"),
            "zero_byte": (zero, "count"),
            "share": (d["small_share"], "share"),
            "threshold_bytes": (s.small_request_bytes, "bytes"),
            "threshold_share": (s.small_requests_share, "share"),
            "median_size": (d.get("median"), "bytes"),
        },
        "Issue fewer, larger requests: read whole samples or shards at once, raise the "
        "reader's buffer size, or pack small samples into larger record files "
        "(TFRecord, WebDataset tar, HDF5)."
        if c.training_job
        else "Issue fewer, larger requests: aggregate them with collective MPI-IO "
        "(collective buffering), align them to the file system's stripe size, or "
        "buffer them in a high-level library (HDF5, PnetCDF).",
        worst[0],
    )


def _random_counts(sp: dict[str, Any]) -> tuple[int, int, str]:
    """(backward ops, ops, source): DXT's segments, else Darshan's counters."""
    if sp.get("ops", 0):
        return int(sp["ops_by_category"].get("random", 0)), int(sp["ops"]), "segments"
    ctr = sp.get("counters") or {}
    ops = sum(int(v["ops"]) for v in ctr.values())
    return sum(int(v["random"]) for v in ctr.values()), ops, "counters"


def random_access(c: Context) -> list[Outcome]:
    """Random access: operations that jump backwards within their file."""
    cid, title = "random_access", "Random access"
    if none := when_no_io(c, cid, title):
        return none
    s = c.settings
    rnd, ops, source = _random_counts(c.summary["spatial"])
    if not ops:
        return [
            not_checked(
                cid, title, "no operation has a known offset (no DXT segments, no POSIX counters)"
            )
        ]
    share = rnd / ops
    numbers = {
        "random": (rnd, "count"),
        "ops": (ops, "count"),
        "share": (share, "share"),
        "threshold_share": (s.random_ops_share, "share"),
    }
    measured = (
        f"{rnd:,} of {ops:,} operations ({share:.1%}) jump backwards in their file ({source})"
    )
    if share <= s.random_ops_share:
        return [passed(cid, title, f"{measured}: not above {s.random_ops_share:.0%}", numbers)]
    if rnd < s.random_ops_min_count:
        return [
            not_applicable(
                cid,
                title,
                f"{measured}: too few to matter (floor: {s.random_ops_min_count:,})",
                numbers,
            )
        ]
    ins = make_insight(
        "random_access",
        "warn",
        "Random access",
        f"{rnd} of {ops} operations ({share:.1%}) jump backwards within their file",
        numbers,
        "Read files sequentially and shuffle in memory (shuffle the order of shards, not "
        "of samples inside a file), or enable read-ahead/prefetching in the data loader."
        if c.training_job
        else "Access each file in increasing offsets (sort the requests, or let collective "
        "MPI-IO reorder them); read-ahead helps only sequential access.",
    )
    return [found(cid, title, ins)]


def misaligned_requests(c: Context) -> list[Outcome]:
    """POSIX requests not aligned to the file system's block (Drishti's P07/P08: > 10%),
    where there are enough of them or the run's I/O time matters.

    Advice of the HPC field, for jobs that choose their offsets (MPI applications): a
    training job reads whole samples where its data loader decides, and its verdict (the
    input pipeline) is where its advice is."""
    out: list[Outcome] = []
    for where, what in (("file", "file offsets"), ("mem", "memory buffers")):
        cid, title = f"misaligned_requests.{where}", f"Requests aligned in {what}"
        if none := when_no_io(c, cid, title):
            out += none
        elif c.training_job:
            out.append(
                not_applicable(
                    cid,
                    title,
                    "a training job's data loader picks its "
                    "offsets and buffers; its verdict says where its time goes",
                )
            )
        elif not c.summary.get("alignment"):
            out.append(not_checked(cid, title, "no POSIX counters (Darshan's *_NOT_ALIGNED)"))
        else:
            out.append(_misaligned(c, where, what, cid, title))
    return out


def _misaligned(c: Context, where: str, what: str, cid: str, title: str) -> Outcome:
    a, s = c.summary["alignment"], c.settings
    n, share = int(a.get(f"{where}_not_aligned") or 0), float(a.get(f"{where}_share") or 0.0)
    block, lustre = a.get("file_alignment"), a.get("lustre")
    numbers = {
        "where": (where, "text"),
        "misaligned": (n, "count"),
        "ops": (a["ops"], "count"),
        "share": (share, "share"),
        "alignment": (block, "bytes"),
        "threshold_share": (s.misaligned_share, "share"),
    }
    measured = f"{n:,} of {a['ops']:,} POSIX requests ({share:.1%}) misaligned in {what}"
    if share <= s.misaligned_share:
        return passed(cid, title, f"{measured}: not above {s.misaligned_share:.0%}", numbers)
    io = c.io_share
    if n < s.misaligned_min_count and not c.io_matters():
        return not_applicable(
            cid,
            title,
            f"{measured}: too few to matter (floor: {s.misaligned_min_count:,} "
            f"requests, or I/O above {s.io_time_share:.0%} of the run; the busiest rank's "
            f"I/O is {io or 0:.1%})",
            numbers,
        )
    unit = f"the file system's {block:,}-byte blocks" if block else "the file system's blocks"
    if lustre and where == "file":
        unit = (
            f"the Lustre stripes ({lustre['stripe_size']:,} bytes, over "
            f"{lustre['stripe_count']} OST{'s' if lustre['stripe_count'] > 1 else ''} "
            f"for most of the {lustre['files']:,} files)"
        )
    ins = make_insight(
        "misaligned_requests",
        "warn",
        f"Requests misaligned in {what}",
        f"{n:,} of {a['ops']:,} POSIX requests ({share:.1%}) have {what} not aligned to {unit}"
        + (
            f"; the busiest rank spends {io:.0%} of the run in I/O"
            if n < s.misaligned_min_count
            else ""
        ),
        numbers,
        "Align requests to the file system's block (on Lustre, the stripe size): offsets and "
        "sizes in whole blocks, buffers from an aligned allocator; MPI-IO collective "
        "buffering aligns its aggregators' requests to the stripes."
        if where == "file"
        else "Allocate I/O buffers aligned to the file system's block "
        "(posix_memalign), as direct I/O needs and page-cache copies prefer.",
    )
    return found(cid, title, ins)


def _repeated_reads(c: Context) -> tuple[pd.DataFrame, pd.Series, int]:
    """Files read by several ranks, the unique bytes of each (module docstring of
    findings: segments' unions, else the extent from the counters), and how many such files
    have no extent known."""
    s = c.settings
    files = c.files
    partitioned = [
        cls
        for cls, v in c.summary["classes"].items()
        if (v.get("per_epoch") or {}).get("shared_in_epoch_share", 1.0) <= s.disjoint_overlap_max
    ]
    files = files[~files["class"].isin(partitioned)]
    many = files["n_readers"] >= max(s.redundant_read_min_ranks, 2)
    traced = files["read_union"] > 0
    # counters only: a file's bytes read beyond its extent were read more than once (at
    # least: Drishti's P09), as whole-file reads by several ranks are; no extent, no figure.
    # (One rank reading its file again is an epoch's re-read, not this rule's: left out.)
    counted = many & ~traced & (files["size"] > 0)
    counted &= (files["whole_readers"] >= 2) | (files["bytes_read"] > files["size"])
    red = files[(many & traced) | counted]
    unsized = int((many & ~traced & (files["size"] <= 0)).sum())
    # bytes of unknown offsets are not known to repeat
    unique = (red["read_union"] + red["read_unplaced"]).where(red["read_union"] > 0, red["size"])
    return red, unique, unsized


def redundant_reads(c: Context) -> list[Outcome]:
    """The same bytes read by many ranks."""
    cid, title = "redundant_reads", "Bytes read more than once"
    if none := when_no_io(c, cid, title):
        return none
    s = c.settings
    if not len(c.files) or not int(c.files["bytes_read"].sum()):
        return [not_applicable(cid, title, c.none_of("reads"))]
    red, uni, unsized = _repeated_reads(c)
    redundant = int((red["bytes_read"] - uni).clip(lower=0).sum())
    numbers = {
        "files": (len(red), "count"),
        "redundant_bytes": (redundant, "bytes"),
        "threshold_bytes": (s.redundant_read_min_bytes, "bytes"),
    }
    if not len(red) and unsized:
        return [
            not_checked(
                cid,
                title,
                f"{files(unsized)} read by several {c.whos} with no extent known "
                f"(no DXT trace, and no highest byte read among {c.layers}'s counters): "
                "bytes read again cannot be told",
                numbers,
            )
        ]
    if not len(red):
        return [
            passed(
                cid,
                title,
                f"no file is read by {max(s.redundant_read_min_ranks, 2)} "
                f"{c.whos} or more (that a split of the data would not explain)",
                numbers,
            )
        ]
    if redundant < s.redundant_read_min_bytes:
        return [
            passed(
                cid,
                title,
                f"{human_bytes(redundant)} read again across {files(len(red))} "
                f"read by several {c.whos}: under "
                f"{human_bytes(s.redundant_read_min_bytes)}",
                numbers,
            )
        ]
    once = sorted(
        {n["read_once_per"] for n in c.summary.get("nodes", []) if n.get("read_once_per")}
    )
    counted = red["read_union"] <= 0
    ins = make_insight(
        "redundant_reads",
        "warn",
        "The same bytes are read by many ranks",
        f"{files(len(red))} {'is' if len(red) == 1 else 'are'} read by "
        f"{span(red['n_readers'])} {c.whos} each; "
        f"{'at least ' if counted.any() else ''}{human_bytes(redundant)} of the "
        f"{human_bytes(int(red['bytes_read'].sum()))} read from them are repeats of bytes "
        "another rank (or read) already moved"
        + (
            f" (of {files(int(counted.sum()))}: Darshan's counters, the bytes read beyond "
            "the file's furthest byte)"
            if counted.any()
            else ""
        )
        + (f"; {_once_per(once)}" if once else ""),
        {
            "files": (len(red), "count"),
            "ranks_per_file_max": (int(red["n_readers"].max()), "count"),
            "bytes_read": (int(red["bytes_read"].sum()), "bytes"),
            "unique_bytes": (int(uni.sum()), "bytes"),
            "redundant_bytes": (redundant, "bytes"),
            "read_once_per": (once, "text"),
            "classes": (sorted(red["class"].unique().tolist()), "text"),
        },
        "Shard the input by file across ranks, or read the data once per node into "
        "shared memory / a node-local cache; a sampler that splits indices does not "
        "split the bytes each rank reads."
        if c.training_job
        else "Read shared input once (on one rank, or one per node) and broadcast it "
        "(MPI_Bcast), or read it with collective MPI-IO calls, which move each byte "
        "once and hand it to the ranks that need it.",
        red["class"].mode().iloc[0],
    )
    return [found(cid, title, ins)]


def _once_per(once: list[str]) -> str:
    """How often the nodes' ranks read each byte, in words (nodes' ``read_once_per``)."""
    words = {
        "node": "once per node",
        "rank": "once per rank",
        "partly-redundant": "more than once per node but not by every rank",
    }
    return "data is read " + ", or ".join(words.get(o, o) for o in once)


def redundant_writes(c: Context) -> list[Outcome]:
    """More bytes written to files than they hold (Drishti's P10: a file's bytes written
    above its highest offset): the same bytes written again. DXT's unions where traced,
    else the file's extent from the counters (POSIX_MAX_BYTE_WRITTEN + 1)."""
    cid, title = "redundant_writes", "Bytes written more than once"
    if none := when_no_io(c, cid, title):
        return none
    f, s = c.files, c.settings
    if not len(f) or not int(f["bytes_written"].sum()):
        return [not_applicable(cid, title, c.none_of("writes"))]
    w = f[f["bytes_written"] > 0]
    # a file written with no extent known (DFS's counters hold no highest byte written) has
    # no figure of bytes written again: left out, and said
    known = (w["write_union"] > 0) | (w["size"] > 0)
    unknown, w = w[~known], w[known]
    blind = (
        f"{files(len(unknown))} written with no extent known (no DXT trace, and no highest "
        f"byte written among {c.layers}'s counters)"
    )
    if w.empty:
        return [not_checked(cid, title, f"{blind}: bytes written again cannot be told")]
    unique = w["write_union"].where(w["write_union"] > 0, w["size"])
    extra = (w["bytes_written"] - unique).clip(lower=0)
    redundant, total = int(extra.sum()), int(w["bytes_written"].sum())
    numbers = {
        "files": (int((extra > 0).sum()), "count"),
        "bytes_written": (total, "bytes"),
        "redundant_bytes": (redundant, "bytes"),
        "threshold_bytes": (s.redundant_write_min_bytes, "bytes"),
    }
    measured = (
        f"{human_bytes(redundant)} of the {human_bytes(total)} written go to bytes already "
        f"written ({int((extra > 0).sum())} of {files(len(w))})"
        + (f"; {blind}, not judged" if len(unknown) else "")
    )
    if redundant < s.redundant_write_min_bytes:
        return [
            passed(
                cid, title, f"{measured}: under {human_bytes(s.redundant_write_min_bytes)}", numbers
            )
        ]
    top = w.loc[extra.idxmax()]
    ins = make_insight(
        "redundant_writes",
        "warn",
        "The same bytes are written more than once",
        f"{measured}; the most to {top['path']} ({human_bytes(int(extra.max()))} again)",
        numbers,
        "Write each byte once: keep the data in memory until it is final, or write each "
        "version (checkpoint, restart dump) to a file of its own; a rewrite of a header or "
        "an index is fine when it is small."
        if not c.training_job
        else "Write each checkpoint to a file of its own (or rotate a few), not the same "
        "file again in place: a crash in the middle leaves no whole checkpoint.",
        str(top["class"]),
    )
    return [found(cid, title, ins)]
