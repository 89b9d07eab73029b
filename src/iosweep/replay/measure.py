"""What a replay of a run needs, measured on the run: the dataset's shape, the loader, the
cost of one sample and of one step, and the checkpoints (:func:`measure_replay`).

Each figure is a :class:`Measured`: a value, its spread where it has one, and where it was
measured, so that the workload written from it (iosweep.replay.dlio) can say so beside every key.

The cost of one sample is measured where the samples are loaded: in each process that reads
the dataset (the rank itself without loader workers, else each worker), consecutive samples
start one sample's load apart, except where the process waited (between batches: for the
training step, or for a free prefetch slot). The median gap between the first reads of
consecutive dataset files in one process is therefore the wall time of loading one sample:
open, read, decode, augment; waits are the minority of gaps as long as a batch holds three
samples or more.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import READ, RunData
from iosweep.analysis.pipeline.waits import rank_epochs

DATASET = "dataset"


class ReplayError(ValueError):
    """A run that cannot be replayed as measured; the message says what is missing."""


@dataclass(frozen=True)
class Measured:
    value: Any
    source: str  # where (and how) it was measured
    stdev: float | None = None


@dataclass
class ReplayMeasures:
    run_id: str
    figures: dict[str, Measured]
    paths: list[str]  # the dataset files the run read, in name order
    files_here: bool = False  # every one of them is on this machine
    limits: list[str] = field(default_factory=list)  # what a replay cannot reproduce
    problems: list[str] = field(default_factory=list)  # what could not be measured

    def require(self) -> None:
        """Raise ReplayError naming what could not be measured, if anything."""
        if self.problems:
            raise ReplayError("; ".join(self.problems))

    def value(self, key: str) -> Any:
        m = self.figures.get(key)
        return m.value if m else None


def _param(rd: RunData, name: str) -> Any:
    return (rd.meta.params or {}).get(name, (rd.meta.manifest or {}).get("params", {}).get(name))


def _dataset_reads(rd: RunData) -> pd.DataFrame:
    """The reads of dataset files: pid, file, path code order, offset, length, start, end."""
    o = rd.ops
    names = rd.settings.class_names
    if DATASET not in names:
        raise ReplayError("the analysis settings name no 'dataset' file class")
    cls = rd.file_class[o.file]
    m = (cls == names.index(DATASET)) & (o.op == READ)
    if not m.any():
        raise ReplayError(
            "the trace holds no reads of dataset files: nothing to replay (is the trace blind? "
            "see the run's completeness check)"
        )
    pid = o.pid[m] if o.pid is not None else o.actor[m].astype(np.int64)
    return pd.DataFrame(
        {
            "pid": pid,
            "actor": o.actor[m],
            "file": o.file[m],
            "offset": o.offset[m],
            "length": o.length[m],
            "start": o.start[m],
            "end": o.end[m],
        }
    )


def _sample_costs(reads: pd.DataFrame) -> tuple[Measured, Measured]:
    """(wall time of one sample's load, time inside its reads)."""
    r = reads.assign(dur=reads["end"] - reads["start"])
    per = r.groupby(["pid", "file"], as_index=False).agg(
        first=("start", "min"), read_time=("dur", "sum")
    )
    per = per.sort_values(["pid", "first"])
    gaps = per.groupby("pid")["first"].diff().dropna().to_numpy()
    gaps = gaps[gaps > 0]
    procs = per["pid"].nunique()
    if len(gaps) < 2:
        raise ReplayError("too few samples per loading process to time one sample's load")
    med = float(np.median(gaps))
    # the spread of the loads, not of the waits between batches: the gaps up to twice the median
    body = gaps[gaps <= 2 * med]
    sample = Measured(
        med,
        f"median gap between the first reads of consecutive dataset files in one process "
        f"({len(gaps):,} gaps, {procs} loading processes)",
        float(np.std(body)),
    )
    rt = Measured(
        float(np.median(per["read_time"])),
        "median time inside one file's reads (per process and file)",
        float(np.std(per["read_time"])),
    )
    return sample, rt


def _dataset_shape(rd: RunData, reads: pd.DataFrame) -> tuple[dict[str, Measured], list[str], bool]:
    """(the dataset's figures, its files in name order, whether all of them are here)."""
    files = np.unique(reads["file"].to_numpy())
    paths = sorted(rd.paths[int(f)] for f in files)
    on_disk = [os.path.getsize(p) for p in paths if os.path.isfile(p)]
    here = len(on_disk) == len(paths)
    if here:
        sizes, src = np.array(on_disk, np.float64), "the files' sizes on disk"
    else:
        ends = (reads["offset"] + reads["length"]).where(reads["offset"] >= 0)
        sizes = ends.groupby(reads["file"]).max().dropna().to_numpy(np.float64)
        src = "the highest byte read of each file"
    folders = pd.Series([os.path.dirname(p) for p in paths])
    root = os.path.commonpath([os.path.dirname(f) for f in folders.unique()])
    if folders.nunique() > 1:
        root = os.path.dirname(root) if root in set(folders) else root
    suffixes = pd.Series([os.path.splitext(p)[1].lower() for p in paths]).value_counts()
    ln = reads["length"][reads["length"] > 0]
    top = ln.value_counts().head(3)
    sizes_text = ", ".join(f"{int(s):,} B x {int(c):,}" for s, c in top.items())
    out = {
        "files": Measured(len(paths), "distinct dataset files read"),
        "folders": Measured(int(folders.nunique()), "distinct folders of those files"),
        "data_root": Measured(root, "the dataset files' common folder"),
        "suffix": Measured(str(suffixes.index[0]), "the dataset files' most common suffix"),
        "record_length": Measured(
            float(sizes.mean()), f"mean file size ({src})", float(sizes.std())
        ),
        "request_size": Measured(
            int(np.median(ln)) if len(ln) else 0,
            f"median read request size; most common: {sizes_text}",
        ),
    }
    return out, paths, here


def _steps(rd: RunData) -> dict[str, Measured]:
    """Per-step compute (every step but each epoch's first: warm-up), steps and samples."""
    comp: list[float] = []
    samples: list[float] = []
    epochs: set[int] = set()
    for re_ in rank_epochs(rd):
        st = re_.steps
        epochs.add(re_.epoch)
        comp += list((st["end"] - st["start"]).to_numpy(np.float64)[1:])
        samples += [float(v) for v in st["samples"].dropna()]
    if not comp:
        raise ReplayError("the run has no timed steps (no step records, no annotations)")
    c = np.array(comp)
    out = {
        "computation_time": Measured(
            float(c.mean()),
            f"mean step time of {len(c):,} steps (each epoch's first, the warm-up, left out), "
            "as the run timed its steps",
            float(c.std()),
        ),
        "epochs": Measured(len(epochs), "epochs with step records"),
    }
    if samples:
        out["batch_samples"] = Measured(float(np.median(samples)), "median samples per step")
    return out


def _checkpoints(summary: dict[str, Any]) -> dict[str, Measured]:
    """The checkpoints the run wrote: traced writes, else the files the tracer saw opened
    (DFTracer does not see torch.save's writes), sized on disk."""
    ck = summary.get("checkpoints") or {}
    events, how = ck.get("events") or [], "traced writes"
    if not events:
        events, how = ck.get("opened") or [], "opens the tracer saw, the files' sizes on disk"
    if not events:
        return {}
    after = [e["after_epoch"] for e in events if e.get("after_epoch") is not None]
    every = int(np.median(np.diff(sorted(set(after))))) if len(set(after)) > 1 else 1
    writers = max(int(e.get("ranks") or 1) for e in events)
    per = float(np.mean([e["bytes"] for e in events])) / writers
    return {
        "checkpoint_bytes": Measured(
            round(per),
            f"mean bytes per checkpoint and writer ({len(events)} checkpoints, {how})",
        ),
        "checkpoint_writers": Measured(writers, "ranks that wrote each checkpoint"),
        "checkpoint_first_epoch": Measured(
            (int(min(after)) + 1) if after else 1, "the epoch after which the first one was written"
        ),
        "checkpoint_every_epochs": Measured(every, "epochs between checkpoints"),
    }


def _outcome(summary: dict[str, Any]) -> dict[str, Measured]:
    """The run's own answer, to set the replay's beside."""
    p = summary.get("pipeline") or {}
    tot = p.get("totals") or {}
    v = p.get("verdict") or {}
    return {
        "au": Measured(tot.get("au"), "the run's AU (iosweep's pipeline analysis)"),
        "samples_per_s": Measured(tot.get("samples_per_s"), "samples/s over all ranks"),
        "wait_per_rank": Measured(tot.get("wait_per_rank"), "data wait per rank, s"),
        "verdict": Measured(
            v.get("trace_kind") or v.get("kind"),
            "the run's verdict from its steps and trace"
            + (f" (the run was {v['kind']} by its host's figures)" if v.get("trace_kind") else ""),
        ),
    }


def _loader(rd: RunData, reads: pd.DataFrame, steps: dict[str, Measured]) -> dict[str, Measured]:
    out: dict[str, Measured] = {"ranks": Measured(int(rd.n_ranks), "ranks of the run")}
    fw = _param(rd, "framework")
    if fw:
        out["framework"] = Measured(str(fw), "the run's parameters")
    bs = _param(rd, "batch_size")
    if bs:
        out["batch_size"] = Measured(int(bs), "the run's parameters")
    elif "batch_samples" in steps:
        out["batch_size"] = Measured(
            int(steps["batch_samples"].value), steps["batch_samples"].source
        )
    w = _param(rd, "loader_workers")
    if w is not None:
        out["loader_workers"] = Measured(int(w), "the run's parameters")
    else:  # processes that read the dataset per rank, less the rank's own where it read none
        per_rank = reads.groupby("actor")["pid"].nunique()
        out["loader_workers"] = Measured(
            int(per_rank.median()) if len(per_rank) else 0,
            "processes that read dataset files, per rank (median)",
        )
    return out


LIMITS = [
    "compute: a sleep per step (DLIO's computation_time), from the measured mean and spread; "
    "the real step's use of the cores (and of the accelerator) is not reproduced",
    "preprocessing beyond DLIO's own decode: a sleep per sample (reader.preprocess_time); it "
    "does not compete for cores as the real decode and augmentation did, so a job whose "
    "loader workers outnumber the cores replays optimistic",
    "a decode and augmentation cost that depends on the image is replayed as a normal "
    "distribution of the measured mean and spread",
    "request sizes: DLIO's image reader reads each file through Pillow, whose buffering sets "
    "the requests; the measured sizes are stated, not imposed",
    "shuffling: DLIO shuffles samples with its own seed, so which rank reads which file "
    "differs from the run",
]


def measure_replay(rd: RunData, summary: dict[str, Any]) -> ReplayMeasures:
    """Every figure a replay needs, from the run's data (``rd``: as the analysis reads it,
    with its steps) and its analysis (``summary``: checkpoints, the run's own answer)."""
    reads = _dataset_reads(rd)
    shape, paths, here = _dataset_shape(rd, reads)
    sample, read_time = _sample_costs(reads)
    try:
        steps, problems = _steps(rd), []
    except ReplayError as e:
        steps, problems = {}, [str(e)]
    figures = {
        **shape,
        **_loader(rd, reads, steps),
        **steps,
        "sample_time": sample,
        "sample_read_time": read_time,
        **_checkpoints(summary),
        **_outcome(summary),
    }
    limits = list(LIMITS)
    v = (summary.get("pipeline") or {}).get("verdict") or {}
    if v.get("kind") == "host-cpu-bound":
        limits.append(
            "the host's CPU: the run was held back by its host's cores (host-CPU-bound), which "
            "sleeps do not reproduce; the replay is set beside the run's reading from its steps "
            f"and trace alone ({v.get('trace_kind')})"
        )
    if "checkpoint_bytes" in figures:
        limits.append(
            "checkpoints: one file of the measured size per writer (DLIO's model state as one "
            "tensor), not the run's own file layout"
        )
    return ReplayMeasures(rd.meta.run_id, figures, paths, here, limits, problems)
