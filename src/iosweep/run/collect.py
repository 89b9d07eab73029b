"""What a finished job left, read into its manifest: the ranks, their step records (the
training script's own, or the step hooks'), what the launcher said about ranks that failed,
and every rank's trace once the tracers have written it."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import time
from pathlib import Path
from typing import Any

from iosweep.run.hooks.steps import steps_from_hooks


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def read_json_files(directory: Path, pattern: str) -> list[dict[str, Any]]:
    out = []
    for f in sorted(directory.glob(pattern)):
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # a rank killed while writing; the manifest reports the rank as missing
    return out


# --- what the launcher says -----------------------------------------------------------------

# How launchers report a rank that a signal ended (Open MPI's mpirun; SLURM's srun).
_MPIRUN_SIGNALED = re.compile(
    r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)", re.I
)
_SRUN_SIGNALED = re.compile(r"srun: error: (\S+): tasks? ([\d,-]+): (.+)")
_SIGNAL_BY_NUMBER = {int(s): s for s in signal.Signals}
_SIGNAL_BY_TEXT = {signal.strsignal(s) or "": s for s in signal.Signals}
# ... and a rank that exited with a status: Open MPI, srun, torchrun (negative: a signal)
_MPIRUN_EXITED = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(\d+)")
_SRUN_EXITED = re.compile(r"srun: error: (\S+): tasks? ([\d,-]+): Exited with exit code (\d+)")
_TORCHRUN_EXITED = re.compile(
    r"host\s*:\s*(\S+)\s*\n\s*rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)"
)


def _task_ranks(spec: str) -> list[int]:
    """srun's task list, e.g. ``1`` or ``0-1,3``."""
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def signaled_ranks(launcher_output: str) -> list[dict[str, Any]]:
    """The ranks the launcher says a signal ended: [{rank, host, signal, name}], the first
    one reported first (the one that died; srun and mpirun end the others after it)."""
    found: dict[int, dict[str, Any]] = {}
    for m in _MPIRUN_SIGNALED.finditer(launcher_output):
        rank, number = int(m.group(1)), int(m.group(3))
        found.setdefault(rank, _signaled(rank, m.group(2), number))
    for m in _SRUN_SIGNALED.finditer(launcher_output):
        sig = _SIGNAL_BY_TEXT.get(m.group(3).strip())
        if sig is None:  # "Exited with exit code 1": not a signal
            continue
        for rank in _task_ranks(m.group(2)):
            found.setdefault(rank, _signaled(rank, m.group(1), int(sig)))
    for m in _TORCHRUN_EXITED.finditer(launcher_output):
        if int(m.group(3)) < 0:
            rank = int(m.group(2))
            found.setdefault(rank, _signaled(rank, m.group(1), -int(m.group(3))))
    return list(found.values())


def _signaled(rank: int, host: str, number: int) -> dict[str, Any]:
    sig = _SIGNAL_BY_NUMBER.get(number)
    return {"rank": rank, "host": host, "signal": number, "name": sig.name if sig else ""}


def exited_ranks(launcher_output: str) -> dict[int, int]:
    """{rank: exit status} of the ranks the launcher says exited non-zero."""
    found: dict[int, int] = {}
    for m in _MPIRUN_EXITED.finditer(launcher_output):
        found.setdefault(int(m.group(1)), int(m.group(2)))
    for m in _SRUN_EXITED.finditer(launcher_output):
        for rank in _task_ranks(m.group(2)):
            found.setdefault(rank, int(m.group(3)))
    for m in _TORCHRUN_EXITED.finditer(launcher_output):
        if int(m.group(3)) > 0:
            found.setdefault(int(m.group(2)), int(m.group(3)))
    return found


# --- the ranks' own records -------------------------------------------------------------------


def collect_progress(
    manifest: dict[str, Any], run_dir: Path, n_ranks: int, timing: str
) -> list[dict]:
    """Fill the manifest's ranks, steps, phases, metrics, errors and failed ranks from the rank
    files and the step records (``timing``: ``script``, ``hooks`` or ``none``); return the rank
    records."""
    ranks = read_json_files(run_dir / "ranks", "rank-*.json")
    own = self_started(manifest, run_dir, ranks)
    taken = {r["rank"] for r in own}  # a launched coordinator's rank, taken by its child
    manifest["ranks"] = sorted(
        [*(r for r in ranks if r["rank"] not in taken), *own], key=lambda r: r["rank"]
    )
    if timing == "script":
        finished = _script_records(manifest, run_dir)
    elif timing == "hooks":
        finished = _hook_records(manifest, run_dir, own)
    else:
        finished = {r["rank"] for r in ranks}
        manifest["timing"] = {"source": "none", "why_none": "the workload's timing is `none`"}
    expected = list(range(n_ranks))
    missing_rank = [r for r in expected if r not in {x["rank"] for x in ranks}]
    unfinished = [r for r in expected if r not in finished]
    manifest["failed_ranks"] = sorted(set(missing_rank) | set(unfinished))
    return ranks


def _script_records(manifest: dict[str, Any], run_dir: Path) -> set[int]:
    """iosweep's own training scripts: ``progress/rank-R.json`` (and ``.error``)."""
    for doc in read_json_files(run_dir / "progress", "rank-*.json"):
        manifest["steps"] += [{"rank": doc["rank"], **s} for s in doc["steps"]]
        manifest["phases"][str(doc["rank"])] = doc["phases"]
        if doc["rank"] == 0:
            manifest["metrics"] = doc["metrics"]
    manifest["errors"] = {
        str(e["rank"]): e["error"] for e in read_json_files(run_dir / "progress", "rank-*.error")
    }
    manifest["timing"] = {
        "source": "script",
        "wait": "measured",
        "method": "the training script timed its own steps and waits",
    }
    return {int(r) for r in manifest["phases"]}


def self_started(manifest: dict[str, Any], run_dir: Path, ranks: list[dict]) -> list[dict]:
    """Ranks the job started itself: processes below a launched rank that joined its process
    group (``progress/joins/``, written by the hooks) as a rank no launcher started, or as the
    rank of a launched process that never joined (a coordinator: ``mp.spawn``'s parent).
    Their rank records (``started_by``: the launched rank they ran under), and
    ``manifest["self_started"]`` saying so, with the group's ranks never seen."""
    keys = ("pid", "host", "rank", "world_size")
    joins = [
        j
        for j in read_json_files(run_dir / "progress" / "joins", "join-*.json")
        if all(k in j for k in keys)
    ]
    launched = {(r["host"], int(r["pid"])): r for r in ranks}
    joined = {(j["host"], int(j["pid"])) for j in joins}
    # a launched rank whose own process never joined: its rank number is free for a child
    free = {int(r["rank"]) for key, r in launched.items() if key not in joined}
    known = {int(r["rank"]) for r in ranks} - free
    own: list[dict] = []
    for j in sorted(joins, key=lambda j: (int(j["rank"]), int(j["pid"]))):
        if (j["host"], int(j["pid"])) in launched or int(j["rank"]) in known:
            continue
        parent = launched.get((j["host"], int(j.get("ppid") or 0)))
        local = j.get("local_rank")
        own.append(
            {
                "rank": int(j["rank"]),
                "pid": int(j["pid"]),
                "host": j["host"],
                "local_rank": int(str(local)) if str(local).isdigit() else int(j["rank"]),
                "size": int(j["world_size"]),
                "started_by": parent["rank"] if parent else None,
            }
        )
        known.add(int(j["rank"]))
    world = max((int(j["world_size"]) for j in joins), default=0)
    unseen = sorted(set(range(world)) - known - free)
    if own or unseen:
        manifest["self_started"] = {
            "ranks": [r["rank"] for r in own],
            "world_size": world,
            "launched": len(ranks),
            "unseen": unseen,
        }
    return own


def _hook_records(manifest: dict[str, Any], run_dir: Path, own: list[dict]) -> set[int]:
    """A user's job timed by the step hooks: ``progress/hooks-rank-R.json``, and for a rank the
    job started itself its process's ``hooks-child-PID.json``."""
    finished, errors, per_rank = set(), {}, {}
    taken = {r["rank"] for r in own}
    docs = [
        d
        for d in read_json_files(run_dir / "progress", "hooks-rank-*.json")
        if int(d.get("rank") or 0) not in taken
    ]
    for r in own:
        for doc in read_json_files(run_dir / "progress", f"hooks-child-{r['pid']}.json"):
            docs.append({**doc, "rank": r["rank"]})
    for doc in docs:
        rank = int(doc.get("rank") or 0)
        rec = steps_from_hooks(doc)
        manifest["steps"] += [{"rank": rank, **s} for s in rec["steps"]]
        manifest["phases"][str(rank)] = rec["phases"]
        per_rank[str(rank)] = rec["timing"] | {
            "steps": sum(1 for s in rec["steps"] if s["step"] >= 0),
            "exit_code": doc.get("exit_code"),
        }
        if doc.get("error"):
            errors[str(rank)] = doc["error"]
        elif doc.get("exit_code") not in (None, 0):
            errors[str(rank)] = f"exited with code {doc['exit_code']}"
        else:
            finished.add(rank)
    manifest["errors"] = errors
    manifest["timing"] = hooks_timing(per_rank, int(manifest["params"].get("ranks") or 0))
    return finished


def hooks_timing(per_rank: dict[str, dict[str, Any]], n_ranks: int) -> dict[str, Any]:
    """The run's timing record from its ranks': how the steps were timed (the rank with the
    most steps tells), what it cost, and, when there is nothing to time, why."""
    out: dict[str, Any] = {"source": "hooks", "per_rank": per_rank, "why_none": ""}
    out["overhead_s"] = sum(float(t.get("overhead_s") or 0) for t in per_rank.values())
    out["batches_timed"] = sum(int(t.get("batches_timed") or 0) for t in per_rank.values())
    best = max(per_rank.values(), key=lambda t: t.get("steps", 0), default=None)
    if best is not None and best.get("steps"):
        keys = ("loop", "wait", "method", "hooked", "problems", "other_loops", "training_thread")
        out |= {k: best[k] for k in keys if k in best}
        return out
    if not per_rank:
        out["why_none"] = (
            f"no rank left a step record (of {n_ranks}): the hooks write theirs when the "
            "process exits normally; a rank killed, or started with `python -I`/`-S` (no "
            "sitecustomize), leaves none"
        )
        return out
    producer = next((t["why_none"] for t in per_rank.values() if t.get("why_none")), "")
    if producer:  # batches were taken, but by a producer thread whose hand-off is not timed
        out["why_none"] = producer
        return out
    hooked = sorted({h for t in per_rank.values() for h in t.get("hooked") or []})
    problems = sorted({p for t in per_rank.values() for p in t.get("problems") or []})
    out["hooked"], out["problems"] = hooked, problems
    if problems:
        out["why_none"] = "the step hooks could not patch the framework: " + "; ".join(problems)
    elif not hooked:
        out["why_none"] = (
            "the job imported none of the loaders the step hooks time (PyTorch's DataLoader, "
            "tf.data, Keras' Model.fit): it feeds its model some other way"
        )
    else:
        out["why_none"] = (
            f"the job never took a batch from the loaders the step hooks time ({', '.join(hooked)} "
            "were patched): it feeds its model some other way, e.g. batches it slices itself"
        )
    return out


# --- the rank's processes and host, as the sampler saw them ------------------------------------

MANIFEST_SAMPLES = 300  # samples a rank's series keeps in the manifest (cumulative: deltas exact)
MANIFEST_PROCS = 64  # processes a rank keeps, busiest first


def collect_procs(run_dir: Path, ranks: list[dict], timeout: float) -> dict[str, Any]:
    """Each rank's record of :mod:`iosweep.run.procstat` (``progress/procs-rank-R.json``),
    waiting up to ``timeout`` s for the samplers, which write once the rank is gone:
    ``{rank: record}``, and ``{rank: {"error": why}}`` for a rank without one (its rank file
    says whether its sampler was started)."""
    deadline = time.monotonic() + timeout
    progress = run_dir / "progress"
    out: dict[str, Any] = {
        str(r["rank"]): {"error": "not sampled (IOSWEEP_PROCSTAT=0)"}
        for r in ranks
        if r.get("procstat") is False
    }
    todo = [int(r["rank"]) for r in ranks if r.get("procstat") is not False]
    while True:
        for r in list(todo):
            doc, err = progress / f"procs-rank-{r}.json", progress / f"procs-rank-{r}.error"
            if doc.exists():
                try:
                    out[str(r)] = _procs_record(json.loads(doc.read_text()))
                except (OSError, ValueError, KeyError) as e:
                    out[str(r)] = {"error": f"{doc.name}: {type(e).__name__}: {e}"}
                todo.remove(r)
            elif err.exists():
                out[str(r)] = {"error": err.read_text(errors="replace").strip()}
                todo.remove(r)
        if not todo or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    for r in todo:
        out[str(r)] = {"error": "the sampler of the rank's processes left no record"}
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def _procs_record(doc: dict[str, Any]) -> dict[str, Any]:
    series = doc["series"]
    n = len(series["t"])
    step = max(1, -(-n // MANIFEST_SAMPLES))
    keep = list(range(0, n, step))
    if n and keep[-1] != n - 1:
        keep.append(n - 1)  # the last sample: the totals
    procs = sorted(doc["procs"].items(), key=lambda kv: -(kv[1].get("cpu_s") or 0))
    return {
        k: doc[k]
        for k in (
            "host",
            "pid",
            "start",
            "end",
            "interval_s",
            "cores",
            "io_readable",
            "overhead_cpu_s",
        )
    } | {
        "process_cpu_s": doc.get("process_cpu_s"),
        "processes_seen": len(procs),
        "procs": [{"pid": int(pid), **rec} for pid, rec in procs[:MANIFEST_PROCS]],
        "series": {k: [v[i] for i in keep] for k, v in series.items()},
        "mapped_files": dict(
            sorted((doc.get("mapped_files") or {}).items(), key=lambda kv: -kv[1])[:MANIFEST_PROCS]
        ),
    }


# --- the traces, once the tracers have written them ----------------------------------------------


def _trace_files(trace_dir: Path, tracer: str) -> tuple[list[Path], list[Path]]:
    """(finished logs, logs still being written) under one rank's trace directory."""
    if tracer == "darshan":
        done = sorted(trace_dir.rglob("*.darshan"))
        partial = sorted(trace_dir.rglob("*.darshan_partial"))
    else:
        done = sorted([*trace_dir.rglob("*.pfw.gz"), *trace_dir.rglob("*.pfw")])
        partial = []
    return done, partial


def wait_for_traces(
    run_dir: Path, tracer: str, ranks: list[int], timeout: float, log
) -> dict[int, str]:
    """Wait until every rank has a finished log and sizes stop changing; returns {rank: problem}.

    Tracers write at process exit, which can be seconds after the launcher returns.
    """
    deadline = time.monotonic() + timeout
    last_sizes: dict[Path, int] | None = None
    while True:
        problems, sizes = {}, {}
        for r in ranks:
            done, partial = _trace_files(run_dir / "traces" / f"rank-{r}", tracer)
            if partial:
                problems[r] = f"log still partial: {partial[0].name}"
            elif not done:
                problems[r] = "no log written"
            for f in (*done, *partial):
                with contextlib.suppress(OSError):  # renamed .darshan_partial -> .darshan meanwhile
                    sizes[f] = f.stat().st_size
        stable = sizes == last_sizes
        if (not problems and stable) or time.monotonic() >= deadline:
            return problems
        if problems:
            log(
                f"waiting for traces: {len(problems)} of {len(ranks)} ranks not finished "
                f"({int(deadline - time.monotonic())} s left)"
            )
        last_sizes = sizes
        time.sleep(1.0)
