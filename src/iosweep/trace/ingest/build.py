"""The entry points: :func:`ingest` (one store) and :func:`ingest_jobs` (one store per job of
the inputs), reuse of an unchanged store (``inputs.json``), and the store's run metadata
(the merged Darshan log, on demand: merged.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from iosweep import memory
from iosweep.files import shown, write_json
from iosweep.trace import dlio, jobs
from iosweep.trace.ingest import inparts, need, parts, stream
from iosweep.trace.ingest.attribute import (
    attribute_logs,
    duplicate_ranks,
    missing_rank_issues,
    mixed_jobs,
    mpi_hosts_of,
    ranks_from_logs,
)
from iosweep.trace.ingest.clock import manifest_steps, place_all
from iosweep.trace.ingest.find import (
    LogEntry,
    collect_ranks,
    describe_unread,
    discover,
    find_rank_files,
    load_manifest,
    outside,
)
from iosweep.trace.ingest.inparts import code_digest
from iosweep.trace.ingest.merged import INPUTS_JSON, MERGED_DARSHAN
from iosweep.trace.ingest.readlogs import read_logs, read_workers
from iosweep.trace.schema import (
    STORE_TABLES,
    Issue,
    ProcessInfo,
    RankInfo,
    RunMeta,
)
from iosweep.trace.store import RUN_JSON, Parts, write_store


def inputs_fingerprint(files: list[Path], arguments: dict[str, Any]) -> dict[str, Any]:
    """What a store is built from: every input file's path, size and modification time, the
    ingest's arguments and the reader code; equal fingerprints give equal stores."""
    listed = []
    for f in sorted({p.resolve() for p in files}):
        st = f.stat()
        listed.append([str(f), st.st_size, st.st_mtime_ns])
    doc = {"code": code_digest(), "arguments": arguments, "files": listed}
    key = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
    return {"fingerprint": key, **doc}


def _reusable(out: Path, fingerprint: dict[str, Any]) -> list[tuple[Path, RunMeta]] | None:
    """The store(s) at ``out`` if complete and built from exactly these inputs: the store
    itself (``inputs.json``), or one per job (``jobs.json``)."""
    for listing in (out / INPUTS_JSON, out / jobs.JOBS_JSON):
        try:
            old = json.loads(listing.read_text())
            if old.get("fingerprint") != fingerprint["fingerprint"]:
                continue
            dirs = [out / label for label in old["jobs"]] if "jobs" in old else [out]
            return [(d, RunMeta.read(d / "run.json")) for d in dirs]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def ingest(
    inputs: list[Path],
    out: Path,
    manifest: Path | None = None,
    run_id: str | None = None,
    *,
    isolate: bool = False,
    params: dict | None = None,
    reuse: bool = True,
    workers: int | None = None,
    phases: dict[str, list[dict[str, str]]] | None = None,
    from_parts: list[Path] | None = None,
    memory_gb: float | None = None,
) -> RunMeta:
    """Build the trace store ``out`` from the logs under ``inputs``; return its metadata.

    ``inputs`` are log files or directories (searched recursively for ``*.darshan``,
    ``*.pfw``, ``*.pfw.gz``): a workflow run directory, or any directory of logs. ``manifest``
    is the run manifest; without one, ``manifest.json`` in an input directory is used if
    present. Ranks come from the manifest's ``ranks`` and ``ranks/rank-R.json`` files beside
    (or one level above) an input directory. ``isolate`` reads each Darshan log in a child
    process. ``params`` labels the run's sweep point (framework, nodes, ppn, ...) where no
    manifest says it, e.g. for logs of a past job; the manifest's own values win. Problems
    with the input become ``RunMeta.issues``; the store is written even
    when no log could be read (``RunMeta.processes`` is then empty). With ``reuse``, a store
    already at ``out`` that was built from the same files (paths, sizes, modification times),
    arguments and reader code is returned as it is (``inputs.json`` records them).
    ``workers`` processes read the logs (default: :func:`read_workers`). ``phases`` declares
    which application events are compute, fetch, ... (kind -> rules, as the ``analysis.phases``
    setting); the store keeps them for its analysis. ``from_parts``: the folders of every part
    of the logs (:func:`iosweep.trace.ingest.inparts.read_part`, each read by a job of its
    own), whose reads are taken instead of reading the logs here: the same store.
    ``memory_gb``: the budget (default: 90% of the machine's memory, or the cgroup's limit):
    fewer readers where the default count would not fit, MemoryBudgetError with the figures
    where one would not (:mod:`iosweep.trace.ingest.need`), before anything is written.

    Logs of several unrelated jobs (:mod:`iosweep.trace.jobs`) raise ValueError naming them:
    :func:`ingest_jobs` writes one store per job instead.
    """
    stores = ingest_jobs(
        inputs,
        out,
        manifest,
        run_id,
        isolate=isolate,
        params=params,
        reuse=reuse,
        workers=workers,
        split=False,
        phases=phases,
        from_parts=from_parts,
        memory_gb=memory_gb,
    )
    return stores[0][1]


def ingest_jobs(
    inputs: list[Path],
    out: Path,
    manifest: Path | None = None,
    run_id: str | None = None,
    *,
    isolate: bool = False,
    params: dict | None = None,
    reuse: bool = True,
    workers: int | None = None,
    split: bool = True,
    phases: dict[str, list[dict[str, str]]] | None = None,
    from_parts: list[Path] | None = None,
    memory_gb: float | None = None,
) -> list[tuple[Path, RunMeta]]:
    """Like :func:`ingest`, but logs of several jobs become one store per job.

    With one job the store is ``out`` itself; with several, ``out/<job>/`` for each, listed
    in ``out/jobs.json``, each with a ``mixed-jobs`` warning naming all of them. Logs that
    could not be read belong to no known job: their errors go into every job's store.
    Returns (store path, metadata) per job; with ``split`` False, several jobs raise
    ValueError instead.
    """
    out = Path(out)
    try:
        return _ingest_jobs(
            [Path(p) for p in inputs],
            out,
            manifest,
            run_id,
            isolate=isolate,
            params=params,
            reuse=reuse,
            workers=workers,
            split=split,
            phases=phases,
            from_parts=from_parts,
            memory_gb=memory_gb,
        )
    finally:  # the logs' tables spilled while it was written (parts.py), whatever happened
        parts.remove(out / parts.SPILL_DIR)


def _ingest_jobs(
    inputs: list[Path],
    out: Path,
    manifest: Path | None,
    run_id: str | None,
    *,
    isolate: bool,
    params: dict | None,
    reuse: bool,
    workers: int | None,
    split: bool,
    phases: dict[str, list[dict[str, str]]] | None,
    from_parts: list[Path] | None = None,
    memory_gb: float | None = None,
) -> list[tuple[Path, RunMeta]]:
    issues: list[Issue] = []
    memory.map_large_arrays()
    if manifest is None:
        found = [p / "manifest.json" for p in inputs if (p / "manifest.json").is_file()]
        manifest = found[0] if found else None
    man = load_manifest(manifest) if manifest is not None else {}
    # DLIO's output folders: its own account of each run (dlio.py); with a manifest (DLIO run
    # as a workload of the sweep), the one DLIO folder of that run
    dlio_dirs = dlio.find_dlio_outputs(inputs)
    if manifest is not None and len(dlio_dirs) > 1:
        issues.append(
            Issue(
                str(manifest),
                "ambiguous",
                f"{len(dlio_dirs)} DLIO output folders in one run: DLIO's own account left out",
                "warning",
            )
        )
        dlio_dirs = []

    entries, unfinished = discover(inputs)
    entries = outside(entries, [out])
    if not (entries or unfinished or dlio_dirs or man):  # nothing to read: say what is there
        issues.append(Issue(", ".join(map(str, inputs)), "no-logs", describe_unread(inputs)))
    rank_files = find_rank_files(inputs)
    used = [e.path for e in entries] + unfinished + rank_files + ([manifest] if manifest else [])
    used += [f for d in dlio_dirs for f in _dlio_files(d)]
    arguments = {"run_id": run_id, "isolate": isolate, "params": params or {}}
    if phases:  # (absent otherwise: stores built before phases existed stay reusable)
        arguments["phases"] = phases
    fingerprint = inputs_fingerprint(used, arguments)
    if reuse and (stores := _reusable(out, fingerprint)) is not None:
        return stores
    # within the memory budget, or refused with the figures before anything is lost
    spilled = need.spills([e.path for e in entries], memory_gb)
    spill_to = out / parts.SPILL_DIR if spilled else None  # (ingest_jobs removes it)
    if from_parts:  # the writer alone, taking a log's spilled tables at a time
        need.fit_readers(entries, 1, requested=True, spilled=True, memory_gb=memory_gb)
    else:
        workers = need.readers_within(entries, workers, spilled, memory_gb)
    _clear_outputs(out)
    for p in unfinished:
        issues.append(
            Issue(
                str(p),
                "truncated",
                "unfinished Darshan log (.darshan_partial): the process was still writing it "
                "or died while writing it; collect logs only after every process has exited",
            )
        )
    ranks, rank_source = collect_ranks(man, rank_files, issues)
    bodies: stream.Bodies | None = None
    if from_parts:
        readers = inparts.take_parts(entries, from_parts, out / parts.SPILL_DIR, issues)
    elif (
        spill_to is not None
        and stream.streamable(entries, isolate)
        and stream.read_heads(entries, issues)
    ):
        bodies = stream.Bodies(read_workers(entries, workers, spilled=True), spill_to)
        readers = bodies.workers
    else:
        readers = read_logs(entries, isolate, issues, workers, spill_to)
    entries = _without_copies(entries, issues)
    # how the logs were read (the CLI says it); in parts: the parts' processes, all together
    read_by = {"logs": len(entries), "read_processes": readers, "parts": len(from_parts or [])}
    read = [e for e in entries if e.log is not None]
    if len(dlio_dirs) == 1:
        rec, dlio_issues = dlio.read_dlio_output(dlio_dirs[0])
        issues.extend(dlio_issues)
        man = {**man, "dlio": rec["dlio"]} if man else rec
        if not ranks and rec.get("ranks"):  # DLIO without traces: the ranks of its outputs
            ranks, rank_source = dlio.untraced_ranks(rec), "dlio"
    # a manifest or rank files describe one run: its logs are never split; DLIO's output
    # folders are one run each
    if len(dlio_dirs) > 1:
        groups = _dlio_groups(dlio_dirs, read)
    else:
        groups = jobs.group_jobs([e.plog for e in read]) if not (man or rank_files) and read else []
    if len(groups) > 1:
        if not split:
            raise ValueError(
                f"the logs come from {len(groups)} different jobs "
                f"({jobs.describe([e.plog for e in read], groups)}): give each job's logs "
                "separately, or use `iosweep ingest`, which writes one store per job"
            )
        return _ingest_split(
            inputs,
            out,
            run_id,
            params,
            entries,
            read,
            groups,
            issues,
            {**fingerprint, **read_by},
            manifests={d.name: dlio.read_dlio_output(d) for d in dlio_dirs},
            phases=phases,
            bodies=bodies,
        )
    issues.extend(mixed_jobs(read))
    meta = _build_store(
        out,
        man,
        entries,
        ranks,
        rank_source,
        issues,
        inputs=inputs,
        run_id=run_id,
        params=params,
        bodies=bodies,
    )
    _declare_phases(out, meta, phases)
    # last: only a finished store is reused
    write_json(out / INPUTS_JSON, {**fingerprint, **read_by})
    return [(out, meta)]


def _ingest_split(
    inputs: list[Path],
    out: Path,
    run_id: str | None,
    params: dict | None,
    entries: list[LogEntry],
    read: list[LogEntry],
    groups: list[tuple[str, list[int]]],
    issues: list[Issue],
    inputs_doc: dict[str, Any],
    manifests: dict[str, tuple[dict[str, Any], list[Issue]]] | None = None,
    phases: dict[str, list[dict[str, str]]] | None = None,
    bodies: stream.Bodies | None = None,
) -> list[tuple[Path, RunMeta]]:
    """One store per job under ``out``; ``jobs.json`` lists them (and lets them be reused).
    ``manifests``: a job's own account of itself by its label (a DLIO run's output folder);
    ``bodies``: how the logs' records are read where only their heads were."""
    base = run_id or (inputs[0].name if inputs else "run")
    manifests = manifests or {}
    described = (
        ", ".join(f"{label} ({len(idx)} traces)" for label, idx in groups)
        if manifests
        else jobs.describe([e.plog for e in read], groups)
    )
    warning = Issue(
        "logs",
        "mixed-jobs",
        f"the input holds logs of {len(groups)} unrelated jobs, ingested as {len(groups)} "
        f"separate runs: {described}",
        "warning",
    )
    read_paths = {shown(str(e.path)) for e in read}
    # errors of logs that were not read (or not finished) may belong to any of the jobs
    shared = [i for i in issues if i.source not in read_paths]
    stores = []
    for label, idx in groups:
        job = [read[i] for i in idx]
        own = {shown(str(e.path)) for e in job}
        man, found = manifests.get(label, ({}, []))
        job_issues = [warning, *shared, *(i for i in issues if i.source in own), *found]
        meta = _build_store(
            out / label,
            man,
            job,
            [],
            "",
            job_issues,
            inputs=inputs,
            run_id=f"{base}.{label}",
            params=params,
            bodies=bodies,
        )
        _declare_phases(out / label, meta, phases)
        stores.append((out / label, meta))
    write_json(out / jobs.JOBS_JSON, {**inputs_doc, "jobs": [label for label, _ in groups]})
    return stores


def _declare_phases(
    store: Path, meta: RunMeta, phases: dict[str, list[dict[str, str]]] | None
) -> None:
    """Keep the phases the user declared for these logs in the store's run.json."""
    if phases:
        meta.phases = phases
        meta.write(store / "run.json")


def _dlio_files(folder: Path) -> list[Path]:
    """What a DLIO output folder says of its run (its traces are found as logs)."""
    return sorted([*folder.glob("*.json"), *(folder / ".hydra").glob("*.yaml")])


def _dlio_groups(dirs: list[Path], read: list[LogEntry]) -> list[tuple[str, list[int]]]:
    """One job per DLIO output folder (its traces lie in it); logs in none of them, apart."""
    groups: list[tuple[str, list[int]]] = []
    taken: set[int] = set()
    for d in dirs:
        idx = [i for i, e in enumerate(read) if d.resolve() in e.path.resolve().parents]
        taken |= set(idx)
        groups.append((d.name, idx))
    rest = [i for i in range(len(read)) if i not in taken]
    return [*groups, *([("other", rest)] if rest else [])]


def _clear_outputs(out: Path) -> None:
    """Forget what an earlier ingest wrote to ``out``: its reuse record, and the per-job
    stores of a split one (they would be analysed as if they were current)."""
    (out / INPUTS_JSON).unlink(missing_ok=True)
    listing = out / jobs.JOBS_JSON
    try:
        old = json.loads(listing.read_text()).get("jobs") or []
    except (OSError, ValueError, AttributeError):
        old = []
    listing.unlink(missing_ok=True)
    # a single store written here before: gone when its logs turn out to be several jobs
    for name in (RUN_JSON, MERGED_DARSHAN, *(f"{t}.parquet" for t in STORE_TABLES)):
        (out / name).unlink(missing_ok=True)
    for label in old:
        if isinstance(label, str) and label and "/" not in label and label not in (".", ".."):
            shutil.rmtree(out / label, ignore_errors=True)


def _without_copies(entries: list[LogEntry], issues: list[Issue]) -> list[LogEntry]:
    """``entries`` less the logs that copy an earlier one (:func:`jobs.copies`), each named:
    counted twice, a copy doubles every figure of its ranks."""
    read = [e for e in entries if e.log is not None]
    dup = jobs.copies([e.plog for e in read])
    for i, j in dup.items():
        issues.append(
            Issue(
                str(read[i].path),
                "duplicate-log",
                f"the same log as {read[j].path} (same process, times and contents): read once",
                "warning",
            )
        )
    gone = {id(read[i]) for i in dup}
    return [e for e in entries if id(e) not in gone]


def _build_store(
    out: Path,
    man: dict[str, Any],
    entries: list[LogEntry],
    ranks: list[RankInfo],
    rank_source: str,
    issues: list[Issue],
    *,
    inputs: list[Path],
    run_id: str | None,
    params: dict | None,
    bodies: stream.Bodies | None = None,
) -> RunMeta:
    """Attribute ``entries`` (read or not) to ranks, put them on one clock, write the store.
    With ``bodies``, the logs read are heads (:mod:`iosweep.trace.ingest.stream`): their
    records are read as the store is written, and the run's metadata made after."""
    read = [e for e in entries if e.log is not None]
    issues.extend(attribute_logs(entries, ranks, rank_source))

    # one clock: the manifest's start time, else the earliest log start
    if isinstance(man.get("start_time"), (int, float)):
        clock_zero = float(man["start_time"])
    elif read:
        clock_zero = min(e.plog.start for e in read)
    else:
        clock_zero = 0.0

    # an MPI log holds its ranks itself; DXT records name each rank's host
    mpi_hosts = {id(e): mpi_hosts_of(e.plog) for e in read if e.plog.mpi}
    if not ranks:  # no manifest/rank files: the ranks are those the logs know
        ranks = ranks_from_logs(read, mpi_hosts)
    tracer = man.get("tracer")
    tracer_name = str(tracer.get("name", "") if isinstance(tracer, dict) else tracer or "")
    # manifests of other tools may name the tracer among the sweep point's parameters only
    tracer_name = tracer_name or str((man.get("params") or {}).get("tracer") or "")
    if tracer_name != "none" and (rank_source or man):
        issues.extend(missing_rank_issues(entries, read, ranks))
    issues.extend(duplicate_ranks(read))

    joint = None
    if bodies is not None:
        joint, processes = stream.place_streamed(read, clock_zero, issues, bodies)
        tables: dict[str, Parts] = {}
    else:
        tables, placed = place_all(read, clock_zero, mpi_hosts)
        processes = placed.copy
    steps = manifest_steps(man, clock_zero, issues)
    written: RunMeta | None = None

    def meta() -> RunMeta:  # after the tables: reading them may have found more issues
        nonlocal written
        written = _run_meta(
            man, inputs, run_id, params, tracer_name, clock_zero, ranks, processes(), issues
        )
        return written

    write_store(out, meta, {**tables, "steps": steps}, joint)
    assert written is not None, "write_store writes run.json last"
    return written


def _run_meta(
    man: dict[str, Any],
    inputs: list[Path],
    run_id: str | None,
    params: dict | None,
    tracer_name: str,
    clock_zero: float,
    ranks: list[RankInfo],
    processes: list[ProcessInfo],
    issues: list[Issue],
) -> RunMeta:
    """The store's run.json: the manifest's facts plus what ingesting found."""
    incomplete = any(i.severity == "error" for i in issues)
    status = str(man.get("status") or "ok")
    if incomplete and status == "ok":
        status = "partial"
    if not run_id:
        run_id = str(man.get("run_id") or (inputs[0].name if inputs else "run"))
    tracers = sorted({p.tracer for p in processes})
    start = man.get("start_time")
    end = man.get("end_time")
    return RunMeta(
        run_id=run_id,
        clock_zero=clock_zero,
        params={**(params or {}), **(man.get("params") or {})},
        tracer=tracer_name or "+".join(tracers),
        status=status,
        start=float(start) - clock_zero
        if isinstance(start, (int, float))
        else min((p.start for p in processes if p.start is not None), default=None),
        end=float(end) - clock_zero
        if isinstance(end, (int, float))
        else max((p.end for p in processes if p.end is not None), default=None),
        ranks=ranks,
        processes=processes,
        issues=issues,
        incomplete=incomplete,
        versions={str(k): str(v) for k, v in (man.get("versions") or {}).items()},
        command=[str(c) for c in man.get("command") or []],
        manifest=man,
    )
