"""Section "Tuning": the tune's ledger (iosweep tune), step by step, each prediction beside
what was measured; and, for the verdict card of the tuned job's group, a line that links here."""

from __future__ import annotations

from typing import Any

from iosweep.analysis.summary import TuneLedger
from iosweep.report.sections import Context
from iosweep.report.tables import Column, records_table
from iosweep.report.tune import header, step_rows

STEPS = [
    Column("step", "step", num=True),
    Column("point", "point"),
    Column("predicted", "predicted (before it ran)"),
    Column("measured", "measured (steady state)"),
    Column("error", "model's error", num=True),
    Column("outcome", "outcome"),
    Column("why", "why"),
    Column("runs", "runs", css="mono"),
]


def section(ctx: Context) -> dict[str, Any]:
    t: TuneLedger | None = ctx.tune
    if t is None:
        return {"shown": False}
    return {
        "shown": True,
        "what": header(t)[0].upper() + header(t)[1:],
        "table": records_table(step_rows(t), STEPS),
        "stop": f"{t.stop}: {t.stop_reason}" if t.stop else "not finished",
        "recommendation": t.recommendation,
        "untried": [f"{u.lever}: {u.why}" for u in t.untried],
    }


def card_line(ctx: Context, framework: str, workload: str) -> str:
    """For the verdict card of the tuned job's group: what the tune proved."""
    t = ctx.tune
    if t is None or t.framework != framework or t.workload != workload:
        return ""
    return t.recommendation or "not finished"
