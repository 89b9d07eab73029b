"""Checkpoints: which ranks write them, how much, how long, how often.

A checkpoint *event* is a burst of writes to checkpoint-class files: per-file write windows
(from segments, or Darshan's open/close times for files known only from counters, e.g. TF's
STDIO writes) merged when they lie within ``phase_gap_s`` of each other. TF writes several
files per checkpoint (.index, .data-*, the ``checkpoint`` list); they make one event.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import WRITE, RunData, category_matches
from iosweep.analysis.sections import PartIn, PartOut, PartsIn, Section, register
from iosweep.trace.schema import RunMeta

CLASS = "checkpoint"


WINDOW_COLUMNS = ["file", "start", "end", "bytes", "ranks"]


def write_windows(rd: RunData, ci: int) -> pd.DataFrame:
    """Per checkpoint file (class ``ci``) the ranks write: its write window, bytes and
    writers (:data:`WINDOW_COLUMNS`); of some ranks, theirs (writers and bytes add up over
    parts of ranks, windows widen)."""
    ops = rd.ops
    m = (ops.op == WRITE) & (rd.file_class[ops.file] == ci) & (ops.actor >= 0)
    if not m.any():
        return pd.DataFrame(columns=WINDOW_COLUMNS)
    seg = pd.DataFrame(
        {
            "file": ops.file[m],
            "actor": ops.actor[m],
            "start": ops.start[m],
            "end": ops.end[m],
            "bytes": ops.length[m],
        }
    )
    return _windows(seg)


def _windows(rows: pd.DataFrame, ranks: tuple[str, str] = ("actor", "nunique")) -> pd.DataFrame:
    """Per file: first start, last end, bytes, and its writers (``ranks``: how to count them
    from ``rows``)."""
    return (
        rows.groupby("file")
        .agg(start=("start", "min"), end=("end", "max"), bytes=("bytes", "sum"), ranks=ranks)
        .reset_index()
    )


def counted_windows(rd: RunData, ci: int) -> pd.DataFrame:
    """The same from Darshan's counters, opens to closes (for the files known only from
    counters, e.g. TF's STDIO writes)."""
    c = rd.counters
    if not len(c):
        return pd.DataFrame(columns=WINDOW_COLUMNS)
    cc = c[
        (rd.file_class[c["file"].to_numpy()] == ci) & (c["bytes_written"] > 0) & (c["actor"] >= 0)
    ]
    cc = cc.dropna(subset=["open_start", "close_end"])
    rows = cc[["file", "actor", "open_start", "close_end", "bytes_written"]].rename(
        columns={"open_start": "start", "close_end": "end", "bytes_written": "bytes"}
    )
    return _windows(rows) if len(rows) else pd.DataFrame(columns=WINDOW_COLUMNS)


def checkpoints_of(
    file_rank: pd.DataFrame,
    written: pd.DataFrame,
    counted: pd.DataFrame,
    ci: int,
    n_ranks: int,
    gap: float,
    windows: pd.DataFrame,
    run_time: float,
) -> dict[str, Any]:
    """The checkpoints of a run from its (rank, file) rows, the checkpoint files' write
    windows (:func:`write_windows`) and counted windows (:func:`counted_windows`)."""
    fr = file_rank[(file_rank["class"] == ci) & (file_rank["actor"] >= 0)]
    w = fr[fr["bytes_written"] > 0]
    writers = sorted(int(a) for a in w["actor"].unique())
    out: dict[str, Any] = {
        "available": True,
        "writers": writers,
        "n_writers": len(writers),
        "ranks_of_run": n_ranks,
        "only_one_rank_writes": len(writers) == 1 and n_ranks > 1,
        "files_written": int(w["file"].nunique()),
        "bytes_written": int(w["bytes_written"].sum()),
        "bytes_written_per_writer": {
            str(a): int(v) for a, v in w.groupby("actor")["bytes_written"].sum().items()
        },
        "write_ops": int(w["writes"].sum()),
        "write_time": float(w["write_time"].sum()),
        "bytes_read": int(fr["bytes_read"].sum()),
        "readers": sorted(int(a) for a in fr.loc[fr["bytes_read"] > 0, "actor"].unique()),
    }
    # Per-file write windows; from the counters for the files some rank has only there.
    parts = [written] if len(written) else []
    co_files = set(w.loc[w["source"] == "counters", "file"])
    counted = counted[counted["file"].isin(co_files)]
    if len(counted):
        parts.append(counted)
    if not parts:
        out |= {"n_checkpoints": 0, "events": []}
        return out
    pf = pd.concat(parts, ignore_index=True).sort_values("start").reset_index(drop=True)
    en = np.maximum.accumulate(pf["end"].to_numpy())
    st = pf["start"].to_numpy()
    new = np.r_[True, st[1:] > en[:-1] + gap]
    pf["event"] = np.cumsum(new) - 1
    ev = pf.groupby("event").agg(
        start=("start", "min"),
        end=("end", "max"),
        bytes=("bytes", "sum"),
        files=("file", "nunique"),
        ranks=("ranks", "max"),
    )
    ev["duration"] = ev["end"] - ev["start"]
    ep = windows[windows["step"] < 0].sort_values("start") if len(windows) else windows
    events = []
    for r in ev.itertuples():
        events.append(
            {
                "start": float(r.start),
                "end": float(r.end),
                "duration": float(r.duration),
                "bytes": int(r.bytes),
                "files": int(r.files),
                "ranks": int(r.ranks),
                "after_epoch": _after_epoch(r.start, ep),
            }
        )
    starts = ev["start"].to_numpy()
    out |= {
        "n_checkpoints": len(events),
        "bytes_per_checkpoint_mean": float(ev["bytes"].mean()),
        "duration_mean": float(ev["duration"].mean()),
        "duration_max": float(ev["duration"].max()),
        "interval_mean": float(np.diff(starts).mean()) if len(starts) > 1 else None,
        "time_share_of_run": float(ev["duration"].sum() / run_time) if run_time > 0 else None,
        "events": events[:200],
    }
    return out


def add_windows(windows: list[pd.DataFrame]) -> pd.DataFrame:
    """Windows of some parts of a run's ranks (:func:`write_windows`, :func:`counted_windows`)
    as the run's: writers and bytes added, windows widened."""
    all_ = pd.concat([w for w in windows if len(w)] or windows[:1], ignore_index=True)
    return _windows(all_, ranks=("ranks", "sum"))  # (ranks disjoint: writers add up)


def _after_epoch(t: float, ep: pd.DataFrame) -> int | None:
    """The last epoch that ended at or before t (checkpoints usually follow an epoch)."""
    if ep is None or len(ep) == 0:
        return None
    done = ep[ep["end"] <= t + 1e-6]
    return int(done["epoch"].max()) if len(done) else None


def app_saves(meta: RunMeta) -> list[dict[str, Any]]:
    """Checkpoint saves as the training script or the step hooks timed them (manifest
    ``phases``: per rank, ``checkpoint-<epoch>: [start, end]`` in Unix seconds), on the run's
    clock."""
    return timed_phases(meta, "checkpoint")


def timed_phases(meta: RunMeta, prefix: str) -> list[dict[str, Any]]:
    """The manifest's timed phases whose names start with ``prefix`` (rank, name, start, end
    on the run's clock), in time order: checkpoint saves, pipeline start-ups."""
    phases = meta.manifest.get("phases") or {}
    out: list[dict[str, Any]] = []
    if not isinstance(phases, dict):
        return out
    for rank, ph in phases.items():
        for name, span in (ph or {}).items() if isinstance(ph, dict) else ():
            if not (str(name).startswith(prefix) and isinstance(span, list | tuple)):
                continue
            if len(span) != 2:
                continue
            try:
                start, end = float(span[0]) - meta.clock_zero, float(span[1]) - meta.clock_zero
                out.append({"rank": int(rank), "name": str(name), "start": start, "end": end})
            except (TypeError, ValueError):
                continue
    return sorted(out, key=lambda e: (e["start"], e["rank"]))


def _outputs(meta: RunMeta) -> dict[str, int]:
    """path -> bytes of the files the job left in its checkpoint directory (manifest
    ``outputs``: ``size``, or ``bytes`` as other tools write it)."""
    outs = [o for o in meta.manifest.get("outputs") or [] if isinstance(o, dict) and o.get("path")]
    return {str(o["path"]): int(o.get("size") or o.get("bytes") or 0) for o in outs}


def outputs_on_disk(meta: RunMeta) -> dict[str, int]:
    """Files and bytes the job left in its checkpoint directory (manifest ``outputs``)."""
    outs = _outputs(meta)
    return {"files": len(outs), "bytes": sum(outs.values())}


def opened_files(rd: RunData) -> pd.DataFrame:
    """Per checkpoint file a rank opened or closed (as events): path, first start, last end
    and the lowest rank (of some ranks: theirs, to be put together by :func:`add_opened`)."""
    ev = rd.app_events
    none = pd.DataFrame(columns=["path", "start", "end", "rank"])
    if ev.empty or CLASS not in rd.class_names:
        return none
    ci = rd.class_names.index(CLASS)
    # per distinct name, then per row by category code and path code: millions of events
    m = category_matches(ev["name"], r"^(f?open(at)?(64)?|creat(64)?|f?close)$")
    file = ev["file"].to_numpy()
    m &= file >= 0
    m[m] = rd.file_class[file[m]] == ci
    m &= ev["actor"].to_numpy() >= 0
    e = ev[m]
    if e.empty:
        return none
    e = e.assign(path=[rd.paths[f] for f in e["file"].to_numpy()])
    return e.groupby("path", as_index=False).agg(
        start=("start", "min"), end=("end", "max"), rank=("actor", "min")
    )


def add_opened(files: list[pd.DataFrame]) -> pd.DataFrame:
    """:func:`opened_files` of some parts of a run's ranks as the run's."""
    all_ = pd.concat(files, ignore_index=True)
    return all_.groupby("path", as_index=False).agg(
        start=("start", "min"), end=("end", "max"), rank=("rank", "min")
    )


def opened_of(files: pd.DataFrame, meta: RunMeta, gap: float) -> list[dict[str, Any]]:
    """Checkpoints placed by the tracer's opens and closes of checkpoint files (DFTracer sees
    ``torch.save``'s ``fopen``/``fclose`` but not its writes), from the run's
    :func:`opened_files`: one event per burst, its bytes the files' sizes on disk, marked
    ``traced: false``."""
    if files.empty:
        return []
    per_file = files.set_index("path").sort_values("start")
    disk = _outputs(meta)
    by_name = {Path(p).name: b for p, b in disk.items()}
    out: list[dict[str, Any]] = []
    for path, r in per_file.iterrows():
        size = disk.get(str(path), by_name.get(Path(str(path)).name, 0))
        if out and r["start"] <= out[-1]["end"] + gap:
            cur = out[-1]
            cur["end"] = max(cur["end"], float(r["end"]))
            cur["bytes"] += size
            cur["files"] += 1
            continue
        out.append(
            {
                "start": float(r["start"]),
                "end": float(r["end"]),
                "bytes": size,
                "files": 1,
                "ranks": 1,
                "after_epoch": None,
                "traced": False,
            }
        )
    for o in out:
        o["duration"] = o["end"] - o["start"]
    return out


def with_records(
    out: dict[str, Any],
    opened: Callable[[], pd.DataFrame],
    meta: RunMeta,
    gap: float,
    windows: pd.DataFrame,
) -> dict[str, Any]:
    """The traced checkpoints ``out`` with what the job recorded and where no write was
    traced, the checkpoint files' opens and closes (``opened``: the run's
    :func:`opened_files`, asked for only then)."""
    out["app_saves"] = app_saves(meta)
    out["on_disk"] = outputs_on_disk(meta)
    traced = [e for e in out.get("events") or [] if "start" in e]
    found = [] if traced else opened_of(opened(), meta, gap)
    ep = windows[windows["step"] < 0].sort_values("start") if len(windows) else windows
    for e in found:
        e["after_epoch"] = _after_epoch(e["start"], ep)
    out["opened"] = found
    out["marks"] = traced or found or out["app_saves"]
    return out


# a part's checkpoint files: write windows from segments and from counters, opens and closes
WRITTEN, COUNTED, OPENED = "written.parquet", "counted.parquet", "opened.parquet"


def _of_part(part: PartIn, out: PartOut) -> None:
    rd = part.rd
    if CLASS not in rd.settings.class_names:
        return
    ci = rd.settings.class_names.index(CLASS)
    out.put(WRITTEN, write_windows(rd, ci), rd.paths)
    out.put(COUNTED, counted_windows(rd, ci), rd.paths)
    out.put(OPENED, opened_files(rd))


def _of_run(parts: PartsIn) -> dict[str, Any]:
    """The checkpoints from the (rank, file) rows of checkpoint files, the parts' write
    windows and opens of checkpoint files."""
    s = parts.settings
    if CLASS not in parts.class_names:
        traced: dict[str, Any] = {
            "available": False,
            "reason": f"no file class named {CLASS!r} in the settings",
        }
    else:
        traced = checkpoints_of(
            parts.checkpoint_rows,
            add_windows(parts.frames(WRITTEN, coded=True)),
            add_windows(parts.frames(COUNTED, coded=True)),
            parts.class_names.index(CLASS),
            parts.n_ranks,
            s.phase_gap_s,
            parts.windows,
            parts.run_time,
        )

    def opened() -> pd.DataFrame:
        return add_opened(parts.frames(OPENED))

    return with_records(traced, opened, parts.meta, s.phase_gap_s, parts.windows)


SECTION = register(Section("checkpoints", _of_part, _of_run))
