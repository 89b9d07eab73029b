"""Drishti beside iosweep on every Darshan log of ``shared/data/darshan-logs``.

For each log, Drishti 0.8 (``.venv-tools/bin/drishti --csv``, installed by tools/setup.sh)
lists the findings it triggers by code (S01 STDIO use, P05 small reads, M02 no collective
reads ...); iosweep ingests and analyses the same log. For each Drishti finding the table
says whether iosweep states the same fact ("same", with iosweep's figure), states the
opposite ("differs"), or does not state it ("not stated", with the reason). Drishti's crashes
are listed, and so is whether iosweep answered on that log.

Usage: python benchmarks/drishti_comparison.py [--shared DIR] [--only SUBSTRING ...] [--out FILE.md]
Exit status 1 when iosweep fails on a log or a finding "differs".
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iosweep.analysis import AnalysisSettings, analyze_run
from iosweep.trace.ingest import ingest_jobs

REPO = Path(__file__).resolve().parents[1]
DRISHTI = REPO / ".venv-tools" / "bin" / "drishti"

# Drishti 0.8's codes (drishti/includes/config.py) and what each says
CODES = {
    "S01": "STDIO moves more than 10% of the bytes",
    "P01": "write operation intensive",
    "P02": "read operation intensive",
    "P03": "write size intensive",
    "P04": "read size intensive",
    "P05": "many small reads (< 1 MiB)",
    "P06": "many small writes (< 1 MiB)",
    "P07": "misaligned memory requests",
    "P08": "misaligned file requests",
    "P09": "redundant reads",
    "P10": "redundant writes",
    "P11": "random reads",
    "P12": "mostly sequential reads",
    "P13": "random writes",
    "P14": "mostly sequential writes",
    "P15": "small reads on shared files",
    "P16": "small writes on shared files",
    "P17": "high metadata time",
    "P18": "shared-file size imbalance (stragglers)",
    "P19": "shared-file time imbalance (stragglers)",
    "P21": "write size imbalance across ranks",
    "P22": "read size imbalance across ranks",
    "M01": "no MPI-IO used",
    "M02": "no collective reads",
    "M03": "no collective writes",
    "M04": "collective reads used",
    "M05": "collective writes used",
    "M06": "blocking MPI-IO reads: non-blocking could help",
    "M07": "blocking MPI-IO writes: non-blocking could help",
    "M08": "intra-node aggregators",
    "M09": "inter-node aggregators",
    "M10": "one aggregator per node",
}


@dataclass
class Row:
    log: str
    code: str
    state: str  # same | explained (a stated difference of scope) | differs | not stated
    iosweep: str


def _insight(sm: dict[str, Any], id_: str, **numbers: Any) -> dict[str, Any] | None:
    for ins in sm["insights"]:
        if ins["id"] == id_ and all(ins["numbers"].get(k) == v for k, v in numbers.items()):
            return ins
    return None


def _said(ins: dict[str, Any] | None, missing: str) -> tuple[str, str]:
    return ("same", f"{ins['id']}: {ins['message']}") if ins else ("not stated", missing)


def _intensive(what: str, op: str) -> Callable[[dict[str, Any]], tuple[str, str]]:
    """P01-P04: one direction above the other by > 10% of the total (Drishti's rule)."""

    def check(sm: dict[str, Any]) -> tuple[str, str]:
        # Drishti counts the POSIX layer only: iosweep's POSIX row of its I/O layers
        px = next((x for x in sm["layers"] if x["module"] == "POSIX"), None)
        if px is None:
            return "not stated", "no POSIX layer in iosweep's summary"
        r, w = (
            (px["reads"], px["writes"])
            if what == "ops"
            else (px["bytes_read"], px["bytes_written"])
        )
        mine, other = (r, w) if op == "read" else (w, r)
        fact = f"POSIX layer {what}: {r:,} read, {w:,} written"
        if mine > other and (mine - other) / max(r + w, 1) > 0.1:
            return "same", fact
        left = sm["trace"]["excluded_paths"]
        if left:  # Drishti counts every record; iosweep's layers only the analysed paths
            return "explained", f"{fact} on the analysed paths; Drishti also counts {left}"
        return "differs", fact

    return check


def _stdio(sm: dict[str, Any]) -> tuple[str, str]:
    layers = {x["module"]: x for x in sm["layers"]}
    total = sum(x["bytes_read"] + x["bytes_written"] for x in layers.values() if x["analysed"])
    st = layers.get("STDIO")
    if not st or not total:
        return "not stated", "no STDIO layer in iosweep's summary"
    share = (st["bytes_read"] + st["bytes_written"]) / total
    fact = f"I/O layers: STDIO {share:.0%} of the analysed bytes"
    return ("same" if share > 0.1 else "differs"), fact


def _aligned(sm: dict[str, Any], where: str) -> tuple[str, str]:
    ins = _insight(sm, "misaligned_requests", where=where)
    if ins:
        return _said(ins, "")
    a = sm.get("alignment")
    if not a:
        return "not stated", "no POSIX counters"
    return "not stated", (
        f"{a[where + '_not_aligned']:,} of {a['ops']:,} POSIX requests ({a[where + '_share']:.0%}) "
        f"misaligned: under misaligned_min_count ({sm['settings']['misaligned_min_count']})"
    )


def _blocking(sm: dict[str, Any], op: str) -> tuple[str, str]:
    m = (sm.get("mpiio") or {}).get(op)
    if not m or not m["ops"]:
        return "not stated", f"no MPI-IO {op}s in iosweep's summary"
    fact = f"MPI-IO paragraph: {m['nonblocking']:,} non-blocking of {m['ops']:,} {op}s"
    return ("same" if m["nonblocking"] == 0 else "differs"), fact


def _imbalance(sm: dict[str, Any]) -> tuple[str, str]:
    ins = _insight(sm, "imbalance")
    if ins:
        return _said(ins, "")
    imb, s = sm["imbalance"], sm["settings"]
    t, b = imb.get("io_time"), imb.get("bytes")
    return "not stated", (
        f"below iosweep's noise floor: spread of I/O time {t or 0:.0%} with the slowest rank at "
        f"{imb.get('io_time_max') or 0:.3f} s (floor {s['imbalance_min_io_time_s']} s), "
        f"of bytes {b or 0:.0%}"
    )


def _small(op: str) -> Callable[[dict[str, Any]], tuple[str, str]]:
    def check(sm: dict[str, Any]) -> tuple[str, str]:
        ins = _insight(sm, "small_requests", op=op)
        if ins:
            return _said(ins, "")
        d = sm["sizes"]["by_class"].get("all", {}).get(op) or {}
        return (
            "not stated",
            f"{d.get('small', 0):,} of {d.get('ops', 0):,} {op}s small: "
            "under the 1000-request floor or from counter bins that reach 1 MiB",
        )

    return check


def _spatial(sm: dict[str, Any], op: str, random: bool) -> tuple[str, str]:
    """P11-P14 from Darshan's counters as iosweep states them (Drishti's: backwards calls
    above 20% and 1000 are random, else mostly sequential)."""
    p = (sm["spatial"].get("counters") or {}).get(op)
    if not p or not p["ops"]:
        left = sm["trace"]["excluded_paths"]
        if left:  # Drishti's figure is of the excluded paths' calls
            return "explained", f"no POSIX {op}s on the analysed paths; Drishti counts {left}"
        return "not stated", "no POSIX counters of this direction"
    fact = (
        f"spatial.counters: {p['consecutive']:,} consecutive, {p['sequential']:,} further on, "
        f"{p['random']:,} backwards of {p['ops']:,} {op}s"
    )
    is_random = p["random"] / p["ops"] > 0.2 and p["random"] > 1000
    return ("same" if is_random == random else "differs"), fact


def _mpiio_collective(op: str, used: bool) -> Callable[[dict[str, Any]], tuple[str, str]]:
    def check(sm: dict[str, Any]) -> tuple[str, str]:
        m = (sm.get("mpiio") or {}).get(op)
        if not m or not m["ops"]:
            return "not stated", "no MPI-IO " + op + "s in iosweep's summary"
        fact = f"MPI-IO: {m['collective']:,} collective, {m['independent']:,} independent {op}s"
        if used:
            return ("same" if m["collective"] else "differs"), fact
        ins = _insight(sm, "mpiio_independent", op=op)
        return ("same", f"{ins['id']}: {ins['message']}") if ins else ("differs", fact)

    return check


NOT_READ = "not stated"
CHECKS: dict[str, Callable[[dict[str, Any]], tuple[str, str]]] = {
    "S01": _stdio,
    "P01": _intensive("ops", "write"),
    "P02": _intensive("ops", "read"),
    "P03": _intensive("bytes", "write"),
    "P04": _intensive("bytes", "read"),
    "P05": _small("read"),
    "P06": _small("write"),
    "P07": lambda sm: _aligned(sm, "mem"),
    "P08": lambda sm: _aligned(sm, "file"),
    "P09": lambda sm: _said(_insight(sm, "redundant_reads"), "below redundant_read_min_bytes"),
    "P10": lambda sm: (NOT_READ, "iosweep has no rule on rewritten bytes"),
    "P11": lambda sm: _spatial(sm, "read", True),
    "P12": lambda sm: _spatial(sm, "read", False),
    "P13": lambda sm: _spatial(sm, "write", True),
    "P14": lambda sm: _spatial(sm, "write", False),
    "P15": _small("read"),
    "P16": _small("write"),
    "P17": lambda sm: _said(_insight(sm, "metadata_heavy"), "metadata_heavy did not fire"),
    "P18": lambda sm: _imbalance(sm),
    "P19": lambda sm: _imbalance(sm),
    "P21": lambda sm: _imbalance(sm),
    "P22": lambda sm: _imbalance(sm),
    "M01": lambda sm: (
        NOT_READ,
        "by design: iosweep does not tell a non-MPI process (or an MPI job) to adopt MPI-IO",
    ),
    "M02": _mpiio_collective("read", False),
    "M03": _mpiio_collective("write", False),
    "M04": _mpiio_collective("read", True),
    "M05": _mpiio_collective("write", True),
    "M06": lambda sm: _blocking(sm, "read"),
    "M07": lambda sm: _blocking(sm, "write"),
    "M08": lambda sm: (NOT_READ, "iosweep does not read the cb_nodes hint"),
    "M09": lambda sm: (NOT_READ, "iosweep does not read the cb_nodes hint"),
    "M10": lambda sm: (NOT_READ, "iosweep does not read the cb_nodes hint"),
}


def drishti(log: Path, work: Path) -> tuple[list[str] | None, str]:
    """Drishti's triggered codes for ``log`` (None when it crashed, with the reason)."""
    res = subprocess.run(
        [str(DRISHTI), "--csv", "--export_dir", str(work), str(log)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "120"},
    )
    table = work / (log.name.removesuffix(".darshan") + ".csv")
    if res.returncode != 0 or not table.exists():
        tail = (res.stderr or res.stdout).strip().splitlines()
        return None, tail[-1] if tail else f"exit {res.returncode}"
    with table.open() as f:
        (row,) = list(csv.DictReader(f))
    return [c for c, v in row.items() if c != "JOB" and v == "True"], ""


def iosweep(log: Path, work: Path) -> tuple[dict[str, Any] | None, str]:
    try:
        jobs = ingest_jobs([log], work / "store")
        (store, meta) = jobs[0]
        if not meta.processes:
            return None, "; ".join(i.message for i in meta.issues) or "no processes"
        return analyze_run(store, work / "out", AnalysisSettings()), ""
    except Exception as err:
        return None, f"FAILED: {type(err).__name__}: {err}"


def compare(log: Path) -> tuple[list[Row], str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        codes, crash = drishti(log, work)
        sm, why = iosweep(log, work)
    rows = []
    for code in codes or []:
        if sm is None:
            rows.append(Row(log.name, code, "not stated", f"iosweep has no analysis: {why}"))
            continue
        state, text = CHECKS[code](sm)
        rows.append(Row(log.name, code, state, text))
    drishti_note = f"Drishti crashed: {crash}" if codes is None else ""
    iosweep_note = why if sm is None else f"iosweep: {sm['analysis_status']}"
    return rows, drishti_note, iosweep_note


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        help="only logs whose path contains this (repeatable)",
    )
    p.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    args = p.parse_args(argv)
    if not DRISHTI.exists():
        print(f"{DRISHTI} not found: run tools/setup.sh", file=sys.stderr)
        return 2
    logs = sorted((args.shared / "data" / "darshan-logs").rglob("*.darshan"))
    logs = [g for g in logs if not args.only or any(o in str(g) for o in args.only)]
    lines = ["| log | Drishti | iosweep | agrees |", "|---|---|---|---|"]
    failed = differs = 0
    counts: dict[str, int] = {}
    for log in logs:
        rows, dnote, inote = compare(log)
        name = f"{log.parent.name}/{log.name[:40]}"
        failed += inote.startswith("FAILED")
        if dnote or not rows:
            lines.append(f"| {name} | {dnote or 'no finding'} | {inote} | |")
        for r in rows:
            counts[r.state] = counts.get(r.state, 0) + 1
            differs += r.state == "differs"
            text = r.iosweep.replace("|", "/")[:160]
            lines.append(f"| {name} | {r.code} {CODES[r.code]} | {text} | {r.state} |")
        print(f"{name}: {len(rows)} Drishti findings {dnote} [{inote}]", file=sys.stderr)
    table = "\n".join(lines)
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(table + f"\n\n{len(logs)} logs; findings: {summary}; iosweep failed on {failed}")
    if args.out:
        args.out.write_text(table + "\n")
    return int(bool(failed or differs))


if __name__ == "__main__":
    raise SystemExit(main())
