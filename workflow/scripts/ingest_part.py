"""Snakemake adapter for rule ingest_part (logic: iosweep.trace.ingest.inparts)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.trace.ingest.inparts import read_part  # noqa: E402

smk = snakemake  # noqa: F821
part = read_part(
    [Path(p) for p in smk.params.logs],
    Path(smk.output.part),
    int(smk.wildcards.part),
    smk.params.parts,
    exclude=[Path(smk.params.store)],  # its merged log, where one was written
    memory_gb=smk.params.memory_gb,  # the run's budget, as its analysis'
)
size = sum(r.size for r in part.logs)
print(
    f"part {part.index + 1} of {part.count}: {len(part.logs)} log(s) ({size / 2**20:.1f} MiB) "
    f"read by {part.readers} process(es)"
)
