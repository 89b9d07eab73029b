"""Snakemake adapter for rule analyze_sweep (logic: iosweep.analysis)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.analysis import AnalysisSettings, analyze_sweep  # noqa: E402

smk = snakemake  # noqa: F821
analyze_sweep(
    [Path(p) for p in smk.input.summaries],
    Path(smk.output.sweep_parquet).parent,
    AnalysisSettings.from_dict(smk.params.settings),
)
