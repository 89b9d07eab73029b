"""Insights: rules in the spirit of Drishti, each reporting the numbers that fired it.

Each rule is a small function of a run's :class:`Context` returning the
:class:`~iosweep.analysis.summary.Insight` s it fires (``id``, ``severity``, ``title``,
``message``, ``numbers``, ``recommendation``, ``class``); severity is ``high`` (data lost or a
likely bottleneck), ``warn`` or ``info``. :data:`RULES` lists them in the order the summary
holds their insights; each can be called and tested alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from iosweep.analysis.patterns.layers import unanalysed_io
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.summary import Insight
from iosweep.units import human_bytes


def _mk(
    id_: str,
    severity: str,
    title: str,
    message: str,
    numbers: dict[str, tuple[Any, str]],
    recommendation: str,
    cls: str | None = None,
) -> Insight:
    """An insight; ``numbers`` maps each name to (value, unit): every number a finding
    prints carries its unit (bytes, bytes/s, s, share, count, ranks, text) from here."""
    return Insight.model_validate(
        {
            "id": id_,
            "severity": severity,
            "title": title,
            "message": message,
            "numbers": {k: v for k, (v, _) in numbers.items()},
            "units": {k: u for k, (_, u) in numbers.items()},
            "recommendation": recommendation,
            "class": cls,
        }
    )


def _span(v: pd.Series) -> str:
    lo, hi = int(v.min()), int(v.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


@dataclass(frozen=True)
class Context:
    """What the rules look at: the run's summary so far, its files and ranks tables."""

    summary: dict[str, Any]
    files: pd.DataFrame
    ranks: pd.DataFrame
    settings: AnalysisSettings

    @property
    def training_job(self) -> bool:
        """A training job (a framework named, or training steps recorded): deep-learning
        advice fits it; any other job (an MPI application's logs) gets its own field's."""
        params = self.summary.get("params") or {}
        return bool(params.get("framework")) or bool(
            (self.summary.get("placement") or {}).get("known")
        )

    @property
    def n_ranks(self) -> int:
        return int(self.summary["ranks"]["count"])

    @property
    def who(self) -> str:
        """ "rank", or "process" when the store knows no ranks."""
        return str(self.summary["ranks"].get("kind", "rank"))

    @property
    def whos(self) -> str:
        return {"rank": "ranks", "process": "processes"}.get(self.who, self.who + "s")


Rule = Callable[[Context], list[Insight]]


def _io_left_out(summary: dict[str, Any], s: AnalysisSettings) -> Insight | None:
    """Nothing analysed, but the tracer did record something: I/O at a layer outside
    ``analysis.modules`` (a DAOS object-store job), or only on excluded paths (a job that
    wrote to its terminal). Either way its tracer worked, unlike what ``no_io_recorded`` says."""
    other = unanalysed_io(summary.get("layers") or [])
    if other:
        names = ", ".join(f"{x['name']} ({x['module']})" for x in other)
        moved = sum(x["bytes_read"] + x["bytes_written"] for x in other)
        return _mk(
            "io_outside_analysed_layers",
            "warn",
            "I/O was recorded only outside the analysed layers",
            f"The trace holds {human_bytes(moved)} of reads and writes at {names}, and none "
            f"at the layers analysed ({', '.join(s.modules)}): the figures of this report "
            "leave that I/O out",
            {"bytes": (moved, "bytes"), "layers": (len(other), "count")},
            f"Add {', '.join(x['module'] for x in other)} to analysis.modules to analyse it.",
        )
    trace = summary["trace"]
    if trace.get("excluded_records") or trace.get("excluded_ops"):
        paths = trace.get("excluded_paths") or []
        return _mk(
            "only_excluded_paths",
            "info",
            "Only excluded paths were touched",
            "The tracer worked, but every file it recorded is one the analysis leaves out "
            f"(exclude_pattern), e.g. {', '.join(paths[:3]) or 'terminal streams'}: the job "
            "did no other file I/O",
            {
                "records": (trace.get("excluded_records", 0), "count"),
                "operations": (trace.get("excluded_ops", 0), "count"),
            },
            "Nothing to do, unless the job's data live under one of those paths: then narrow "
            "analysis.exclude_pattern.",
        )
    return None


def no_io_or_truncated(c: Context) -> list[Insight]:
    """Nothing recorded at all; else truncated / incomplete trace."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    trace = summary["trace"]
    errors = [i for i in summary["issues"] if i.get("severity", "error") == "error"]
    comp = trace.get("completeness")
    if unsized := trace.get("unsized_io_calls"):
        # DFTracer without DFTRACER_INC_METADATA: calls timed, their files and sizes unknown
        empty = summary.get("analysis_status") == "empty"
        out.append(_mk(
            "io_without_metadata", "high" if empty else "warn",
            "I/O calls were traced without their files and sizes",
            f"DFTracer recorded {unsized} read/write calls with no file and no byte count: "
            "it ran without DFTRACER_INC_METADATA=1, so "
            + ("no I/O figure of this report can be computed" if empty else
               "the I/O figures of this report leave them out"),
            {"calls": (unsized, "count")},
            "Trace again with DFTRACER_INC_METADATA=1 beside DFTRACER_ENABLE=1 (DLIO too).",
        ))  # fmt: skip
    if summary.get("analysis_status") == "empty" and (found := _io_left_out(summary, s)):
        out.append(found)
    elif summary.get("analysis_status") == "empty" and not unsized:
        out.append(
            _mk(
                "no_io_recorded",
                "high",
                "No I/O was recorded",
                "The trace store holds no operations and no counters: the tracer saw nothing, "
                "or its logs are missing",
                {
                    "segments": (trace["segments"], "count"),
                    "counter_records": (trace["counter_records"], "count"),
                    "issues": (len(summary["issues"]), "count"),
                },
                "Check that the tracer was preloaded into the job's processes (LD_PRELOAD "
                "reached every rank), that NAME_EXCLUDE does not hide the data, and that the "
                "logs were collected after the processes exited.",
            )
        )
    elif errors or (comp is not None and comp < s.trace_completeness_min):
        # (a trace that is whole but blind to some I/O is trace_incomplete's, with its reason)
        out.append(
            _mk(
                "truncated_trace",
                "high",
                "The trace is incomplete",
                "Some traces are missing, truncated or partial, so every figure here is a lower bound"
                + (
                    f"; DXT holds {comp:.1%} of the operations the counters saw"
                    if comp is not None
                    else ""
                ),
                {
                    "completeness": (comp, "share"),
                    "threshold": (s.trace_completeness_min, "share"),
                    "issues": (len(summary["issues"]), "count"),
                    "error_issues": (len(errors), "count"),
                    "kinds": (sorted({i["kind"] for i in summary["issues"]}), "text"),
                },
                "Raise Darshan's memory limits (DARSHAN_MODMEM / DXT buffer, MAX_RECORDS in the "
                "Darshan config), exclude irrelevant paths (NAME_EXCLUDE), and collect logs only "
                "after every traced process has exited.",
            )
        )
    return out


def small_requests(c: Context) -> list[Insight]:
    """Small requests (Drishti: < 1 MiB, > 10 % and > 1000 requests)."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    for op in ("read", "write"):
        d = summary["sizes"]["by_class"].get("all", {}).get(op)
        if not d:
            continue
        zero = int(d.get("zero_length") or 0)
        sized = d["ops"] - zero
        if d["small_share"] > s.small_requests_share and d["small"] >= s.small_requests_min_count:
            worst = max(
                (
                    (c, v[op])
                    for c, v in summary["sizes"]["by_class"].items()
                    if c != "all" and op in v
                ),
                key=lambda cv: cv[1]["small"],
                default=(None, None),
            )
            out.append(
                _mk(
                    "small_requests",
                    "warn",
                    f"Many small {op} requests",
                    f"{d['small']:,} of {sized:,} {op} requests ({d['small_share']:.1%}) are smaller than "
                    f"{human_bytes(s.small_request_bytes)}"
                    + (f"; most go to {worst[0]} files" if worst[0] else "")
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
            )
    return out


def random_access(c: Context) -> list[Insight]:
    """Random access."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    sp = summary["spatial"]
    if sp.get("ops", 0):
        rnd = sp["ops_by_category"].get("random", 0)
        share = rnd / sp["ops"]
        if share > s.random_ops_share and rnd >= s.random_ops_min_count:
            out.append(
                _mk(
                    "random_access",
                    "warn",
                    "Random access",
                    f"{rnd} of {sp['ops']} operations ({share:.1%}) jump backwards within their file",
                    {
                        "random": (rnd, "count"),
                        "ops": (sp["ops"], "count"),
                        "share": (share, "share"),
                        "threshold_share": (s.random_ops_share, "share"),
                    },
                    "Read files sequentially and shuffle in memory (shuffle the order of shards, not "
                    "of samples inside a file), or enable read-ahead/prefetching in the data loader.",
                )
            )
    return out


def metadata_heavy(c: Context) -> list[Insight]:
    """Metadata heavy."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    md = summary["metadata"]
    if md.get("meta_time_share") is not None and (
        md["meta_time_share"] > s.metadata_time_share
        and md["max_rank_meta_time"] >= s.metadata_min_time_s
    ):
        out.append(
            _mk(
                "metadata_heavy",
                "warn",
                "Metadata-heavy I/O",
                f"{md['meta_time_share']:.1%} of I/O time is metadata (open, stat, seek, sync); the "
                f"busiest rank spends {md['max_rank_meta_time']:.2f} s on it",
                {
                    "meta_time_share": (md["meta_time_share"], "share"),
                    "max_rank_meta_time": (md["max_rank_meta_time"], "s"),
                    "opens": (md["totals"]["opens"], "count"),
                    "stats": (md["totals"]["stats"], "count"),
                    "seeks": (md["totals"]["seeks"], "count"),
                    "threshold_share": (s.metadata_time_share, "share"),
                },
                "Open each file once and keep it open, pack many small files into few large ones, "
                "and avoid repeated stat/exists checks in the data loader.",
            )
        )
    return out


def redundant_reads(c: Context) -> list[Insight]:
    """The same bytes read by many ranks."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    files = c.files
    whos = c.whos
    partitioned = [
        cls
        for cls, v in summary["classes"].items()
        if (v.get("per_epoch") or {}).get("shared_in_epoch_share", 1.0) <= s.disjoint_overlap_max
    ]
    files = files[~files["class"].isin(partitioned)] if len(files) else files
    if len(files):
        red = files[
            (files["n_readers"] >= max(s.redundant_read_min_ranks, 2)) & (files["read_union"] > 0)
        ]
        if red.empty:  # counters only: whole-file reads by several ranks say the same
            red = files[
                (files["n_readers"] >= max(s.redundant_read_min_ranks, 2))
                & (files["whole_readers"] >= 2)
            ]
            uni = red["size"]
        else:  # bytes of unknown offsets are not known to repeat
            uni = red["read_union"] + red["read_unplaced"]
        redundant = int((red["bytes_read"] - uni).clip(lower=0).sum())
        if len(red) and redundant >= s.redundant_read_min_bytes:
            nodes = summary.get("nodes", [])
            once = sorted({n["read_once_per"] for n in nodes if n.get("read_once_per")})
            out.append(
                _mk(
                    "redundant_reads",
                    "warn",
                    "The same bytes are read by many ranks",
                    f"{len(red)} files are read by {_span(red['n_readers'])} {whos} each; {human_bytes(redundant)} of the {human_bytes(int(red['bytes_read'].sum()))} "
                    "read from them are repeats of bytes another rank (or read) already moved"
                    + (f"; data is read once per {', '.join(once)}" if once else ""),
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
                    red["class"].mode().iloc[0] if len(red) else None,
                )
            )
    return out


def file_per_process_at_scale(c: Context) -> list[Insight]:
    """File per process at scale."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    n_ranks = c.n_ranks
    for cls, acc in summary["classes"].items():
        for d in ("read", "write"):
            a = acc.get("access", {}).get(d)
            if a and a["strategy"] == "file-per-process" and n_ranks >= s.fpp_min_ranks:
                out.append(
                    _mk(
                        "file_per_process_at_scale",
                        "warn",
                        f"File-per-process {cls} {d}s at {n_ranks} ranks",
                        f"{a['evidence']['files']} {cls} files, one set per rank, opened by {n_ranks} ranks",
                        {
                            "ranks": (n_ranks, "count"),
                            "files": (a["evidence"]["files"], "count"),
                            "op": (d, "text"),
                            "threshold_ranks": (s.fpp_min_ranks, "count"),
                        },
                        "Many ranks opening their own files load the metadata servers together; use "
                        "fewer, shared files (collective or aggregated I/O) or stagger the opens.",
                        cls,
                    )
                )
    return out


def single_rank_checkpoint(c: Context) -> list[Insight]:
    """One rank writes every checkpoint."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    n_ranks = c.n_ranks
    who = c.who
    whos = c.whos
    ck = summary.get("checkpoints", {})
    if (
        ck.get("available")
        and ck.get("n_writers") == 1
        and n_ranks >= max(s.rank0_checkpoint_min_ranks, 2)
    ):
        w = ck["writers"][0]
        out.append(
            _mk(
                "single_rank_checkpoint",
                "info",
                f"Only {who} {w} writes checkpoints",
                f"{who.capitalize()} {w} writes all {human_bytes(ck['bytes_written'])} of checkpoints"
                + (
                    f" in {ck['n_checkpoints']} bursts of {ck['duration_mean']:.3f} s on average"
                    if ck.get("n_checkpoints")
                    else ""
                )
                + f" while the other {n_ranks - 1} {whos} write none",
                {
                    "writer": (w, "ranks"),
                    "ranks": (n_ranks, "count"),
                    "bytes_written": (ck["bytes_written"], "bytes"),
                    "checkpoints": (ck.get("n_checkpoints"), "count"),
                    "duration_mean": (ck.get("duration_mean"), "s"),
                    "interval_mean": (ck.get("interval_mean"), "s"),
                },
                "Fine for small models; for large ones the other ranks wait at the next collective "
                "while one rank writes: use asynchronous or sharded (per-rank) checkpointing.",
                "checkpoint",
            )
        )
    return out


def _aggregators(c: Context) -> Insight | None:
    """Collective MPI-IO with only some ranks doing file I/O: the ranks that do are
    MPI-IO's aggregators, and the spread of bytes across ranks is its design, not a fault."""
    m = c.summary.get("mpiio") or {}
    collective = sum(int((m.get(d) or {}).get("collective") or 0) for d in ("read", "write"))
    with_io = int(c.summary["ranks"].get("with_io") or 0)
    if not collective or not 0 < with_io < c.n_ranks:
        return None
    return _mk(
        "mpiio_aggregators",
        "info",
        "Collective I/O through aggregator ranks",
        f"{with_io} of {c.n_ranks} ranks do the file I/O under {collective:,} collective MPI-IO "
        "calls: MPI-IO's collective buffering aggregators; the others send them their data",
        {"ranks_with_io": (with_io, "ranks"), "collective": (collective, "count")},
        "The number of aggregators is the cb_nodes hint (romio_cb_read/romio_cb_write turn "
        "collective buffering on or off); more aggregators spread the file I/O.",
    )


def misaligned_requests(c: Context) -> list[Insight]:
    """POSIX requests not aligned to the file system's block (Drishti's P07/P08: > 10%).

    Advice of the HPC field, for jobs that choose their offsets (MPI applications): a
    training job reads whole samples where its data loader decides, and its verdict (the
    input pipeline) is where its advice is."""
    if c.training_job:
        return []
    a = c.summary.get("alignment") or {}
    s = c.settings
    out: list[Insight] = []
    for where, what in (("file", "file offsets"), ("mem", "memory buffers")):
        n = int(a.get(f"{where}_not_aligned") or 0)
        share = float(a.get(f"{where}_share") or 0.0)
        if n < s.misaligned_min_count or share <= s.misaligned_share:
            continue
        block, lustre = a.get("file_alignment"), a.get("lustre")
        unit = f"the file system's {block:,}-byte blocks" if block else "the file system's blocks"
        if lustre and where == "file":
            unit = (
                f"the Lustre stripes ({lustre['stripe_size']:,} bytes, over "
                f"{lustre['stripe_count']} OST{'s' if lustre['stripe_count'] > 1 else ''} "
                f"for most of the {lustre['files']:,} files)"
            )
        out.append(
            _mk(
                "misaligned_requests",
                "warn",
                f"Requests misaligned in {what}",
                f"{n:,} of {a['ops']:,} POSIX requests ({share:.1%}) have {what} not aligned "
                f"to {unit}",
                {
                    "where": (where, "text"),
                    "misaligned": (n, "count"),
                    "ops": (a["ops"], "count"),
                    "share": (share, "share"),
                    "alignment": (block, "bytes"),
                    "threshold_share": (s.misaligned_share, "share"),
                },
                "Align requests to the file system's block (on Lustre, the stripe size): "
                "offsets and sizes in whole blocks, buffers from an aligned allocator; MPI-IO "
                "collective buffering aligns its aggregators' requests to the stripes."
                if where == "file"
                else "Allocate I/O buffers aligned to the file system's block "
                "(posix_memalign), as direct I/O needs and page-cache copies prefer.",
            )
        )
    return out


def mpiio_overhead(c: Context) -> list[Insight]:
    """Time in MPI-IO calls that the POSIX calls under them do not account for: the ranks
    wait inside MPI-IO (for each other, in two-phase exchanges, on locks), not on storage.
    mpi-io-test's writes: 5.37 s a rank in MPI-IO over 0.03 s of POSIX writes."""
    m = c.summary.get("mpiio") or {}
    s = c.settings
    out: list[Insight] = []
    for name in ("read", "write"):
        d = m.get(name) or {}
        t, gap = d.get("time"), d.get("gap_mean")
        if not t or gap is None or gap < s.mpiio_overhead_min_s:
            continue
        if gap <= s.mpiio_overhead_share * t["mean"]:
            continue
        posix = t["mean"] - gap
        out.append(
            _mk(
                "mpiio_overhead",
                "warn",
                f"MPI-IO {name}s wait above the file system",
                f"A rank spends {t['mean']:.2f} s in MPI-IO {name}s on average (min {t['min']:.2f} s, "
                f"max {t['max']:.2f} s) and {posix:.2f} s in the POSIX {name}s under them: "
                f"{gap / t['mean']:.0%} of the MPI-IO time is not spent in the file system",
                {
                    "op": (name, "text"),
                    "mpiio_time_mean": (t["mean"], "s"),
                    "mpiio_time_max": (t["max"], "s"),
                    "posix_time_mean": (posix, "s"),
                    "gap_mean": (gap, "s"),
                    "threshold_share": (s.mpiio_overhead_share, "share"),
                },
                "The ranks wait inside MPI-IO: for the slowest rank to reach a collective call "
                "(balance the work before it), in two-phase collective buffering (the cb_nodes "
                "and cb_buffer_size hints), or on file locks (romio_ds_read/romio_ds_write). "
                "Time the ranks' arrival at the call to tell which.",
            )
        )
    return out


def mpiio_independent(c: Context) -> list[Insight]:
    """Independent MPI-IO where collective calls would let MPI-IO merge the ranks' requests
    (Drishti: more than half of a direction's MPI-IO calls, and more than 1000)."""
    out: list[Insight] = []
    m = c.summary.get("mpiio") or {}
    s = c.settings
    for name in ("read", "write"):
        d = m.get(name) or {}
        ops, indep = int(d.get("ops") or 0), int(d.get("independent") or 0)
        if not ops or indep <= s.mpiio_independent_min_count:
            continue
        share = indep / ops
        if share <= s.mpiio_independent_share:
            continue
        out.append(
            _mk(
                "mpiio_independent",
                "warn",
                f"Independent MPI-IO {name}s",
                f"{indep:,} of {ops:,} MPI-IO {name}s ({share:.1%}) are independent calls",
                {
                    "op": (name, "text"),
                    "independent": (indep, "count"),
                    "ops": (ops, "count"),
                    "share": (share, "share"),
                    "threshold_share": (s.mpiio_independent_share, "share"),
                },
                f"Use collective {name}s (MPI_File_{name}_all, MPI_File_{name}_at_all) so that "
                "MPI-IO can merge the ranks' requests, with one aggregator per compute node "
                "(the cb_nodes hint).",
            )
        )
    return out


def imbalance(c: Context) -> list[Insight]:
    """Imbalance and stragglers."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    n_ranks = c.n_ranks
    imb = summary.get("imbalance", {})
    aggregators = _aggregators(c)
    if aggregators:
        out.append(aggregators)
    if n_ranks > 1 and imb:
        fired = {}
        if (
            imb.get("bytes") is not None
            and imb["bytes"] > s.imbalance_share
            and (imb.get("bytes_max") or 0) >= s.imbalance_min_bytes
            and not aggregators
        ):
            fired["bytes_spread"] = (imb["bytes"], "share")
        if (
            imb.get("io_time") is not None
            and imb["io_time"] > s.imbalance_share
            and imb.get("io_time_max", 0) >= s.imbalance_min_io_time_s
        ):
            fired["io_time_spread"] = (imb["io_time"], "share")
        if fired or imb.get("stragglers"):
            out.append(
                _mk(
                    "imbalance",
                    "warn",
                    "I/O imbalance across ranks",
                    "; ".join(
                        [
                            f"(max - min) / max of {k.removesuffix('_spread').replace('_', ' ')} per rank is {v[0]:.1%}"
                            for k, v in fired.items()
                        ]
                        + (
                            [f"stragglers: ranks {imb['stragglers']}"]
                            if imb.get("stragglers")
                            else []
                        )
                    ),
                    {
                        **fired,
                        "stragglers": (imb.get("stragglers", []), "ranks"),
                        "threshold_share": (s.imbalance_share, "share"),
                    },
                    "Balance the data each rank reads (equal shard sizes), and look at the "
                    "stragglers' nodes (storage path, local contention)."
                    if c.training_job
                    else "Balance the bytes each rank moves (the decomposition of the domain), "
                    "and look at the stragglers' nodes and storage targets (a slow OST, local "
                    "contention).",
                )
            )
    return out


def io_bound(c: Context) -> list[Insight]:
    """I/O bound."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    h = summary["headline"]
    if h.get("io_share_max") is not None and h["io_share_max"] > s.io_time_share:
        out.append(
            _mk(
                "io_bound",
                "warn",
                "I/O takes a large share of the run",
                f"The busiest rank spends {h['io_share_max']:.1%} of the run time in I/O",
                {
                    "io_share_max": (h["io_share_max"], "share"),
                    "io_time_max": (h["io_time_max"], "s"),
                    "run_time": (h["run_time"], "s"),
                    "threshold_share": (s.io_time_share, "share"),
                },
                "Overlap loading with compute (DataLoader workers, prefetch), cache the dataset in "
                "memory or on node-local storage, or use a faster file system tier."
                if c.training_job
                else "Overlap I/O with computation (non-blocking or asynchronous I/O), aggregate "
                "it into fewer, larger collective MPI-IO operations, or stage it through a "
                "burst buffer or a faster file system tier.",
            )
        )
    return out


def exposed_io(c: Context) -> list[Insight]:
    """Exposed I/O."""
    out: list[Insight] = []
    summary = c.summary
    s = c.settings
    ov = summary.get("overlap", {})
    if (summary.get("pipeline") or {}).get("verdict"):
        return out  # the input-pipeline verdict says whether (and why) the ranks wait
    if (
        ov.get("available")
        and ov.get("exposed_share_of_epochs_max") is not None
        and ov["exposed_share_of_epochs_max"] > s.exposed_io_share
    ):
        out.append(
            _mk(
                "exposed_io",
                "warn",
                "I/O not hidden behind compute",
                f"Up to {ov['exposed_share_of_epochs_max']:.1%} of a rank's epoch time is I/O with no "
                "compute running",
                {
                    "exposed_share_max": (ov["exposed_share_of_epochs_max"], "share"),
                    "exposed_io_time_max": (ov["exposed_io_time_in_epochs_max"], "s"),
                    "threshold_share": (s.exposed_io_share, "share"),
                },
                "Prefetch the next batches while computing (more loader workers, prefetch_factor, "
                "tf.data prefetch) so reads overlap with the steps.",
            )
        )
    return out


def input_bound(c: Context) -> list[Insight]:
    """The ranks wait for their data, or for their own loop: the input pipeline's verdict."""
    v = (c.summary.get("pipeline") or {}).get("verdict") or {}
    loop = v.get("kind") == "loop-bound"
    if not (loop or v.get("kind", "").startswith("input-bound")):
        return []
    n = v["numbers"]
    numbers = {
        "au": (n["au"], "share"),
        "au_threshold": (n["au_threshold"], "share"),
        "wait_per_rank": (n["wait_per_rank_s"], "s"),
        "storage_share_of_wait": (n["storage_share_of_wait"], "share"),
        "no_read_share_of_wait": (n["no_read_share_of_wait"], "share"),
    }
    if loop:
        numbers["idle_per_rank"] = (n["idle_per_rank_s"], "s")
    return [
        _mk(
            v["kind"].replace("-", "_"),
            "warn" if loop else "high",
            v["title"],
            v["text"][0].upper() + v["text"][1:],
            numbers,
            "; ".join(v["levers"]),
        )
    ]


def trace_incomplete(c: Context) -> list[Insight]:
    """The trace missed I/O that the run must have done."""
    checks = c.summary.get("completeness") or []
    return [
        _mk(
            "trace_missed_" + ch["kind"].replace("-", "_"),
            "high" if ch["kind"] == "dataset-reads" else "warn",
            "The trace missed dataset reads"
            if ch["kind"] == "dataset-reads"
            else "The trace missed checkpoint writes",
            ch["message"][0].upper()
            + ch["message"][1:]
            + (f": {ch['why']}" if ch.get("why") else ""),
            {"expected_bytes": (ch["expected"], "bytes"), "seen_bytes": (ch["seen"], "bytes")},
            "Trace the data directory (iosweep sets DARSHAN_EXCLUDE_DIRS and a NAME_INCLUDE for the "
            "dataset and staging directories; DFTracer needs them in DFTRACER_DATA_DIR); read the "
            "figures of this run as lower bounds.",
            "dataset" if ch["kind"] == "dataset-reads" else "checkpoint",
        )
        for ch in checks
    ]


RULES: list[Rule] = [
    input_bound,
    trace_incomplete,
    no_io_or_truncated,
    small_requests,
    random_access,
    metadata_heavy,
    redundant_reads,
    file_per_process_at_scale,
    single_rank_checkpoint,
    misaligned_requests,
    mpiio_overhead,
    mpiio_independent,
    imbalance,
    io_bound,
    exposed_io,
]


def run_insights(
    summary: dict[str, Any], files: pd.DataFrame, ranks: pd.DataFrame, s: AnalysisSettings
) -> list[dict]:
    """Every rule's insights, in RULES order, as summary.json holds them."""
    ctx = Context(summary, files, ranks, s)
    return [i.model_dump(by_alias=True) for rule in RULES for i in rule(ctx)]
