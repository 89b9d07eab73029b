"""The verdict on a run's input pipeline: compute-bound, input-bound by storage or by
preprocessing, dominated by start-up, or undecided (an estimated wait), with the numbers
that decided it and the levers to try. Reads the totals of :mod:`.waits`; thresholds from
the analysis settings."""

from __future__ import annotations

from typing import Any

VERDICTS = {
    "compute-bound": "Compute-bound",
    "undecided": "Not decided: the data wait is only estimated",
    "input-bound-storage": "Input-bound by storage",
    "input-bound-preprocessing": "Input-bound by preprocessing",
    "loop-bound": "Held back by the loop itself, not by its data",
    "host-cpu-bound": "Held back by the host's CPU",
    "startup": "Dominated by start-up",
}


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
    if tot["startup"] > s.startup_share * tot["run_time"] and tot["startup"] > tot["training_time"]:
        kind = "startup"
    elif au is not None and au >= s.au_threshold:
        kind = "compute-bound"
    elif au is None:
        kind = "startup"  # a single step per epoch: nothing but warm-up to judge
    elif (
        (idle := tot.get("idle_per_rank"))
        and wait < s.input_wait_share * idle
        and not wait_is_lower_bound
    ):
        kind = "loop-bound"  # most of the time not computing is not spent waiting either
    else:
        kind = (
            "input-bound-storage"
            if storage >= s.storage_wait_share
            else "input-bound-preprocessing"
        )
    return {
        "kind": kind,
        "title": VERDICTS[kind],
        "text": _verdict_text(kind, tot, context, storage),
        "numbers": {
            "au": au,
            "au_threshold": s.au_threshold,
            "wait_per_rank_s": wait,
            "epoch_time_per_rank_s": epoch,
            "idle_per_rank_s": tot.get("idle_per_rank"),
            "wait_share_of_idle": wait / tot["idle_per_rank"] if tot.get("idle_per_rank") else None,
            "input_wait_threshold": s.input_wait_share,
            "storage_share_of_wait": storage,
            "storage_threshold": s.storage_wait_share,
            "no_read_share_of_wait": tot["no_read_share"],
            "startup_s": tot["startup"],
            "training_s": tot["training_time"],
        },
        "levers": _levers(kind, context),
    }


def _pct(v: float | None) -> str:
    return "?" if v is None else f"{v:.0%}"


def _verdict_text(kind: str, tot: dict[str, Any], ctx: dict[str, Any], storage: float) -> str:
    au, wait, epoch = tot["au"], tot["wait_per_rank"], tot["epoch_time_per_rank"]
    if kind == "startup":
        return (
            f"{tot['startup']:.1f} s passed before the first step, against {tot['training_time']:.1f} s "
            f"of training in {tot['epochs']} epoch(s): the run is too short to judge its input pipeline"
        )
    base = (
        f"the ranks compute {_pct(au)} of their epoch time (MLPerf-Storage-style AU) and wait "
        f"{wait:.1f} s of {epoch:.1f} s for data"
    )
    if kind == "compute-bound":
        return base + "; the input pipeline keeps up"
    if kind == "loop-bound":
        idle = tot["idle_per_rank"]
        return (
            base + f", but they do not compute for {idle:.1f} s: {idle - wait:.1f} s of it is "
            "neither computing nor waiting for a batch, spent by the loop itself between steps "
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


def _levers(kind: str, ctx: dict[str, Any]) -> list[str]:
    w, staged = ctx.get("loader_workers"), ctx.get("staging") == "node-local"
    small_files = (ctx.get("file_size_median") or 0) and ctx["file_size_median"] < (1 << 20)
    small_reads = (ctx.get("read_size_median") or 0) and ctx["read_size_median"] < (1 << 20)
    if kind == "startup":
        return ["run more steps or epochs before judging the input pipeline"]
    if kind == "compute-bound":
        return []
    if kind == "loop-bound":
        return [
            "profile the loop between steps (per-step logging, metric syncs such as .item(), "
            "evaluation or checkpoints inside the epoch)"
        ]
    if kind == "input-bound-preprocessing":
        out = [
            "more loader workers (DataLoader num_workers, tf.data num_parallel_calls), as long as cores are free"
        ]
        if w == 0:
            out[0] = (
                "loader workers (DataLoader num_workers > 0, tf.data num_parallel_calls) so batches are prepared while the step computes"
            )
        return [
            *out,
            "cheaper preprocessing: decode at reduced size, or decode on the accelerator (e.g. DALI)",
            "store samples pre-decoded or pre-resized",
        ]
    out = []
    if not staged:
        out.append("stage the data to node-local storage (sweep.staging: node-local)")
    if small_files:
        out.append("pack the small files into larger record files (TFRecord, WebDataset tar, HDF5)")
    if small_reads:
        out.append("larger reads (a bigger read buffer, whole-file reads)")
    out.append("more loader workers or deeper prefetch, to keep more reads in flight")
    return out


def estimated(v: dict[str, Any], method: str) -> dict[str, Any]:
    """A verdict on an estimated wait. The estimate is a lower bound of the wait, so it can
    show a run input-bound, never compute-bound: that reading becomes undecided."""
    if v["kind"] == "startup":
        return v
    if v["kind"] == "compute-bound":
        au = v["numbers"]["au"]
        return v | {
            "kind": "undecided",
            "title": VERDICTS["undecided"],
            "text": f"AU is at most {_pct(au)} by an estimate that can only underrate the wait "
            f"({method}); that does not show the input pipeline keeps up",
            "levers": [
                "let iosweep measure the wait: Keras fit with steps_per_execution=1 on the default "
                "strategy, or a loop over the dataset in eager code"
            ],
        }
    return v | {
        "text": v["text"] + f" (even by an estimate that can only underrate the wait: {method})"
    }
