"""Is the trace complete? What it saw against what the run must have read and written.

A tracer can be blind without saying so: Darshan ignores paths under ``/dev/``, ``/etc/``,
``/usr/`` ... by default (data staged in ``/dev/shm`` goes untraced), DFTracer traces only
under ``DFTRACER_DATA_DIR`` and does not see ``torch.save``'s writes. Each check compares
the trace with an outside account of the run: the dataset's size (``dataset.json``) times the
epochs, the samples the training script consumed, the checkpoint files on disk. A failed
check is a warning issue of kind ``trace-incomplete``; such a run is never "traced
completely", and the check says what was missed and, where it can, why.
"""

from __future__ import annotations

import re
from typing import Any

from iosweep.analysis.pipeline.host import blind_reads
from iosweep.trace.darshan.runtime import excluded_by_default
from iosweep.trace.schema import RunMeta
from iosweep.units import human_bytes

_DATA_ARG = re.compile(r"--(?:data|data[-_]dir|dataset|train[-_]dir)[= ](\S+)")
SEEN_MIN = 0.9  # the share of the expected bytes below which reads are missing


def data_dirs(meta: RunMeta) -> list[str]:
    """Where the run's data were: the manifest's (the staged copy first), else the ``--data``
    argument of the traced processes' command lines."""
    man = meta.manifest or {}
    out = [
        str((man.get("staging") or {}).get("dir") or ""),
        str((man.get("data") or {}).get("path") or ""),
    ]
    for p in meta.processes:
        out += _DATA_ARG.findall(p.exe or "")
    out += _DATA_ARG.findall(" ".join(meta.command))
    return [d for d in dict.fromkeys(out) if d.startswith("/")]


def _why_blind(meta: RunMeta) -> str:
    tracer = meta.tracer or (meta.processes[0].tracer if meta.processes else "")
    dirs = data_dirs(meta)
    if tracer == "darshan":
        for d in dirs:
            hidden = excluded_by_default(d)
            if hidden:
                return (
                    f"the data were under {d}, and Darshan excludes {hidden} by default (its "
                    "built-in exclusion list; DARSHAN_EXCLUDE_DIRS or a NAME_INCLUDE for the data "
                    "directory brings them back)"
                )
        return "Darshan's NAME_EXCLUDE rules or record limits may have left the data files out"
    if tracer == "dftracer":
        where = f" ({', '.join(dirs)})" if dirs else ""
        return f"DFTracer traces only under DFTRACER_DATA_DIR: the data directory{where} may not be in it"
    return ""


def _dataset_check(
    meta: RunMeta, seen: int, files_seen: int, pipeline: dict[str, Any]
) -> dict | None:
    man = meta.manifest or {}
    data = man.get("data") or {}
    tot = pipeline.get("totals") or {}
    epochs = tot.get("epochs") or 0
    samples = tot.get("samples")
    whole = meta.params.get("steps") == 0 and data.get("workload") == "imagenet"
    if whole and data.get("bytes") and epochs:
        expected = int(data["bytes"]) * epochs
        if seen >= SEEN_MIN * expected:
            return None
        return {
            "kind": "dataset-reads",
            "expected": expected,
            "seen": seen,
            "message": f"the tracer saw {human_bytes(seen)} of the {human_bytes(expected)} of dataset "
            f"reads that {epochs} whole epoch(s) over {data.get('files')} files must have made",
        }
    if seen == 0 and samples:
        return {
            "kind": "dataset-reads",
            "expected": None,
            "seen": 0,
            "message": f"the tracer saw no dataset reads at all, while the run consumed "
            f"{int(samples):,} samples",
        }
    steps = tot.get("steady_steps_per_rank")
    if seen == 0 and files_seen == 0 and pipeline.get("available") and steps:
        # a training job whose trace holds no read of a dataset file: it cannot tell
        return {
            "kind": "dataset-reads",
            "expected": None,
            "seen": 0,
            "message": f"the trace holds no read of a dataset file, while the ranks trained "
            f"{steps:,.0f} steps each: whatever read the data was not seen (forked loader "
            "workers a non-MPI Darshan does not trace, darshan-hpc/darshan issue 872; a reader "
            "the tracer does not intercept), or its files are not recognised as the dataset "
            "(analysis.file_classes); whether training waited for storage cannot be told here",
        }
    return None


def _blind_check(pipeline: dict[str, Any]) -> dict | None:
    """Reads the tracer could not see, found by the kernel's account of the ranks' processes
    (:mod:`.host`): memory-mapped data, or read calls well past the traced bytes."""
    host = pipeline.get("host") or {}
    totals = pipeline.get("totals") or {}
    traced = int(totals.get("bytes_read_in_epochs") or 0)
    how = blind_reads(host, traced, totals.get("data_opens_in_epochs"))
    if not how:
        return None
    figures = [f"{human_bytes(host['rchar'])} through read calls"] if host.get("rchar") else []
    if host.get("read_bytes") is not None:
        figures.append(f"{human_bytes(host['read_bytes'])} from storage")
    if host.get("majflt") is not None:
        figures.append(f"{host['majflt']:,.0f} major page faults")
    return {
        "kind": "dataset-reads",
        "expected": None,
        "seen": traced,
        "message": f"the trace holds {human_bytes(traced)} of reads in the epochs, a lower bound: "
        "the ranks' processes read data the tracer did not see (during training, by the "
        f"kernel's counts: {', '.join(figures) or 'not readable'})",
        "why": how,
    }


def _checkpoint_check(checkpoints: dict[str, Any]) -> dict | None:
    disk = checkpoints.get("on_disk") or {}
    traced = int(checkpoints.get("bytes_written") or 0)
    if not disk.get("files") or disk.get("bytes", 0) <= traced * 1.01:
        return None
    timed = "the saves timed in the job" if checkpoints.get("app_saves") else "their traced opens"
    return {
        "kind": "checkpoint-writes",
        "expected": int(disk["bytes"]),
        "seen": traced,
        "message": f"the job left {disk['files']} checkpoint file(s) ({human_bytes(disk['bytes'])}) on "
        f"disk, but the trace holds {human_bytes(traced)} of checkpoint writes: the tracer missed the "
        "checkpoint writes (DFTracer does not see torch.save's); checkpoint sizes come from the files "
        f"on disk, their times from {timed}",
        "measured_by": f"the checkpoint files on disk (sizes) and {timed} (times)",
    }


def completeness_checks(
    meta: RunMeta,
    traced: bool,
    dataset_bytes: int,
    dataset_files: int,
    pipeline: dict[str, Any],
    checkpoints: dict[str, Any],
) -> list[dict[str, Any]]:
    """The checks that failed (nothing for an untraced run, or for a trace that holds no
    segment and no counter record, not ``traced``, unless the steps say the job trained: a
    tracer that saw nothing of a job that read its data memory-mapped is blind, not done):
    kind, expected, seen, message, and ``why`` where the cause is known."""
    if meta.tracer == "none" or not (traced or pipeline.get("available")):
        return []
    out = []
    check = _dataset_check(meta, dataset_bytes, dataset_files, pipeline)
    # the trace holds opens of the dataset's files: the tracer was pointed at them
    opened = bool((pipeline.get("totals") or {}).get("data_opens_in_epochs"))
    if check:
        check["why"] = "" if opened else _why_blind(meta)
    blind = _blind_check(pipeline)
    if check and blind:
        check["why"] = "; ".join(w for w in (check["why"], "the data were " + blind["why"]) if w)
    check = check or blind
    if check:
        out.append(check)
    check = _checkpoint_check(checkpoints)
    if check:
        check["why"] = ""
        out.append(check)
    return out
