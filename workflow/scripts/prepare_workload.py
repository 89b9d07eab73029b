"""Snakemake adapter for rule prepare_workload (logic: iosweep.run.workload_data)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.run.workload_data import prepare_workload_data  # noqa: E402
from iosweep.workloads import all_workloads  # noqa: E402

smk = snakemake  # noqa: F821
prepare_workload_data(
    all_workloads(smk.config)[smk.wildcards.workload],
    Path(smk.output[0]).parent,
    smk.config["training"],
)
