"""What the report reads: each run's analysis (summary.json, through
:mod:`iosweep.analysis.summary`, and the tables beside it) and the sweep analysis
(sweep.parquet, scaling.json, insights_across.json, overhead.json). Nothing else: never a
trace store, never the analysis code. A summary of another shape or version is reported as
a problem with the run, not read half-way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from iosweep.analysis.summary import RunInfo, SummaryError, read_summary, to_dict

_STATUS_ORDER = {"ok": 0, "partial": 1, "failed": 2, "skipped": 3}


def slugify(run_id: str) -> str:
    """A file-name-safe, readable name for a run id (``framework~pytorch/ppn~4`` -> ``pytorch_ppn4``)."""
    s = run_id.replace("framework~", "").replace("external~", "ext-")
    s = re.sub(r"~", "", s)
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("._-")
    return s or "run"


@dataclass
class RunView:
    """One run as the report sees it."""

    analysis_dir: Path
    summary: dict[str, Any]
    meta: RunInfo | None = None  # how the run was made (the summary's run_meta)
    meta_error: str = ""
    slug: str = ""
    _tables: dict[str, pd.DataFrame | None] = field(default_factory=dict, repr=False)

    # --- identity ---------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return str(self.summary.get("run_id") or self.analysis_dir)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.summary.get("params") or {})

    def param(self, key: str, default: Any = None) -> Any:
        v = self.params.get(key)
        return default if v is None else v

    @property
    def framework(self) -> str:
        return str(self.param("framework", "") or "")

    @property
    def tracer(self) -> str:
        return str(self.param("tracer", "") or self.summary.get("tracer") or "")

    @property
    def ranks(self) -> int | None:
        r = self.param("ranks") or (self.summary.get("ranks") or {}).get("count")
        return int(r) if r else None

    @property
    def nodes(self) -> int | None:
        n = self.param("nodes") or (self.summary.get("ranks") or {}).get("nodes")
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
        """The run's own status: ok | partial | failed | skipped (from the manifest)."""
        return str(self.summary.get("status") or "unknown")

    @property
    def reason(self) -> str:
        man = self.manifest
        return str(
            man.get("reason") or self.summary.get("reason") or self.summary.get("error") or ""
        )

    @property
    def analysis_status(self) -> str:
        return str(
            self.summary.get("analysis_status") or ("error" if "error" in self.summary else "")
        )

    @property
    def has_io(self) -> bool:
        return self.analysis_status in ("complete", "partial")

    @property
    def manifest(self) -> dict[str, Any]:
        return dict(self.meta.manifest or {}) if self.meta else {}

    @property
    def store(self) -> str:
        """Where the run's trace store was when it was analysed (for provenance only)."""
        return str(self.summary.get("store") or "")

    # --- tables ----------------------------------------------------------------------------
    def table(self, name: str) -> pd.DataFrame | None:
        """An analysis table (files, file_ranks, ranks, nodes, sizes, phases, overlap) or None."""
        if name not in self._tables:
            rel = (self.summary.get("tables") or {}).get(name, f"{name}.parquet")
            f = self.analysis_dir / rel
            try:
                self._tables[name] = pd.read_parquet(f) if f.exists() else None
            except (OSError, ValueError) as e:  # a damaged table must not stop the report
                self._tables[name] = None
                self.summary.setdefault("_report_warnings", []).append(f"{f.name}: {e}")
        return self._tables[name]

    def paths_by_class(self) -> dict[str, list[str]]:
        files = self.table("files")
        if files is None or files.empty or "path" not in files:
            return {}
        cls = files["class"] if "class" in files else pd.Series(["all"] * len(files))
        return {str(c): files.loc[cls == c, "path"].astype(str).tolist() for c in cls.unique()}


def load_runs(analysis_dirs: list[Path]) -> tuple[list[RunView], list[dict[str, str]]]:
    """Runs, sorted (framework, tracer, ranks, nodes, rep), and the dirs that could not be read."""
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
        meta = getattr(model, "run_meta", None)
        runs.append(RunView(analysis_dir=d, summary=to_dict(model), meta=meta))
    runs.sort(key=RunView.sort_key)
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
    scaling: dict[str, Any]
    insights_across: dict[str, Any]
    overhead: list[dict[str, Any]]
    source: str  # where it came from (sweep dir, or computed here)


def _json(p: Path, default: Any) -> Any:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return default


def load_sweep(sweep_dir: Path | None) -> SweepView:
    """The sweep analysis in ``sweep_dir``; an empty one (source ``none``) if there is none."""
    if sweep_dir is not None:
        sweep_dir = Path(sweep_dir)
        if sweep_dir.is_file():
            sweep_dir = sweep_dir.parent
        for name, reader in (("sweep.parquet", pd.read_parquet), ("sweep.csv", pd.read_csv)):
            if not (sweep_dir / name).exists():
                continue
            try:
                df = reader(sweep_dir / name)
            except (OSError, ValueError):
                continue
            return SweepView(
                df,
                _json(sweep_dir / "scaling.json", {}),
                _json(sweep_dir / "insights_across.json", {}),
                _json(sweep_dir / "overhead.json", []),
                str(sweep_dir),
            )
    return SweepView(pd.DataFrame(), {}, {}, [], "none")
