"""Is training waiting for its data, how much, why, and which lever helps.

Reads a run's step records (the manifest's steps, on the store's clock: ``RunData.steps``)
beside its operations: ``epochs`` (each rank's epoch windows and where each operation falls),
``waits`` (per rank and epoch: compute, data wait, AU, what the wait is made of; the
run's totals and how its steps were timed), ``verdict`` (compute-bound, input-bound by
storage or by preprocessing, start-up, undecided, and the levers to try), ``overlap`` (I/O
against compute), ``completeness`` (whether the trace saw what the run must have read and
written), and, across the sweep, ``levers`` (what each lever the sweep turned did, how far
the input keeps up with scale).
"""
