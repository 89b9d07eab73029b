"""Snakemake adapter for checkpoint tune_step (logic: iosweep.tune)."""

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.analysis.settings import AnalysisSettings  # noqa: E402
from iosweep.report.tune import ledger_text  # noqa: E402
from iosweep.tune.ledger import run_step  # noqa: E402
from iosweep.tune.points import tune_plan  # noqa: E402

smk = snakemake  # noqa: F821
ledger = run_step(
    tune_plan(smk.config),
    smk.input.get("previous"),
    list(smk.input.runs),
    smk.output.ledger,
    AnalysisSettings.from_dict(smk.params.analysis).lever_min_gain,
)
print(ledger_text(ledger))
