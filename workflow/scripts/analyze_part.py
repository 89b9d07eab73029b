"""Snakemake adapter for rule analyze_part (logic: iosweep.analysis.parts)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.analysis import AnalysisSettings  # noqa: E402
from iosweep.analysis.parts.analyze import read_plan  # noqa: E402
from iosweep.analysis.parts.run import analyze_part  # noqa: E402

smk = snakemake  # noqa: F821
part = read_plan(smk.input.plan)[int(smk.wildcards.index)]
analyze_part(
    Path(smk.input.meta).parent,
    part,
    Path(smk.output.part),
    AnalysisSettings.from_dict(smk.params.settings),
)
