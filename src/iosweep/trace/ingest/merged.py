"""The run's merged Darshan log (``STORE/merged.darshan``), on demand: ``iosweep merge``,
``iosweep ingest --merged-log`` or the workflow's ``merged_log`` rule (config
``ingest.merged_log``).

It is a product for Darshan's own tools (darshan-parser, PyDarshan, Drishti, DXT Explorer);
nothing in iosweep reads it. Written during every ingest, it took more than half of an
ImageNet-scale run's ingest (131 s of 240 s over 544 logs), so the store no longer waits for
it: it is made from a finished store, whose ``run.json`` says which log is which rank and
whose ``inputs.json`` where each log lies.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from iosweep.files import shown
from iosweep.trace.darshan.merge import MergeInput, write_merged_log
from iosweep.trace.jobs import JOBS_JSON
from iosweep.trace.schema import Issue, RunMeta
from iosweep.trace.store import RUN_JSON

MERGED_DARSHAN = "merged.darshan"
INPUTS_JSON = "inputs.json"  # what a store was built from: lets an unchanged input be reused


def merge_inputs(store: Path) -> list[MergeInput]:
    """The store's per-process (non-MPI) Darshan logs, each with its rank and host (rank -1:
    none, left out of the merged log). ValueError when the store cannot say where its logs
    are (a store written before ``inputs.json`` existed, or by ``write_store`` directly)."""
    meta = RunMeta.read(store / RUN_JSON)
    # a store of its own lists its inputs; one of several jobs split from one input, the
    # listing beside them (jobs.json)
    files = None
    for listing in (store / INPUTS_JSON, store.parent / JOBS_JSON):
        try:
            files = [Path(f[0]) for f in json.loads(listing.read_text())["files"]]
            break
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            continue
    if files is None:
        raise ValueError(
            f"{store}: no readable {INPUTS_JSON}, so where its logs lie is not known: "
            "ingest the logs again (iosweep ingest ... --merged-log)"
        )
    by_name: dict[str, list[Path]] = {}
    for f in files:
        by_name.setdefault(shown(f.name), []).append(f)
    # an MPI log holds several ranks: it is one job already, and not merged
    per_source = Counter(p.source for p in meta.processes)
    out = []
    for p in meta.processes:
        if p.tracer != "darshan" or per_source[p.source] > 1:
            continue
        found = by_name.get(p.source, [])
        if len(found) != 1:  # two logs of one name in different folders: not told apart
            out.append(MergeInput(found[0] if found else Path(p.source), -1))
            continue
        out.append(MergeInput(found[0], p.rank, p.host))
    return out


def write_merged_darshan(store: Path) -> list[Issue]:
    """``STORE/merged.darshan``: the store's per-process Darshan logs as one N-rank log
    (trace/darshan/merge.py). Returns the warnings, also added to the store's ``run.json``
    (the store itself is complete either way); no log when the run has no per-process
    Darshan log (an MPI job's own log already is one)."""
    out = store / MERGED_DARSHAN
    out.unlink(missing_ok=True)
    inputs = merge_inputs(store)
    if not inputs:
        return []
    try:
        res = write_merged_log(inputs, out)
    except Exception as err:  # the store is complete without it: never fail it
        out.unlink(missing_ok=True)
        why = f"the merged log was not written: {type(err).__name__}: {err}"
        issues = [Issue(str(out), "merge-failed", why, "warning")]
    else:
        issues = (
            [
                Issue(
                    str(out),
                    "merge-partial",
                    "the merged log leaves out " + "; ".join(res.left_out),
                    "warning",
                )
            ]
            if res.left_out
            else []
        )
    meta = RunMeta.read(store / RUN_JSON)
    kept = [i for i in meta.issues if i.kind not in ("merge-failed", "merge-partial")]
    if kept != meta.issues or issues:
        meta.issues = kept + issues
        meta.write(store / RUN_JSON)
    return issues
