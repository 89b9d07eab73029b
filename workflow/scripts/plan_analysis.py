"""Snakemake adapter for checkpoint plan_analysis (logic: iosweep.analysis.parts)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.analysis import AnalysisSettings  # noqa: E402
from iosweep.analysis.parts.analyze import write_plan  # noqa: E402

smk = snakemake  # noqa: F821
parts = write_plan(
    Path(smk.input.meta).parent,
    smk.output.plan,
    AnalysisSettings.from_dict(smk.params.settings).memory_gb,
)
print(f"{len(parts)} parts" if len(parts) > 1 else "one part: analysed by rule analyze_run")
