"""Snakemake adapter for rules ingest_run and ingest_external (logic: iosweep.trace.ingest)."""

from pathlib import Path

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.trace.ingest import ingest  # noqa: E402

smk = snakemake  # noqa: F821
store = Path(smk.output.meta).parent
parts = [Path(p) for p in smk.input.parts] or None  # config ingest.parts: read by other jobs
if hasattr(smk.input, "manifest"):  # Namedlist: `in` tests values, not names
    run_dir = Path(smk.input.manifest).parent
    ingest(
        [run_dir],
        store,
        manifest=run_dir / "manifest.json",
        run_id=smk.wildcards.run_id,
        from_parts=parts,
        memory_gb=smk.params.memory_gb,  # the run's budget, as its analysis'
    )
else:
    manifest = Path(smk.params.manifest) if smk.params.manifest else None
    ingest(
        [Path(p) for p in smk.params.logs],
        store,
        manifest=manifest,
        run_id=f"external~{smk.wildcards.name}",
        params=dict(smk.params.labels),
        from_parts=parts,
        memory_gb=smk.params.memory_gb,  # the run's budget, as its analysis'
    )
