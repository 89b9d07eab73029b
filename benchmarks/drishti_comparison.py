"""Drishti beside iosweep on every Darshan log of ``shared/data/darshan-logs``.

For each log, Drishti 0.8 (``.venv-tools/bin/drishti --csv``, installed by tools/setup.sh)
lists the findings it triggers by code (S01 STDIO use, P05 small reads, M02 no collective
reads ...); iosweep ingests and analyses the same log. For each Drishti finding the table
says whether iosweep finds it too ("same", with iosweep's figure), reaches another outcome
on the same check and says why ("stated": the measured value under the threshold, the
floor, or the data it lacks), contradicts it ("differs"), or says nothing ("silent"). Drishti's crashes
are listed, and so is whether iosweep answered on that log.

Usage: python benchmarks/drishti_comparison.py [--shared DIR] [--only SUBSTRING ...] [--out FILE.md]
Each of iosweep's statements that rests on a counter is checked against the log's counters
as PyDarshan reads them (counter_check.py): the count checked and any found false.

Exit status 1 when iosweep fails on a log, a finding "differs" or is met with silence, or a
statement is found false against the counters.
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

from counter_check import Checked, check_statements

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
    # same: iosweep finds it too | stated: iosweep's check on it reached another outcome and
    # says why (the value and threshold, the floor, what is missing) | differs: iosweep's
    # figures contradict it | silent: nothing of iosweep's covers it (must never happen)
    state: str
    iosweep: str


def _check(*ids: str) -> Callable[[dict[str, Any]], tuple[str, str]]:
    """Drishti's finding against iosweep's checks ``ids``: same when one found it, else
    the checks' stated outcomes."""

    def judge(sm: dict[str, Any]) -> tuple[str, str]:
        got = [c for c in sm.get("checks", []) if c["id"] in ids]
        if not got:
            return "silent", f"no check {' / '.join(ids)} in iosweep's summary"
        hit = [c for c in got if c["outcome"] == "found"]
        if hit:
            return "same", "; ".join(f"{c['id']}: {c['reason']}" for c in hit)
        return "stated", "; ".join(f"{c['id']} {c['outcome']}: {c['reason']}" for c in got)

    return judge


def _intensive(what: str, op: str) -> Callable[[dict[str, Any]], tuple[str, str]]:
    """P01-P04: one direction above the other by > 10% of the total (Drishti's rule): a
    description, which the report's I/O layers table states."""

    def check(sm: dict[str, Any]) -> tuple[str, str]:
        # Drishti counts the POSIX layer only: iosweep's POSIX row of its I/O layers
        px = next((x for x in sm["layers"] if x["module"] == "POSIX"), None)
        if px is None:
            return "stated", "no POSIX layer on the analysed paths (the I/O layers table)"
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
            return "stated", f"{fact} on the analysed paths; Drishti also counts {left}"
        return "differs", fact

    return check


def _sequential(op: str) -> Callable[[dict[str, Any]], tuple[str, str]]:
    """P12/P14, mostly sequential: iosweep's random_access check passing says the same."""

    def check(sm: dict[str, Any]) -> tuple[str, str]:
        state, text = _check("random_access")(sm)
        # passed, or under the floor: not random, by Drishti's rule too (> 1000 and > 20%)
        if state == "stated" and text.startswith(("random_access passed", "random_access not-a")):
            return "same", text
        return ("stated" if state == "same" else state), text

    return check


def _collective_used(op: str) -> Callable[[dict[str, Any]], tuple[str, str]]:
    def check(sm: dict[str, Any]) -> tuple[str, str]:
        m = (sm.get("mpiio") or {}).get(op)
        if not m or not m["ops"]:
            return _check(f"mpiio_independent.{op}")(sm)
        fact = f"MPI-IO: {m['collective']:,} collective, {m['independent']:,} independent {op}s"
        return ("same" if m["collective"] else "differs"), fact

    return check


CHECKS: dict[str, Callable[[dict[str, Any]], tuple[str, str]]] = {
    "S01": _check("stdio_share"),
    "P01": _intensive("ops", "write"),
    "P02": _intensive("ops", "read"),
    "P03": _intensive("bytes", "write"),
    "P04": _intensive("bytes", "read"),
    "P05": _check("small_requests.read"),
    "P06": _check("small_requests.write"),
    "P07": _check("misaligned_requests.mem"),
    "P08": _check("misaligned_requests.file"),
    "P09": _check("redundant_reads"),
    "P10": _check("redundant_writes"),
    "P11": _check("random_access"),
    "P12": _sequential("read"),
    "P13": _check("random_access"),
    "P14": _sequential("write"),
    "P15": _check("small_requests.read"),
    "P16": _check("small_requests.write"),
    "P17": _check("metadata_heavy"),
    "P18": _check("shared_file_imbalance.read", "shared_file_imbalance.write"),
    "P19": _check("shared_file_imbalance.read", "shared_file_imbalance.write", "imbalance"),
    "P21": _check("imbalance", "shared_file_imbalance.write"),
    "P22": _check("imbalance", "shared_file_imbalance.read"),
    "M01": _check("mpiio_use"),
    "M02": _check("mpiio_independent.read"),
    "M03": _check("mpiio_independent.write"),
    "M04": _collective_used("read"),
    "M05": _collective_used("write"),
    "M06": _check("mpiio_nonblocking.read"),
    "M07": _check("mpiio_nonblocking.write"),
    # where the aggregators sit (intra- / inter-node) needs the cb_nodes hint and the
    # ranks' hosts; iosweep counts the aggregators and says whether they funnel the I/O
    "M08": _check("mpiio_aggregators"),
    "M09": _check("mpiio_aggregators"),
    "M10": _check("mpiio_aggregators"),
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
        store, _ = jobs[0]
        # a log with no process (no module data) is analysed too: its checks say why not
        return analyze_run(store, work / "out", AnalysisSettings()), ""
    except Exception as err:
        return None, f"FAILED: {type(err).__name__}: {err}"


def compare(log: Path) -> tuple[list[Row], str, str, list[Checked]]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        codes, crash = drishti(log, work)
        sm, why = iosweep(log, work)
    checked = check_statements(log, sm) if sm is not None else []
    rows = []
    for code in codes or []:
        if sm is None:
            rows.append(Row(log.name, code, "silent", f"iosweep has no analysis: {why}"))
            continue
        state, text = CHECKS[code](sm)
        rows.append(Row(log.name, code, state, text))
    drishti_note = f"Drishti crashed: {crash}" if codes is None else ""
    iosweep_note = why if sm is None else f"iosweep: {sm['analysis_status']}"
    return rows, drishti_note, iosweep_note, checked


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
    failed = differs = silent = 0
    counts: dict[str, int] = {}
    checked: list[tuple[str, Checked]] = []
    for log in logs:
        rows, dnote, inote, held = compare(log)
        checked += [(log.name, c) for c in held]
        name = f"{log.parent.name}/{log.name[:40]}"
        failed += inote.startswith("FAILED")
        if dnote or not rows:
            lines.append(f"| {name} | {dnote or 'no finding'} | {inote} | |")
        for r in rows:
            counts[r.state] = counts.get(r.state, 0) + 1
            differs += r.state == "differs"
            silent += r.state == "silent"
            text = r.iosweep.replace("|", "/")[:160]
            lines.append(f"| {name} | {r.code} {CODES[r.code]} | {text} | {r.state} |")
        print(f"{name}: {len(rows)} Drishti findings {dnote} [{inote}]", file=sys.stderr)
    false = [(name, c) for name, c in checked if not c.holds]
    lines += ["", "| log | iosweep's statement | PyDarshan's counters |", "|---|---|---|"]
    lines += [f"| {name[:40]} | {c.statement} | {c.why} |" for name, c in false]
    table = "\n".join(lines)
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    kinds = len({c.statement for _, c in checked})
    print(
        table + f"\n\n{len(logs)} logs; findings: {summary}; silent: {silent}; "
        f"iosweep failed on {failed}; statements checked against PyDarshan's counters: "
        f"{len(checked)} ({kinds} kinds), found false: {len(false)}"
    )
    if args.out:
        args.out.write_text(table + "\n")
    return int(bool(failed or differs or silent or false))


if __name__ == "__main__":
    raise SystemExit(main())
