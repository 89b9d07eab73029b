"""``iosweep ingest LOGDIR... -o STORE``: build a run's trace store from its Darshan/DFTracer logs."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from iosweep.analysis.settings import PHASE_HELP, parse_phases
from iosweep.memory import MemoryBudgetError

if TYPE_CHECKING:
    from iosweep.trace.schema import RunMeta


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "logdirs",
        nargs="+",
        type=Path,
        metavar="LOGDIR",
        help="directories (searched recursively) or files of Darshan logs (*.darshan) "
        "or DFTracer traces (*.pfw, *.pfw.gz); a workflow run directory works too",
    )
    p.add_argument("-o", "--out", type=Path, required=True, metavar="STORE", help="trace store")
    p.add_argument(
        "--manifest",
        type=Path,
        metavar="FILE",
        help="run manifest (ranks, start time, steps); default: manifest.json in a LOGDIR",
    )
    p.add_argument("--run-id", metavar="ID", help="run id (default: from the manifest)")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a sweep label for the run (repeatable), e.g. --param staging=node-local: places "
        "existing logs in the sweep; numbers are read as numbers",
    )
    p.add_argument(
        "--isolate",
        action="store_true",
        help="read each Darshan log in a child process (for logs from unknown sources)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes that read the logs (default: one per core, at most 8, when there "
        "are several logs and over 32 MiB of them: DFTracer traces, and Darshan logs of "
        "over 256 MiB, whose tables the readers spill to files)",
    )
    p.add_argument(
        "--memory-gb",
        type=float,
        metavar="G",
        help="memory the ingest may take (analysis.memory_gb; default: 90%% of the machine's, "
        "or of the cgroup's limit): fewer reader processes where the default count would not "
        "fit; refused with the figures, before anything is written, where one would not",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="rebuild the store even if it was built from the same, unchanged logs",
    )
    p.add_argument(
        "--merged-log",
        action="store_true",
        help="also write STORE/merged.darshan: the per-process Darshan logs as one N-rank job "
        "for Darshan's own tools (the same as `iosweep merge STORE` afterwards)",
    )
    p.add_argument(
        "--part",
        metavar="K/N",
        help="read only part K (from 1) of N of the logs, into the folder -o (not a store): one "
        "job a part, on any node (e.g. one `srun` each); the parts share the logs by size, "
        "found from the logs alone. Then --from-parts puts them together",
    )
    p.add_argument(
        "--from-parts",
        nargs="+",
        type=Path,
        metavar="PARTDIR",
        help="write the store -o from the folders of all N parts (--part K/N) of these logs, "
        "instead of reading the logs here: the same store. A log changed since its part read "
        "it, or read by no part, is an error naming it",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="list every issue")
    p.add_argument(
        "--phase",
        action="append",
        default=[],
        metavar="KIND:cat=RX[:name=RX]",
        help=PHASE_HELP + "; kept in the store for its analysis",
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = EPILOG


EPILOG = """\
traces iosweep did not run:
  DFTracer traces whose application marks its compute and its data loading get the verdict
  of iosweep's own runs (is the training waiting for its data). Recognised without options:
  the DFTracer docs' Profile("computation") and Profile("IO", ...).iter(loader), the
  categories of dftracer.python.ai (compute, dataloader, data, pipeline), DLIO's
  (ai_framework/*.compute, dlio_benchmark/*.iter) and iosweep's (compute, fetch).
  Other names: declare them, e.g.
    iosweep ingest traces/ -o store --phase compute:cat=model:name='^forward$' \\
        --phase fetch:cat=loader:name='next_batch'
  A DLIO output folder (summary.json, .hydra/, trace-R-of-N.pfw) is one run; DLIO's own AU
  is reported beside iosweep's. docs/analysis.md, "Phases", has the rules.
"""


def parse_params(items: list[str]) -> dict[str, object]:
    """``["staging=node-local", "loader_workers=8"]`` -> {"staging": "node-local", "loader_workers": 8}."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--param {item!r}: expected KEY=VALUE")
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def _ranks_text(ranks: list[int]) -> str:
    if not ranks:
        return "none"
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}..{ranks[-1]}"
    return ",".join(map(str, ranks))


def _stamp(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _readers_line(inputs_json: Path, reused: bool) -> str:
    try:
        doc = json.loads(inputs_json.read_text())
    except (OSError, ValueError):
        return "  logs: -"
    logs, n, parts = doc.get("logs"), doc.get("read_processes"), doc.get("parts")
    jobs = f" in {parts} parts" if parts else ""
    return (
        f"  logs: {logs}, read {'earlier ' if reused else ''}by {n} "
        f"process{'es' if n != 1 else ''}{jobs}"
    )


def parse_part(text: str) -> tuple[int, int]:
    """``"2/8"`` -> (1, 8): the part's index from 0, and the count."""
    k, sep, n = text.partition("/")
    try:
        index, count = int(k), int(n)
    except ValueError:
        index = count = 0
    if not sep or count < 1 or not 1 <= index <= count:
        raise ValueError(f"--part {text!r}: expected K/N with 1 <= K <= N, e.g. --part 1/4")
    return index - 1, count


def _run_part(args: argparse.Namespace) -> int:
    """``--part K/N``: read one part of the logs into the folder ``-o``."""
    from iosweep.trace.ingest.inparts import read_part

    try:
        index, count = parse_part(args.part)
        part = read_part(
            args.logdirs,
            args.out,
            index,
            count,
            isolate=args.isolate,
            workers=args.workers,
            memory_gb=args.memory_gb,
        )
    except (FileNotFoundError, ValueError, MemoryBudgetError) as e:
        print(f"iosweep ingest: {e}", file=sys.stderr)
        return 2
    errors = [i for r in part.logs for i in r.issues if i.severity == "error"]
    size = sum(r.size for r in part.logs)
    print(
        f"iosweep ingest: part {index + 1} of {count}: {len(part.logs)} log(s) "
        f"({size / 2**20:.1f} MiB) read by {part.readers} process"
        f"{'es' if part.readers != 1 else ''} into {args.out}; {len(errors)} could not be read"
    )
    shown = errors if args.verbose else errors[:10]
    for i in shown:
        print(f"    {i.severity} [{i.kind}] {i.source}: {i.message}")
    if len(errors) > len(shown):
        print(f"    ... {len(errors) - len(shown)} more (-v lists them)")
    return 0


def run(args: argparse.Namespace) -> int:
    from iosweep.trace.ingest import INPUTS_JSON, ingest_jobs
    from iosweep.trace.jobs import JOBS_JSON

    if args.part:
        if args.from_parts or args.merged_log:
            why = "--part reads a part only: no --from-parts, --merged-log"
            print(f"iosweep ingest: {why}", file=sys.stderr)
            return 2
        return _run_part(args)
    before = _stamp(args.out / INPUTS_JSON) or _stamp(args.out / JOBS_JSON)
    try:
        stores = ingest_jobs(
            args.logdirs,
            args.out,
            manifest=args.manifest,
            run_id=args.run_id,
            isolate=args.isolate,
            params=parse_params(args.param),
            reuse=not args.force,
            workers=args.workers,
            phases=parse_phases(args.phase) or None,
            from_parts=args.from_parts,
            memory_gb=args.memory_gb,
        )
    except (FileNotFoundError, ValueError, MemoryBudgetError) as e:
        print(f"iosweep ingest: {e}", file=sys.stderr)
        return 2
    listing = args.out / (INPUTS_JSON if len(stores) == 1 else JOBS_JSON)
    reused = before is not None and _stamp(listing) == before
    readers = _readers_line(listing, reused)
    if len(stores) > 1:
        print(
            f"iosweep ingest: the logs are {len(stores)} unrelated jobs: one store each under "
            f"{args.out} (`iosweep analyze {args.out}` compares them)\n{readers}"
        )
    if args.merged_log:
        from iosweep.trace.ingest import write_merged_darshan
        from iosweep.trace.schema import RunMeta
        from iosweep.trace.store import RUN_JSON

        for i, (path, _meta) in enumerate(stores):
            write_merged_darshan(path)
            stores[i] = (path, RunMeta.read(path / RUN_JSON))  # with the merge's warnings
    failed = 0
    for path, meta in stores:
        logs = len({p.source for p in meta.processes})
        line = readers if len(stores) == 1 else f"  logs: {logs}"
        failed += _print_store(path, meta, line, reused, args.verbose)
    return 1 if failed == len(stores) else 0


def _print_store(path: Path, meta: RunMeta, logs_line: str, reused: bool, verbose: bool) -> int:
    """What ingest made of one store; 1 when it holds no process (and should have)."""
    from iosweep.trace.ingest import MERGED_DARSHAN
    from iosweep.trace.store import open_store

    store = open_store(path)
    # one process may leave several traces (DFTracer 1.x: an app file and a POSIX file)
    procs = {
        (p.rank, p.host, p.pid, p.role) if p.pid >= 0 else (p.rank, p.source, k): p.role
        for k, p in enumerate(meta.processes)
    }
    roles = Counter(procs.values())
    files = len({p.source for p in meta.processes})
    ranks = sorted({p.rank for p in meta.processes if p.role == "rank" and p.rank >= 0})
    how = sorted({p.attributed_by for p in meta.processes if p.role == "rank"} - {""})
    hosts = sorted({p.host for p in meta.processes if p.host})
    if not meta.processes and meta.ranks:  # an untraced run: the ranks its records name
        ranks, how = [r.rank for r in meta.ranks], ["the run's records"]
        hosts = sorted({r.host for r in meta.ranks if r.host})
    sev = Counter(i.severity for i in meta.issues)
    out = [
        f"iosweep ingest: {'reused' if reused else 'wrote'} {path} "
        + ("(its logs are unchanged; --force rebuilds it) " if reused else "")
        + f"(run {meta.run_id}, status {meta.status}"
        + (", INCOMPLETE" if meta.incomplete else "")
        + ")",
        logs_line,
        f"  processes: {len(procs)} ("
        + ", ".join(f"{n} {r}" for r, n in sorted(roles.items()))
        + (f"; in {files} traces" if files > len(procs) else "")
        + f"), tracer {meta.tracer or '-'}",
        f"  ranks: {_ranks_text(ranks)} (from {', '.join(how) or '-'}); "
        f"hosts: {', '.join(hosts) or 'unknown'}",
        "  rows: "  # counted from the Parquet metadata: no table is read
        + ", ".join(
            f"{n} {store.table(n, columns=[]).num_rows}"
            for n in ("segments", "counters", "steps", "app_events")
        ),
        f"  issues: {sev.get('error', 0)} errors, {sev.get('warning', 0)} warnings",
    ]
    if meta.phases:
        out.insert(-1, f"  phases declared: {json.dumps(meta.phases)}")
    if (path / MERGED_DARSHAN).exists():
        out.insert(
            -1,
            f"  merged log: {path / MERGED_DARSHAN} (one {len(ranks)}-rank Darshan job for "
            "darshan-parser, PyDarshan, Drishti, DXT Explorer)",
        )
    shown = (
        meta.issues
        if verbose or not meta.processes
        else [i for i in meta.issues if i.severity == "error"]
    )
    by_kind = Counter(i.kind for i in meta.issues if i not in shown)
    for i in shown[:50]:
        out.append(f"    {i.severity} [{i.kind}] {i.source}: {i.message}")
    if len(shown) > 50:
        out.append(f"    ... {len(shown) - 50} more (see run.json)")
    if by_kind:
        out.append(
            "    also: "
            + ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items()))
            + " (-v lists them)"
        )
    print("\n".join(out))
    read_empty = [i for i in meta.issues if i.kind == "empty"]  # read, no I/O in them
    if not meta.processes and meta.tracer == "none":
        print("  untraced run (tracer none): no logs expected")
    elif not meta.processes and read_empty:
        n = len(read_empty)
        print(f"  no I/O recorded in the {n} log{'s' if n != 1 else ''} read (said above)")
    elif not meta.processes:
        print(f"iosweep ingest: {path}: no log could be ingested", file=sys.stderr)
        return 1
    return 0
