"""The run stage: datasets, launch commands, tracers, the per-rank wrapper, training and the runner."""
