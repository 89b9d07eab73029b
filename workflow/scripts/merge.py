"""Snakemake adapter for rule merged_log (logic: iosweep.trace.ingest.merged)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.trace.ingest import MERGED_DARSHAN, write_merged_darshan  # noqa: E402

smk = snakemake  # noqa: F821
store = Path(smk.input.meta).parent
issues = write_merged_darshan(store)
merged = store / MERGED_DARSHAN
lines = [f"{merged}" if merged.exists() else "no merged log: no per-process Darshan log"]
lines += [f"{i.severity}: {i.message}" for i in issues]
Path(smk.output.record).write_text("\n".join(lines) + "\n")
