"""Shared start of every adapter: make `iosweep` importable and send output to the rule's log.

Adapters run under Snakemake's `script:` directive, in the rule's conda env or Snakemake's own
interpreter; either way the package is taken from this repository's src/.
"""

import sys
from pathlib import Path


def setup(snakemake):
    src = str(Path(snakemake.scriptdir).resolve().parents[1] / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    if snakemake.log:
        log = open(snakemake.log[0], "w", buffering=1)  # noqa: SIM115 - lives as long as the job
        sys.stdout = sys.stderr = log
