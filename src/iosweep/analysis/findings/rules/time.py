"""Rules on how much of the run the I/O takes, and whether compute hides it."""

from __future__ import annotations

from iosweep.analysis.findings.rules.base import (
    Context,
    Outcome,
    found,
    make_insight,
    not_applicable,
    not_checked,
    passed,
    when_no_io,
)


def io_bound(c: Context) -> list[Outcome]:
    """The busiest rank's I/O wall time against the run's."""
    cid, title = "io_bound", "I/O share of the run"
    if none := when_no_io(c, cid, title):
        return none
    h, s = c.summary["headline"], c.settings
    share, run, io = h.get("io_share_max"), h.get("run_time"), h.get("io_time_max") or 0.0
    numbers = {
        "io_share_max": (share, "share"),
        "io_time_max": (io, "s"),
        "run_time": (run, "s"),
        "threshold_share": (s.io_time_share, "share"),
    }
    if share is None and run and io > run:  # (a sum of call times: calls at once add up)
        return [
            not_checked(
                cid,
                title,
                f"the busiest {c.who}'s I/O calls add up to {io:,.1f} s, {io / run:.1f} times "
                f"the run's {run:,.1f} s: its calls overlapped (threads, asynchronous I/O) or "
                "its log's times are wrong, so no share of the run can be stated",
                numbers,
            )
        ]
    if share is None:
        return [not_checked(cid, title, "the run's length is unknown")]
    if share <= s.io_time_share and c.unknown_ranks:  # (a share above it stays true)
        return [
            not_checked(
                cid,
                title,
                f"the busiest {c.who} whose figures are known spends {share:.1%} of the run "
                f"in I/O (at most {s.io_time_share:.0%}), but the figures of "
                f"{len(c.unknown_ranks):,} {c.who if len(c.unknown_ranks) == 1 else c.whos} "
                "are not known (no trace, or counters with impossible values)",
                numbers,
            )
        ]
    if share <= s.io_time_share:
        return [
            passed(
                cid,
                title,
                f"the busiest {c.who} spends {share:.1%} of the run in I/O "
                f"(at most {s.io_time_share:.0%})",
                numbers,
            )
        ]
    ins = make_insight(
        "io_bound",
        "warn",
        "I/O takes a large share of the run",
        f"The busiest rank spends {share:.1%} of the run time in I/O",
        numbers,
        "Overlap loading with compute (DataLoader workers, prefetch), cache the dataset in "
        "memory or on node-local storage, or use a faster file system tier."
        if c.training_job
        else "Overlap I/O with computation (non-blocking or asynchronous I/O), aggregate "
        "it into fewer, larger collective MPI-IO operations, or stage it through a "
        "burst buffer or a faster file system tier.",
    )
    return [found(cid, title, ins)]


def exposed_io(c: Context) -> list[Outcome]:
    """I/O with no compute running, per epoch (when the job has no verdict)."""
    cid, title = "exposed_io", "I/O hidden behind compute"
    if none := when_no_io(c, cid, title):
        return none
    s = c.settings
    if (c.summary.get("pipeline") or {}).get("verdict"):
        return [
            not_applicable(
                cid,
                title,
                "the input pipeline's verdict says whether, and why, the ranks wait (input_bound)",
            )
        ]
    ov = c.summary.get("overlap", {})
    share = ov.get("exposed_share_of_epochs_max")
    if not ov.get("available") or share is None:
        return [not_applicable(cid, title, "no compute phases recorded to set the I/O against")]
    numbers = {
        "exposed_share_max": (share, "share"),
        "exposed_io_time_max": (ov["exposed_io_time_in_epochs_max"], "s"),
        "threshold_share": (s.exposed_io_share, "share"),
    }
    if share <= s.exposed_io_share:
        return [
            passed(
                cid,
                title,
                f"at most {share:.1%} of a rank's epoch is I/O with no "
                f"compute running (at most {s.exposed_io_share:.0%})",
                numbers,
            )
        ]
    ins = make_insight(
        "exposed_io",
        "warn",
        "I/O not hidden behind compute",
        f"Up to {share:.1%} of a rank's epoch time is I/O with no compute running",
        numbers,
        "Prefetch the next batches while computing (more loader workers, prefetch_factor, "
        "tf.data prefetch) so reads overlap with the steps.",
    )
    return [found(cid, title, ins)]
