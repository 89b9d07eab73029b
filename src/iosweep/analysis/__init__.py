"""I/O pattern analysis of trace stores, per run and across the sweep (docs/analysis.md).

``analyze_run(store, out_dir, settings)`` writes ``summary.json`` (its shape:
:mod:`iosweep.analysis.summary`) and Parquet tables for one run; ``analyze_sweep(summaries,
out_dir, settings)`` compares runs across the sweep.

The names below are loaded on first use, so that importing :mod:`iosweep.analysis.summary`
(as the report does) does not load the analysis and trace code.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "AnalysisSettings": "iosweep.analysis.settings",
    "analyze_run": "iosweep.analysis.parts.analyze",
    "analyze_sweep": "iosweep.analysis.findings.sweep",
    "load_summary": "iosweep.analysis.findings.sweep",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'iosweep.analysis' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
