"""Rules on the trace itself and on the verdict: is anything missing, does the job wait."""

from __future__ import annotations

from collections.abc import Mapping

from iosweep.analysis.findings.rules.base import (
    Context,
    Outcome,
    found,
    make_insight,
    not_applicable,
    not_checked,
    passed,
)
from iosweep.analysis.patterns.layers import unanalysed_io
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.summary import Insight
from iosweep.units import human_bytes


def input_bound(c: Context) -> list[Outcome]:
    """The ranks wait for their data, or for their own loop: the input pipeline's verdict."""
    title = "The job waits for its data"
    pipe = c.summary.get("pipeline") or {}
    v = pipe.get("verdict") or {}
    kind = v.get("kind", "")
    if not v:
        if c.training_job:
            return [not_checked("input_bound", title, pipe.get("reason") or "no verdict")]
        return [
            not_applicable(
                "input_bound",
                title,
                "no compute phases recorded or declared: a job without a compute loop has no "
                "data wait to measure (its I/O time is io_bound's)",
            )
        ]
    n = v["numbers"]
    au = {"au": (n["au"], "share"), "au_threshold": (n["au_threshold"], "share")}
    if kind == "compute-bound":
        return [passed("input_bound", title, v["text"][0].upper() + v["text"][1:], au)]
    loop = kind in ("loop-bound", "unexplained")
    if not (loop or kind.startswith(("input-bound", "host-cpu-bound"))):
        return [not_checked("input_bound", title, f"{v['title']}: {v['text']}", au)]
    numbers = {
        **au,
        "wait_per_rank": (n["wait_per_rank_s"], "s"),
        "storage_share_of_wait": (n["storage_share_of_wait"], "share"),
        "no_read_share_of_wait": (n["no_read_share_of_wait"], "share"),
    }
    if loop:
        numbers["idle_per_rank"] = (n["idle_per_rank_s"], "s")
    ins = make_insight(
        kind.replace("-", "_"),
        "warn" if loop else "high",
        v["title"],
        v["text"][0].upper() + v["text"][1:],
        numbers,
        "; ".join(lv["text"] for lv in v["levers"]),
    )
    return [found("input_bound", title, ins)]


def trace_incomplete(c: Context) -> list[Outcome]:
    """The trace missed I/O that the run must have done (an outside account says so)."""
    out: list[Outcome] = []
    missed = {ch["kind"]: ch for ch in c.summary.get("completeness") or []}
    # (a job other than a training job gets the words of its own field)
    reads, saves = ("dataset", "checkpoint") if c.training_job else ("input", "output")
    for kind, title in (
        ("dataset-reads", f"The trace holds the {reads} reads"),
        ("checkpoint-writes", f"The trace holds the {saves} writes"),
    ):
        cid = "trace_missed_" + kind.replace("-", "_")
        ch = missed.get(kind)
        if ch:
            ins = make_insight(
                cid,
                "high" if kind == "dataset-reads" else "warn",
                "The trace missed dataset reads"
                if kind == "dataset-reads"
                else "The trace missed checkpoint writes",
                ch["message"][0].upper()
                + ch["message"][1:]
                + (f": {ch['why']}" if ch.get("why") else ""),
                {"expected_bytes": (ch["expected"], "bytes"), "seen_bytes": (ch["seen"], "bytes")},
                "Trace the data directory (iosweep sets DARSHAN_EXCLUDE_DIRS and a NAME_INCLUDE "
                "for the dataset and staging directories; DFTracer needs them in "
                "DFTRACER_DATA_DIR); read the figures of this run as lower bounds.",
                "dataset" if kind == "dataset-reads" else "checkpoint",
            )
            out.append(found(cid, title, ins))
        else:
            out.append(_nothing_missed(c, cid, title, kind))
    return out


def _nothing_missed(c: Context, cid: str, title: str, kind: str) -> Outcome:
    if not c.has_io:
        return not_applicable(cid, title, "nothing was traced to compare")
    if kind == "checkpoint-writes":
        disk = (c.summary.get("checkpoints") or {}).get("on_disk") or {}
        if disk.get("files"):
            return passed(
                cid,
                title,
                f"the trace holds the writes of the {disk['files']} checkpoint file(s) on disk "
                f"({human_bytes(disk.get('bytes', 0))})",
                {"on_disk_bytes": (disk.get("bytes", 0), "bytes")},
            )
        return not_applicable(
            cid,
            title,
            "no files on disk to compare the trace's writes with (iosweep "
            "counts the files the runs it launched left)",
        )
    totals = (c.summary.get("pipeline") or {}).get("totals") or {}
    if totals.get("samples"):
        return passed(
            cid,
            title,
            f"the trace holds dataset reads for the {int(totals['samples']):,} samples the "
            "run consumed (and, for whole ImageNet-style epochs, at least 90% of the bytes)",
            {"samples": (int(totals["samples"]), "count")},
        )
    return not_applicable(
        cid,
        title,
        "no outside account of what the run must read (iosweep has one for the runs it launched)",
    )


def _io_left_out(summary: Mapping, s: AnalysisSettings) -> Insight | None:
    """Nothing analysed, but the tracer did record something: I/O at a layer outside
    ``analysis.modules`` (a DAOS object-store job), or only on excluded paths (a job that
    wrote to its terminal). Either way its tracer worked, unlike what ``no_io_recorded`` says."""
    other = unanalysed_io(summary.get("layers") or [])
    if other:
        names = ", ".join(f"{x['name']} ({x['module']})" for x in other)
        moved = sum(x["bytes_read"] + x["bytes_written"] for x in other)
        return make_insight(
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
        return make_insight(
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


def _no_io_recorded(summary: Mapping) -> Insight:
    trace = summary["trace"]
    return make_insight(
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


def _truncated(summary: Mapping, s: AnalysisSettings, errors: list, comp: float | None) -> Insight:
    return make_insight(
        "truncated_trace",
        "high",
        "The trace is incomplete",
        "Some traces are missing, truncated or partial, so every figure here is a lower bound"
        + (
            f"; DXT holds {comp:.1%} of the operations the counters saw" if comp is not None else ""
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


def _without_metadata(unsized: int, empty: bool) -> Insight:
    # DFTracer without DFTRACER_INC_METADATA: calls timed, their files and sizes unknown
    return make_insight(
        "io_without_metadata",
        "high" if empty else "warn",
        "I/O calls were traced without their files and sizes",
        f"DFTracer recorded {unsized} read/write calls with no file and no byte count: "
        "it ran without DFTRACER_INC_METADATA=1, so "
        + (
            "no I/O figure of this report can be computed"
            if empty
            else "the I/O figures of this report leave them out"
        ),
        {"calls": (unsized, "count")},
        "Trace again with DFTRACER_INC_METADATA=1 beside DFTRACER_ENABLE=1 (DLIO too).",
    )


def no_io_or_truncated(c: Context) -> list[Outcome]:
    """Nothing recorded at all; else a truncated or incomplete trace."""
    title = "The trace is whole"
    summary, s = c.summary, c.settings
    trace = summary["trace"]
    errors = [i for i in summary["issues"] if i.get("severity", "error") == "error"]
    comp = trace.get("completeness")
    empty = summary.get("analysis_status") == "empty"
    out: list[Outcome] = []
    if unsized := trace.get("unsized_io_calls"):
        out.append(found("trace_metadata", title, _without_metadata(unsized, empty)))
    if empty and (left := _io_left_out(summary, s)):
        out.append(found("trace_recorded", title, left))
    elif empty and not unsized:
        out.append(found("trace_recorded", title, _no_io_recorded(summary)))
    elif errors or (comp is not None and comp < s.trace_completeness_min):
        # (a trace that is whole but blind to some I/O is trace_incomplete's, with its reason)
        out.append(found("trace_whole", title, _truncated(summary, s, errors, comp)))
    if out:
        return out
    if summary.get("analysis_status") == "untraced":
        return [not_applicable("trace_whole", title, "the run was not traced")]
    return [
        passed(
            "trace_whole",
            title,
            "no log is missing, truncated or partial"
            + (
                f"; DXT holds {comp:.1%} of the operations the counters saw (at least "
                f"{s.trace_completeness_min:.0%} needed)"
                if comp is not None
                else ""
            ),
            {"completeness": (comp, "share"), "threshold": (s.trace_completeness_min, "share")},
        )
    ]
