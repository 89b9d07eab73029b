"""render_report: analyses in, one self-contained HTML file (+ its figures as PNG files) out.

The HTML embeds its figures as base64 PNGs and its CSS inline, loads nothing from anywhere
(a Content-Security-Policy forbids it), and has no script. Every string from traces,
manifests or configs reaches the page through Jinja's autoescaping, after the anonymizer
(Jinja ``finalize``). The page is ``report.html.j2``, one partial per section; the values
each partial prints come from the section's module in :mod:`iosweep.report.sections`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from iosweep.analysis.summary import LedgerError, read_ledger
from iosweep.files import shown, write_text
from iosweep.report import fmt
from iosweep.report.anonymize import Anonymizer, build_anonymizer, identity
from iosweep.report.data import load_runs, load_sweep
from iosweep.report.figures import FigureStore, Raw
from iosweep.report.sections import (
    Context,
    frameworks,
    overview,
    provenance,
    runs,
    sweep,
    tune,
)
from iosweep.report.settings import ReportSettings

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _environment(anon) -> jinja2.Environment:
    def finalize(v: Any) -> Any:
        # Raw: our own data URIs; Markup: a macro's output, whose parts passed here already
        if isinstance(v, Raw | markupsafe.Markup):
            return v
        if isinstance(v, str):
            return anon(v)
        return v

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every template, whatever its extension
        finalize=finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        bytes=fmt.human_bytes, secs=fmt.seconds, pct=fmt.share, num=fmt.number, metric=fmt.metric
    )
    return env


def build_page(ctx: Context) -> dict[str, Any]:
    """Every value the page prints, section by section (in page order: figures are added in
    the order they appear)."""
    page: dict[str, Any] = {"title": ctx.settings.title, "anonymized": ctx.settings.anonymize}
    page |= overview.section(ctx)
    page["sweep"] = sweep.section(ctx)
    page["tune"] = tune.section(ctx)
    page["frameworks"] = frameworks.section(ctx)
    page["runs"] = [runs.section(ctx, r) for r in ctx.runs]
    # the largest run is the one that shows sharing between ranks: open it, not the smallest
    if ctx.runs:
        largest = max(
            range(len(ctx.runs)),
            key=lambda i: (ctx.runs[i].has_io, ctx.runs[i].ranks or 0, ctx.runs[i].nodes or 0),
        )
        page["runs"][largest]["open"] = True
    page["prov"] = provenance.section(ctx)
    page["budget"] = {"limit_mb": ctx.settings.max_html_mb, "linked": 0}
    return page


def render_report(
    analysis_dirs: list[Path],
    sweep_dir: Path | None,
    out_html: Path,
    settings: ReportSettings | None = None,
    config: dict | None = None,
    ledger: Path | None = None,
) -> Path:
    """Render the report of these run analyses (and the sweep analysis, and the tune's
    ``ledger``) into ``out_html``; figures go to ``<out_html dir>/figures/``. Returns
    ``out_html``."""
    settings = settings or ReportSettings()
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    run_views, problems = load_runs([Path(p) for p in analysis_dirs])
    sweep_view = load_sweep(Path(sweep_dir) if sweep_dir else None)
    anon: Anonymizer | Any = build_anonymizer(run_views, config) if settings.anonymize else identity
    figs = FigureStore(out_html.parent, settings)
    ctx = Context(run_views, sweep_view, settings, figs, anon, config, problems)
    if ledger is not None:
        try:
            ctx.tune = read_ledger(ledger)
        except LedgerError as e:
            problems.append({"source": str(ledger), "message": str(e)})
    page = build_page(ctx)
    template = _environment(anon).get_template("report.html.j2")
    html = template.render(**page)
    # Keep the file under its size, whatever the number of runs: the figures that do not fit
    # are linked (they are files beside the HTML anyway), last runs first.
    limit = int(settings.max_html_mb * 1e6)
    while len(html.encode("utf-8")) > limit and figs.unembed(len(html.encode("utf-8")) - limit):
        page["budget"]["linked"] = figs.linked
        html = template.render(**page)
    figs.write_index()
    return write_text(out_html, shown(html))  # (a name no stage made UTF-8: said, not a crash)
