"""A run's answer on the terminal: the verdict, AU, where the wait goes, the top lever and
what makes the figures incomplete, in a few plain lines (``iosweep analyze``, ``iosweep
show``, the end of a sweep); ``as_record`` is the same for scripts (``--json``).
Formatting only: it reads the run's summary (the analysis' hand-off), nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iosweep.analysis.summary import AnalysisFailure, Lever, RunSummary
from iosweep.report.words import plural

# ANSI: only when the output is a terminal (the caller decides)
_STYLE = {"bad": "\033[1;31m", "good": "\033[1;32m", "warn": "\033[1;33m", "dim": "\033[2m"}
_RESET = "\033[0m"
_TONE = {
    "compute-bound": "good",
    "input-bound-storage": "bad",
    "input-bound-preprocessing": "bad",
    "input-bound-phase-start": "bad",
    "input-bound-untraced": "bad",
    "unexplained": "warn",
    "host-cpu-bound": "bad",
}
# insights that say the figures miss something (shown as warnings, whatever their severity)
_COMPLETENESS = ("truncated_trace", "io_without_metadata", "no_io_recorded", "trace_missed_")


def _pct(v: float | None) -> str:
    return f"{v:.0%}" if isinstance(v, int | float) else "n/a"


ACCOUNT_WORDS = {
    "compute": "compute",
    "wait_steady": "waiting in steady state",
    "wait_phase_start": "waiting for each epoch's first batch",
    "collectives": "collectives",
    "evaluation": "evaluation",
    "checkpoint": "checkpoints",
    "startup": "start-up",
    "unexplained": "unexplained",
}


def account_line(acc) -> str:
    """ "time a rank (379 s): compute 64%, waiting for each epoch's first batch 14%, ..."."""
    parts = [
        f"{ACCOUNT_WORDS[x.kind]} {_pct(x.share)}"
        for x in sorted(acc.slices, key=lambda x: -x.seconds)
        if x.seconds > 0
    ]
    return f"time a rank ({acc.window_per_rank:.3g} s): " + ", ".join(parts)


def _warnings(sm: RunSummary) -> list[str]:
    # a run analysed in part (iosweep analyze --ranks) says so first: its totals are partial
    out = [x for x in sm.limitations if x.startswith("only ranks ")]
    out += [i.title for i in sm.insights if i.id.startswith(_COMPLETENESS)]
    errors = [i for i in sm.issues if i.severity == "error"]
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        out.append(f"{errors[0].source}: {errors[0].message}{more}")
    if sm.pipeline.coverage:
        out.append(sm.pipeline.coverage)
    if sm.timeline.cut and sm.timeline.file:
        out.append(f"the timeline is cut {sm.timeline.cut}")
    return out


def as_record(
    sm: RunSummary | AnalysisFailure, where: Path | str, levers: list[Lever] | None = None
) -> dict[str, Any]:
    """The run's answer as plain data (``--json``). ``levers``: the run's levers as its
    sweep's measurements leave them (PipelineAcross.advised), where they differ from its
    verdict's."""
    if isinstance(sm, AnalysisFailure):
        return {"run_id": sm.run_id, "analysis": str(where), "status": "error", "error": sm.error}
    p, t = sm.pipeline, sm.pipeline.totals
    v = p.verdict
    top = (levers if levers is not None else v.levers if v else [])[:1]
    return {
        "run_id": sm.run_id,
        "analysis": str(where),
        "status": sm.analysis_status,
        "verdict": v.kind if v and p.available else None,
        "title": v.title if v and p.available else None,
        "au": t.au if t else None,
        "wait_per_rank_s": t.wait_per_rank if t else None,
        "epoch_time_per_rank_s": t.epoch_time_per_rank if t else None,
        "wait_shares": {
            "reads": t.read_in_wait_share,
            "metadata": t.meta_in_wait_share,
            "other": t.other_in_wait_share,
        }
        if t
        else None,
        "top_lever": top[0].text if top else None,
        "top_lever_source": top[0].source if top else None,
        "why_no_verdict": "" if p.available else p.reason,
        "warnings": _warnings(sm),
        "timeline": str(Path(where) / sm.timeline.file) if sm.timeline.file else None,
        "checks": [c.model_dump(by_alias=True) for c in sm.checks],
    }


def checks_line(sm: RunSummary) -> str:
    """Every rule's outcome in one line: how many of each, naming the found and the
    not-checked (those a reader must look at)."""
    by: dict[str, list[str]] = {}
    for c in sm.checks:
        by.setdefault(c.outcome, []).append(c.id)
    parts = []
    for outcome in ("found", "passed", "not-applicable", "not-checked"):
        ids = by.get(outcome, [])
        if ids:
            named = f" ({', '.join(ids)})" if outcome in ("found", "not-checked") else ""
            parts.append(f"{len(ids)} {outcome.replace('-', ' ')}{named}")
    return "checks: " + "; ".join(parts)


def run_text(
    sm: RunSummary | AnalysisFailure,
    where: Path | str,
    color: bool = False,
    levers: list[Lever] | None = None,
) -> str:
    """A few plain lines: what the run's analysis says first."""
    if isinstance(sm, AnalysisFailure):
        return f"{sm.run_id}: the analysis failed: {sm.error}\n  -> {where}"

    def style(tone: str, text: str) -> str:
        return f"{_STYLE[tone]}{text}{_RESET}" if color and tone in _STYLE else text

    r = as_record(sm, where, levers)
    n = sm.ranks.count
    head = f"{sm.run_id}: {sm.analysis_status}, {plural(n, sm.ranks.kind)}"
    lines = [style("dim", head) if color else head]
    p, t = sm.pipeline, sm.pipeline.totals
    if p.available and p.verdict and t:
        tone = _TONE.get(p.verdict.kind, "warn")
        lines.append("  " + style(tone, p.verdict.title) + f" (AU {_pct(t.au)})")
        if t.wait_per_rank is not None and t.epoch_time_per_rank:
            ws = r["wait_shares"]
            split = (
                f"reads {_pct(ws['reads'])}, metadata {_pct(ws['metadata'])}, neither (decode, "
                f"collate, ...) {_pct(ws['other'])}"
                if ws["reads"] is not None or ws["other"] is not None
                else "not known (not traced)"
            )
            lines.append(
                f"  waits {t.wait_per_rank:.3g} s of {t.epoch_time_per_rank:.3g} s per rank for "
                f"data in steady state (each epoch's first batch left out); in the wait: {split}"
            )
        if p.account.available:
            lines.append("  " + account_line(p.account))
        if r["top_lever"]:
            said = {"measured": " (as this sweep measured)", "predicted": " (predicted)"}
            lines.append(f"  first lever{said.get(r['top_lever_source'], '')}: {r['top_lever']}")
    else:
        lines.append(
            f"  whether it waited for its data: not known: {p.reason or 'no step records'}"
        )
    lines += ["  " + style("warn", "warning: ") + w for w in r["warnings"]]
    if sm.checks:
        lines.append("  " + checks_line(sm))
    lines.append(f"  -> {where}" + (f" (timeline: {r['timeline']})" if r["timeline"] else ""))
    return "\n".join(lines)
