"""What the analysis found, said in sentences: access strategies and checkpoints."""

from __future__ import annotations

from typing import Any

from iosweep.analysis.summary import AppSave, CheckpointEvent, LeverSeries, RateModel, RunSummary
from iosweep.report import fmt

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


def plural(n: Any, word: str) -> str:
    """``n`` and ``word``, in the plural unless ``n`` is 1 ("0 processes", "1 rank")."""
    many = word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s")
    if n is None:
        return f"? {many}"
    n = int(n) if float(n).is_integer() else n
    return f"{n} {word if n == 1 else many}"


def class_order(cls: str) -> tuple[int, str]:
    """Classes in reading order: the data first, checkpoints next, ``other`` last."""
    return ({"dataset": 0, "data": 0, "checkpoint": 1, "other": 9}.get(cls, 5), cls)


def access_sentences(
    sm: RunSummary, min_share: float = 0.0, skip: tuple[str, ...] = ()
) -> list[str]:
    """What the analysis found about who touches which files, in words (main data first).

    ``min_share``: leave out classes moving less than this share of the run's bytes."""
    out = []
    moved = sum(c.bytes_read + c.bytes_written for c in sm.classes.values())
    # reads the trace missed (completeness): the dataset's read pattern rests on what it saw
    missed = next((c for c in sm.completeness if c.kind == "dataset-reads"), None)
    for cls in sorted(sm.classes, key=class_order):
        c = sm.classes[cls]
        if cls in skip or (
            min_share and moved and (c.bytes_read + c.bytes_written) < min_share * moved
        ):
            continue
        for d in ("read", "write"):
            a = c.access.get(d)
            if not a or not a.strategy:
                continue
            ev = a.evidence
            strat = a.strategy
            detail = [plural(ev.files, "file")]
            if strat == "single-rank" and ev.rank_list:
                detail.append(f"only rank {ev.rank_list[0]}")
            else:
                detail.append(f"{ev.ranks} of {ev.ranks_of_run} ranks")
                if ev.ranks_per_file is not None:
                    detail.append(f"up to {plural(ev.ranks_per_file.max, 'rank')} per file")
                if ev.files_per_rank is not None:
                    detail.append(f"up to {plural(ev.files_per_rank.max, 'file')} per rank")
            detail.append(f"{fmt.human_bytes(ev.bytes)} {'read' if d == 'read' else 'written'}")
            said = f"{cls} {d}s: {strat} — {STRATEGY_TEXT.get(strat, strat)} ({', '.join(detail)})"
            if missed is not None and cls in ("dataset", "data") and d == "read":
                said += (
                    "; as traced, and the trace missed dataset reads: file sizes, coverage and "
                    "bytes are lower bounds"
                )
            out.append(said)
    return out


def checkpoint_sentence(sm: RunSummary) -> str:
    ck = sm.checkpoints
    if ck.available and ck.bytes_written:
        who = f"rank {ck.writers[0]} only" if len(ck.writers) == 1 else f"{len(ck.writers)} ranks"
        bursts = f" in {plural(ck.n_checkpoints, 'burst')}" if ck.n_checkpoints else ""
        times = ", ".join(f"{e.start:.1f} s" for e in ck.events[:6])
        return (
            f"Checkpoints written by {who}: {plural(ck.files_written, 'file')}, "
            f"{fmt.human_bytes(ck.bytes_written)}{bursts}"
            + (f" (at {times} from the run start)" if times else "")
        )
    # The tracer saw no checkpoint writes (DFTracer misses torch.save's): what the job says.
    saves = ck.app_saves
    files, size = ck.on_disk.files, ck.on_disk.bytes
    if not saves and not files:
        return ""
    ranks = sorted({e.rank for e in saves})
    who = (
        f"rank {ranks[0]} only"
        if len(ranks) == 1
        else f"{len(ranks)} ranks"
        if ranks
        else "the job"
    )
    times = ", ".join(f"{e.start:.1f} s" for e in saves[:6])
    parts = [f"Checkpoints saved by {who} (by the training script's own record, not in the trace)"]
    if saves:
        parts.append(f"{plural(len(saves), 'save')} at {times} from the run start")
    if files:
        parts.append(f"{plural(files, 'file')}, {fmt.human_bytes(size)} on disk")
    return ": ".join(parts[:2]) + ("; " + parts[2] if len(parts) > 2 else "")


def checkpoint_gap(sm: RunSummary) -> str:
    """A warning when the checkpoint files on disk hold more than the trace saw written."""
    files, size = sm.checkpoints.on_disk.files, sm.checkpoints.on_disk.bytes
    traced = sm.checkpoints.bytes_written
    if not files or size <= traced * 1.01:
        return ""
    return (
        f"The job left {plural(files, 'file')} ({fmt.human_bytes(size)}) in its checkpoint directory, but "
        f"the trace holds {fmt.human_bytes(traced)} of checkpoint writes: the tracer missed writes "
        f"(DFTracer does not see torch.save's). Checkpoint times here come from the training script."
    )


def checkpoint_marks(sm: RunSummary) -> list[CheckpointEvent | AppSave]:
    """Checkpoint times for the temporal plot: traced bursts, else the script's own record."""
    return list(sm.checkpoints.marks)


def lever_series_text(s: LeverSeries) -> str:
    """What a lever's series measured, then what follows from it (the best value measured,
    the model's predictions beside it, and beyond the sweep, said as predicted)."""
    return s.text + "".join(f". {t[0].upper()}{t[1:]}" for t in (s.advice, s.beyond) if t)


def rates_text(m: RateModel) -> str:
    """The rate model's predictions in a sentence, each with its bottleneck; '' without one."""
    if not m.available or not m.predictions:
        return ""
    preds = "; ".join(
        f"{p.workers}: {p.samples_per_s:,.0f} samples/s, AU {p.au:.0%} ({p.bottleneck})"
        for p in m.predictions
    )
    return (
        f"In steady state this run measured {m.samples_per_s or 0:,.0f} samples/s with "
        f"{m.workers} loader workers; with other counts the model predicts {preds}"
    )
