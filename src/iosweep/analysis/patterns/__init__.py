"""The I/O patterns an HPC I/O expert looks at, per run.

Each module reads the run's operations, counters and events (``RunData``) and answers one
question: ``access`` (file-per-process or shared, whole or partitioned), ``spatial``
(contiguous, strided, random), ``temporal`` (signatures and phases), ``sizes`` (request
sizes), ``alignment`` (file-system and Lustre alignment), ``metadata`` (opens, stats,
seeks, and their time), ``checkpoints`` (who writes them, how often, how long),
``mpiio`` and ``layers`` (the layers above and below POSIX), ``shapes`` (how a class's files
are read, said once), ``volume`` (per-rank and per-file volumes, imbalance) and
``artefacts`` (tracer artefacts, left out before the rest looks).
"""
