"""Snakemake adapter for rule prepare_imagenet (logic: iosweep.run.imagenet)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.run.imagenet import prepare_imagenet  # noqa: E402

p = snakemake.params  # noqa: F821
prepare_imagenet(
    Path(snakemake.output[0]).parent,  # noqa: F821
    source=p.source,
    classes=p.classes,
    images_per_class=p.images_per_class,
    seed=p.seed,
    image_scale=p.image_scale,
    workers=p.workers or snakemake.threads,  # noqa: F821
)
