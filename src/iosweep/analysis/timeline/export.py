"""A run's timeline: slices and markers from the analysed data, cut to the settings'
window, written as Chrome trace-event JSON (gzip) with the run's verdict in its metadata."""

from __future__ import annotations

import gzip
import heapq
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from iosweep import __version__
from iosweep.analysis.data import OPS, RunData
from iosweep.analysis.pipeline import account
from iosweep.analysis.pipeline.verdict import ACCOUNT_WORDS
from iosweep.analysis.pipeline.waits import rank_epochs
from iosweep.files import atomic_write
from iosweep.trace.schema import RunMeta

FILE = "timeline.json.gz"
HOW_TO_OPEN = (
    "open it at https://ui.perfetto.dev (Open trace file; it stays in the browser), or with "
    "Perfetto's trace processor (trace_processor_shell, or the perfetto Python package)"
)
_ROLE_ORDER = {"rank": 0, "worker": 1, "child": 2}


@dataclass
class Timeline:
    """A run's slices (one row each: track, thread key, name, cat, ts and dur in µs, args as
    JSON text) and markers, after the cut; the metadata says what was cut."""

    slices: pd.DataFrame
    markers: list[dict[str, Any]]
    process_names: dict[int, str]
    window: tuple[float, float]  # seconds from the run's start
    cut: str  # "" when nothing was left out, else where and why
    left_out: dict[str, int] = field(default_factory=dict)
    run_id: str = ""
    clock_zero: float = 0.0

    @staticmethod
    def record_of(tl: Timeline | None) -> dict[str, Any]:
        """The summary's ``timeline`` record of ``tl``, or of none made (not asked for)."""
        return tl.record() if tl else {"file": "", "cut": "analysis.timeline.enabled: false"}

    def record(self, written: bool = True) -> dict[str, Any]:
        """The summary's ``timeline`` record."""
        lo, hi = self.window
        return {
            "file": FILE if written else "",
            "slices": len(self.slices),
            "window": [lo, hi if np.isfinite(hi) else None],
            "cut": self.cut,
            "left_out": self.left_out,
        }


# --- slices ---------------------------------------------------------------------------------------
def _loop_slices(rd: RunData) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Each rank's steps and waits as the pipeline measured them, and its epochs (markers)."""
    rows: list[tuple] = []
    marks = []
    epochs = rank_epochs(rd)
    for re_ in epochs:
        st = re_.steps
        first = np.zeros(len(st), bool)
        first[0] = True
        for s, e, lo, hi, step, f in zip(
            st["start"], st["end"], st["wait_lo"], st["wait_hi"], st["step"], first, strict=True
        ):
            args = json.dumps({"epoch": re_.epoch, "step": int(step), "first_of_epoch": bool(f)})
            if hi > lo:
                rows.append((re_.rank, -1, -1, "wait for batch", "data wait", lo, hi, args))
            rows.append((re_.rank, -1, -1, "step", "compute", s, e, args))
        marks.append(
            _marker(
                f"epoch {re_.epoch}",
                "p",
                re_.start,
                re_.rank,
                {"epoch": re_.epoch, "end_s": re_.end, "steps": len(st)},
            )
        )
    for rank, x in account.account_slices(rd, epochs):  # a track of its own, each second once
        args = json.dumps({"kind": x.kind, "where": x.where} if x.where else {"kind": x.kind})
        name = ACCOUNT_WORDS[x.kind] + (f", {x.where}" if x.where else "")
        rows.append((rank, ACCOUNT_PID, -1, name, ACCOUNT_CAT, x.start, x.end, args))
    return pd.DataFrame(rows, columns=_COLS), marks


ACCOUNT_PID = -2  # the time account's pseudo-thread of a rank's track (-1: its steps and waits)
ACCOUNT_CAT = "time account"
_COLS = ["track", "pid", "thread", "name", "cat", "start", "end", "args"]


def _op_slices(rd: RunData, keep: np.ndarray) -> pd.DataFrame:
    """The analysed reads and writes (``keep`` of them), with file, offset and size."""
    o = rd.ops
    assert o.pid is not None and o.thread is not None and o.module is not None, "released"
    idx = np.flatnonzero(keep)
    names = np.array(OPS, dtype=object)
    modules = np.array([*rd.modules, ""], dtype=object)
    return pd.DataFrame(
        {
            "track": o.actor[idx],
            "pid": o.pid[idx],
            "thread": o.thread[idx],
            "name": names[o.op[idx]],
            "cat": modules[o.module[idx]],
            "start": o.start[idx],
            "end": o.end[idx],
            "args": _op_args(rd, o.file[idx], o.offset[idx], o.length[idx]),
        }
    )


def _op_args(rd: RunData, file: np.ndarray, offset: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Each operation's args as the JSON ``json.dumps`` writes of {file, offset (null: not
    known), size, class}: text made once per distinct file and class, then joined by Arrow
    (json.dumps a slice: 4 s of a 40 s part of the 100 M-segment run, 500 k slices a part)."""
    used, at = np.unique(file, return_inverse=True)
    file_text = pa.array([json.dumps(rd.paths[f]) for f in used.tolist()], pa.string())
    class_text = pa.array([json.dumps(c) for c in rd.class_names], pa.string())
    known = offset >= 0
    parts = [
        pa.scalar('{"file": '),
        file_text.take(pa.array(at)),
        pa.scalar(', "offset": '),
        pc.if_else(
            pa.array(known),
            pc.cast(pa.array(np.where(known, offset, 0).astype(np.int64)), pa.string()),
            pa.scalar("null"),
        ),
        pa.scalar(', "size": '),
        pc.cast(pa.array(length.astype(np.int64, copy=False)), pa.string()),
        pa.scalar(', "class": '),
        class_text.take(pa.array(rd.file_class[used][at].astype(np.int64))),
        pa.scalar("}"),
    ]
    return np.asarray(pc.binary_join_element_wise(*parts, "").to_pylist(), dtype=object)


def _event_slices(rd: RunData, keep: np.ndarray) -> pd.DataFrame:
    """The app events (metadata calls, annotations), with the file where they name one."""
    ev = rd.app_events[keep]
    paths = rd.paths
    args = [json.dumps({"file": paths[f]} if f >= 0 else {}) for f in ev["file"].to_numpy()]
    return pd.DataFrame(
        {
            "track": ev["actor"].to_numpy(),
            "pid": ev["pid"].to_numpy(),
            "thread": ev["thread"].to_numpy(),
            "name": ev["name"].astype(str).to_numpy(),
            "cat": ev["cat"].astype(str).to_numpy(),
            "start": ev["start"].to_numpy(),
            "end": ev["end"].to_numpy(),
            "args": args,
        }
    )


# --- the cut --------------------------------------------------------------------------------------
def _step_window(loop: pd.DataFrame, max_steps: int) -> float:
    """The time by which every rank has done ``max_steps`` steps (inf: none does more)."""
    steps = loop[loop["name"] == "step"].sort_values("start")
    ends = [g["end"].iloc[max_steps - 1] for _, g in steps.groupby("track") if len(g) > max_steps]
    return float(max(ends)) if ends else np.inf


def _cut(t: dict[str, Any], steps_end: float) -> tuple[float, float, str]:
    """(window start, window end, why it ends there, or ""), ``t`` the timeline's settings,
    ``steps_end`` when every rank has done ``max_steps`` steps (:func:`_step_window`)."""
    if t.get("window"):
        lo, hi = (float(v) for v in t["window"])
        return lo, hi, f"the window {lo:g}-{hi:g} s set by analysis.timeline.window"
    why = f"after the first {t['max_steps']} steps of every rank" if np.isfinite(steps_end) else ""
    return -np.inf, steps_end, why


def _capped(starts: np.ndarray, cap: int) -> tuple[float, str] | None:
    """Where the slices starting at ``starts`` (those in the window) end when they are more
    than ``cap``: at the start of the first past it, and why; None where they fit."""
    if len(starts) <= cap:
        return None
    hi = float(np.partition(starts, cap)[cap])
    return hi, f"at {cap:,} slices (analysis.timeline.max_events), {hi:.3f} s into the run"


def _in_window(start: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (start >= lo) & (start < hi)


def _kept(
    rd: RunData, loop: pd.DataFrame, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The operations, app events and loop slices that start in [lo, hi) (and end: a slice
    without an end is not drawn)."""
    ev = rd.app_events
    return (
        _in_window(rd.ops.start, lo, hi) & np.isfinite(rd.ops.end),
        _in_window(ev["start"].to_numpy(), lo, hi) & np.isfinite(ev["end"].to_numpy()),
        _in_window(loop["start"].to_numpy(), lo, hi),
    )


def collect(rd: RunData) -> Timeline:
    """The run's timeline, cut as ``analysis.timeline`` says (steps, window, max_events)."""
    loop, marks = _loop_slices(rd)
    t = rd.settings.timeline
    lo, hi, why = _cut(t, _step_window(loop, int(t["max_steps"])))
    ops_keep, ev_keep, loop_keep = _kept(rd, loop, lo, hi)
    ev = rd.app_events
    starts = np.concatenate(
        [
            rd.ops.start[ops_keep],
            ev["start"].to_numpy()[ev_keep],
            loop["start"].to_numpy()[loop_keep],
        ]
    )
    capped = _capped(starts, int(t["max_events"]))
    if capped:  # end earlier: at the start of the first slice past the cap
        hi, why = capped
        ops_keep &= rd.ops.start < hi
        ev_keep &= ev["start"].to_numpy() < hi
        loop_keep &= loop["start"].to_numpy() < hi
    acc = (loop["cat"] == ACCOUNT_CAT).to_numpy()
    left = {
        "operations": int(len(rd.ops) - ops_keep.sum()),
        "app_events": int(len(ev) - ev_keep.sum()),
        "steps_and_waits": int((~acc).sum() - (loop_keep & ~acc).sum()),
        "time_account": int(acc.sum() - (loop_keep & acc).sum()),
    }
    slices = pd.concat(
        [loop[loop_keep], _op_slices(rd, ops_keep), _event_slices(rd, ev_keep)], ignore_index=True
    )
    marks = [m for m in marks if lo <= m["ts"] / 1e6 < hi]
    return Timeline(
        slices=slices,
        markers=marks,
        process_names=_process_names(rd.actor_kind, rd.actor_host, slices),
        window=(float(max(lo, rd.run_start)), float(hi)),
        cut=why if any(left.values()) else "",
        left_out=left if any(left.values()) else {},
        run_id=rd.meta.run_id,
        clock_zero=rd.meta.clock_zero,
    )


# --- a run analysed in parts ----------------------------------------------------------------------
# a slice's kind: an index into these
KINDS = ("operations", "app_events", "steps_and_waits", "time_account")


def part_slices(rd: RunData) -> tuple[pd.DataFrame, dict[str, Any]]:
    """What a part of a run's ranks gives the run's timeline (:func:`from_parts`): its slices
    in ``analysis.timeline``'s window (``kind``: an index into :data:`KINDS`), the first
    ``max_events`` + 1 of them by start, ties kept (a slice the run's timeline keeps is among
    the first ``max_events`` of its part); and facts: when its ranks have done ``max_steps``
    steps (None: not all do), its epoch markers and how many slices of each kind it has."""
    loop, marks = _loop_slices(rd)
    t = rd.settings.timeline
    lo, hi, _ = _cut(t, np.inf)
    ev = rd.app_events
    keep = _kept(rd, loop, lo, hi)
    starts = (rd.ops.start, ev["start"].to_numpy(), loop["start"].to_numpy())
    capped = _capped(
        np.concatenate([x[k] for x, k in zip(starts, keep, strict=True)]), int(t["max_events"])
    )
    if capped:
        keep = tuple(k & (x <= capped[0]) for x, k in zip(starts, keep, strict=True))
    acc = (loop["cat"] == ACCOUNT_CAT).to_numpy()
    slices = pd.concat(
        [
            loop[keep[2]].assign(kind=np.where(acc[keep[2]], 3, 2)),
            _op_slices(rd, keep[0]).assign(kind=0),
            _event_slices(rd, keep[1]).assign(kind=1),
        ],
        ignore_index=True,
    )
    end = _step_window(loop, int(t["max_steps"]))
    facts = {
        "steps_end": end if np.isfinite(end) else None,
        "marks": marks,
        "slices": dict(
            zip(KINDS, (len(rd.ops), len(ev), int((~acc).sum()), int(acc.sum())), strict=True)
        ),
        "actor_kind": rd.actor_kind,
    }
    return slices, facts


def from_parts(
    files: Sequence[Callable[..., pd.DataFrame]],
    facts: list[dict[str, Any]],
    t: dict[str, Any],
    meta: RunMeta,
    actor_host: dict[int, str],
    run_start: float,
) -> Timeline:
    """The run's timeline from its parts' slices (``files``: each part's slices of
    :func:`part_slices`, read as ``f(columns=, filters=)`` with Parquet's filters) and
    ``facts``, cut as :func:`collect` cuts the whole run's: the run's step window from every
    part's, then the first ``max_events`` slices of all parts (only their starts are read
    to find where)."""
    ends = [f["steps_end"] for f in facts if f["steps_end"] is not None]
    lo, hi, why = _cut(t, max(ends) if ends else np.inf)
    starts = np.concatenate([f(columns=["start"])["start"].to_numpy() for f in files])
    capped = _capped(starts[_in_window(starts, lo, hi)], int(t["max_events"]))
    if capped:
        hi, why = capped
    del starts
    where = [("start", ">=", lo), ("start", "<", hi)]
    slices = pd.concat([f(filters=where) for f in files], ignore_index=True)
    kept = np.bincount(slices.pop("kind").to_numpy(np.int64), minlength=len(KINDS))
    left = {k: sum(f["slices"][k] for f in facts) - int(kept[i]) for i, k in enumerate(KINDS)}
    marks = [m for f in facts for m in f["marks"] if lo <= m["ts"] / 1e6 < hi]
    return Timeline(
        slices=slices,
        markers=marks,
        process_names=_process_names(facts[0]["actor_kind"], actor_host, slices),
        window=(float(max(lo, run_start)), float(hi)),
        cut=why if any(left.values()) else "",
        left_out=left if any(left.values()) else {},
        run_id=meta.run_id,
        clock_zero=meta.clock_zero,
    )


def _process_names(
    actor_kind: str, actor_host: dict[int, str], slices: pd.DataFrame
) -> dict[int, str]:
    kind = "rank" if actor_kind == "rank" else "process"
    out = {}
    for a in sorted({int(a) for a in slices["track"]}):
        host = actor_host.get(a, "")
        out[a] = (
            f"{kind} {a}" + (f" ({host})" if host else "")
            if a >= 0
            else ("processes not tied to a rank")
        )
    return out


# --- tracks ---------------------------------------------------------------------------------------
def _lanes(ts: np.ndarray, te: np.ndarray) -> np.ndarray:
    """A lane per slice such that no two slices of one lane overlap (greedy, by start)."""
    order = np.lexsort((-te, ts))
    lane = np.zeros(len(ts), np.int64)
    free: list[tuple[float, int]] = []  # (end of its last slice, lane)
    n_lanes = 0
    for i in order:
        if free and free[0][0] <= ts[i]:
            _, k = heapq.heappop(free)
        else:
            k, n_lanes = n_lanes, n_lanes + 1
        lane[i] = k
        heapq.heappush(free, (te[i], k))
    return lane


def _thread_name(roles: dict[int, str], pid: int, thread: int, lane: int) -> str:
    if pid == ACCOUNT_PID:
        base = "time account: each second of the rank in one slice"
    elif pid < 0:
        base = "training loop: steps and data waits"
    else:
        role = roles.get(pid, "process")
        base = {"rank": "main process", "worker": "loader worker"}.get(role, role)
        base += f" pid {pid}" + (f" thread {thread}" if thread >= 0 and thread != pid else "")
    return base + (f" (overlapping calls, lane {lane + 1})" if lane else "")


def _tracks(meta: RunMeta, s: pd.DataFrame) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Slices with ``tid`` (one per track, thread and lane, unique in the file) and their
    ``thread_name`` metadata events; times in µs (rounded to the ns, so that lanes hold)."""
    s = s.assign(
        ts=np.round(s["start"].to_numpy(np.float64) * 1e6, 3),
        te=np.round(s["end"].to_numpy(np.float64) * 1e6, 3),
    )
    s["te"] = np.maximum(s["te"], s["ts"])
    s["track"] = np.where(s["track"] >= 0, s["track"], -1)
    roles = {p.pid: p.role for p in meta.processes}
    s["order"] = [_ROLE_ORDER.get(roles.get(int(p), ""), 3) if p >= 0 else -1 for p in s["pid"]]
    s["lane"] = 0
    for _, g in s.groupby(["track", "pid", "thread"], sort=False):
        s.loc[g.index, "lane"] = _lanes(g["ts"].to_numpy(), g["te"].to_numpy())
    keys = s[["track", "order", "pid", "thread", "lane"]].drop_duplicates()
    keys = keys.sort_values(["track", "order", "pid", "thread", "lane"]).reset_index(drop=True)
    keys["tid"] = np.arange(1, len(keys) + 1)
    s = s.merge(keys, on=["track", "order", "pid", "thread", "lane"], how="left")
    names = [
        {
            "ph": "M",
            "name": "thread_name",
            "pid": _pid(k.track),
            "tid": int(k.tid),
            "args": {"name": _thread_name(roles, int(k.pid), int(k.thread), int(k.lane))},
        }
        for k in keys.itertuples()
    ] + [
        {
            "ph": "M",
            "name": "thread_sort_index",
            "pid": _pid(k.track),
            "tid": int(k.tid),
            "args": {"sort_index": int(k.tid)},
        }
        for k in keys.itertuples()
    ]
    return s.sort_values(["tid", "ts", "te"], kind="stable"), names


def _pid(track: int) -> int:
    """A rank's process id in the file: the rank; processes tied to no rank share one."""
    return int(track) if track >= 0 else 1_000_000


def _marker(name: str, scope: str, t: float, track: int, args: dict[str, Any]) -> dict[str, Any]:
    m = {
        "ph": "i",
        "s": scope,
        "name": name,
        "cat": "marker",
        "ts": round(t * 1e6, 3),
        "pid": _pid(track),
        "tid": 0,
        "args": args,
    }
    return m


# --- writing --------------------------------------------------------------------------------------
def _metadata(tl: Timeline, summary: dict[str, Any]) -> dict[str, Any]:
    pipe = summary.get("pipeline") or {}
    v = pipe.get("verdict") or {}
    return {
        "generator": f"iosweep {__version__}",
        "run_id": tl.run_id,
        "clock_zero_unix_s": tl.clock_zero,
        "time": "microseconds from the run's start (clock_zero_unix_s)",
        "verdict": {k: v.get(k) for k in ("kind", "title", "text")} if v else None,
        "au": (pipe.get("totals") or {}).get("au"),
        "au_label": pipe.get("au_label"),
        "pipeline_reason": "" if pipe.get("available") else pipe.get("reason", ""),
        "window_s": tl.record()["window"],
        "cut": tl.cut or "nothing left out",
        "left_out": tl.left_out,
        "how_to_open": HOW_TO_OPEN,
    }


def _checkpoints(summary: dict[str, Any], tl: Timeline) -> list[dict[str, Any]]:
    lo, hi = tl.window
    out = []
    for c in (summary.get("checkpoints") or {}).get("events") or []:
        if lo <= c["start"] < hi:
            args = {k: c.get(k) for k in ("duration", "bytes", "files", "ranks", "after_epoch")}
            out.append(_marker("checkpoint", "g", c["start"], 1_000_000, args))
    return out


# counter tracks from the sampler of each rank's processes (manifest ``procs``): name -> the
# cumulative series whose rate each draws (seconds of CPU a second = cores busy)
COUNTERS: dict[str, dict[str, tuple[str, ...]]] = {
    "CPU (cores)": {"rank process": ("rank_cpu",), "processes below it": ("cpu", "rank_cpu")},
    "waiting for a core (threads)": {"rank and below": ("runq",)},
    "host CPU busy (cores)": {"all processes": ("host_busy",)},
}


def _rate(t: np.ndarray, series: dict[str, list], keys: tuple[str, ...]) -> np.ndarray | None:
    vals = [series.get(k) or [] for k in keys]
    if any(len(v) != len(t) or any(x is None for x in v) for v in vals):
        return None
    y = np.asarray(vals[0], dtype=float) - (
        np.asarray(vals[1], dtype=float) if len(keys) > 1 else 0.0
    )
    return np.diff(y) / np.maximum(np.diff(t), 1e-9)


def counters(meta: RunMeta, tl: Timeline) -> list[dict[str, Any]]:
    """Counter events ("ph": "C") per rank in the window: its processes' CPU, their wait for a
    core and the host's busy cores, each sample's rate since the previous one."""
    out: list[dict[str, Any]] = []
    lo, hi = tl.window
    for rank, rec in ((meta.manifest or {}).get("procs") or {}).items():
        series = rec.get("series") if isinstance(rec, dict) else None
        if not series or len(series.get("t") or []) < 2 or not str(rank).isdigit():
            continue
        t = np.asarray(series["t"], dtype=float) - tl.clock_zero
        for name, args in COUNTERS.items():
            rates = {label: _rate(t, series, keys) for label, keys in args.items()}
            if any(r is None for r in rates.values()):
                continue
            for i in np.flatnonzero((t[1:] >= lo) & (t[1:] < hi)):
                values = {
                    label: round(float(r[i]), 3) for label, r in rates.items() if r is not None
                }
                out.append(
                    {
                        "ph": "C",
                        "name": name,
                        "pid": _pid(int(rank)),
                        "tid": 0,
                        "ts": round(float(t[i + 1]) * 1e6, 3),
                        "args": values,
                    }
                )
    return out


def events(meta: RunMeta, tl: Timeline, summary: dict[str, Any]) -> tuple[list[dict], pd.DataFrame]:
    """(metadata and marker events, the slices with their tids), in the order written."""
    slices, thread_meta = _tracks(meta, tl.slices)
    procs = [
        {"ph": "M", "name": n, "pid": _pid(a), "tid": 0, "args": args}
        for a, name in tl.process_names.items()
        for n, args in (
            ("process_name", {"name": name}),
            ("process_sort_index", {"sort_index": _pid(a)}),
        )
    ]
    marks = tl.markers + _checkpoints(summary, tl)
    if tl.cut:
        marks.append(
            _marker(
                "timeline cut here",
                "g",
                min(tl.window[1], 1e9),
                1_000_000,
                {"why": tl.cut, "left_out": tl.left_out},
            )
        )
    marks += counters(meta, tl)
    return procs + thread_meta + sorted(marks, key=lambda m: (m["pid"], m["ts"])), slices


def write(meta: RunMeta, tl: Timeline, summary: dict[str, Any], path: Path) -> Path:
    """Write the timeline of the run of ``meta`` to ``path`` (gzip JSON), atomically."""
    head, slices = events(meta, tl, summary)

    def lines():
        yield from (json.dumps(e) for e in head)
        yield from _slice_lines(slices)

    def put(tmp: Path) -> None:
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
            f.write('{"traceEvents":[\n')
            f.write(",\n".join(lines()))
            f.write('\n],\n"displayTimeUnit":"ms",\n"otherData":')
            f.write(json.dumps(_metadata(tl, summary)))
            f.write("}\n")

    return atomic_write(path, put)


def _slice_lines(slices: pd.DataFrame) -> Iterator[str]:
    """Each slice's event, as JSON text: names and categories turned to JSON once each
    distinct value (500 k slices: 1 M json.dumps and a row tuple each took 12 s)."""
    ts, te = slices["ts"].to_numpy(np.float64), slices["te"].to_numpy(np.float64)
    track = slices["track"].to_numpy(np.int64)
    columns = (
        _json_texts(slices["name"]),
        _json_texts(slices["cat"]),
        np.where(track >= 0, track, _pid(-1)).tolist(),
        slices["tid"].to_numpy(np.int64).tolist(),
        ts.tolist(),
        (te - ts).tolist(),
        slices["args"].tolist(),
    )
    for name, cat, pid, tid, start, dur, args in zip(*columns, strict=True):
        yield (
            f'{{"ph":"X","name":{name},"cat":{cat},"pid":{pid},"tid":{tid},'
            f'"ts":{start:.3f},"dur":{dur:.3f},"args":{args}}}'
        )


def _json_texts(column: pd.Series) -> list[str]:
    """Each value of ``column`` as JSON text, made once per distinct value."""
    codes, values = pd.factorize(column, use_na_sentinel=False)
    texts = [json.dumps(v) for v in values.tolist()]
    return [texts[c] for c in codes.tolist()]


def from_store(store: Path, settings: Any) -> tuple[RunData, Timeline]:
    """(RunData, Timeline) of a trace store read as the analysis reads it (artefacts out,
    steps from the annotations where there are no step records)."""
    from iosweep.analysis.parts.run import load_analysed

    rd = load_analysed(store, settings)
    return rd, collect(rd)
