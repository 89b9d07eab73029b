"""The verdict: the first thing the report says, per framework and workload. Where the I/O
happens and how much of the run it takes, whether training waits for its data (and why),
what each lever of the sweep did, and how far it scales."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from iosweep.analysis.summary import LeverSeries, Pipeline, Placement, RunSummary
from iosweep.report import fmt
from iosweep.report.data import RunView
from iosweep.report.sections import Context
from iosweep.report.sections.tune import card_line as tune_card_line
from iosweep.report.tables import Column, Table, records_table
from iosweep.report.words import lever_series_text

RUNS = [
    Column("label", "run"),
    Column("verdict", "verdict"),
    Column("au", "AU", fmt.share, num=True),
    Column("compute_share", "compute / epoch", fmt.share, num=True),
    Column("wait", "data wait per rank", fmt.seconds, num=True),
    Column("samples_per_s", "samples/s", fmt.number, num=True),
    Column("read_share", "wait with reads in flight", fmt.share, num=True),
]


def workload(r: RunView) -> str:
    return str(r.param("workload", "") or "")


def group_name(framework: str, wl: str) -> str:
    names = {"imagenet": "ImageNet-style", "mnist": "MNIST"}
    return f"{framework or 'Applications'}" + (f" · {names.get(wl, wl)}" if wl else "")


def where_io_happens(sm: RunSummary) -> str:
    """ "225.1 MB read before training; 181.7 kB of checkpoints; I/O during 0.1 s, 1% of the run"."""
    pl: Placement = sm.placement
    parts = []
    for name, p in pl.places.items():
        if not (p.bytes_read or p.bytes_written):
            continue
        moved = []
        if p.bytes_read:
            moved.append(f"{fmt.human_bytes(p.bytes_read)} read")
        if p.bytes_written:
            moved.append(f"{fmt.human_bytes(p.bytes_written)} written")
        where = "for checkpoints" if name == "checkpoints" else name
        parts.append(f"{' and '.join(moved)} {where}")
    if not parts:
        return ""
    if not pl.known:  # no epochs to place it in: every place but "before training" is empty
        moved = [
            f"{fmt.human_bytes(b)} {what}"
            for what, b in (
                ("read", sum(p.bytes_read for p in pl.places.values())),
                ("written", sum(p.bytes_written for p in pl.places.values())),
            )
            if b
        ]
        parts = [" and ".join(moved) + " over the run"]
    share = (
        f", {fmt.share(pl.io_share_of_run)} of the run" if pl.io_share_of_run is not None else ""
    )
    text = "; ".join(parts) + f"; I/O in progress during {fmt.seconds(pl.io_time)}{share}"
    return text[0].upper() + text[1:]


def _verdicts_said(runs: list[RunView]) -> str:
    """ "input-bound by preprocessing in 2 of 3 runs (loader workers 0, 2); compute-bound in 1"."""
    kinds: dict[str, list[RunView]] = defaultdict(list)
    for r in runs:
        v = r.summary.pipeline.verdict
        if v is not None:  # by kind and grade: each run's own share of the wait is its own
            graded = v.grade and v.kind.startswith("input-bound")
            # (the title less its figures: "Input-bound by storage", "Not waiting ...")
            head = v.title.split(" (")[0].split(": ")[0]
            kinds[head + (f" ({v.grade}ly)" if graded else "")].append(r)
    parts = []
    for title, rs in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        workers = sorted(
            {r.param("loader_workers") for r in rs if r.param("loader_workers") is not None}
        )
        extra = (
            f" (loader workers {', '.join(map(str, workers))})"
            if workers and len(kinds) > 1
            else ""
        )
        parts.append(
            f"{title[0].lower()}{title[1:]} in {len(rs)} of {len(runs)} run{'s' if len(runs) != 1 else ''}{extra}"
        )
    return "; ".join(parts)


def _representative(runs: list[RunView]) -> RunView:
    """The largest run whose verdict is the group's commonest."""
    common = Counter(r.summary.pipeline.verdict.kind for r in runs if r.summary.pipeline.verdict)
    top = common.most_common(1)[0][0] if common else None
    pool = [
        r for r in runs if r.summary.pipeline.verdict and r.summary.pipeline.verdict.kind == top
    ] or runs
    return max(pool, key=lambda r: (r.ranks or 0, r.nodes or 0, -r.rep))


def _row(r: RunView) -> dict[str, Any]:
    p = r.summary.pipeline
    t, v = p.totals, p.verdict
    return {
        "label": r.label,
        "verdict": v.title if v else f"not available: {p.reason}",
        "au": t.au if t else None,
        "compute_share": t.compute_share if t else None,
        "wait": t.wait_per_rank if t else None,
        "samples_per_s": t.samples_per_s if t else None,
        "read_share": t.read_in_wait_share if t else None,
    }


def timing_text(p: Pipeline) -> str:
    """How the run's steps and waits were timed, for a reader: the hooks' loop and cost, or an
    estimate said to be one."""
    t = p.timing
    if t.source == "hooks" and p.available:
        cost = ""
        if t.overhead_s is not None and t.batches:
            cost = (
                f"; their bookkeeping took {fmt.seconds(t.overhead_s)} over {t.batches:,} batches"
            )
        text = f"Steps timed by iosweep's hooks, without changing the script: {t.loop}, {t.method}{cost}"
    elif t.source == "script" and p.available:
        text = "Steps timed by the training script itself"
    elif t.source == "events" and p.available:
        text = f"Steps from the trace's own annotations ({t.loop}): {t.method}"
    else:
        return ""
    if t.wait == "estimated":
        text += ". The data wait is an estimate, not a measurement"
    if p.dlio is not None:
        text += f". {p.dlio.text}"
    if t.other_loops:
        text += f". Other loops (not the training loop): {', '.join(t.other_loops)}"
    return text + "."


def host_text(p: Pipeline) -> str:
    """What the ranks' processes did on their host's cores during training, from /proc; or
    that it was not measured (a trace from elsewhere)."""
    h = p.host
    if not h.available:
        return h.reason
    n = max(h.nodes, key=lambda x: x.busy_share or 0) if h.nodes else None
    parts = []
    if n is not None and n.cores_usable:
        busy = (
            f", {fmt.share(n.busy_share)} busy during training" if n.busy_share is not None else ""
        )
        parts.append(f"{n.cores_usable:g} usable cores{busy}")
    if h.rank_cores is not None:
        parts.append(
            f"a rank used {h.rank_cores:.2f} cores in its own process and "
            f"{h.other_cores or 0:.2f} in the processes below it"
        )
    if h.core_wait_share is not None:
        parts.append(
            f"its threads waited for a core {fmt.share(h.core_wait_share)} of the time they could run"
        )
    moved = [
        f"{fmt.human_bytes(v)} {what}"
        for v, what in ((h.rchar, "through read calls"), (h.read_bytes, "from storage"))
        if v is not None
    ]
    if h.majflt is not None:
        moved.append(f"{h.majflt:,.0f} major page faults")
    if moved:
        parts.append("all ranks: " + ", ".join(moved))
    interval = next((r.interval_s for r in h.ranks if r.interval_s), None)
    return "; ".join(parts) + (
        f" (the kernel's counts, sampled every {interval:g} s)" if interval else ""
    )


def _levers(ctx: Context, framework: str, wl: str) -> list[str]:
    """What each lever did, per series of the group; a series named by the parameters that
    tell it from the group's others (tracer, a job's own parameters ...)."""
    series: list[LeverSeries] = [
        s
        for s in ctx.sweep.pipeline.levers
        if s.key.get("framework") == framework and (s.key.get("workload") or "") == wl
    ]
    differ = [
        k
        for k in dict.fromkeys(k for s in series for k in s.key)
        if len({str(s.key.get(k)) for s in series}) > 1
    ]
    out = []
    for s in series:
        named = ", ".join(f"{k} {s.key.get(k)}" for k in differ)
        out.append(s.text + (f" ({named})" if named else "") + lever_series_text(s)[len(s.text) :])
    return out


def section(ctx: Context) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[RunView]] = defaultdict(list)
    for r in ctx.runs:
        if r.has_io or r.summary.pipeline.available:
            groups[(r.framework, workload(r))].append(r)
    out = []
    for (fw, wl), runs in sorted(groups.items()):
        rep = _representative(runs)
        p = rep.summary.pipeline
        out.append(
            {
                "name": group_name(fw, wl),
                "run": rep.label,
                "slug": rep.slug,
                "title": p.verdict.title
                if p.verdict
                else "Whether training waits for its data: not known"
                if fw
                else "The I/O only: these logs record no compute phases",
                "said": _verdicts_said(runs),
                "text": (p.verdict.text[0].upper() + p.verdict.text[1:] + ".")
                if p.verdict
                else (p.reason[:1].upper() + p.reason[1:] + "."),
                "where": where_io_happens(rep.summary),
                "levers": ctx.levers(rep),
                "trends": _levers(ctx, fw, wl),
                "tuned": tune_card_line(ctx, fw, wl),
                # the pipeline's columns (AU, compute per epoch ...) mean nothing for an
                # application's logs
                "table": records_table([_row(r) for r in runs], RUNS)
                if len(runs) > 1 and any(r.training for r in runs)
                else Table(RUNS, []),
                "au_label": p.au_label,
                "timing": timing_text(p),
                "host": host_text(p) if p.available else "",
                "has_verdict": p.verdict is not None,
                "completeness": [
                    c.message + (f": {c.why}" if c.why else "") for c in rep.summary.completeness
                ],
            }
        )
    return out
