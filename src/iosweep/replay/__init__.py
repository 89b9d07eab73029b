"""A measured run replayed at larger scale with DLIO (docs/replay.md): its own stage, above
the run and the analysis. :mod:`.measure` takes from a run's trace what DLIO's workload needs,
:mod:`.dlio` writes, runs and reads DLIO (and calibrates its compute time), :mod:`.workload`
puts them together for ``iosweep replay`` and the workflow's rule ``replay_workload``."""
