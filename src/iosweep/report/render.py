"""render_report: analyses in, one self-contained HTML file (+ its figures as PNG files) out.

The HTML embeds its figures as base64 PNGs and its CSS inline, loads nothing from anywhere
(a Content-Security-Policy forbids it), and has no script. Every string from traces,
manifests or configs reaches the page through Jinja's autoescaping, after the anonymizer
(Jinja ``finalize``).
"""

from __future__ import annotations

import base64
import datetime as dt
import platform
import shlex
import socket
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd
import yaml

import iosweep
from iosweep.files import write_json, write_text
from iosweep.provenance import git_revision
from iosweep.report import fmt, plots
from iosweep.report.anonymize import Anonymizer, build_anonymizer, identity
from iosweep.report.data import RunView, SweepView, load_runs, load_sweep
from iosweep.report.settings import ReportSettings

TEMPLATES = Path(__file__).resolve().parent / "templates"
FIGURE_SUBDIRS = ("sweep", "frameworks", "runs")
_SEVERITY = {"high": 0, "warn": 1, "info": 2}

# The analysis's access-strategy vocabulary, said for a reader (docs/analysis.md).
STRATEGY_TEXT = {
    "single-rank": "one rank does all of it",
    "file-per-process": "each rank its own file(s)",
    "partitioned": "the file set is split between ranks",
    "shared-whole": "shared files, every rank reads each one whole",
    "shared-disjoint": "shared files, ranks on disjoint parts",
    "shared-overlapping": "shared files, ranks on overlapping parts",
    "shared": "shared files (offsets not traced)",
    "mixed": "no single strategy",
}


class Raw(str):
    """A string the report made itself (a data URI): exempt from anonymization, still escaped."""


@dataclass
class FigureRef:
    file: str  # relative to the HTML file
    title: str
    caption: str
    src: str  # data URI when embedded, else ""
    embedded: bool
    bytes: int
    entry: dict[str, Any]  # its row in figures.json


class FigureStore:
    """Writes figures under ``<html dir>/figures`` and embeds each in the HTML (see ``unembed``)."""

    def __init__(self, html_dir: Path, settings: ReportSettings):
        self.root = html_dir / "figures"
        self.settings = settings
        self.refs: list[FigureRef] = []
        for sub in FIGURE_SUBDIRS:  # figures of an earlier report must not linger
            d = self.root / sub
            if d.is_dir():
                for f in d.rglob("*.png"):
                    f.unlink()
                for f in sorted(d.rglob("*"), reverse=True):
                    if f.is_dir() and not any(f.iterdir()):
                        f.rmdir()
            # Always there, even if empty: the workflow declares each as an output directory.
            d.mkdir(parents=True, exist_ok=True)

    def add(self, fig, rel: str, title: str, caption: str, anon) -> FigureRef:
        png, texts = plots.render_png(fig, self.settings.figure_dpi)
        fig.clear()
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        entry = {
            "file": f"figures/{rel}",
            "title": anon(title),
            "caption": anon(caption),
            "embedded": True,
            "bytes": len(png),
            "texts": texts,
        }
        src = Raw("data:image/png;base64," + base64.b64encode(png).decode("ascii"))
        ref = FigureRef(f"figures/{rel}", title, caption, src, True, len(png), entry)
        self.refs.append(ref)
        return ref

    def unembed(self, nbytes: int) -> int:
        """Link instead of embed the last figures (the largest runs' first) until ``nbytes``
        of data URIs are freed; returns the bytes freed."""
        freed = 0
        for ref in reversed(self.refs):
            if freed >= nbytes:
                break
            if ref.embedded:
                freed += len(ref.src)
                ref.src, ref.embedded = Raw(""), False
                ref.entry["embedded"] = False
        return freed

    @property
    def linked(self) -> int:
        return sum(1 for r in self.refs if not r.embedded)

    def write_index(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        index = [r.entry for r in self.refs]
        write_json(self.root / "figures.json", index)


# --- helpers ------------------------------------------------------------------------------
def _lib_versions() -> dict[str, str]:
    import matplotlib
    import pyarrow

    return {
        "python": platform.python_version(),
        "pandas": pd.__version__,
        "pyarrow": pyarrow.__version__,
        "matplotlib": matplotlib.__version__,
        "jinja2": jinja2.__version__,
    }


def _hosts(run: RunView) -> dict[int, str]:
    ranks = run.table("ranks")
    if ranks is not None and {"rank", "host"} <= set(ranks.columns):
        return {int(r): str(h) for r, h in zip(ranks["rank"], ranks["host"], strict=True)}
    if run.meta:
        return {r.rank: r.host for r in run.meta.ranks}
    return {}


def _strategies(run: RunView) -> dict[str, str]:
    """class -> "read: shared-whole; write: single-rank" for figure titles."""
    out = {}
    for cls, acc in (run.summary.get("access") or {}).items():
        parts = [f"{d} {s}" for d, s in (acc or {}).items() if s]
        if parts:
            out[cls] = ", ".join(parts)
    return out


def _epochs(run: RunView) -> pd.DataFrame | None:
    """The run's epoch windows, as the analysis placed them."""
    ep = pd.DataFrame((run.summary.get("temporal") or {}).get("epochs") or [])
    return None if ep.empty else ep[["epoch", "start", "end"]]


def _checkpoint_events(run: RunView) -> list[dict[str, Any]]:
    ck = run.summary.get("checkpoints") or {}
    return [e for e in ck.get("events") or [] if isinstance(e, dict) and "start" in e]


def _main_class(run: RunView, sample: plots.OpsSample) -> int:
    """The class with the most operations other than checkpoints: the data being read."""
    counts = np.bincount(sample.cls, minlength=len(sample.class_names))
    order = sorted(
        range(len(counts)),
        key=lambda i: (sample.class_names[i] in ("checkpoint", "other"), -counts[i]),
    )
    return order[0]


def _class_order(cls: str) -> tuple[int, str]:
    return ({"dataset": 0, "checkpoint": 1, "other": 9}.get(cls, 5), cls)


def access_sentences(run: RunView, min_share: float = 0.0, skip: tuple[str, ...] = ()) -> list[str]:
    """What the analysis found about who touches which files, in words (main data first).

    ``min_share``: leave out classes moving less than this share of the run's bytes."""
    out = []
    classes = run.summary.get("classes") or {}
    moved = sum(
        ((c or {}).get("bytes_read") or 0) + ((c or {}).get("bytes_written") or 0)
        for c in classes.values()
    )
    for cls in sorted(classes, key=_class_order):
        c = classes[cls] or {}
        if cls in skip or (
            min_share
            and moved
            and ((c.get("bytes_read") or 0) + (c.get("bytes_written") or 0)) < min_share * moved
        ):
            continue
        for d in ("read", "write"):
            a = (c.get("access") or {}).get(d)
            if not a or not a.get("strategy"):
                continue
            ev = a.get("evidence") or {}
            strat = a["strategy"]
            who = ev.get("rank_list")
            rpf = (ev.get("ranks_per_file") or {}).get("max")
            fpr = (ev.get("files_per_rank") or {}).get("max")
            detail = [_plural(ev.get("files"), "file")]
            if strat == "single-rank" and who:
                detail.append(f"only rank {who[0]}")
            else:
                if ev.get("ranks") is not None:
                    detail.append(f"{ev['ranks']} of {ev.get('ranks_of_run', '?')} ranks")
                if rpf is not None:
                    detail.append(f"up to {_plural(rpf, 'rank')} per file")
                if fpr is not None:
                    detail.append(f"up to {_plural(fpr, 'file')} per rank")
            if ev.get("bytes") is not None:
                detail.append(
                    f"{fmt.human_bytes(ev['bytes'])} {'read' if d == 'read' else 'written'}"
                )
            out.append(
                f"{cls} {d}s: {strat} — {STRATEGY_TEXT.get(strat, strat)} ({', '.join(detail)})"
            )
    return out


def _plural(n: Any, word: str) -> str:
    if n is None:
        return f"? {word}s"
    n = int(n) if float(n).is_integer() else n
    return f"{n} {word}{'' if n == 1 else 's'}"


def app_checkpoints(run: RunView) -> list[dict[str, Any]]:
    """Checkpoint saves as the training script timed them (the analysis's ``app_saves``)."""
    return list((run.summary.get("checkpoints") or {}).get("app_saves") or [])


def _outputs_on_disk(run: RunView) -> tuple[int, int]:
    """(files, bytes) the job left in its checkpoint directory."""
    d = (run.summary.get("checkpoints") or {}).get("on_disk") or {}
    return int(d.get("files") or 0), int(d.get("bytes") or 0)


def checkpoint_sentence(run: RunView) -> str:
    ck = run.summary.get("checkpoints") or {}
    if ck.get("available") and ck.get("bytes_written"):
        writers = ck.get("writers") or []
        who = f"rank {writers[0]} only" if len(writers) == 1 else f"{len(writers)} ranks"
        n = ck.get("n_checkpoints")
        bursts = f" in {_plural(n, 'burst')}" if n else ""
        times = ", ".join(f"{e['start']:.1f} s" for e in _checkpoint_events(run)[:6])
        return (
            f"Checkpoints written by {who}: {_plural(ck.get('files_written'), 'file')}, "
            f"{fmt.human_bytes(ck['bytes_written'])}{bursts}"
            + (f" (at {times} from the run start)" if times else "")
        )
    # The tracer saw no checkpoint writes (DFTracer misses torch.save's): what the job says.
    saves = app_checkpoints(run)
    files, size = _outputs_on_disk(run)
    if not saves and not files:
        return ""
    ranks = sorted({e["rank"] for e in saves})
    who = (
        f"rank {ranks[0]} only"
        if len(ranks) == 1
        else f"{len(ranks)} ranks"
        if ranks
        else "the job"
    )
    times = ", ".join(f"{e['start']:.1f} s" for e in saves[:6])
    parts = [f"Checkpoints saved by {who} (by the training script's own record, not in the trace)"]
    if saves:
        parts.append(f"{_plural(len(saves), 'save')} at {times} from the run start")
    if files:
        parts.append(f"{_plural(files, 'file')}, {fmt.human_bytes(size)} on disk")
    return ": ".join(parts[:2]) + ("; " + parts[2] if len(parts) > 2 else "")


def checkpoint_gap(run: RunView) -> str:
    """A warning when the checkpoint files on disk hold more than the trace saw written."""
    files, size = _outputs_on_disk(run)
    traced = (run.summary.get("checkpoints") or {}).get("bytes_written") or 0
    if not files or size <= traced * 1.01:
        return ""
    return (
        f"The job left {_plural(files, 'file')} ({fmt.human_bytes(size)}) in its checkpoint directory, but "
        f"the trace holds {fmt.human_bytes(traced)} of checkpoint writes: the tracer missed writes "
        f"(DFTracer does not see torch.save's). Checkpoint times here come from the training script."
    )


def _checkpoint_marks(run: RunView) -> list[dict[str, Any]]:
    """Checkpoint times for the temporal plot: traced bursts, else the script's own record."""
    return list((run.summary.get("checkpoints") or {}).get("marks") or [])


# --- context --------------------------------------------------------------------------------
class ReportBuilder:
    def __init__(
        self,
        runs: list[RunView],
        sweep: SweepView,
        settings: ReportSettings,
        figs: FigureStore,
        anon,
        config: dict | None,
        problems: list[dict[str, str]],
    ):
        self.runs = runs
        self.sweep = sweep
        self.s = settings
        self.figs = figs
        self.anon = anon
        self.config = config
        self.problems = problems
        self._samples: dict[str, plots.OpsSample | None] = {}

    def sample(self, run: RunView) -> plots.OpsSample | None:
        """The analysis's sample of the run's operations (``ops_sample.parquet``)."""
        if run.slug not in self._samples:
            info = run.summary.get("ops_sample") or {}
            df = run.table("ops_sample") if run.has_io else None
            self._samples[run.slug] = plots.ops_sample(
                df, info.get("total", 0), info.get("excluded", 0), self.s.max_points_per_plot
            )
        return self._samples[run.slug]

    # overview
    def what_was_run(self) -> dict[str, Any]:
        def vals(get) -> list:
            found = {v for v in (get(r) for r in self.runs) if v not in (None, "")}
            return sorted(
                found,
                key=lambda v: (
                    not isinstance(v, int | float),
                    v if isinstance(v, int | float) else str(v),
                ),
            )

        sweep_cfg = (self.config or {}).get("sweep") or {}
        rows = [
            ("frameworks", vals(lambda r: r.framework)),
            ("tracers", vals(lambda r: r.tracer)),
            ("nodes", vals(lambda r: r.nodes)),
            ("processes per node", vals(lambda r: r.ppn)),
            ("ranks", vals(lambda r: r.ranks)),
            ("repeats", vals(lambda r: r.rep + 1) and [max(r.rep for r in self.runs) + 1]),
        ]
        for key, label in (
            ("epochs", "epochs"),
            ("steps", "steps per epoch"),
            ("batch_size", "batch size"),
        ):
            rows.append((label, vals(lambda r, k=key: r.param(k))))
        if sweep_cfg and not ((self.config or {}).get("ingest") or {}).get("enabled"):
            rows.append(
                (
                    "configured sweep",
                    ["; ".join(f"{k}: {_listed(v)}" for k, v in sweep_cfg.items())],
                )
            )
        status = Counter(r.status for r in self.runs)
        analysis = Counter(r.analysis_status for r in self.runs)
        commands = []
        seen = set()
        for r in self.runs:
            if r.meta and r.meta.command:
                c = shlex.join(str(a) for a in r.meta.command)
                if c not in seen:
                    seen.add(c)
                    commands.append({"run": r.label, "command": c})
        versions = self.versions()
        return {
            "rows": [(k, ", ".join(str(x) for x in v)) for k, v in rows if v],
            "runs": len(self.runs),
            "status": dict(status),
            "analysis": dict(analysis),
            "commands": commands[:6],
            "more_commands": max(0, len(commands) - 6),
            "versions": [
                v
                for v in versions
                if v["key"] in _VERSION_KEYS or v["key"].startswith(("torch", "tensorflow"))
            ],
        }

    def not_ok(self) -> list[dict[str, Any]]:
        """Runs that did not finish, were not fully traced, or lost data (error-level issues).
        Warnings (e.g. an unattributed child process) stay in the run's own section."""
        out = []
        for r in self.runs:
            all_issues = [i for i in r.summary.get("issues") or [] if isinstance(i, dict)]
            errors = [i for i in all_issues if i.get("severity", "error") == "error"]
            # an untraced baseline (tracer: none) is as it should be
            fine = (
                r.status == "ok"
                and r.analysis_status in ("complete", "untraced")
                and not r.summary.get("incomplete")
            )
            if fine and not errors and not r.meta_error:
                continue
            out.append(
                {
                    "label": r.label,
                    "run_id": r.run_id,
                    "slug": r.slug,
                    "status": r.status,
                    "analysis_status": r.analysis_status,
                    "reason": r.reason or r.meta_error,
                    "issues": [
                        f"{i.get('kind', '?')}: {i.get('source', '')}: {i.get('message', '')}"
                        for i in errors[:8]
                    ],
                    "more_issues": max(0, len(errors) - 8),
                    "warnings": len(all_issues) - len(errors),
                }
            )
        return out

    def findings(self) -> list[dict[str, Any]]:
        by_id: dict[str, list[tuple[RunView, dict]]] = defaultdict(list)
        # Runs that ran: a failed or skipped point's "no I/O" says nothing its reason does not.
        ran = [r for r in self.runs if r.has_io or r.status in ("ok", "partial")]
        for r in ran:
            for ins in r.summary.get("insights") or []:
                if isinstance(ins, dict) and ins.get("id"):
                    by_id[ins["id"]].append((r, ins))
        across = self._across()
        out = []
        for iid, hits in by_id.items():
            run, ins = max(hits, key=lambda h: (h[0].ranks or 0, h[0].nodes or 0, -h[0].rep))
            fws = sorted({r.framework for r, _ in hits if r.framework})
            out.append(
                {
                    "id": iid,
                    "severity": ins.get("severity", "info"),
                    "title": ins.get("title", iid),
                    "message": ins.get("message", ""),
                    "example_run": run.label,
                    "example_slug": run.slug,
                    "numbers": _numbers(ins.get("numbers") or {}),
                    "recommendation": ins.get("recommendation", ""),
                    "runs": len({r.slug for r, _ in hits}),
                    "of_runs": len(ran),
                    "frameworks": ", ".join(fws),
                    "across": across.get(iid, []),
                }
            )
        out.sort(key=lambda f: (_SEVERITY.get(f["severity"], 3), -f["runs"], f["id"]))
        return out

    def _across(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        all_series = (self.sweep.insights_across or {}).get("series") or []
        for series in all_series:
            key = _series_name(series, all_series)
            for iid, ch in (series.get("insights") or {}).items():
                st = ch.get("status")
                where = (
                    ch.get("appears_at")
                    if st == "appears"
                    else ch.get("disappears_at")
                    if st == "disappears"
                    else None
                )
                if st and st != "never":
                    at = ""
                    if where and where.get("ranks") is not None:
                        at = f" at {_int(where['ranks'])} ranks"
                        if where.get("nodes") is not None:
                            at += f" on {_plural(_int(where['nodes']), 'node')}"
                    out[iid].append(f"{key}: {st}{at}")
        return out

    def glance(self) -> list[dict[str, Any]]:
        """Per framework: its largest run's access pattern, checkpoints, and how bytes scale."""
        out = []
        by_fw: dict[str, list[RunView]] = defaultdict(list)
        for r in self.runs:
            if r.has_io:
                by_fw[r.framework].append(r)
        for fw, runs in sorted(by_fw.items()):
            big = max(runs, key=lambda r: (r.ranks or 0, r.nodes or 0, -r.rep))
            ck = checkpoint_sentence(big)
            # The glance leaves out classes that move next to nothing (temp files of the runtime).
            facts = access_sentences(big, min_share=0.001, skip=("checkpoint",) if ck else ())
            if ck:
                facts.append(ck)
            facts += self._trend_sentences(fw)
            out.append(
                {"framework": fw or "(unknown)", "run": big.label, "slug": big.slug, "facts": facts}
            )
        return out

    def _trend_sentences(self, fw: str) -> list[str]:
        df = self.sweep.table
        if df.empty or "framework" not in df or "ranks" not in df:
            return []
        g = df[(df["framework"] == fw)]
        if "analysis_status" in g:
            g = g[g["analysis_status"].isin(["complete", "partial"])]
        if (
            "nodes" in g and g["nodes"].nunique() > 1
        ):  # compare along ppn on the commonest node count
            g = g[g["nodes"] == g["nodes"].mode().iloc[0]]
        out = []
        for m, what in (
            ("bytes_read_per_rank", "Bytes read per rank"),
            ("bytes_read", "Bytes read in total"),
            ("io_time_max", "I/O time of the slowest rank"),
            ("run_time", "Run time"),
        ):
            if m not in g:
                continue
            v = pd.to_numeric(g[m], errors="coerce").groupby(g["ranks"]).mean().dropna()
            if len(v) < 2:
                continue
            r0, r1 = _int(v.index[0]), _int(v.index[-1])
            ratio = v.iloc[-1] / v.iloc[0] if v.iloc[0] else float("nan")
            trend = self._trend(fw, m)
            out.append(
                f"{what} from {r0} to {r1} ranks: {fmt.metric(m, v.iloc[0])} → {fmt.metric(m, v.iloc[-1])} "
                f"(\u00d7{ratio:.2f}{', ' + trend if trend else ''})"
            )
        return out

    def _trend(self, fw: str, metric: str) -> str:
        for s in (self.sweep.scaling or {}).get("series") or []:
            if (s.get("key") or {}).get("framework") == fw:
                return ((s.get("metrics") or {}).get(metric) or {}).get("trend") or ""
        return ""

    # sweep comparison
    def sweep_section(self) -> dict[str, Any]:
        df = self.sweep.table
        if df.empty or "ranks" not in df:
            return {"figures": [], "table": None, "trends": [], "overhead": []}
        ok = (
            df[df["analysis_status"].isin(["complete", "partial"])]
            if "analysis_status" in df
            else df
        )
        figures = []
        series_cols = [c for c in ("framework", "tracer") if c in ok and ok[c].nunique() > 1] or (
            ["framework"] if "framework" in ok else []
        )
        for extra in ("epochs", "steps", "batch_size"):
            if extra in ok and ok[extra].nunique() > 1:
                series_cols.append(extra)
        multi_nodes = "nodes" in ok and ok["nodes"].nunique() > 1
        if len(ok) and ok["ranks"].notna().any():
            fig = plots.scaling_figure(
                ok,
                "ranks",
                series_cols,
                "nodes" if multi_nodes else None,
                "How I/O changes with the number of ranks",
                self.anon,
            )
            figures.append(
                self.figs.add(
                    fig,
                    "sweep/scaling_ranks.png",
                    "Scaling against ranks",
                    _SCALING_CAPTION,
                    self.anon,
                )
            )
        if multi_nodes and "ppn" in ok:
            fig = plots.scaling_figure(
                ok,
                "nodes",
                series_cols,
                "ppn",
                "How I/O changes with the number of nodes",
                self.anon,
            )
            figures.append(
                self.figs.add(
                    fig,
                    "sweep/scaling_nodes.png",
                    "Scaling against nodes",
                    _NODES_CAPTION,
                    self.anon,
                )
            )
        return {
            "figures": figures,
            "table": self.metric_table(df),
            "trends": self.trend_table(),
            "overhead": self.overhead_rows(),
        }

    def overhead_rows(self) -> list[dict[str, str]]:
        """Traced run time against the untraced baseline (tracer: none) of the same point."""
        rows = []
        for o in self.sweep.overhead or []:
            if not isinstance(o, dict):
                continue
            point = ", ".join(
                f"{k} {o[k]}"
                for k in ("framework", "nodes", "ppn", "ranks")
                if o.get(k) is not None
            )
            rows.append(
                {
                    "point": point,
                    "tracer": str(o.get("tracer", "")),
                    "traced": fmt.seconds(o.get("traced_run_time_mean")),
                    "baseline": fmt.seconds(o.get("baseline_run_time_mean")),
                    "runs": f"{o.get('traced_runs', '?')} / {o.get('baseline_runs', '?')}",
                    "overhead": fmt.share(o.get("overhead")),
                    "fired": "above threshold" if o.get("fired") else "",
                }
            )
        return rows

    def trend_table(self) -> dict[str, Any]:
        """Rows: metrics; columns: series (framework, ...), each the means along its points."""
        series = (self.sweep.scaling or {}).get("series") or []
        heads, points = [], []
        for sr in series:
            heads.append(_series_name(sr, series))
            points.append(", ".join(_point_name(p) for p in sr.get("points") or []))
        rows = []
        for p in plots.SCALING_PANELS:
            cells = []
            for sr in series:
                m = (sr.get("metrics") or {}).get(p.metric)
                if not m:
                    cells.append({"text": fmt.MISSING, "trend": "", "slope": ""})
                    continue
                e = m.get("exponent")
                cells.append(
                    {
                        "text": " → ".join(fmt.metric(p.metric, v) for v in m.get("mean") or []),
                        "trend": m.get("trend") or "",
                        "slope": "" if e is None else f"{e:+.2f}",
                    }
                )
            if any(c["text"] != fmt.MISSING for c in cells):
                rows.append({"metric": p.title, "cells": cells})
        return {"heads": heads, "points": points, "rows": rows} if rows else {}

    def metric_table(self, df: pd.DataFrame) -> dict[str, Any]:
        """Every metric (rows) for every run (columns), in sweep order."""
        df = df.copy()
        sort = [c for c in ("framework", "tracer", "ranks", "nodes", "rep") if c in df]
        if sort:
            df = df.sort_values(sort, kind="stable")
        heads = [
            " ".join(
                x
                for x in (
                    str(_py(row.get("framework")) or ""),
                    _point_name({"ranks": row.get("ranks"), "nodes": row.get("nodes")}),
                    f"rep{_int(_py(row.get('rep')) or 0)}",
                )
                if x
            )
            for _, row in df.iterrows()
        ]
        skip = {"run_id", "summary_path", "framework", "ranks", "nodes", "rep"}
        rows = []
        for c in df.columns:
            if c in skip:
                continue
            col = df[c]
            cells = [fmt.metric(c, _py(v)) for v in col]
            rows.append({"metric": c, "cells": cells})
        return {
            "heads": heads,
            "rows": rows,
            "run_ids": df["run_id"].astype(str).tolist() if "run_id" in df else [],
        }

    # frameworks side by side
    def frameworks_section(self) -> dict[str, Any] | None:
        by_fw: dict[str, list[RunView]] = defaultdict(list)
        for r in self.runs:
            if r.has_io and r.framework:
                by_fw[r.framework].append(r)
        if len(by_fw) < 2:
            return {"frameworks": sorted(by_fw), "figure": None, "rows": [], "point": None}
        common = set.intersection(*[{r.ranks for r in rs} for rs in by_fw.values()])
        ranks = max((x for x in common if x), default=None)
        chosen = []
        for _fw, rs in sorted(by_fw.items()):
            cand = [r for r in rs if r.ranks == ranks] if ranks else rs
            cand = cand or rs
            chosen.append(min(cand, key=lambda r: (-(r.ranks or 0), r.nodes or 0, r.rep)))
        items: list[dict[str, Any]] = []
        for r in chosen:
            s = self.sample(r)
            if s is None:
                continue
            ci = _main_class(r, s)
            items.append(
                {
                    "label": r.label,
                    "sample": s,
                    "cls": ci,
                    "hosts": _hosts(r),
                    "strategy": _strategies(r).get(s.class_names[ci], ""),
                    "epochs": _epochs(r),
                    "checkpoints": _checkpoint_marks(r),
                }
            )
        figure = None
        if len(items) >= 2:
            note = " ".join(it["sample"].note() for it in items if it["sample"].sampled)
            fig = plots.frameworks_figure(
                items, "Frameworks side by side: who reads which file, and when", self.anon
            )
            figure = self.figs.add(
                fig,
                "frameworks/frameworks.png",
                "Frameworks side by side",
                _FRAMEWORKS_CAPTION + (" " + note if note else ""),
                self.anon,
            )
        rows = self._framework_rows(chosen)
        return {
            "frameworks": sorted(by_fw),
            "figure": figure,
            "rows": rows,
            "heads": [r.label for r in chosen],
            "slugs": [r.slug for r in chosen],
        }

    def _framework_rows(self, runs: list[RunView]) -> list[dict[str, Any]]:
        def h(r: RunView, k: str) -> Any:
            return (r.summary.get("headline") or {}).get(k)

        def cls_field(r: RunView, d: str) -> str:
            acc = r.summary.get("access") or {}
            return (
                "; ".join(f"{c}: {(a or {}).get(d)}" for c, a in acc.items() if (a or {}).get(d))
                or fmt.MISSING
            )

        def per_rank(r: RunView, key: str, stat: str = "max") -> str:
            vals = []
            for c, v in (r.summary.get("classes") or {}).items():
                a = ((v or {}).get("access") or {}).get("read") or {}
                x = ((a.get("evidence") or {}).get(key) or {}).get(stat)
                if x is not None:
                    vals.append(f"{c}: {x:.0f}")
            return "; ".join(vals) or fmt.MISSING

        spec = [
            ("read strategy per class", lambda r: cls_field(r, "read")),
            ("write strategy per class", lambda r: cls_field(r, "write")),
            ("files read per rank (max)", lambda r: per_rank(r, "files_per_rank")),
            ("ranks reading each file (max)", lambda r: per_rank(r, "ranks_per_file")),
            ("files traced", lambda r: fmt.number(h(r, "files"))),
            ("bytes read per rank", lambda r: fmt.human_bytes(h(r, "bytes_read_per_rank"))),
            ("read requests", lambda r: fmt.number(h(r, "reads"))),
            ("median read size", lambda r: fmt.human_bytes(h(r, "read_size_median"))),
            ("small read share (< 1 MiB)", lambda r: fmt.share(h(r, "small_read_share"))),
            ("opens per rank", lambda r: fmt.number(h(r, "opens_per_rank"))),
            ("checkpoints", lambda r: checkpoint_sentence(r) or fmt.MISSING),
            ("I/O time, slowest rank", lambda r: fmt.seconds(h(r, "io_time_max"))),
            ("run time", lambda r: fmt.seconds(h(r, "run_time"))),
        ]
        return [{"name": n, "cells": [f(r) for r in runs]} for n, f in spec]

    # per run
    def run_section(self, r: RunView) -> dict[str, Any]:
        sm = r.summary
        h = sm.get("headline") or {}
        d: dict[str, Any] = {
            "label": r.label,
            "run_id": r.run_id,
            "slug": r.slug,
            "status": r.status,
            "analysis_status": r.analysis_status,
            "reason": r.reason,
            "has_io": r.has_io,
            "tracer": r.tracer,
            "figures": [],
            "notes": [],
            # filled below for runs with I/O; the template tests every one
            "files": [],
            "more_files": 0,
            "ranks_table": [],
            "more_ranks": 0,
            "signatures": [],
            "checkpoint_events": [],
            "overlap": {},
            "phases": [],
            "more_phases": 0,
        }
        keys = [
            ("ranks", h.get("ranks", r.ranks)),
            ("nodes", h.get("nodes", r.nodes)),
            ("run_time", h.get("run_time")),
            ("files", h.get("files")),
            ("bytes_read", h.get("bytes_read")),
            ("bytes_written", h.get("bytes_written")),
            ("reads", h.get("reads")),
            ("writes", h.get("writes")),
            ("io_time_max", h.get("io_time_max")),
            ("bandwidth_aggregate", h.get("bandwidth_aggregate")),
            ("opens", h.get("opens")),
            ("io_share_max", h.get("io_share_max")),
        ]
        d["numbers"] = [(k.replace("_", " "), fmt.metric(k, v)) for k, v in keys if v is not None]
        d["access"] = access_sentences(r)
        d["checkpoints"] = checkpoint_sentence(r)
        d["insights"] = [
            {
                "severity": i.get("severity", "info"),
                "title": i.get("title", i.get("id", "")),
                "message": i.get("message", ""),
                "numbers": _numbers(i.get("numbers") or {}),
                "recommendation": i.get("recommendation", ""),
            }
            for i in sm.get("insights") or []
            if isinstance(i, dict)
        ]
        d["issues"] = [
            f"[{i.get('severity', 'error')}] {i.get('kind', '?')}: {i.get('source', '')}: {i.get('message', '')}"
            for i in sm.get("issues") or []
            if isinstance(i, dict)
        ][:30]
        d["limitations"] = [str(x) for x in sm.get("limitations") or []]
        gap = checkpoint_gap(r)
        d["warnings"] = [str(x) for x in sm.get("_report_warnings") or []]
        if r.meta_error:
            d["warnings"].append(r.meta_error)
        if gap:
            d["warnings"].append(gap)
        if not r.has_io:
            return d
        hosts = _hosts(r)
        s = self.sample(r)
        base = f"runs/{r.slug}"
        if s is not None and s.shown:
            note = s.note()
            fig = plots.spatial_figure(
                s, hosts, _strategies(r), f"Spatial pattern: {r.label}", self.anon
            )
            d["figures"].append(
                self.figs.add(
                    fig,
                    f"{base}/spatial.png",
                    "Spatial pattern",
                    _SPATIAL_CAPTION + (" " + note if note else ""),
                    self.anon,
                )
            )
            fig = plots.temporal_figure(
                s,
                hosts,
                f"Temporal pattern: {r.label}",
                self.anon,
                _epochs(r),
                _checkpoint_marks(r),
            )
            d["figures"].append(
                self.figs.add(
                    fig,
                    f"{base}/temporal.png",
                    "Temporal pattern",
                    _TEMPORAL_CAPTION + (" " + note if note else ""),
                    self.anon,
                )
            )
            fr = r.table("file_ranks")
            if fr is not None and {"seg_ops", "ctr_ops"} <= set(fr.columns):
                only = int((fr["ctr_ops"] - fr["seg_ops"]).clip(lower=0).sum())
                if only:
                    d["notes"].append(
                        f"{only:,} operations are known only from Darshan's counters (no DXT record, "
                        "e.g. STDIO, which DXT does not trace): they count in the tables, not in the plots."
                    )
            if s.excluded:
                d["notes"].append(
                    f"{s.excluded:,} operations on files the analysis leaves out (terminal streams, /dev, ...) are not drawn."
                )
        elif (sm.get("trace") or {}).get("dxt_available") is False:
            d["notes"].append(
                "No per-operation trace (DXT) in this run: no spatial or temporal plot; figures come from counters."
            )
        fig = plots.sizes_figure(r.table("sizes"), f"Request sizes: {r.label}", self.anon)
        if fig is not None:
            d["figures"].append(
                self.figs.add(fig, f"{base}/sizes.png", "Request sizes", _SIZES_CAPTION, self.anon)
            )
        d["overlap"] = _overlap(sm)
        fig = plots.overlap_figure(r.table("overlap"), f"I/O and compute: {r.label}", self.anon)
        if fig is not None:
            d["figures"].append(
                self.figs.add(
                    fig, f"{base}/overlap.png", "I/O and compute", _OVERLAP_CAPTION, self.anon
                )
            )
        nodes = r.table("nodes")
        fig = plots.nodes_figure(nodes, f"Per node: {r.label}", self.anon)
        if fig is not None:
            d["figures"].append(
                self.figs.add(fig, f"{base}/nodes.png", "Per node", _NODES_RUN_CAPTION, self.anon)
            )
        d["files"], d["more_files"] = _files_table(r.table("files"))
        d["ranks_table"], d["more_ranks"] = _ranks_table(r.table("ranks"))
        d["signatures"] = _signatures(sm)
        d["phases"], d["more_phases"] = _phases_table(r.table("phases"))
        d["checkpoint_events"] = [
            {
                "start": fmt.seconds(e.get("start")),
                "duration": fmt.seconds(e.get("duration")),
                "bytes": fmt.human_bytes(e.get("bytes")),
                "files": e.get("files"),
                "ranks": e.get("ranks"),
                "after_epoch": fmt.MISSING
                if e.get("after_epoch") is None
                else e.get("after_epoch"),
            }
            for e in _checkpoint_events(r)[:20]
        ]
        return d

    # provenance
    def versions(self) -> list[dict[str, str]]:
        vals: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for r in self.runs:
            for k, v in (r.meta.versions if r.meta else {}).items():
                vals[k][str(v)].append(r.label)
            for k, v in (r.manifest.get("versions") or {}).items():
                if r.meta is None or k not in r.meta.versions:
                    vals[k][str(v)].append(r.label)
        out = []
        for k in sorted(vals):
            vs = vals[k]
            if len(vs) == 1:
                out.append(
                    {
                        "key": k,
                        "value": next(iter(vs)),
                        "runs": "all"
                        if len(next(iter(vs.values()))) == len(self.runs)
                        else ", ".join(next(iter(vs.values()))),
                    }
                )
            else:
                for v, rs in vs.items():
                    out.append({"key": k, "value": v, "runs": ", ".join(rs)})
        return out

    def provenance(self) -> dict[str, Any]:
        runs = []
        tracers: dict[str, list[str]] = {}
        for r in self.runs:
            man = r.manifest
            cmd = r.meta.command if r.meta and r.meta.command else man.get("command") or []
            start = man.get("start_time")
            end = man.get("end_time")
            runs.append(
                {
                    "label": r.label,
                    "run_id": r.run_id,
                    "status": r.status,
                    "started": fmt.iso_time(start)
                    if start
                    else (fmt.iso_time(r.meta.clock_zero) if r.meta else fmt.MISSING),
                    "duration": fmt.seconds(end - start)
                    if isinstance(start, int | float) and isinstance(end, int | float)
                    else fmt.MISSING,
                    "host": str(
                        man.get("host") or ", ".join(sorted({x.host for x in r.meta.ranks}))
                        if r.meta
                        else ""
                    ),
                    "launcher": str(man.get("launcher") or ""),
                    "slurm_job": str(man.get("slurm_job_id") or ""),
                    "command": shlex.join(str(a) for a in cmd) if cmd else "",
                    "store": r.store,
                    "analysis": str(r.analysis_dir),
                }
            )
            tr = man.get("tracer")
            if isinstance(tr, dict) and tr.get("name"):
                text = yaml.safe_dump(tr, sort_keys=True, default_flow_style=False).strip()
                cf = tr.get("config_file")
                if cf and Path(cf).is_file() and Path(cf).stat().st_size < 8192:
                    text += f"\n--- {cf}\n" + Path(cf).read_text(errors="replace").strip()
                tracers.setdefault(text, []).append(r.label)
        analysis_settings: dict[str, Any] = {}
        for r in self.runs:
            st = r.summary.get("settings")
            if isinstance(st, dict):
                analysis_settings.setdefault(yaml.safe_dump(st, sort_keys=True).strip(), []).append(
                    r.label
                )
        return {
            "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "host": socket.gethostname(),
            "iosweep": iosweep.__version__,
            "git": git_revision() or "not a git checkout",
            "libs": _lib_versions(),
            "config": yaml.safe_dump(self.config, sort_keys=False, default_flow_style=False).strip()
            if self.config
            else "",
            "runs": runs,
            "versions": self.versions(),
            "tracers": [
                {"runs": ", ".join(v) if len(v) < len(self.runs) else "all runs", "text": k}
                for k, v in tracers.items()
            ],
            "analysis_settings": [
                {"runs": ", ".join(v) if len(v) < len(self.runs) else "all runs", "text": k}
                for k, v in analysis_settings.items()
            ],
            "report_settings": yaml.safe_dump(self.s.to_dict(), sort_keys=False).strip(),
            "sweep_source": self.sweep.source,
            "platform": platform.platform(),
        }


_VERSION_KEYS = {
    "iosweep",
    "iosweep_git",
    "horovod",
    "torch",
    "tensorflow",
    "tracer",
    "mpi",
    "python",
    "darshan",
    "dftracer",
}


def _series_name(series: dict[str, Any], all_series: list[dict[str, Any]]) -> str:
    """A series by the parameters that tell it from the others (framework first)."""
    key = series.get("key") or {}
    keys = [
        k
        for k in key
        if k == "framework" or len({str((s.get("key") or {}).get(k)) for s in all_series}) > 1
    ]
    return (
        " ".join(f"{key[k]}" if k in ("framework", "tracer") else f"{k}={key[k]}" for k in keys)
        or "all runs"
    )


def _point_name(p: dict[str, Any]) -> str:
    """{ranks: 4, nodes: 1} -> "4r/1n" (nodes left out when unknown)."""
    ranks = _py(p.get("ranks"))
    name = f"{_int(ranks)}r" if ranks is not None else "?r"
    nodes = _py(p.get("nodes"))
    return name + (f"/{_int(nodes)}n" if nodes is not None else "")


def _int(v: Any) -> Any:
    """2.0 -> 2 (pandas turns an int column with gaps into floats)."""
    return int(v) if isinstance(v, float | np.floating) and float(v).is_integer() else v


def _listed(v: Any) -> str:
    return ", ".join(str(x) for x in v) if isinstance(v, list | tuple) else str(v)


def _numbers(d: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for k, v in d.items():
        if isinstance(v, list):
            text = ", ".join(str(x) for x in v[:12]) + (" ..." if len(v) > 12 else "")
            out.append((k, text or "none"))
        elif isinstance(v, dict):
            continue
        else:
            out.append((k, fmt.metric(k, v) if not isinstance(v, str) else v))
    return out


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return v


def _files_table(files: pd.DataFrame | None, limit: int = 40) -> tuple[list[dict[str, str]], int]:
    if files is None or files.empty:
        return [], 0
    f = files.copy()
    f["_moved"] = f.get("bytes_read", 0) + f.get("bytes_written", 0)
    f = f.sort_values(["_moved", "path"], ascending=[False, True])
    rows = []
    for _, x in f.head(limit).iterrows():
        rows.append(
            {
                "path": str(x.get("path", "")),
                "class": str(x.get("class", "")),
                "size": fmt.human_bytes(_py(x.get("size"))),
                "bytes_read": fmt.human_bytes(_py(x.get("bytes_read"))),
                "bytes_written": fmt.human_bytes(_py(x.get("bytes_written"))),
                "reads": fmt.number(_py(x.get("reads"))),
                "writes": fmt.number(_py(x.get("writes"))),
                "readers": fmt.number(_py(x.get("n_readers"))),
                "writers": fmt.number(_py(x.get("n_writers"))),
                "strategy": str(x.get("read_strategy") or x.get("write_strategy") or ""),
                "time": fmt.seconds(
                    (_py(x.get("read_time")) or 0) + (_py(x.get("write_time")) or 0)
                ),
            }
        )
    return rows, max(0, len(f) - limit)


def _ranks_table(ranks: pd.DataFrame | None, limit: int = 64) -> tuple[list[dict[str, str]], int]:
    if ranks is None or ranks.empty:
        return [], 0
    rows = []
    for _, x in ranks.head(limit).iterrows():
        rows.append(
            {
                "rank": str(_py(x.get("rank"))),
                "host": str(x.get("host", "")),
                "bytes_read": fmt.human_bytes(_py(x.get("bytes_read"))),
                "bytes_written": fmt.human_bytes(_py(x.get("bytes_written"))),
                "reads": fmt.number(_py(x.get("reads"))),
                "writes": fmt.number(_py(x.get("writes"))),
                "opens": fmt.number(_py(x.get("opens"))),
                "io_time": fmt.seconds(_py(x.get("io_time"))),
                "io_share": fmt.share(_py(x.get("io_share"))),
                "straggler": "yes" if _py(x.get("straggler")) else "",
            }
        )
    return rows, max(0, len(ranks) - limit)


def _overlap(sm: dict[str, Any]) -> dict[str, Any]:
    """The I/O-vs-compute overlap (as DFAnalyzer's overlap summary): sentence and per-epoch rows."""
    ov = sm.get("overlap") or {}
    if not ov.get("available"):
        return {"text": f"Not available: {ov['reason']}." if ov.get("reason") else "", "epochs": []}
    share = ov.get("exposed_share_of_epochs_max")
    text = (
        f"Compute known from {ov.get('compute_source') or '?'}. Up to "
        f"{fmt.seconds(ov.get('exposed_io_time_in_epochs_max'))} of a rank's I/O inside the epochs ran "
        f"with no compute alongside ({fmt.share(share)} of its epoch time); "
        f"{fmt.seconds(ov.get('io_time_outside_epochs_max'))} of I/O fell outside the epochs."
    )
    epochs = [
        {
            "epoch": e.get("epoch"),
            "duration": fmt.seconds(e.get("duration_max")),
            "io": fmt.seconds(e.get("io_time_max")),
            "exposed": fmt.seconds(e.get("exposed_io_time_max")),
            "share": fmt.share(e.get("exposed_share_max")),
        }
        for e in (ov.get("epochs") or [])[:50]
        if isinstance(e, dict)
    ]
    return {"text": text, "epochs": epochs}


def _phases_table(ph: pd.DataFrame | None, limit: int = 30) -> tuple[list[dict[str, str]], int]:
    if ph is None or ph.empty or "start" not in ph:
        return [], 0
    rows = []
    for _, x in ph.head(limit).iterrows():
        rows.append(
            {
                "start": fmt.seconds(_py(x.get("start"))),
                "duration": fmt.seconds(_py(x.get("duration"))),
                "ops": fmt.number(_py(x.get("ops"))),
                "read": fmt.human_bytes(_py(x.get("bytes_read"))),
                "written": fmt.human_bytes(_py(x.get("bytes_written"))),
                "ranks": fmt.number(_py(x.get("ranks"))),
                "class": str(x.get("main_class") or ""),
                "where": str(x.get("where") or ""),
            }
        )
    return rows, max(0, len(ph) - limit)


def _signatures(sm: dict[str, Any]) -> list[dict[str, str]]:
    groups = ((sm.get("temporal") or {}).get("signature_groups") or {}).get("all") or []
    out = []
    for g in groups[:6]:
        if isinstance(g, dict):
            rk = g.get("ranks") or []
            out.append(
                {
                    "ranks": ", ".join(str(x) for x in rk[:16]) + (" ..." if len(rk) > 16 else ""),
                    "signature": str(g.get("example", ""))[:1500],
                }
            )
    return out


_SPATIAL_CAPTION = (
    "File offset (y) against rank (x), one panel per file class. Each request is a vertical bar from "
    "its offset to its end, with a dot (read) or triangle (write) at its offset, coloured by request "
    "size (yellow small, dark purple large). Within a rank's column each file has its own narrow "
    "sub-column, in path order: a shared file shows the same sub-columns for every rank, "
    "file-per-process a diagonal."
)
_TEMPORAL_CAPTION = (
    "Operations over time per rank (rank 0 on top), coloured by request size: reads just below a "
    "rank's line, writes (triangles) just above; shaded bands are epochs, dotted red lines checkpoint "
    "bursts."
)
_SIZES_CAPTION = (
    "Left: number of requests per power-of-two size bin (reads and writes, all files). Right: "
    "cumulative fraction of requests up to each size, per file class and direction."
)
_OVERLAP_CAPTION = (
    "Each rank's I/O time, split into I/O that ran while the rank computed (hidden), I/O inside "
    "the epochs with no compute running (exposed: the rank waits for data) and I/O outside the "
    "epochs (start-up, test set, final checkpoint)."
)
_NODES_RUN_CAPTION = "Bytes moved and I/O time per node (host) of this run."
_SCALING_CAPTION = (
    "One panel per metric against the number of ranks (log scale), one colour per framework; where "
    "runs span several node counts each has its own line style. Markers are the mean over repeats, "
    "vertical bars the spread (min to max)."
)
_NODES_CAPTION = (
    "The same metrics against the number of nodes, one line style per processes-per-node value."
)
_FRAMEWORKS_CAPTION = (
    "The frameworks at the same number of ranks. Top: spatial pattern of the main data files; "
    "bottom: operations over time per rank, coloured by request size."
)


def _environment(anon) -> jinja2.Environment:
    def finalize(v: Any) -> Any:
        if isinstance(v, Raw):
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


def render_report(
    analysis_dirs: list[Path],
    sweep_dir: Path | None,
    out_html: Path,
    settings: ReportSettings | None = None,
    config: dict | None = None,
) -> Path:
    """Render the report of these run analyses (and the sweep analysis) into ``out_html``;
    figures go to ``<out_html dir>/figures/``. Returns ``out_html``."""
    settings = settings or ReportSettings()
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    runs, problems = load_runs([Path(p) for p in analysis_dirs])
    sweep = load_sweep(Path(sweep_dir) if sweep_dir else None)
    anon: Anonymizer | Any = build_anonymizer(runs, config) if settings.anonymize else identity
    figs = FigureStore(out_html.parent, settings)
    b = ReportBuilder(runs, sweep, settings, figs, anon, config, problems)
    ctx: dict[str, Any] = {
        "title": settings.title,
        "anonymized": settings.anonymize,
        "what": b.what_was_run(),
        "glance": b.glance(),
        "findings": b.findings(),
        "not_ok": b.not_ok(),
        "problems": problems,
        "sweep": b.sweep_section(),
        "frameworks": b.frameworks_section(),
        "runs": [b.run_section(r) for r in runs],
        "prov": b.provenance(),
    }
    ctx["budget"] = {"limit_mb": settings.max_html_mb, "linked": 0}
    template = _environment(anon).get_template("report.html.j2")
    html = template.render(**ctx)
    # Keep the file under its size, whatever the number of runs: the figures that do not fit
    # are linked (they are files beside the HTML anyway), last runs first.
    limit = int(settings.max_html_mb * 1e6)
    while len(html.encode("utf-8")) > limit and figs.unembed(len(html.encode("utf-8")) - limit):
        ctx["budget"]["linked"] = figs.linked
        html = template.render(**ctx)
    figs.write_index()
    return write_text(out_html, html)
