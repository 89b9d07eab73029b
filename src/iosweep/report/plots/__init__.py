"""The report's figures, drawn with matplotlib's Agg renderer (no pyplot, no global state),
from the analysis' files alone: per-operation figures from the ops sample
(``ops_sample.parquet``, sampled by the analysis and, above ``max_points``, again here),
per-run figures from its tables, sweep figures from the sweep files.

Every text a figure draws goes through the anonymizer first (labels are built from paths and
host names); ``figure_texts`` lists what was drawn, so tests can check it.

``base``: style, rendering, size bins and axes; ``ops``: spatial and temporal figures;
``run``: request sizes, nodes, I/O against compute; ``sweep``: scaling, levers, frameworks.
"""

from iosweep.report.plots.base import figure_texts, new_figure, render_png, size_bin
from iosweep.report.plots.ops import OpsSample, ops_sample, spatial_figure, temporal_figure
from iosweep.report.plots.run import account_figure, nodes_figure, overlap_figure, sizes_figure
from iosweep.report.plots.sweep import (
    drawable,
    frameworks_figure,
    levers_figure,
    panels_from,
    scaling_figure,
)

__all__ = [
    "OpsSample",
    "account_figure",
    "drawable",
    "figure_texts",
    "frameworks_figure",
    "levers_figure",
    "new_figure",
    "nodes_figure",
    "ops_sample",
    "overlap_figure",
    "panels_from",
    "render_png",
    "scaling_figure",
    "size_bin",
    "sizes_figure",
    "spatial_figure",
    "temporal_figure",
]
