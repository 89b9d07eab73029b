"""Snakemake adapter for rule analyze_run (logic: iosweep.analysis): the run's one part
analysed here, or its parts (rule analyze_part, one job each) put together."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.analysis import AnalysisSettings, analyze_run  # noqa: E402
from iosweep.analysis.parts.analyze import read_plan, write_combined  # noqa: E402

smk = snakemake  # noqa: F821
store, out = Path(smk.input.meta).parent, Path(smk.output.summary).parent
settings = AnalysisSettings.from_dict(smk.params.settings)
parts = read_plan(smk.input.plan)
if len(parts) > 1:
    dirs = [Path(getattr(smk.input, f"part{p.index}")) for p in parts]
    write_combined(store, out, dirs, settings, jobs=smk.threads)
else:
    analyze_run(store, out, settings, parts=parts)
