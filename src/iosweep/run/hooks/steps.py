"""The step hooks' record of a rank turned into the manifest's step records.

A process may run several loops (training, validation, a second loader): the training loop
is the one with the most batches (loops that start at one place in the code are one loop,
whatever dataset object they iterate; a PyTorch loader iterated more than once is a loop of
its own even when a helper starts every loop at one place). Each of its iterations is an
epoch; batch k's wait is the time ``next()`` blocked for it, its step the time from having
it to asking for the next one (the last: to the StopIteration, or to the iterator's end).
Keras ``fit`` steps come timed from the split compiled step (or whole, with an estimated wait).

The loop must run in the training thread (the one whose optimizer steps or backward passes
the hooks counted; the main thread where none was seen). A loader iterated in another thread
is a producer (a thread prefetcher): its ``next()`` times say how busy the producer was, not
what training waited for. Then the steps are the training thread's hand-offs, the
``queue.Queue.get`` calls that returned a batch, matched to the producer's batches in order
(a queue is first in, first out) for their epochs; where the training thread took no batch
from a queue, no step is drawn from the producer's figures and the record says why.

Where no loader's batches describe the training thread's waits (no loader at all, or one in
a thread that hands its batches over otherwise: a future), its optimizer steps bound the
loop: step k computes from its first training forward to its optimizer step's end and waits
from the previous step's end (or the end of a ``torch.save`` between them) to that forward.
The training thread's ``torch.save`` calls are the phases ``checkpoint-save-N``, its waits in
blocking collectives (``torch.distributed``, Horovod's ``synchronize``) the phases
``collective-N``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

WAIT_MEASURED = "measured"
WAIT_ESTIMATED = "estimated"
ESTIMATE_METHOD = (
    "each step was timed whole (the input fetch runs inside the compiled step), and its wait "
    "estimated as its time less the epoch's fastest step after the first: this assumes equal "
    "compute per step and at least one batch ready in time, so the wait is a lower bound and "
    "AU an upper bound"
)


def _site(path: str) -> str:
    file, _, line = path.rpartition(":")
    return f"{file.rsplit('/', 1)[-1]}:{line}" if file else path


def _loop_groups(doc: dict[str, Any]) -> dict[tuple, list[int]]:
    """Loop key -> the iterations (indexes into ``loops``) of that loop, in time order."""
    loops = doc.get("loops") or []
    reused: dict[int, int] = defaultdict(int)
    for lp in loops:
        if lp.get("kind") == "torch" and lp.get("loader", -1) >= 0:
            reused[lp["loader"]] += 1
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, lp in enumerate(loops):
        loader = lp.get("loader", -1)
        key = (lp.get("kind"), lp.get("site"), loader if reused.get(loader, 0) > 1 else None)
        groups[key].append(i)
    return groups


def _batches(doc: dict[str, Any]) -> dict[int, list[tuple[float, float, int]]]:
    b = doc.get("batches") or {}
    out: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    for i, t0, t1, n in zip(
        b.get("loop", []),
        b.get("request", []),
        b.get("ready", []),
        b.get("samples", []),
        strict=False,
    ):
        out[int(i)].append((float(t0), float(t1), int(n)))
    for v in out.values():
        v.sort()
    return out


def _next_start(doc: dict[str, Any], after: float) -> float:
    """The first thing the process started after ``after`` (another loop, a fit), else its exit."""
    starts = [lp["start"] for lp in doc.get("loops") or [] if lp["start"] > after]
    starts += [f["start"] for f in doc.get("fits") or [] if f["start"] > after]
    return min(starts, default=float(doc.get("exit") or after))


def _step(epoch, k, start, end, wait=None, samples=-1) -> dict[str, Any]:
    rec: dict[str, Any] = {"epoch": epoch, "step": k, "start": start, "end": max(end, start)}
    if wait is not None:
        rec["wait_start"], rec["wait_end"] = wait
    if samples >= 0:
        rec["samples"] = samples
    return rec


def _loop_steps(doc, iterations, batches) -> list[dict[str, Any]]:
    loops = doc["loops"]
    out: list[dict[str, Any]] = []
    epoch = 0
    for i in iterations:
        bs = batches.get(i) or []
        if not bs:
            continue
        lp = loops[i]
        for k, (t0, t1, n) in enumerate(bs):
            if k + 1 < len(bs):
                end = bs[k + 1][0]
            else:
                end = lp.get("stop") or lp.get("close") or _next_start(doc, t1)
            out.append(_step(epoch, k, t1, end, (t0, t1), n))
        out.append(_step(epoch, -1, lp["start"], out[-1]["end"]))
        epoch += 1
    return out


def _fit_steps(fits: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Steps of one site's fit calls, epochs numbered across calls; (steps, estimated)."""
    out: list[dict[str, Any]] = []
    estimated = False
    epoch = 0
    for fit in fits:
        by_epoch: dict[int, list[list[float]]] = defaultdict(list)
        for e, t0, fetched, t1, n in fit.get("steps") or []:
            by_epoch[int(e)].append([t0, fetched, t1, n])
        for e in sorted(by_epoch):
            rows = by_epoch[e]
            whole = [r for r in rows if r[1] is None or math.isnan(r[1])]
            fastest = min((r[2] - r[0] for r in rows[1:]), default=None)
            for k, (t0, fetched, t1, n) in enumerate(rows):
                if fetched is not None and not math.isnan(fetched):
                    out.append(_step(epoch, k, fetched, t1, (t0, fetched), int(n)))
                elif fastest is not None and len(rows) >= 3:
                    w = max((t1 - t0) - fastest, 0.0) if k else 0.0
                    out.append(_step(epoch, k, t0 + w, t1, (t0, t0 + w), int(n)))
                else:
                    out.append(_step(epoch, k, t0, t1, None, int(n)))
            estimated = estimated or bool(whole)
            begin = next((b for ep, b, _ in fit.get("epochs") or [] if ep == e), rows[0][0])
            out.append(_step(epoch, -1, min(begin, rows[0][0]), rows[-1][2]))
            epoch += 1
    return out, estimated


# --- threads: the training thread, and a producer's hand-off --------------------------------


def _training_thread(doc: dict[str, Any]) -> tuple[int | None, str]:
    """(index of the training thread, how it was known); (None, '') in a record without
    threads (an older hooks record: every loop taken as the training one)."""
    threads = doc.get("threads") or []
    if not threads:
        return None, ""
    best = max(range(len(threads)), key=lambda i: threads[i].get("train_calls", 0))
    if threads[best].get("train_calls", 0) > 0:
        n = threads[best]["train_calls"]
        return best, f"it ran the training calls ({n} optimizer steps and backward passes)"
    main = next((i for i, t in enumerate(threads) if t.get("main")), None)
    if main is None:
        return None, ""
    return main, "the main thread (no optimizer step or backward pass was seen in any thread)"


def _loop_thread(doc: dict[str, Any], iterations: list[int]) -> int | None:
    """The thread that took most of a loop's batches."""
    b = doc.get("batches") or {}
    its = set(iterations)
    counts: dict[int, int] = defaultdict(int)
    for i, t in zip(b.get("loop", []), b.get("thread", []), strict=False):
        if i in its:
            counts[int(t)] += 1
    return max(counts, key=lambda t: counts[t]) if counts else None


def _thread_name(doc: dict[str, Any], idx: int) -> str:
    return str((doc.get("threads") or [])[idx].get("name") or f"thread {idx}")


def _handoffs(doc: dict[str, Any], thread: int) -> tuple[str, list[tuple[float, float, int]]]:
    """The training thread's busiest hand-off site and its gets (request, ready, samples) in
    time order, sentinels (no batch) included; ('', []) when it took no batch from a queue."""
    h = doc.get("handoffs") or {}
    sites = h.get("sites") or []
    rows: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    for t, site, t0, t1, n in zip(
        h.get("thread", []),
        h.get("site", []),
        h.get("request", []),
        h.get("ready", []),
        h.get("samples", []),
        strict=False,
    ):
        if int(t) == thread:
            rows[int(site)].append((float(t0), float(t1), int(n)))
    batched = {k: sum(1 for r in v if r[2] >= 0) for k, v in rows.items()}
    best = max(batched, key=lambda k: batched[k], default=None)
    if best is None or batched[best] == 0:
        return "", []
    return str(sites[best]) if best < len(sites) else "?", sorted(rows[best])


def _handoff_steps(doc, iterations, batches, gets) -> list[dict[str, Any]]:
    """The training thread's steps from its hand-offs: get k of a batch is the producer's
    batch k (first in, first out), which gives its epoch; its step runs to the next get."""
    epoch_of: list[int] = []
    for e, i in enumerate(i for i in iterations if batches.get(i)):
        epoch_of += [e] * len(batches[i])
    out: list[dict[str, Any]] = []
    by_epoch: dict[int, list[dict[str, Any]]] = defaultdict(list)
    k = 0
    for j, (t0, t1, n) in enumerate(gets):
        if n < 0 or k >= len(epoch_of):
            continue
        end = gets[j + 1][0] if j + 1 < len(gets) else _next_start(doc, t1)
        by_epoch[epoch_of[k]].append(
            _step(epoch_of[k], len(by_epoch[epoch_of[k]]), t1, end, (t0, t1), n)
        )
        k += 1
    for e in sorted(by_epoch):
        rows = by_epoch[e]
        out += rows
        out.append(_step(e, -1, rows[0]["wait_start"], rows[-1]["end"]))
    return out


def _producer(doc, main, train: int, how: str, thread: int, timing) -> list[dict[str, Any]]:
    """A loop iterated outside the training thread: the steps of its hand-off, or none (with
    why) when the training thread took no batch from a queue."""
    producer = f"{main['kind']} at {_site(main['site'])} in thread '{_thread_name(doc, thread)}'"
    train_name = _thread_name(doc, train)
    site, gets = _handoffs(doc, train)
    if not gets:
        timing["why_none"] = (
            f"the loader ({producer}) was iterated outside the training thread "
            f"'{train_name}' ({how}): its next() times describe a producer, not what training "
            "waited for, and the training thread took no batch from a queue.Queue that iosweep "
            "can time (another hand-off: a deque, a pipe, a multiprocessing queue); no verdict "
            "is drawn from the producer's figures"
        )
        return []
    timing["loop"] = f"hand-off at {_site(site)} in thread '{train_name}', fed by {producer}"
    timing["method"] = (
        f"time the training thread ('{train_name}': {how}) blocked in queue.Queue.get for "
        f"each batch; the loader is iterated by a producer thread ({producer}), whose next() "
        "times say how busy it was, not what training waited for"
    )
    return _handoff_steps(doc, main["iterations"], _batches(doc), gets)


def _saves(doc: dict[str, Any], thread: int | None) -> list[tuple[float, float]]:
    """The ``torch.save`` calls of the training thread (all, in a record without threads):
    synchronous checkpoints, in time order."""
    return sorted(
        (float(a), float(b))
        for t, a, b in doc.get("saves") or []
        if thread is None or int(t) == thread
    )


def _collectives(doc: dict[str, Any], thread: int | None) -> list[tuple[float, float]]:
    """The training thread's (all, in a record without threads) coalesced waits in collective
    calls, in time order."""
    spans = (doc.get("collectives") or {}).get("spans") or []
    return sorted(
        (float(a), float(b)) for t, a, b, *_ in spans if thread is None or int(t) == thread
    )


def _optimizer_steps(doc: dict[str, Any], thread: int, saves: list) -> list[dict[str, Any]]:
    """A loop no loader fed, bounded by the thread's optimizer steps: step k's compute runs
    from its first training forward to its optimizer step's end, its wait from the previous
    step's end (or a ``torch.save`` after it) to that forward. The first step only bounds the
    second (the forward hook starts at it); a step without a forward of its own (a second
    optimizer) extends the one before."""
    o = doc.get("optimizer_steps") or {}
    rows = sorted(
        (float(e), float(f), int(n))
        for t, f, n, e in zip(
            o.get("thread", []),
            o.get("forward", []),
            o.get("samples", []),
            o.get("end", []),
            strict=False,
        )
        if int(t) == thread
    )
    out: list[dict[str, Any]] = []
    prev = None
    for end, forward, n in rows:
        if prev is not None and prev <= forward <= end:
            lo = max([prev] + [b for a, b in saves if a >= prev and b <= forward])
            out.append(_step(0, len(out), forward, end, (lo, forward), n))
        elif out and forward < 0:
            out[-1]["end"] = end
        prev = end
    if out:
        out.append(_step(0, -1, out[0]["wait_start"], out[-1]["end"]))
    return out


def _use_optimizer_steps(doc, timing: dict[str, Any]) -> list[dict[str, Any]]:
    """No loader's batches describe what the training thread waited for: its optimizer
    steps do, where the forward hook timed them (else no step, with why)."""
    train, how = _training_thread(doc)
    if train is None:
        return []
    steps = _optimizer_steps(doc, train, _saves(doc, train))
    if not steps:
        return []
    name = _thread_name(doc, train)
    timing.update(
        loop=f"optimizer steps in thread '{name}' (no data loader fed it)",
        wait=WAIT_MEASURED,
        why_none="",
        training_thread=f"{name}: {how}",
        method=(
            "from each optimizer step's end to the next training forward (torch.nn.Module, "
            "grad enabled): the batch fetch and whatever else the loop does between steps, "
            "its torch.save calls timed apart as checkpoints; one epoch, as no loader marks "
            "epochs"
        ),
    )
    return steps


def _candidates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every loop of the process: kind, site, iterations, batches, first start."""
    batches = _batches(doc)
    loops = doc.get("loops") or []
    out = []
    for (kind, site, _), its in _loop_groups(doc).items():
        n = sum(len(batches.get(i, ())) for i in its)
        if n:
            out.append(
                {
                    "kind": kind,
                    "site": site,
                    "iterations": its,
                    "batches": n,
                    "start": loops[its[0]]["start"],
                }
            )
    by_site: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in doc.get("fits") or []:
        by_site[f.get("site", "?")].append(f)
    for site, fits in by_site.items():
        n = sum(len(f.get("steps") or []) for f in fits)
        if n:
            out.append(
                {
                    "kind": "keras-fit",
                    "site": site,
                    "fits": fits,
                    "batches": n,
                    "start": fits[0]["start"],
                }
            )
    return sorted(out, key=lambda c: (-c["batches"], c["start"]))


def steps_from_hooks(doc: dict[str, Any]) -> dict[str, Any]:
    """``{steps, phases, timing}`` for the manifest from one rank's hooks record."""
    cands = _candidates(doc)
    timing: dict[str, Any] = {
        "source": "hooks",
        "hooked": doc.get("hooked") or [],
        "problems": doc.get("problems") or [],
        "overhead_s": float(doc.get("overhead_s") or 0.0),
        "batches_timed": int(sum(c["batches"] for c in cands)),
        "loop": "",
        "wait": "",
        "method": "",
        "why_none": "",
        "other_loops": [
            {"kind": c["kind"], "site": _site(c["site"]), "batches": c["batches"]}
            for c in cands[1:]
        ],
    }
    train, _ = _training_thread(doc)
    phases: dict[str, list[float]] = {
        f"checkpoint-save-{n}": [a, b] for n, (a, b) in enumerate(_saves(doc, train))
    }
    phases |= {f"collective-{n}": [a, b] for n, (a, b) in enumerate(_collectives(doc, train))}
    for key, field in (("calls", "collective_calls"), ("on_gpu", "collective_calls_on_gpu")):
        calls = (doc.get("collectives") or {}).get(key) or {}
        if calls:
            timing[field] = dict(sorted(calls.items()))
    if not cands:
        steps = _use_optimizer_steps(doc, timing)
        return {"steps": steps, "phases": phases, "timing": timing}
    main = cands[0]
    timing["loop"] = f"{main['kind']} at {_site(main['site'])}"
    if main["kind"] == "keras-fit":
        steps, estimated = _fit_steps(main["fits"])
        why = "; ".join(sorted({f["why"] for f in main["fits"] if f.get("why")}))
        timing["wait"] = WAIT_ESTIMATED if estimated else WAIT_MEASURED
        timing["method"] = (
            f"Keras fit: {why}: {ESTIMATE_METHOD}"
            if estimated
            else "Keras fit: each batch fetched eagerly by iosweep and handed to the compiled "
            "train step (Keras' own step, without its fetch): the wait is measured"
        )
    else:
        train, how = _training_thread(doc)
        thread = _loop_thread(doc, main["iterations"])
        if train is not None:
            timing["training_thread"] = f"{_thread_name(doc, train)}: {how}"
        timing["wait"] = WAIT_MEASURED
        if train is not None and thread is not None and thread != train:
            steps = _producer(doc, main, train, how, thread, timing)
        else:
            steps = _loop_steps(doc, main["iterations"], _batches(doc))
            timing["method"] = f"time blocked in next() on the {main['kind']} iterator"
    if not steps:
        steps = _use_optimizer_steps(doc, timing) or steps
    if main["kind"] != "keras-fit" and steps and timing["loop"].startswith(main["kind"]):
        # each epoch's iter(): building the iterator (workers started) is its start-up
        with_batches = [i for i in main["iterations"] if _batches(doc).get(i)]
        for e, i in enumerate(with_batches):
            lp = doc["loops"][i]
            if lp.get("ready") is not None and lp["ready"] > lp["start"]:
                phases[f"pipeline-start-{e}"] = [lp["start"], lp["ready"]]
    for c in cands[1:]:
        for n, i in enumerate(c.get("iterations") or []):
            lp = doc["loops"][i]
            end = lp.get("stop") or lp.get("close") or lp["start"]
            phases[f"loop {_site(c['site'])} #{n}"] = [lp["start"], end]
    return {"steps": steps, "phases": phases, "timing": timing}
