"""One section per run: its numbers, access pattern, insights, figures and tables."""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from iosweep.analysis.summary import RunSummary
from iosweep.report import fmt, plots
from iosweep.report.data import RunView
from iosweep.report.figures import (
    ACCOUNT_CAPTION,
    NODES_RUN_CAPTION,
    OVERLAP_CAPTION,
    SIZES_CAPTION,
    SPATIAL_CAPTION,
    TEMPORAL_CAPTION,
    TEMPORAL_MARKS,
)
from iosweep.report.sections import Context
from iosweep.report.sections.frameworks import epochs, hosts, marks, strategies
from iosweep.report.sections.overview import numbers
from iosweep.report.tables import Column, Table, frame_table, records_table
from iosweep.report.words import (
    access_sentences,
    checkpoint_gap,
    checkpoint_sentence,
    rates_text,
)


def _yes(v: Any) -> str:
    return "yes" if v else ""


def _or_missing(v: Any) -> str:
    return fmt.MISSING if v is None else str(v)


FILES = [
    Column("path", "path", css="path"),
    Column("class", "class"),
    Column("size", "size", fmt.human_bytes, num=True),
    Column("bytes_read", "read", fmt.human_bytes, num=True),
    Column("bytes_written", "written", fmt.human_bytes, num=True),
    Column("reads", "reads", fmt.number, num=True),
    Column("writes", "writes", fmt.number, num=True),
    Column("n_readers", "readers", fmt.number, num=True),
    Column("n_writers", "writers", fmt.number, num=True),
    Column("strategy", "strategy"),
    Column("io_time", "I/O time", fmt.seconds, num=True),
]
RANKS = [
    Column("rank", "rank", num=True),
    Column("host", "host"),
    Column("bytes_read", "read", fmt.human_bytes, num=True),
    Column("bytes_written", "written", fmt.human_bytes, num=True),
    Column("reads", "reads", fmt.number, num=True),
    Column("writes", "writes", fmt.number, num=True),
    Column("opens", "opens", fmt.number, num=True),
    Column("io_time", "I/O time", fmt.seconds, num=True),
    Column("io_share", "I/O share", fmt.share, num=True),
    Column("straggler", "straggler", _yes),
]
PHASES = [
    Column("start", "start", fmt.seconds, num=True),
    Column("duration", "duration", fmt.seconds, num=True),
    Column("ops", "ops", fmt.number, num=True),
    Column("bytes_read", "read", fmt.human_bytes, num=True),
    Column("bytes_written", "written", fmt.human_bytes, num=True),
    Column("ranks", "ranks", fmt.number, num=True),
    Column("main_class", "main class"),
    Column("where", "where in the run"),
]
CHECKPOINT_EVENTS = [
    Column("start", "start", fmt.seconds, num=True),
    Column("duration", "duration", fmt.seconds, num=True),
    Column("bytes", "bytes", fmt.human_bytes, num=True),
    Column("files", "files", num=True),
    Column("ranks", "ranks", num=True),
    Column("after_epoch", "after epoch", _or_missing, num=True),
]
LAYERS = [
    Column("name", "layer"),
    Column("level", "level"),
    Column("analysed", "in the figures", lambda v: "yes" if v else "no"),
    Column("reads", "reads", fmt.number, num=True),
    Column("writes", "writes", fmt.number, num=True),
    Column("bytes_read", "read", fmt.human_bytes, num=True),
    Column("bytes_written", "written", fmt.human_bytes, num=True),
    Column("time", "time in calls", fmt.seconds, num=True),
]
PIPELINE_EPOCHS = [
    Column("epoch", "epoch", num=True),
    Column("epoch_time", "epoch time", fmt.seconds, num=True),
    Column("compute_mean", "compute per rank", fmt.seconds, num=True),
    Column("wait_mean", "data wait per rank", fmt.seconds, num=True),
    Column("first_wait_max", "first batch's wait", fmt.seconds, num=True),
    Column("first_step_max", "first step", fmt.seconds, num=True),
    Column("au_mean", "AU", fmt.share, num=True),
    Column("samples_per_s", "samples/s", fmt.number, num=True),
    Column("bytes_read", "read", fmt.human_bytes, num=True),
]
OVERLAP_EPOCHS = [
    Column("epoch", "epoch", num=True),
    Column("duration_max", "duration (longest rank)", fmt.seconds, num=True),
    Column("io_time_max", "I/O time (max)", fmt.seconds, num=True),
    Column("exposed_io_time_max", "exposed I/O (max)", fmt.seconds, num=True),
    Column("exposed_share_max", "exposed share (max)", fmt.share, num=True),
]

_NUMBERS = [
    "ranks",
    "nodes",
    "run_time",
    "files",
    "bytes_read",
    "bytes_written",
    "reads",
    "writes",
    "io_time_max",
    "bandwidth_aggregate",
    "opens",
    "io_share_max",
]


# what a number the trace cannot give is said as (the others are left out)
_UNKNOWN = {"nodes": "unknown (the trace does not name every rank's host)"}


def _numbers(headline: dict[str, Any], defaults: dict[str, Any]) -> list[tuple[str, str]]:
    """The run's numbers, the headline's (else the sweep's, for ranks and nodes); one the
    trace cannot give said as unknown where the report has words for it, else left out."""
    out = []
    for k in _NUMBERS:
        v = headline.get(k)
        v = defaults.get(k) if v is None else v
        if v is not None or k in _UNKNOWN:
            shown = fmt.metric(k, v) if v is not None else _UNKNOWN[k]
            out.append((k.replace("_", " "), shown))
    return out


def section(ctx: Context, r: RunView) -> dict[str, Any]:
    sm = r.summary
    h = sm.headline
    defaults = {"ranks": r.ranks, "nodes": r.nodes}
    d: dict[str, Any] = {
        "label": r.label,
        "run_id": r.run_id,
        "slug": r.slug,
        "status": r.status,
        "analysis_status": r.analysis_status,
        "reason": r.reason,
        "has_io": r.has_io,
        "tracer": r.tracer,
        "figures": [],
        "notes": [],
        "numbers": _numbers(h, defaults),
        "access": access_sentences(sm),
        "mpiio": _mpiio(sm),
        "layers": _layers(sm),
        "pipeline": _pipeline(sm)
        | {
            "levers": ctx.levers(r),
            "rates": rates_text(sm.pipeline.rates),
            "rate_assumptions": sm.pipeline.rates.assumptions,
        },
        "timeline": _timeline(ctx, r),
        "checkpoints": checkpoint_sentence(sm),
        "insights": [
            {
                "severity": i.severity,
                "title": i.title or i.id,
                "message": i.message,
                "numbers": numbers(i),
                "recommendation": i.recommendation,
            }
            for i in sm.insights
        ],
        "checks": [
            {
                "id": c.id,
                "title": c.title,
                "outcome": c.outcome,
                "severity": c.severity or "",
                "reason": c.reason,
            }
            for c in sm.checks
        ],
        "issues": [f"[{i.severity}] {i.kind}: {i.source}: {i.message}" for i in sm.issues][:30],
        "limitations": list(sm.limitations),
        # filled below for runs with I/O; the template tests every one
        "files": Table(FILES, []),
        "ranks_table": Table(RANKS, []),
        "signatures": [],
        "checkpoint_events": Table(CHECKPOINT_EVENTS, []),
        "overlap": {},
        "phases": Table(PHASES, []),
        "zero_files": 0,
        "file_tables": sm.file_tables,
        "open": False,
        "training": r.training,
    }
    if not r.has_io:
        d["warnings"] = _warnings(r)
        return d
    d["figures"], d["notes"] = _figures(ctx, r)
    d["overlap"] = _overlap(sm)
    ft = sm.file_tables
    d["zero_files"] = ft.zero_byte_files
    d["files"] = frame_table(_files_frame(r.table("files")), FILES, limit=40)
    # rows the analysis did not write count as left out too (it keeps the most bytes moved)
    d["files"].more = ft.files - ft.zero_byte_files - len(d["files"].rows)
    d["ranks_table"] = frame_table(r.table("ranks"), RANKS, limit=64)
    d["signatures"] = _signatures(sm)
    d["phases"] = frame_table(r.table("phases"), PHASES, limit=30)
    d["checkpoint_events"] = records_table(sm.checkpoints.events, CHECKPOINT_EVENTS, limit=20)
    d["warnings"] = _warnings(r)  # last: reading the tables may add some
    return d


def _mpiio(sm: RunSummary) -> list[str]:
    """The MPI-IO layer in sentences: time per rank against the POSIX time under it."""
    m = sm.mpiio
    if m is None:
        return []
    out = []
    for name, d in (("reads", m.read), ("writes", m.write)):
        if not d.ops:
            continue
        line = (
            f"{d.ops:,} MPI-IO {name} ({d.collective:,} collective, {d.independent:,} "
            f"independent; {d.nonblocking:,} non-blocking), {fmt.human_bytes(d.bytes)}"
        )
        if d.time:
            t = d.time
            line += (
                f"; time in MPI-IO per rank: min {fmt.seconds(t.min)}, mean "
                f"{fmt.seconds(t.mean)}, max {fmt.seconds(t.max)}"
            )
        if d.posix_time and d.gap_mean is not None:
            line += f"; in the POSIX calls under them: mean {fmt.seconds(d.posix_time.mean)} " + (
                f"(MPI-IO adds {fmt.seconds(d.gap_mean)} a rank)"
                if d.gap_mean >= 0
                else "(longer than the MPI-IO calls: the two layers' timers disagree)"
            )
        out.append(line)
    src = "DXT traces" if m.source == "dxt" else "Darshan's MPI-IO counters"
    out.append(f"From {src}, over {m.ranks} ranks; MPI-IO bytes are the POSIX bytes above.")
    return out


def _layers(sm: RunSummary) -> Table | None:
    """The trace's I/O layers, where there is more to them than the analysed file layers."""
    if not any(x.level != "file" for x in sm.layers):
        return None
    return records_table(sm.layers, LAYERS)


def _warnings(r: RunView) -> list[str]:
    out = list(r.warnings)
    gap = checkpoint_gap(r.summary)
    if gap:
        out.append(gap)
    return out


def _figures(ctx: Context, r: RunView) -> tuple[list, list[str]]:
    sm = r.summary
    figures: list = []
    notes: list[str] = []
    base = f"runs/{r.slug}"
    s = ctx.sample(r)

    def add(fig, name: str, title: str, caption: str) -> None:
        if fig is not None:
            figures.append(ctx.figs.add(fig, f"{base}/{name}.png", title, caption, ctx.anon))

    if sm.pipeline.account.available:
        add(
            plots.account_figure(
                sm.pipeline.account.per_rank, f"Time account: {r.label}", ctx.anon
            ),
            "account",
            "Time account",
            ACCOUNT_CAPTION,
        )
    if s is not None and s.shown:
        note = s.note()
        suffix = " " + note if note else ""
        fig = plots.spatial_figure(
            s, hosts(r), strategies(r), f"Spatial pattern: {r.label}", ctx.anon
        )
        add(fig, "spatial", "Spatial pattern", SPATIAL_CAPTION + suffix)
        fig = plots.temporal_figure(
            s,
            hosts(r),
            f"Temporal pattern: {r.label}",
            ctx.anon,
            epochs(r),
            marks(r),
            r.table("heatmap"),
        )
        bands = TEMPORAL_MARKS if r.training else ""
        add(fig, "temporal", "Temporal pattern", TEMPORAL_CAPTION.format(marks=bands) + suffix)
        notes += _sample_notes(r, s)
    elif not sm.trace.dxt_available:
        notes.append(
            "No per-operation trace (DXT) in this run: no spatial or temporal plot; figures come from counters."
            + _counter_patterns(sm)
        )
    add(
        plots.sizes_figure(r.table("sizes"), f"Request sizes: {r.label}", ctx.anon),
        "sizes",
        "Request sizes",
        SIZES_CAPTION,
    )
    add(
        plots.overlap_figure(r.table("overlap"), f"I/O and compute: {r.label}", ctx.anon),
        "overlap",
        "I/O and compute",
        OVERLAP_CAPTION,
    )
    add(
        plots.nodes_figure(r.table("nodes"), f"Per node: {r.label}", ctx.anon),
        "nodes",
        "Per node",
        NODES_RUN_CAPTION,
    )
    return figures, notes


def _counter_patterns(sm: RunSummary) -> str:
    """Darshan's access-pattern counters in words (the pattern without DXT)."""
    pats = sm.spatial.counters or {}
    parts = []
    for op, p in pats.items():
        if p.ops:
            shares = (p.consecutive / p.ops, p.sequential / p.ops, p.random / p.ops)
            parts.append(
                f"{op}s {shares[0]:.0%} consecutive, {shares[1]:.0%} further on, "
                f"{shares[2]:.0%} backwards"
            )
    return f" Darshan's counters of POSIX calls: {'; '.join(parts)}." if parts else ""


def _sample_notes(r: RunView, s: plots.OpsSample) -> list[str]:
    notes = []
    only = r.summary.file_tables.counter_only_ops
    if only:
        notes.append(
            f"{only:,} operations are known only from Darshan's counters (no DXT record, "
            "e.g. STDIO, which DXT does not trace): they count in the tables, not in the plots."
        )
    if s.excluded:
        notes.append(
            f"{s.excluded:,} operations on files the analysis leaves out (terminal streams, /dev, ...) are not drawn."
        )
    other = r.summary.ops_sample.other_layers
    if other:
        layers = ", ".join(f"{n:,} {m}" for m, n in sorted(other.items()))
        notes.append(
            f"Operations of layers the analysis does not count ({layers}: analysis.modules) are "
            "not drawn; where they sit above POSIX, POSIX's own records of the same I/O are."
        )
    return notes


def _files_frame(files: pd.DataFrame | None) -> pd.DataFrame | None:
    """The files table in report order (most bytes moved first), with its derived columns,
    without the files that moved no byte (sysfs, PMIx segments, locks: opened, never read)."""
    if files is None or files.empty:
        return None
    f = files.copy()
    f["_moved"] = f.get("bytes_read", 0) + f.get("bytes_written", 0)
    f = f[f["_moved"] > 0].sort_values(["_moved", "path"], ascending=[False, True])
    rs = f["read_strategy"] if "read_strategy" in f else pd.Series("", index=f.index)
    ws = f["write_strategy"] if "write_strategy" in f else pd.Series("", index=f.index)
    f["strategy"] = rs.where(rs.fillna("") != "", ws).fillna("")
    f["io_time"] = f.get("read_time", 0).fillna(0) + f.get("write_time", 0).fillna(0)
    return f


def _pipeline(sm: RunSummary) -> dict[str, Any]:
    """Is this run waiting for its data: the verdict, what the wait is made of, per epoch."""
    p = sm.pipeline
    found = {
        "shapes": [sh.text for sh in (sm.file_shapes.shapes if sm.file_shapes else [])],
        "completeness": [c.message + (f": {c.why}" if c.why else "") for c in sm.completeness],
        "artefacts": [
            f"{a.path}: {a.ops} operations ({fmt.human_bytes(a.bytes_read)} read, "
            f"{fmt.human_bytes(a.bytes_written)} written) at {a.start:.2f} s: {a.message}"
            for a in sm.artefacts
        ],
    }
    if not p.available or p.totals is None or p.verdict is None:
        return {"available": False, "reason": p.reason, **found}
    t = p.totals
    wait = [
        ("storage reads in flight", t.read_in_wait_share),
        ("metadata calls (open, stat, seek, close)", t.meta_in_wait_share),
        ("neither: decoding, augmentation, collation, copies", t.other_in_wait_share),
    ]
    return {
        "available": True,
        "title": p.verdict.title,
        "text": p.verdict.text[0].upper() + p.verdict.text[1:] + ".",
        "wait": [(name, fmt.share(v)) for name, v in wait if v is not None],
        "wait_source": _wait_source(p),
        "numbers": [
            ("AU (first step left out)", fmt.share(t.au)),
            ("compute / epoch (first step in)", fmt.share(t.compute_share)),
            ("compute per rank", fmt.seconds(t.compute_per_rank)),
            ("data wait per rank", fmt.seconds(t.wait_per_rank)),
            ("first batch's wait (max)", fmt.seconds(t.first_wait_max)),
            ("first step (max)", fmt.seconds(t.first_step_max)),
            ("samples/s, all ranks", fmt.number(t.samples_per_s)),
            ("in reads, per rank (all its processes)", fmt.seconds(t.read_time_per_rank)),
            ("before the first epoch", fmt.seconds(t.startup)),
        ],
        "epochs": records_table(p.epochs, PIPELINE_EPOCHS, limit=50),
        "coverage": p.coverage,
        "dlio": p.dlio.text if p.dlio else "",
        "replay": p.dlio.replay.text if p.dlio and p.dlio.replay else "",
        "replay_limits": p.dlio.replay.limits if p.dlio and p.dlio.replay else [],
        "unoverlapped": _unoverlapped(p),
        **found,
    }


def _timeline(ctx: Context, r: RunView) -> dict[str, str] | None:
    """The run's timeline file, linked from where the report is, with what it leaves out."""
    tl = r.summary.timeline
    f = r.analysis_dir / tl.file if tl.file else None
    if f is None or not f.is_file():
        return None
    cut = (
        f"It ends {tl.cut}; "
        + ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in tl.left_out.items() if n)
        + " are left out of it."
        if tl.cut
        else "It holds the whole run."
    )
    return {
        "href": os.path.relpath(f.resolve(), ctx.figs.root.parent.resolve()),
        "text": f"{tl.slices:,} slices. {cut}",
    }


def _wait_source(p) -> str:
    if p.wait_source == "gaps":
        return "the gaps between the steps"
    if p.wait_source == "estimated":
        return "estimated: " + p.timing.method
    return {
        "hooks": "as iosweep's hooks timed it",
        "events": "from the trace's own fetch events",
    }.get(p.timing.source, "as the training script timed it")


def _unoverlapped(p) -> str:
    """DFAnalyzer's overlap figures in one sentence (and dftracer-analyzer's own way)."""
    u = p.unoverlapped
    if not u.available or u.totals is None:
        return ""
    t = u.totals
    return (
        f"Not hidden by computation (DFAnalyzer's figures, all ranks, exact unions): "
        f"{fmt.seconds(t.unoverlapped_app_io_time)} of {fmt.seconds(t.app_io_time)} of "
        f"application I/O, {fmt.seconds(t.unoverlapped_posix_io_time)} of "
        f"{fmt.seconds(t.posix_io_time)} of POSIX I/O, beside "
        f"{fmt.seconds(t.compute_time)} of compute; dftracer-analyzer's way (summed durations "
        f"less summed compute, per process) gives {fmt.seconds(t.u_app_io_dfa)} and "
        f"{fmt.seconds(t.u_posix_io_dfa)}"
    )


def _overlap(sm: RunSummary) -> dict[str, Any]:
    """The I/O-vs-compute overlap (as DFAnalyzer's overlap summary): sentence and per-epoch rows."""
    ov = sm.overlap
    if not ov.available:
        return {"text": f"Not available: {ov.reason}." if ov.reason else "", "epochs": None}
    text = (
        f"Compute known from {ov.compute_source or '?'}. Up to "
        f"{fmt.seconds(ov.exposed_io_time_in_epochs_max)} of a rank's I/O inside the epochs ran "
        f"with no compute alongside ({fmt.share(ov.exposed_share_of_epochs_max)} of its epoch time); "
        f"{fmt.seconds(ov.io_time_outside_epochs_max)} of I/O fell outside the epochs."
    )
    return {"text": text, "epochs": records_table(ov.epochs, OVERLAP_EPOCHS, limit=50)}


def _signatures(sm: RunSummary) -> list[dict[str, str]]:
    groups = sm.temporal.signature_groups.get("all") or []
    return [
        {
            "ranks": ", ".join(str(x) for x in g.ranks[:16])
            + (" ..." if len(g.ranks) > 16 else ""),
            "signature": str(g.example or "")[:1500],
        }
        for g in groups[:6]
    ]
