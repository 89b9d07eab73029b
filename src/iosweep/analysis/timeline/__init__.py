"""What each rank did when: a run as a timeline, in the Chrome trace-event JSON format that
ui.perfetto.dev, Perfetto's trace processor and Catapult's trace viewer read.

Reads what the analysis reads (``RunData``: the steps and waits the pipeline measured,
recovered from the trace's annotations where the run has no step records; every traced
read, write and app event with its process and thread) and the run's summary (verdict,
AU, checkpoints). ``export`` builds ``timeline.json.gz`` beside the analysis: one process
track per rank, its training loop (steps, waits) and each of its processes and threads
(loader workers included) as threads, epochs and checkpoints as markers, cut where
``analysis.timeline`` says, and saying so. docs/analysis.md, "Timeline", has the layout.
"""
