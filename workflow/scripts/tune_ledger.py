"""Snakemake adapter for rule tune_ledger: the last step's ledger is the tune's."""

from _bootstrap import setup

setup(snakemake)  # noqa: F821 - injected by Snakemake
from iosweep.report.tune import ledger_text  # noqa: E402
from iosweep.tune.ledger import read_ledger, write_ledger  # noqa: E402

smk = snakemake  # noqa: F821
ledger = read_ledger(smk.input.last)
write_ledger(ledger, smk.output.ledger)
print(ledger_text(ledger))
