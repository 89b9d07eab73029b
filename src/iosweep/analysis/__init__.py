"""I/O pattern analysis of trace stores, per run and across the sweep (docs/analysis.md).

``analyze_run(store, out_dir, settings)`` writes ``summary.json`` and Parquet tables for one
run; ``analyze_sweep(summaries, out_dir, settings)`` compares runs across the sweep.
"""

from iosweep.analysis.run import analyze_run
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.sweep import analyze_sweep, load_summary

__all__ = ["AnalysisSettings", "analyze_run", "analyze_sweep", "load_summary"]
