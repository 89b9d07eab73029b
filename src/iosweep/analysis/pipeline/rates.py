"""A rate model per run: from what the run measured, the samples/s and AU it would reach with
another number of loader workers, each prediction naming its bottleneck (docs/analysis.md
"The rate model").

In the manner of Plumber (MLSys 2022), each stage of a rank's pipeline has a rate, and the
slowest one sets the pace:

- **compute**: 1 / the step's compute time a sample (steady state, measured);
- **preprocessing**: W loader workers prepare W / p samples a second, p the loader
  processes' CPU seconds a sample (the kernel's count; loader threads in the rank's own
  process, as tf.data's: the rank's CPU a sample less its compute time while it had a
  core; where the host was
  not measured, the workers' wall time a sample, W / the measured rate: an upper bound of
  p); with no workers
  the rank does it in turn with its steps, 1 / (compute + p), p then the data wait a sample
  less the time its thread waited for a core;
- **the host's CPU**: the cores usable per rank / the CPU seconds all of a rank's processes
  spend a sample (measured; unknown where the host was not: then no CPU limit is assumed,
  and the prediction is an upper bound);
- **storage**: ``analysis.fs_bandwidth`` / the bytes a sample of all ranks, where set; else
  no storage limit is assumed (what the run achieved is only a lower bound of what storage
  can do). The file system's open rate is the projection's (:mod:`.levers`), not this.

The model's rate at the run's own settings rarely equals the measured rate (the loop's own
time between steps, synchronisation, what no stage above holds); the gap is kept as a factor,
the same at every prediction. Every figure here is a prediction, never a measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from iosweep.analysis.pipeline.host import busiest_node

PREP_CPU = "the loader processes' CPU time a sample (the kernel's count)"
PREP_WAIT = "the data wait a sample in the rank's own process (no loader workers)"
PREP_THREADS = (
    "the rank's CPU time a sample less its compute time while it had a core (loader threads "
    "in the rank's own process, as tf.data's)"
)
# below this many cores in the processes under a rank, its loader runs in its own threads
THREADS_ONLY = 0.01
PREP_WALL = "the workers' wall time a sample (W / measured rate: an upper bound of their cost)"


@dataclass(frozen=True)
class RateInputs:
    """What a run measured that the model rests on: per rank, in steady state."""

    workers: int
    rate: float  # samples/s a rank
    compute_s: float  # compute a sample
    prep_s: float | None  # preprocessing a sample (see prep_source)
    prep_source: str
    cpu_s: float | None  # CPU seconds a sample, all of a rank's processes
    cores_per_rank: float | None  # the node's usable cores / its ranks
    ranks: int
    bytes_per_sample: float | None


def rate_inputs(
    tot: dict[str, Any], host: dict[str, Any], workers: Any
) -> tuple[RateInputs | None, str]:
    """The run's :class:`RateInputs`, or None and why the model cannot be built."""
    if not isinstance(workers, int) or isinstance(workers, bool):
        return None, "the number of loader workers is not known (no loader_workers parameter)"
    n, steady = tot.get("steady_samples_per_rank"), tot.get("steady_time_per_rank")
    if not n or not steady or n <= 0 or steady <= 0 or tot["compute_per_rank"] <= 0:
        return None, "no steady state with samples and compute to take rates from"
    rate = n / steady
    short = (host.get("core_wait_share") or 0.0) if host.get("available") else 0.0
    running = 1.0 - short  # of a thread's runnable time, the share it had a core
    # the compute's cost a sample: the time it ran on a core (its wall time less its wait for
    # one); where the host has no core to spare, the host's CPU limit holds the rate
    compute_s = tot["compute_per_rank"] / n * running
    ranks = int(tot["ranks"])
    per_rank = (tot.get("samples") or 0) / ranks  # over the epochs, as the host's window
    window = tot["epoch_time_per_rank"]
    cpu_s = prep_s = cores = None
    source = PREP_CPU
    if host.get("available") and per_rank > 0:
        rank_c, other_c = host.get("rank_cores"), host.get("other_cores")
        if rank_c is not None:
            cpu_s = (rank_c + (other_c or 0.0)) * window / per_rank
        if workers > 0 and other_c is not None and other_c >= THREADS_ONLY:
            prep_s = other_c * window / per_rank
        elif workers > 0 and cpu_s is not None and cpu_s > compute_s:
            # the loader works in threads of the rank's own process (tf.data): its CPU is
            # the rank's less one core for the length of the compute
            prep_s, source = cpu_s - compute_s, PREP_THREADS
        node = busiest_node(host)
        if node.get("cores_usable") and node.get("ranks"):
            cores = float(node["cores_usable"]) / int(node["ranks"])
    if workers == 0:
        prep_s, source = tot["wait_per_rank"] / n * running, PREP_WAIT
    elif prep_s is None:
        prep_s, source = workers / rate, PREP_WALL
    read = tot.get("bytes_read_in_epochs") or 0
    samples = tot.get("samples") or 0
    return (
        RateInputs(
            workers=workers,
            rate=rate,
            compute_s=compute_s,
            prep_s=prep_s,
            prep_source=source,
            cpu_s=cpu_s,
            cores_per_rank=cores,
            ranks=ranks,
            bytes_per_sample=read / samples if read and samples else None,
        ),
        "",
    )


def limits(r: RateInputs, workers: int, s) -> dict[str, float]:
    """Each stage's samples/s a rank with ``workers`` loader workers (the model, uncorrected)."""
    out = {"compute": 1.0 / r.compute_s}
    if r.prep_s is not None and r.prep_s > 0:
        if workers == 0:
            out["compute and preprocessing in turn"] = 1.0 / (r.compute_s + r.prep_s)
        else:
            out["preprocessing in the loader workers"] = workers / r.prep_s
    if r.cpu_s and r.cores_per_rank:
        out["the host's CPU"] = r.cores_per_rank / r.cpu_s
    if s.fs_bandwidth and r.bytes_per_sample:
        out["storage bandwidth"] = s.fs_bandwidth / (r.bytes_per_sample * r.ranks)
    return out


def _pace(lim: dict[str, float]) -> tuple[str, float]:
    name = min(lim, key=lambda k: lim[k])
    return name, lim[name]


def predict(r: RateInputs, workers: int, s) -> dict[str, Any]:
    """samples/s (a rank and all ranks) and AU with ``workers``, the bottleneck, and the
    model's factor at the run's own settings (measured / modelled)."""
    own = _pace(limits(r, r.workers, s))[1]
    factor = r.rate / own if own > 0 else 1.0
    bottleneck, raw = _pace(limits(r, workers, s))
    rate = raw * factor
    return {
        "workers": workers,
        "samples_per_s": rate * r.ranks,
        "au": min(1.0, r.compute_s * rate),
        "bottleneck": bottleneck,
        "factor": factor,
    }


def candidates(r: RateInputs) -> list[int]:
    """Worker counts to predict: 0 .. twice the cores a rank has (or, unknown, 4x the run's)."""
    top = 2 * math.ceil(r.cores_per_rank) if r.cores_per_rank else max(4 * r.workers, 8)
    vals = {0, r.workers, top}
    v = 1
    while v < top:
        vals.add(v)
        v *= 2
    return sorted(vals)


def assumptions(r: RateInputs, s) -> list[str]:
    """What the predictions take for granted, in the words of this run's figures."""
    out = [
        f"each stage's cost a sample stays what this run measured: compute {r.compute_s * 1e3:.2f} "
        f"ms; preprocessing {r.prep_s * 1e3:.2f} ms ({r.prep_source})"
        if r.prep_s is not None
        else f"compute {r.compute_s * 1e3:.2f} ms a sample; preprocessing not measured",
        "a loader worker keeps one core busy; workers are alike and add up",
    ]
    if r.cpu_s and r.cores_per_rank:
        out.append(
            f"{r.cores_per_rank:g} usable cores a rank shared by all of its processes, at "
            f"{r.cpu_s * 1e3:.2f} ms of CPU a sample"
        )
    else:
        out.append("no limit of the host's cores (not measured): the predictions are upper bounds")
    if not s.fs_bandwidth:
        out.append(
            "no storage limit (analysis.fs_bandwidth not set; a run only shows a lower bound of "
            "what storage can do)"
        )
    out.append(
        "prefetch depth changes no steady rate (a deeper buffer only hides jitter); threads per "
        "rank are not modelled (one run does not show how its compute scales with threads)"
    )
    return out


def rate_model(tot: dict[str, Any], host: dict[str, Any], workers: Any, s) -> dict[str, Any]:
    """The run's rate model (summary.RateModel): its inputs, a prediction for each worker
    count, and what they assume; or why there is none."""
    r, why = rate_inputs(tot, host, workers)
    if r is None:
        return {"available": False, "reason": why}
    preds = [predict(r, w, s) for w in candidates(r)]
    return {
        "available": True,
        "workers": r.workers,
        "samples_per_s": r.rate * r.ranks,
        "compute_s": r.compute_s,
        "prep_s": r.prep_s,
        "prep_source": r.prep_source,
        "cpu_s": r.cpu_s,
        "cores_per_rank": r.cores_per_rank,
        "ranks": r.ranks,
        "bytes_per_sample": r.bytes_per_sample,
        "factor": preds[0]["factor"],
        "predictions": preds,
        "assumptions": assumptions(r, s),
    }
