"""The tune's ledger in words: on the terminal (``iosweep tune``, ``iosweep show``) and as
the rows of the report's "Tuning" section. Formatting only."""

from __future__ import annotations

from iosweep.analysis.summary import TuneLedger, TuneMeasurement, TuneStep
from iosweep.units import rate_text


def measured_text(m: TuneMeasurement) -> str:
    if not m.ok:
        return f"failed ({len(m.failures)} of {len(m.run_ids)} runs)"
    spread = (
        f" [{rate_text(m.samples_per_s_min)}-{rate_text(m.samples_per_s_max)}]" if m.ok > 1 else ""
    )
    au = f", AU {m.au:.0%}" if m.au is not None else ""
    return f"{rate_text(m.samples_per_s)} samples/s{spread} over {m.ok} runs{au}"


def predicted_text(step: TuneStep) -> str:
    p = step.prediction
    if p is None:
        return "-"
    return f"{rate_text(p.samples_per_s)} samples/s ({p.gain:+.0%}), AU {p.au:.0%}, limited by {p.bottleneck}"


def error_text(step: TuneStep) -> str:
    return "-" if step.error is None else f"{step.error:+.0%}"


def step_rows(ledger: TuneLedger) -> list[dict[str, str]]:
    """One row a step: what was tried, predicted, measured, and kept or not."""
    return [
        {
            "step": str(s.step),
            "point": s.lever or f"start: loader workers {s.measured.loader_workers}",
            "predicted": predicted_text(s),
            "measured": measured_text(s.measured),
            "error": error_text(s),
            "outcome": s.outcome,
            "why": s.why,
            "runs": ", ".join(s.measured.run_ids),
        }
        for s in ledger.steps
    ]


def header(t: TuneLedger) -> str:
    """What was tuned, from where, with what budget."""
    ranks = t.start.get("ranks")
    return (
        f"tune of {t.workload} ({t.framework}, {ranks} rank{'s' if ranks != 1 else ''}) from "
        f"loader workers {t.start.get('loader_workers')}: {t.reruns} of {t.budget} reruns, "
        f"{t.repeats} runs a point, target AU {t.target_au:.0%}"
    )


def ledger_text(ledger: TuneLedger) -> str:
    lines = [header(ledger)]
    for s in ledger.steps:
        head = s.lever or f"start (loader workers {s.measured.loader_workers})"
        lines.append(f"  step {s.step}: {head}")
        if s.prediction is not None:
            lines.append(f"    predicted {predicted_text(s)}")
        lines.append(f"    measured  {measured_text(s.measured)}")
        if s.error is not None:
            lines.append(f"    the model's error {error_text(s)}")
        if s.step:
            lines.append(f"    {s.outcome}: {s.why}")
        for f in s.measured.failures:
            lines.append(f"    failed: {f}")
    if ledger.next is not None:
        lines.append(f"  next: loader workers {ledger.next}")
    else:
        lines.append(f"  stopped ({ledger.stop}): {ledger.stop_reason}")
        lines.append(f"  recommendation: {ledger.recommendation}")
    for u in ledger.untried:
        lines.append(f"  not tried: {u.lever}: {u.why}")
    return "\n".join(lines)
