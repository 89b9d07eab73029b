"""The HTML comparison report: ``render_report(analysis_dirs, sweep_dir, out_html, settings)``.

One self-contained HTML file (figures embedded, CSS inline, no script, nothing fetched) plus
the figures as PNG files under ``<out_html dir>/figures/``. Templates: ``report/templates/``.
"""

from iosweep.report.render import render_report
from iosweep.report.settings import ReportSettings

__all__ = ["ReportSettings", "render_report"]
