"""Snakemake adapter for rule prepare_dataset (logic: iosweep.run.dataset)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.run.dataset import prepare_dataset  # noqa: E402

p = snakemake.params  # noqa: F821
prepare_dataset(
    Path(snakemake.output[0]).parent,  # noqa: F821
    source=p.source,
    seed=p.seed,
    train_size=p.train_size,
    test_size=p.test_size,
    npz_copies=p.npz_copies,
    url=p.url,
)
