"""What the report reads: each run's analysis (summary.json, through
:mod:`iosweep.analysis.summary`, and the tables beside it) and the sweep analysis
(sweep.parquet, and scaling.json, insights_across.json, overhead.json through the same
module). Nothing else: never a trace store, never the analysis code. A summary of another
shape or version is reported as a problem with the run, not read half-way.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from iosweep.analysis.summary import (
    AnalysisFailure,
    InsightsAcross,
    Overhead,
    PipelineAcross,
    RunInfo,
    RunSummary,
    Scaling,
    SummaryError,
    read_summary,
    read_sweep_file,
)


def slugify(run_id: str) -> str:
    """A file-name-safe, readable name for a run id (``framework~pytorch/ppn~4`` -> ``pytorch_ppn4``)."""
    s = run_id.replace("framework~", "").replace("external~", "ext-")
    s = re.sub(r"~", "", s)
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("._-")
    return s or "run"


@dataclass
class RunView:
    """One run as the report sees it: its summary (typed) and its analysis tables."""

    analysis_dir: Path
    summary: RunSummary
    slug: str = ""
    warnings: list[str] = field(default_factory=list)  # tables that could not be read
    apart: str = ""  # the parameters that tell this run from the report's others (label_runs)
    _tables: dict[str, pd.DataFrame | None] = field(default_factory=dict, repr=False)

    @property
    def meta(self) -> RunInfo:
        """How the run was made (the summary's run_meta)."""
        return self.summary.run_meta

    # --- identity ---------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.summary.run_id or str(self.analysis_dir)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.summary.params)

    def param(self, key: str, default: Any = None) -> Any:
        v = self.params.get(key)
        return default if v is None else v

    @property
    def framework(self) -> str:
        return str(self.param("framework", "") or "")

    @property
    def training(self) -> bool:
        """A training job (a framework named, or training steps recorded); any other job (an
        MPI application's logs) is described without deep-learning words."""
        return (
            bool(self.framework) or self.summary.placement.known or self.summary.pipeline.available
        )

    @property
    def tracer(self) -> str:
        """The tracer that ran (``auto`` resolved to Darshan or DFTracer)."""
        return str(self.summary.tracer or self.param("tracer", "") or "")

    @property
    def ranks(self) -> int | None:
        r = self.param("ranks") or self.summary.ranks.count
        return int(r) if r else None

    @property
    def nodes(self) -> int | None:
        n = self.param("nodes") or self.summary.ranks.nodes
        return int(n) if n else None

    @property
    def ppn(self) -> int | None:
        p = self.param("ppn")
        if p:
            return int(p)
        return self.ranks // self.nodes if self.ranks and self.nodes else None

    @property
    def rep(self) -> int:
        return int(self.param("rep", 0) or 0)

    @property
    def label(self) -> str:
        """Short human label: ``pytorch 4 ranks (1 node x 4)``."""
        parts = [self.framework or self.run_id]
        if self.ranks:
            parts.append(f"{self.ranks} rank{'s' if self.ranks != 1 else ''}")
        if self.nodes and self.ppn:
            parts.append(f"({self.nodes} node{'s' if self.nodes != 1 else ''} x {self.ppn})")
        if self.apart:
            parts.append(f"· {self.apart}")
        if self.rep:
            parts.append(f"rep {self.rep}")
        return " ".join(parts)

    def sort_key(self) -> tuple:
        return (
            self.framework,
            self.tracer,
            self.ranks or 0,
            self.nodes or 0,
            self.rep,
            self.run_id,
        )

    # --- status ----------------------------------------------------------------------------
    @property
    def status(self) -> str:
        """The run's own status: ok | partial | failed | lost | skipped (from the manifest)."""
        return self.summary.status or "unknown"

    @property
    def reason(self) -> str:
        return str(self.manifest.get("reason") or "")

    @property
    def rerun(self) -> str:
        """The command that redoes just this run (the workflow's, as it was started)."""
        return str(self.manifest.get("rerun") or "")

    @property
    def analysis_status(self) -> str:
        return self.summary.analysis_status

    @property
    def has_io(self) -> bool:
        return self.analysis_status in ("complete", "partial")

    @property
    def manifest(self) -> dict[str, Any]:
        return dict(self.meta.manifest or {})

    @property
    def store(self) -> str:
        """Where the run's trace store was when it was analysed (for provenance only)."""
        return self.summary.store

    # --- tables ----------------------------------------------------------------------------
    def table(self, name: str) -> pd.DataFrame | None:
        """An analysis table (files, file_ranks, ranks, nodes, sizes, phases, overlap) or None."""
        if name not in self._tables:
            rel = self.summary.tables.get(name, f"{name}.parquet")
            f = self.analysis_dir / rel
            try:
                self._tables[name] = pd.read_parquet(f) if f.exists() else None
            except (OSError, ValueError) as e:  # a damaged table must not stop the report
                self._tables[name] = None
                self.warnings.append(f"{f.name}: {e}")
        return self._tables[name]

    def paths_by_class(self) -> dict[str, list[str]]:
        files = self.table("files")
        if files is None or files.empty or "path" not in files:
            return {}
        cls = files["class"] if "class" in files else pd.Series(["all"] * len(files))
        return {str(c): files.loc[cls == c, "path"].astype(str).tolist() for c in cls.unique()}


# Parameters the label says already, or that name no choice of the user's.
_LABELLED = {"framework", "nodes", "ppn", "ranks", "rep"}
# How a parameter reads in a label: "workers 2", "batch 32"; the workload and tracer by name.
_LABEL_WORDS = {
    "loader_workers": "workers",
    "batch_size": "batch",
    "steps": "steps",
    "epochs": "epochs",
    "staging": "staging",
}


def label_runs(runs: list[RunView]) -> None:
    """Name in each run's label the parameters whose values differ among ``runs`` (loader
    workers, tracer, a job's own parameters ...), so that no two runs read alike."""
    keys = dict.fromkeys(k for r in runs for k in r.params if k not in _LABELLED)
    keys |= {"tracer": None} if len({r.tracer for r in runs}) > 1 else {}
    differ = [
        k for k in keys if len({str(r.param(k) if k != "tracer" else r.tracer) for r in runs}) > 1
    ]
    for r in runs:
        words = []
        for k in differ:
            v = r.tracer if k == "tracer" else r.param(k)
            if v is None:
                continue
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            words.append(str(v) if k in ("workload", "tracer") else f"{_LABEL_WORDS.get(k, k)} {v}")
        r.apart = ", ".join(words)
    _by_run_id(runs)


def _by_run_id(runs: list[RunView]) -> None:
    """Runs whose parameters are all alike (logs given without them) still read apart: their
    labels add the part of their run ids that differs."""
    alike: dict[str, list[RunView]] = {}
    for r in runs:
        alike.setdefault(r.label, []).append(r)
    for group in alike.values():
        ids = [r.run_id for r in group]
        if len(group) < 2 or len(set(ids)) < len(ids):
            continue
        common = os.path.commonprefix(ids)  # noqa: RUF071 - run ids, not paths
        cut = max(common.rfind(c) for c in "/_~-.") + 1  # back to a separator
        for r in group:
            r.apart = ", ".join(p for p in (r.apart, r.run_id[cut:] or r.run_id) if p)


def load_runs(analysis_dirs: list[Path]) -> tuple[list[RunView], list[dict[str, str]]]:
    """Runs, sorted (framework, tracer, ranks, nodes, rep), and the dirs that could not be read
    (an unreadable summary, or the record of an analysis that failed)."""
    runs: list[RunView] = []
    problems: list[dict[str, str]] = []
    for d in analysis_dirs:
        d = Path(d)
        if d.name == "summary.json":
            d = d.parent
        try:
            model = read_summary(d)
        except SummaryError as e:
            problems.append({"source": str(d), "message": str(e)})
            continue
        if isinstance(model, AnalysisFailure):
            problems.append({"source": str(d), "message": f"{model.run_id}: {model.error}"})
            continue
        runs.append(RunView(analysis_dir=d, summary=model))
    runs.sort(key=RunView.sort_key)
    label_runs(runs)
    seen: dict[str, int] = {}
    for r in runs:
        base = slugify(r.run_id)
        n = seen.get(base, 0)
        seen[base] = n + 1
        r.slug = base if n == 0 else f"{base}-{n}"
    return runs, problems


@dataclass
class SweepView:
    table: pd.DataFrame  # one row per run, a column per metric (sweep.parquet)
    scaling: Scaling
    insights_across: InsightsAcross
    overhead: Overhead
    pipeline: PipelineAcross
    source: str  # where it came from (the sweep directory), or "none"
    problems: list[dict[str, str]] = field(default_factory=list)  # files that could not be read


def _empty_sweep(source: str = "none") -> SweepView:
    return SweepView(
        pd.DataFrame(),
        Scaling(metrics=[], series=[]),
        InsightsAcross(series=[]),
        Overhead(points=[]),
        PipelineAcross(levers=[], scale=[], projection=None, au_threshold=0.9),
        source,
    )


def load_sweep(sweep_dir: Path | None) -> SweepView:
    """The sweep analysis in ``sweep_dir``; an empty one (source ``none``) if there is none.
    A sweep file that cannot be read is left empty and listed in ``problems``."""
    if sweep_dir is None:
        return _empty_sweep()
    sweep_dir = Path(sweep_dir)
    if sweep_dir.is_file():
        sweep_dir = sweep_dir.parent
    table = None
    for name, reader in (("sweep.parquet", pd.read_parquet), ("sweep.csv", pd.read_csv)):
        if (sweep_dir / name).exists():
            try:
                table = reader(sweep_dir / name)
                break
            except (OSError, ValueError):
                continue
    if table is None:
        return _empty_sweep()
    view = _empty_sweep(str(sweep_dir))
    view.table = table
    for name, attr in (
        ("scaling.json", "scaling"),
        ("insights_across.json", "insights_across"),
        ("overhead.json", "overhead"),
        ("pipeline.json", "pipeline"),
    ):
        if not (sweep_dir / name).exists():
            continue
        try:
            setattr(view, attr, read_sweep_file(sweep_dir / name))
        except SummaryError as e:
            view.problems.append({"source": str(sweep_dir / name), "message": str(e)})
    return view
