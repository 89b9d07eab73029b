"""Checkpoints: which ranks write them, how much, how long, how often.

A checkpoint *event* is a burst of writes to checkpoint-class files: per-file write windows
(from segments, or Darshan's open/close times for files known only from counters, e.g. TF's
STDIO writes) merged when they lie within ``phase_gap_s`` of each other. TF writes several
files per checkpoint (.index, .data-*, the ``checkpoint`` list); they make one event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import WRITE, RunData, category_matches
from iosweep.trace.schema import RunMeta

CLASS = "checkpoint"


def analyze_checkpoints(
    rd: RunData, file_rank: pd.DataFrame, windows: pd.DataFrame
) -> dict[str, Any]:
    if CLASS not in rd.class_names:
        return {"available": False, "reason": f"no file class named {CLASS!r} in the settings"}
    ci = rd.class_names.index(CLASS)
    fr = file_rank[(file_rank["class"] == ci) & (file_rank["actor"] >= 0)]
    w = fr[fr["bytes_written"] > 0]
    writers = sorted(int(a) for a in w["actor"].unique())
    out: dict[str, Any] = {
        "available": True,
        "writers": writers,
        "n_writers": len(writers),
        "ranks_of_run": rd.n_ranks,
        "only_one_rank_writes": len(writers) == 1 and rd.n_ranks > 1,
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
    # Per-file write windows.
    ops = rd.ops
    m = (ops.op == WRITE) & (rd.file_class[ops.file] == ci) & (ops.actor >= 0)
    parts = []
    if m.any():
        seg = pd.DataFrame(
            {
                "file": ops.file[m],
                "actor": ops.actor[m],
                "start": ops.start[m],
                "end": ops.end[m],
                "bytes": ops.length[m],
            }
        )
        parts.append(
            seg.groupby("file")
            .agg(
                start=("start", "min"),
                end=("end", "max"),
                bytes=("bytes", "sum"),
                ranks=("actor", "nunique"),
            )
            .reset_index()
        )
    c = rd.counters
    co_files = set(w.loc[w["source"] == "counters", "file"])
    if co_files and len(c):
        cc = c[c["file"].isin(co_files) & (c["bytes_written"] > 0) & (c["actor"] >= 0)]
        cc = cc.dropna(subset=["open_start", "close_end"])
        if len(cc):
            parts.append(
                cc.groupby("file")
                .agg(
                    start=("open_start", "min"),
                    end=("close_end", "max"),
                    bytes=("bytes_written", "sum"),
                    ranks=("actor", "nunique"),
                )
                .reset_index()
            )
    if not parts:
        out |= {"n_checkpoints": 0, "events": []}
        return out
    pf = pd.concat(parts, ignore_index=True).sort_values("start").reset_index(drop=True)
    en = np.maximum.accumulate(pf["end"].to_numpy())
    st = pf["start"].to_numpy()
    new = np.r_[True, st[1:] > en[:-1] + rd.settings.phase_gap_s]
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
        "time_share_of_run": float(ev["duration"].sum() / rd.run_time) if rd.run_time > 0 else None,
        "events": events[:200],
    }
    return out


def _after_epoch(t: float, ep: pd.DataFrame) -> int | None:
    """The last epoch that ended at or before t (checkpoints usually follow an epoch)."""
    if ep is None or len(ep) == 0:
        return None
    done = ep[ep["end"] <= t + 1e-6]
    return int(done["epoch"].max()) if len(done) else None


def app_saves(meta: RunMeta) -> list[dict[str, Any]]:
    """Checkpoint saves as the training script timed them (manifest ``phases``: per rank,
    ``checkpoint-<epoch>: [start, end]`` in Unix seconds), on the run's clock."""
    phases = meta.manifest.get("phases") or {}
    out: list[dict[str, Any]] = []
    if not isinstance(phases, dict):
        return out
    for rank, ph in phases.items():
        for name, span in (ph or {}).items() if isinstance(ph, dict) else ():
            if not (str(name).startswith("checkpoint") and isinstance(span, list | tuple)):
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


def opened_checkpoints(rd: RunData, gap: float) -> list[dict[str, Any]]:
    """Checkpoints placed by the tracer's opens and closes of checkpoint files (DFTracer sees
    ``torch.save``'s ``fopen``/``fclose`` but not its writes): one event per burst, its
    bytes the files' sizes on disk, marked ``traced: false``."""
    ev = rd.app_events
    if ev.empty or CLASS not in rd.class_names:
        return []
    ci = rd.class_names.index(CLASS)
    # per distinct name, then per row by category code and path code: millions of events
    m = category_matches(ev["name"], r"^(f?open(at)?(64)?|creat(64)?|f?close)$")
    file = ev["file"].to_numpy()
    m &= file >= 0
    m[m] = rd.file_class[file[m]] == ci
    m &= ev["actor"].to_numpy() >= 0
    e = ev[m]
    if e.empty:
        return []
    e = e.assign(path=[rd.paths[f] for f in e["file"].to_numpy()])
    per_file = e.groupby("path").agg(
        start=("start", "min"), end=("end", "max"), rank=("actor", "min")
    )
    per_file = per_file.sort_values("start")
    disk = _outputs(rd.meta)
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
            {"start": float(r["start"]), "end": float(r["end"]), "bytes": size, "files": 1,
             "ranks": 1, "after_epoch": None, "traced": False}
        )  # fmt: skip
    for o in out:
        o["duration"] = o["end"] - o["start"]
    return out


def checkpoint_summary(rd: RunData, file_rank: pd.DataFrame, windows: pd.DataFrame) -> dict:
    """Traced checkpoints, plus what the job itself recorded, for when the tracer missed the
    writes (DFTracer does not see torch.save's): ``app_saves``, ``on_disk`` and ``marks``
    (the times to show: traced bursts, else the script's saves)."""
    out = analyze_checkpoints(rd, file_rank, windows)
    out["app_saves"] = app_saves(rd.meta)
    out["on_disk"] = outputs_on_disk(rd.meta)
    traced = [e for e in out.get("events") or [] if "start" in e]
    opened = [] if traced else opened_checkpoints(rd, rd.settings.phase_gap_s)
    ep = windows[windows["step"] < 0].sort_values("start") if len(windows) else windows
    for e in opened:
        e["after_epoch"] = _after_epoch(e["start"], ep)
    out["opened"] = opened
    out["marks"] = traced or opened or out["app_saves"]
    return out
