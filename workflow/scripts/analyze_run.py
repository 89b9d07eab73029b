"""Snakemake adapter for rule analyze_run (logic: iosweep.analysis)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.analysis import AnalysisSettings, analyze_run  # noqa: E402

smk = snakemake  # noqa: F821
analyze_run(
    Path(smk.input.meta).parent,
    Path(smk.output.summary).parent,
    AnalysisSettings.from_dict(smk.params.settings),
)
