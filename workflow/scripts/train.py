"""Snakemake adapter for rules train_<framework> (logic: iosweep.run.runner)."""

import os
import shlex
from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.run.runner import rerun_command, run_point  # noqa: E402
from iosweep.tune.points import find_point  # noqa: E402

smk = snakemake  # noqa: F821
run_point(
    smk.config,
    find_point(smk.config, smk.wildcards.run_id),
    run_dir=Path(smk.output.manifest).parent,
    dataset_dir=Path(smk.input.dataset).parent,
    allocate=bool(smk.resources.slurm_allocate),
    rerun=rerun_command(
        shlex.split(os.environ.get("IOSWEEP_WORKFLOW_ARGV", "snakemake")), smk.output.manifest
    ),
)
