"""Horovod training jobs that iosweep traces (run by the per-rank wrapper, one process per rank)."""
