"""Snakemake adapter for rule replay_workload (logic: iosweep.replay.workload)."""

import json
from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.replay.workload import write_replay  # noqa: E402

smk = snakemake  # noqa: F821
write_replay(
    Path(smk.input.meta).parent,
    json.loads(Path(smk.input.summary).read_text()),
    Path(smk.output.workload),
    data_folder=Path(smk.output.data),
)
