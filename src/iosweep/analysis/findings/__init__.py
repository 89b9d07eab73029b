"""What the other rooms found, put together: a run's ``summary.json`` and tables
(``run.analyze_run``), the comparison across the sweep (``sweep.analyze_sweep``), the
insights an I/O expert would state (``insights``) and the sample of operations the report
draws (``sample``). Reads a trace store through ``RunData``; writes only through the
hand-off's models (``iosweep.analysis.summary``).
"""
