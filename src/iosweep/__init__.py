"""iosweep: sweep instrumented Horovod training and compare its I/O across scale.

``iosweep.open(path)`` opens a trace store, a run's analysis or a sweep's results in a
notebook (:mod:`iosweep.notebook`); loaded on first use, so that the step hooks, which import
this package in every process of a training job, load nothing more.
"""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("open", "Run", "Sweep"):
        from iosweep import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'iosweep' has no attribute {name!r}")
