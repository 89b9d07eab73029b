"""Snakemake adapter for rule report (logic: iosweep.report)."""

import sys
from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.report import ReportSettings, render_report  # noqa: E402

smk = snakemake  # noqa: F821
out = render_report(
    [Path(p).parent for p in smk.input.summaries],
    Path(smk.input.sweep_parquet).parent,
    Path(smk.output.html),
    ReportSettings.from_dict(smk.params.report),
    config=smk.params.config,
    ledger=Path(smk.input.get("ledger")) if smk.input.get("ledger") else None,
)
print(f"report written: {out.resolve()}")  # into the rule's log
# and to the terminal the workflow runs in (setup() sent stdout to the log)
print(f"Report: {out.resolve()}", file=sys.__stdout__, flush=True)
