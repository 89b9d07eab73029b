"""The verdict on a run's input pipeline: compute-bound, input-bound by storage or by
preprocessing (graded, as XProf grades it, by the data wait's share of the step time),
held back by the loop, dominated by start-up, too short to judge, or undecided (an
estimated wait), with the numbers that decided it and the levers to try. Reads the totals of
:mod:`.waits`; thresholds from the analysis settings."""

from __future__ import annotations

import math
from typing import Any

from iosweep.units import human_bytes

VERDICTS = {
    "compute-bound": "Compute-bound",
    "undecided": "Not decided: the data wait is only estimated",
    "input-bound-storage": "Input-bound by storage",
    "input-bound-preprocessing": "Input-bound by preprocessing",
    "input-bound-phase-start": "Input-bound at each epoch's start",
    "input-bound-untraced": "Input-bound, its cause not traced",
    "loop-bound": "Held back by the loop itself, not by its data",
    "unexplained": "Not waiting for its data in steady state",
    "host-cpu-bound": "Held back by the host's CPU",
    "startup": "Dominated by start-up",
    "too-short": "Too short to judge",
}
GRADES = {"moderate": "moderately", "high": "highly"}


def lever(text: str, param: str = "", direction: str = "") -> dict[str, str]:
    """A lever to try (summary.Lever): its words, and the sweep parameter it turns and which
    way, so that what the sweep measured of that parameter can overrule it."""
    return {"text": text, "param": param, "direction": direction}


def grade(wait_share: float | None, s) -> str:
    """'' (not input-bound), 'moderate' or 'high', by the wait's share of the step time."""
    if wait_share is None:
        return ""
    lo, hi = s.wait_grades
    return "high" if wait_share >= hi else "moderate" if wait_share >= lo else ""


def _too_short(tot: dict[str, Any], s) -> bool:
    steady, steps = tot.get("steady_time_per_rank"), tot.get("steady_steps_per_rank")
    if steady is None or steps is None:  # totals of an older summary: not said
        return False
    epoch = tot["epoch_time_per_rank"]
    return steps < s.min_steady_steps or (epoch > 0 and steady < s.min_steady_share * epoch)


def _phase_start_bound(acc: dict[str, Any], s) -> bool:
    """The time account: the loop's wait over every batch is graded, most of it for each
    epoch's or evaluation loop's first batch."""
    share, start = acc.get("loop_wait_share"), acc.get("phase_start_share_of_wait")
    # one epoch's first wait is the run's start-up, paid once: not a start that repeats
    again = (acc.get("phases_per_rank") or 0) >= 2
    return again and bool(grade(share, s)) and start is not None and start >= s.phase_start_share


def _seconds(acc: dict[str, Any], kind: str) -> float:
    return next((x["seconds"] for x in acc.get("slices") or [] if x["kind"] == kind), 0.0)


def _unexplained(acc: dict[str, Any]) -> bool:
    """More of the loop's time unexplained than its evidence puts in its own work
    (evaluation, checkpoints): "held back by the loop" would be a guess."""
    if not acc.get("available"):
        return False
    own = _seconds(acc, "evaluation") + _seconds(acc, "checkpoint")
    return _seconds(acc, "unexplained") > own


# the share of the time a loop-bound rank does not compute spent in synchronous checkpoints
# inside its steps, at and above which the checkpoints are what holds the loop back
CHECKPOINT_HELD = 0.5


def checkpoint_held(v: dict[str, Any]) -> bool:
    """A loop-bound verdict whose time not computing (less the wait) is mostly its
    synchronous checkpoints: the loop's own work, measured, whatever the host's cores."""
    n = v["numbers"]
    if v["kind"] != "loop-bound" or not n.get("idle_per_rank_s"):
        return False
    idle, ckpt = n["idle_per_rank_s"], n.get("checkpoint_per_rank_s") or 0.0
    return ckpt > 0 and ckpt >= CHECKPOINT_HELD * max(idle - (n.get("wait_per_rank_s") or 0), 0)


def _kind(
    tot: dict[str, Any], s, wait_is_lower_bound: bool, wait_share: float | None, acc: dict
) -> str:
    au = tot["au"]
    if tot["startup"] > s.startup_share * tot["run_time"] and tot["startup"] > tot["training_time"]:
        return "startup"
    if au is None:
        return "startup"  # a single step per epoch: nothing but warm-up to judge
    short = _too_short(tot, s)
    # waits at each phase's start need no steady state to be seen (an iterator rebuilt each
    # epoch can leave little of one); a steady state that keeps up says compute-bound
    if not wait_is_lower_bound and _phase_start_bound(acc, s) and (short or au < s.au_threshold):
        return "input-bound-phase-start"
    if short:
        return "too-short"
    if au >= s.au_threshold:
        return "compute-bound"  # (its waits at each epoch's start, if graded, are said)
    idle = tot.get("idle_per_rank")
    small = not grade(wait_share, s) and wait_share is not None
    # the time not computing is mostly not spent waiting, or the wait is a sliver of the step
    if not wait_is_lower_bound and (
        small or (idle and tot["wait_per_rank"] < s.input_wait_share * idle)
    ):
        return "unexplained" if _unexplained(acc) else "loop-bound"
    storage = (tot["read_in_wait_share"] or 0.0) + (tot["meta_in_wait_share"] or 0.0)
    return "input-bound-storage" if storage >= s.storage_wait_share else "input-bound-preprocessing"


def verdict(
    tot: dict[str, Any], context: dict[str, Any], s, wait_is_lower_bound: bool = False
) -> dict[str, Any]:
    """The run's verdict, the numbers that decided it, and the levers to try.

    ``context``: loader workers, staging, dataset median file size and read size (for the
    levers); ``s``: the analysis settings (thresholds). ``wait_is_lower_bound``: the wait was
    estimated (Keras fit's compiled steps), so time not computing may be unseen wait: never
    loop-bound."""
    au = tot["au"]
    wait = tot["wait_per_rank"]
    epoch = tot["epoch_time_per_rank"]
    storage = (tot["read_in_wait_share"] or 0.0) + (tot["meta_in_wait_share"] or 0.0)
    steady = tot.get("steady_time_per_rank")
    wait_share = tot.get("wait_share")
    if wait_share is None and steady is None and epoch > 0:
        wait_share = wait / epoch  # totals without a steady state: of the whole epoch
    acc = context.get("account") or {}
    kind = _kind(tot, s, wait_is_lower_bound, wait_share, acc)
    g = grade(wait_share, s) if kind.startswith("input-bound") else ""
    title = VERDICTS[kind]
    if kind == "input-bound-phase-start":
        g = grade(acc["loop_wait_share"], s)
        title += (
            f" ({GRADES[g]}: {_pct(acc['loop_wait_share'])} of the loop waiting for data, "
            f"{_pct(acc['phase_start_share_of_wait'])} of it for each epoch's or evaluation's "
            "first batch)"
        )
    elif kind == "unexplained":
        title += f": {_where_unexplained(acc)}"
    elif kind == "compute-bound" and _phase_start_bound(acc, s):
        # the steady state keeps up; each epoch's start does not: said, with its levers
        title += (
            f" in steady state, but {_pct(acc['loop_wait_share'])} of its loop waits for "
            "each epoch's or evaluation's first batch"
        )
    elif g:
        title += f" ({GRADES[g]}: {_pct(wait_share)} of the step time waiting)"
    out = {
        "kind": kind,
        "title": title,
        "grade": g,
        "text": _verdict_text(kind, tot, context, storage, s) + _collectives_note(acc, kind),
        "numbers": {
            "au": au,
            "au_threshold": s.au_threshold,
            "wait_per_rank_s": wait,
            "epoch_time_per_rank_s": epoch,
            "steady_time_per_rank_s": steady,
            "wait_share_of_step": wait_share,
            "wait_grade_moderate": s.wait_grades[0],
            "wait_grade_high": s.wait_grades[1],
            "idle_per_rank_s": tot.get("idle_per_rank"),
            "checkpoint_per_rank_s": tot.get("checkpoint_per_rank"),
            "wait_share_of_idle": wait / tot["idle_per_rank"] if tot.get("idle_per_rank") else None,
            "input_wait_threshold": s.input_wait_share,
            "storage_share_of_wait": storage,
            "storage_threshold": s.storage_wait_share,
            "no_read_share_of_wait": tot["no_read_share"],
            "startup_s": tot["startup"],
            "training_s": tot["training_time"],
            "loop_wait_share": acc.get("loop_wait_share"),
            "phase_start_share_of_wait": acc.get("phase_start_share_of_wait"),
            "phase_start_threshold": s.phase_start_share,
            "unexplained_per_rank_s": _seconds(acc, "unexplained")
            if acc.get("available")
            else None,
        },
        "levers": _phase_start_levers(context, tot, s)
        if kind == "compute-bound" and _phase_start_bound(acc, s)
        else _levers(kind, tot, context, s),
    }
    return _by_checkpoints(out, tot) if checkpoint_held(out) else out


def _by_checkpoints(v: dict[str, Any], tot: dict[str, Any]) -> dict[str, Any]:
    """A loop held back by its synchronous checkpoints: said in the title, with their lever."""
    steady = tot.get("steady_time_per_rank") or tot["epoch_time_per_rank"]
    share = tot["checkpoint_per_rank"] / steady if steady else None
    title = v["title"] + f": its synchronous checkpoints take {_pct(share)} of the steady time"
    first = lever(
        "checkpoint asynchronously or less often: copy the state and write it in the "
        "background (torch.distributed.checkpoint.async_save, a writer thread or process), or "
        "save every more steps"
    )
    return v | {"title": title, "levers": [first, *v["levers"]]}


# the share of a rank's loop in timed collectives at and above which the verdict says so
COLLECTIVES_NOTE = 0.1


def _collectives_note(acc: dict[str, Any], kind: str) -> str:
    """ "; 3.6 s a rank (21% of its loop) waiting in collectives ..." where the collectives
    the hooks timed take a tenth of the loop or more: '' otherwise."""
    loop = acc.get("loop_per_rank") or 0.0
    if kind == "startup" or not acc.get("available") or loop <= 0:
        return ""
    sec = _seconds(acc, "collectives")
    if sec < COLLECTIVES_NOTE * loop:
        return ""
    out = f"; {sec:.1f} s a rank ({_pct(sec / loop)} of its loop) waiting in collectives"
    per = {a["rank"]: a["seconds"].get("collectives", 0.0) for a in acc.get("per_rank") or []}
    if len(per) > 1:
        hi, lo = max(per, key=per.__getitem__), min(per, key=per.__getitem__)
        if per[hi] > 2 * per[lo] + 0.5:
            return out + (
                f" (rank {hi} {per[hi]:.1f} s, rank {lo} {per[lo]:.1f} s: the ranks that wait "
                "least are the ones the others wait for)"
            )
    return out + " (the ranks waiting for each other: communication the steps do not hide)"


def untraced(v: dict[str, Any], host: dict[str, Any]) -> dict[str, Any]:
    """A run no tracer watched: a wait no traced read explains says nothing of storage, so an
    input-bound reading names no cause (storage or preprocessing), only how to tell them."""
    if v["kind"] not in ("input-bound-storage", "input-bound-preprocessing"):
        return v
    n = v["numbers"]
    text = v["text"].split(";")[0] + (
        "; the run was not traced (tracer none), so whether its reads or its preprocessing "
        "hold the batches back is not known"
    )
    outside = host.get("read_bytes") if host.get("available") else None
    if outside is not None:
        text += (
            f" (its processes read {human_bytes(outside)} from storage during training, by the "
            "kernel's counts, which do not say how long the reads took)"
        )
    levers = [
        lever(
            "more loader workers (DataLoader num_workers, tf.data num_parallel_calls, DLIO "
            "read_threads), as long as cores are free: they overlap reads and preprocessing alike",
            WORKERS,
            "more",
        ),
        lever(
            "trace the run (sweep.tracers: darshan or dftracer) to tell the reads' share of the "
            "wait from preprocessing's: staging helps the one, cheaper decoding the other"
        ),
    ]
    title = VERDICTS["input-bound-untraced"] + (f" ({GRADES[v['grade']]}" if v["grade"] else "")
    if v["grade"]:
        title += f": {_pct(n.get('wait_share_of_step'))} of the step time waiting)"
    return v | {
        "trace_kind": v["kind"],
        "kind": "input-bound-untraced",
        "title": title,
        "text": text,
        "levers": levers,
        "numbers": n | {"storage_share_of_wait": None, "no_read_share_of_wait": None},
    }


def _pct(v: float | None) -> str:
    return "?" if v is None else f"{v:.0%}"


def _where_unexplained(acc: dict[str, Any]) -> str:
    """ "34.6 s a rank unexplained, 33.5 s of it before the first batch of epoch 2"."""
    total = _seconds(acc, "unexplained")
    places = acc.get("unexplained_at") or []
    out = f"{total:.1f} s a rank unexplained"
    if places:
        top = places[0]
        out += (
            f", {top['seconds']:.1f} s of it {top['where']}"
            if len(places) > 1
            else (f", {top['where']}")
        )
    return out


ACCOUNT_WORDS = {
    "compute": "computing",
    "wait_steady": "waiting for data in steady state",
    "wait_phase_start": "waiting for each epoch's first batch",
    "collectives": "waiting in collectives",
    "evaluation": "in evaluation",
    "checkpoint": "in checkpoints",
    "startup": "in start-up",
    "unexplained": "unexplained",
}


def _went_to(acc: dict[str, Any]) -> str:
    """Where a rank's time went, by the account ("; where the time went, a rank: 86.0 s of
    93.0 s waiting for each epoch's first batch, ..."): '' without one."""
    if not acc.get("available") or not acc.get("window_per_rank"):
        return ""
    top = sorted((x for x in acc["slices"] if x["seconds"] > 0), key=lambda x: -x["seconds"])
    said = [f"{x['seconds']:.1f} s {ACCOUNT_WORDS[x['kind']]}" for x in top[:3]]
    return f"; where the time went, a rank: {', '.join(said)} of {acc['window_per_rank']:.1f} s"


def _phase_start_text(acc: dict[str, Any], tot: dict[str, Any]) -> str:
    first, steady = _seconds(acc, "wait_phase_start"), _seconds(acc, "wait_steady")
    return (
        f"the ranks wait {acc['wait_per_rank']:.1f} s of their {acc['loop_per_rank']:.1f} s loop "
        f"for data ({_pct(acc['loop_wait_share'])}), {first:.1f} s of it for the first batch "
        "after each epoch's or evaluation loop's start (the loader's workers started again, its "
        f"pipeline filled) and {steady:.1f} s in steady state, where they compute "
        f"{_pct(tot['au'])} of the time (MLPerf-Storage-style AU)"
    )


def _short_text(tot: dict[str, Any], s) -> str:
    """How much steady state there was, against what a verdict needs, and how many steps
    would be enough."""
    steady, steps = tot["steady_time_per_rank"], tot["steady_steps_per_rank"]
    epoch = tot["epoch_time_per_rank"]
    warm = max(epoch - steady, 0.0)
    # steady time a rank needs: at least min_steady_steps, and min_steady_share of the epoch
    # time with the warm-up it has now (the first wait and step of each epoch)
    m = s.min_steady_share
    need_time = m * warm / (1 - m) if m < 1 else math.inf
    per_step = steady / steps if steps > 0 else None
    need = max(s.min_steady_steps, math.ceil(need_time / per_step) if per_step else 0)
    return (
        f"the verdict would rest on {steady:.2f} s of steady state a rank ({steps:g} steps after "
        f"each epoch's first), {_pct(steady / epoch if epoch > 0 else None)} of its "
        f"{epoch:.1f} s in epochs; the rest went to each epoch's first wait and first step "
        "(loader start-up, compilation, warm-up), while the loader filled its prefetch buffer, "
        f"which a short steady state drains instead of showing the pipeline's rate. A verdict "
        f"needs at least {s.min_steady_steps} steady steps and {m:.0%} of the epoch time in "
        f"steady state (analysis.min_steady_steps, min_steady_share): about {need:,} steady "
        "steps a rank at these step times"
    )


def _verdict_text(kind: str, tot: dict[str, Any], ctx: dict[str, Any], storage: float, s) -> str:
    au, wait, epoch = tot["au"], tot["wait_per_rank"], tot["epoch_time_per_rank"]
    if kind == "startup":
        return (
            f"{tot['startup']:.1f} s passed before the first step, against {tot['training_time']:.1f} s "
            f"of training in {tot['epochs']} epoch(s): the run is too short to judge its input pipeline"
        )
    acc = ctx.get("account") or {}
    if kind == "too-short":
        return _short_text(tot, s) + _went_to(acc)
    if kind == "input-bound-phase-start":
        return _phase_start_text(acc, tot)
    base = (
        f"the ranks compute {_pct(au)} of their epoch time (MLPerf-Storage-style AU) and wait "
        f"{wait:.1f} s of {epoch:.1f} s for data"
    )
    if kind == "compute-bound":
        return base + "; the input pipeline keeps up"
    if kind == "unexplained":
        return base + (
            f", and no timed or traced region names {_where_unexplained(acc)}: not the data "
            "wait, and nothing shows it is the loop's own work (evaluation, checkpoints, "
            "logging); trace the loop's thread (DFTracer annotations, a stack sampler) to say"
        )
    if kind == "loop-bound":
        idle = tot["idle_per_rank"]
        ckpt = tot.get("checkpoint_per_rank") or 0.0
        share = tot.get("wait_share")
        graded = (
            f" (the wait is {_pct(share)} of the step time, under the "
            f"{s.wait_grades[0]:.0%} at which it is graded input-bound)"
            if share is not None and share < s.wait_grades[0]
            else ""
        )
        if ckpt >= CHECKPOINT_HELD * max(idle - wait, 0.0) and ckpt > 0:
            return base + (
                f"{graded}, but they do not compute for {idle:.1f} s: {ckpt:.1f} s of it in "
                "synchronous checkpoints inside the steps (saves the job or iosweep's hooks "
                f"timed, writes to checkpoint files), {max(idle - wait - ckpt, 0.0):.1f} s "
                "neither computing, waiting for a batch nor checkpointing"
            )
        return (
            base + f"{graded}, but they do not compute for {idle:.1f} s: {idle - wait:.1f} s of it "
            "is neither computing nor waiting for a batch, spent by the loop itself between steps "
            "(logging, metrics, synchronisation, evaluation)"
        )
    w = ctx.get("loader_workers")
    if kind == "input-bound-storage":
        return (
            base
            + f"; storage reads or metadata calls were in flight during {_pct(storage)} of that wait"
        )
    who = f"{w} loader worker{'s' if w != 1 else ''}" if isinstance(w, int) else "the data loader"
    if w == 0:
        who = "the training process itself (no loader workers)"
    return (
        base + f"; reads were in flight during only {_pct(tot['read_in_wait_share'])} of that wait "
        f"({_pct(tot['no_read_share'])} of it with no read at all): the time goes to decoding, "
        f"augmentation and collation in {who}"
    )


WORKERS = "loader_workers"
# the share of the reads' time in the wait made by the loop's own process above which the
# reads are synchronous in the training process: overlap comes before faster storage
SYNCHRONOUS_READS = 0.9


def _levers(kind: str, tot: dict[str, Any], ctx: dict[str, Any], s) -> list[dict[str, str]]:
    w, staged = ctx.get("loader_workers"), ctx.get("staging") == "node-local"
    small_files = (ctx.get("file_size_median") or 0) and ctx["file_size_median"] < (1 << 20)
    small_reads = (ctx.get("read_size_median") or 0) and ctx["read_size_median"] < (1 << 20)
    if kind == "startup":
        return [lever("run more steps or epochs before judging the input pipeline")]
    if kind == "too-short":
        return [
            lever(
                "run more steps per epoch (or more epochs) before judging the input pipeline: "
                + _short_text(tot, s).rsplit(": ", 1)[-1]
            )
        ]
    if kind == "compute-bound":
        return []
    if kind == "input-bound-phase-start":
        return _phase_start_levers(ctx, tot, s)
    if kind == "unexplained":
        places = (ctx.get("account") or {}).get("unexplained_at") or [{"where": "there"}]
        return [
            lever(
                f"find what the loop does {places[0]['where']}: annotate it (DFTracer's dft_fn "
                "regions) or sample the training thread's stack (py-spy record --threads)"
            )
        ]
    if kind == "loop-bound":
        return [
            lever(
                "profile the loop between steps (per-step logging, metric syncs such as .item(), "
                "evaluation or checkpoints inside the epoch)"
            )
        ]
    if kind == "input-bound-preprocessing":
        out = [
            lever(
                "more loader workers (DataLoader num_workers, tf.data num_parallel_calls), as long "
                "as cores are free",
                WORKERS,
                "more",
            )
        ]
        if w == 0:
            out[0]["text"] = (
                "loader workers (DataLoader num_workers > 0, tf.data num_parallel_calls) so "
                "batches are prepared while the step computes"
            )
        return [
            *out,
            lever(
                "cheaper preprocessing: decode at reduced size, or decode on the accelerator (e.g. DALI)"
            ),
            lever("store samples pre-decoded or pre-resized"),
        ]
    out = []
    own = tot.get("own_read_in_wait_share")
    synchronous = own is not None and own >= SYNCHRONOUS_READS
    if synchronous:
        out.append(
            lever(
                f"overlap the reads with the steps: {_pct(own)} of the reads' time in the wait is "
                "the training process's own (synchronous reads); loader workers (DataLoader "
                "num_workers > 0, DLIO reader.read_threads > 0) or a prefetching thread keep "
                "reads in flight while it computes",
                WORKERS,
                "more",
            )
        )
    if not staged:
        out.append(
            lever(
                "stage the data to node-local storage (sweep.staging: node-local)", "staging", "on"
            )
        )
    if small_files:
        out.append(
            lever("pack the small files into larger record files (TFRecord, WebDataset tar, HDF5)")
        )
    if small_reads:
        out.append(lever("larger reads (a bigger read buffer, whole-file reads)"))
    if not synchronous:
        out.append(
            lever(
                "more loader workers or deeper prefetch, to keep more reads in flight",
                WORKERS,
                "more",
            )
        )
    return out


def _phase_start_levers(ctx: dict[str, Any], tot: dict[str, Any], s) -> list[dict[str, str]]:
    out = [
        lever(
            "keep the loader alive across epochs and evaluations: DataLoader(persistent_workers="
            "True) for the training and the evaluation loader, a tf.data pipeline iterated across "
            "epochs rather than rebuilt"
        ),
        lever(
            "prefetch across the boundary: the next epoch's first batches prepared while the last "
            "steps compute (prefetch_factor with persistent workers, tf.data prefetch)"
        ),
    ]
    if _seconds(ctx.get("account") or {}, "evaluation") > 0:
        out.append(lever("evaluate less often, or on a loader whose workers stay alive"))
    return out


def estimated(v: dict[str, Any], method: str) -> dict[str, Any]:
    """A verdict on an estimated wait. The estimate is a lower bound of the wait, so it can
    show a run input-bound, never compute-bound: that reading becomes undecided."""
    if v["kind"] in ("startup", "too-short"):
        return v
    if v["kind"] == "compute-bound":
        au = v["numbers"]["au"]
        return v | {
            "kind": "undecided",
            "title": VERDICTS["undecided"],
            "text": f"AU is at most {_pct(au)} by an estimate that can only underrate the wait "
            f"({method}); that does not show the input pipeline keeps up",
            "levers": [
                lever(
                    "let iosweep measure the wait: Keras fit with steps_per_execution=1 on the "
                    "default strategy, or a loop over the dataset in eager code"
                )
            ],
        }
    return v | {
        "text": v["text"] + f" (even by an estimate that can only underrate the wait: {method})"
    }
