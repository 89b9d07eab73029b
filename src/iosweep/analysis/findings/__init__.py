"""What the other rooms found, put together: the summary's sections every run's analysis
states (``sections``: status, ranks, volume, imbalance, headline, the written file tables),
the comparison across the sweep (``sweep.analyze_sweep``), the rules an I/O expert would
state (``rules``) and the sample of operations the report draws (``sample``). Writes only
through the hand-off's models (``iosweep.analysis.summary``).
"""
