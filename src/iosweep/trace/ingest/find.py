"""Finding a run's logs (the workflow's run layout or any directory of logs), its manifest and
its rank files."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iosweep.trace.logs import ProcessLog
from iosweep.trace.schema import (
    Issue,
    RankInfo,
)

DARSHAN_SUFFIXES = (".darshan",)


DFTRACER_SUFFIXES = (".pfw", ".pfw.gz")


# darshan-runtime writes <name>.darshan_partial and renames it when the log is complete
UNFINISHED_SUFFIX = ".darshan_partial"


_RANK_DIR = re.compile(r"^rank-(\d+)$")
# DLIO names each rank's DFTracer trace trace-<rank>-of-<ranks>.pfw (one file for the rank and
# its loader workers)
_DLIO_TRACE = re.compile(r"^trace-(\d+)-of-(\d+)\.pfw(\.gz)?$")


_RANK_FILE = re.compile(r"^rank-(\d+)\.json$")


@dataclass
class LogEntry:
    """One discovered log file and what became of it."""

    path: Path
    tracer: str  # darshan | dftracer
    dir_rank: int | None = None  # R when the log lies under a traces/rank-R/ directory
    log: ProcessLog | None = None
    # attribution
    rank: int = -1
    role: str = "unknown"
    host: str = ""
    attributed_by: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def plog(self) -> ProcessLog:
        """The log as read; only for entries that were read (``log`` is set)."""
        if self.log is None:
            raise RuntimeError(f"{self.path}: used before it was read")
        return self.log


def _tracer_of(path: Path) -> str | None:
    name = path.name
    if name.endswith(DARSHAN_SUFFIXES):
        return "darshan"
    if name.endswith(DFTRACER_SUFFIXES):
        return "dftracer"
    return None


def _dir_rank(path: Path, root: Path) -> int | None:
    """R if ``path`` lies under a ``rank-R`` directory below ``root`` (traces/rank-R/...), or
    is DLIO's trace of rank R (``trace-R-of-N.pfw``)."""
    m = _DLIO_TRACE.match(path.name)
    if m:
        return int(m.group(1))
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    for part in reversed(rel.parts[:-1]):
        m = _RANK_DIR.match(part)
        if m:
            return int(m.group(1))
    return None


def discover(inputs: list[Path]) -> tuple[list[LogEntry], list[Path]]:
    """Logs under ``inputs`` (files or directories, searched recursively), and unfinished ones.

    Files that are not logs (``*.dxt``, ``*.csv``, the store's parquet files ...) are ignored.
    """
    logs: dict[Path, LogEntry] = {}
    unfinished: list[Path] = []
    for root in inputs:
        root = Path(root)
        if root.is_file():
            candidates, base = [root], root.parent
        elif root.is_dir():
            candidates, base = sorted(p for p in root.rglob("*") if p.is_file()), root
        else:
            raise FileNotFoundError(f"{root}: no such file or directory")
        for p in candidates:
            key = p.resolve()
            if key in logs:
                continue
            tracer = _tracer_of(p)
            if tracer:
                logs[key] = LogEntry(path=p, tracer=tracer, dir_rank=_dir_rank(p, base))
            elif p.name.endswith(UNFINISHED_SUFFIX):
                unfinished.append(p)
    return list(logs.values()), unfinished


# files that are not logs, but say what a folder holds (a trace of another kind, a report)
PROFILER_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")


def _json_kind(path: Path) -> str:
    """What a JSON file is, by the keys its head holds."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", errors="replace") as f:
            head = f.read(1 << 16)
    except (OSError, EOFError, gzip.BadGzipFile):
        return "unreadable"
    if '"traceEvents"' in head:
        kineto = any(k in head for k in ('"schemaVersion"', '"deviceProperties"', "ProfilerStep#"))
        return "profiler" if kineto else "chrome"
    return "json"


# what each kind of file iosweep does not read is, said of one and of several
_KINDS = {
    "profiler": (
        "PyTorch profiler (Kineto) trace",
        "PyTorch profiler (Kineto) traces",
    ),
    "chrome": (
        "Chrome trace-event file of another tool",
        "Chrome trace-event files of another tool",
    ),
    "json": ("JSON file of no known format", "JSON files of no known format"),
    "unreadable": ("JSON file that cannot be read", "JSON files that cannot be read"),
}


def _kind_of(path: Path) -> str:
    name = path.name
    if name.endswith(PROFILER_SUFFIXES):
        return "profiler"
    if name.endswith((".json", ".json.gz")):
        return _json_kind(path)
    return "".join(path.suffixes[-2:]) if name.endswith(".gz") else path.suffix or "-"


def describe_unread(inputs: list[Path]) -> str:
    """What ``inputs`` hold where none of it is a log: '3 files, none a log iosweep reads
    (...): 2 PyTorch profiler (Kineto) traces, which iosweep does not read yet ...; 1 .txt'."""
    files = [p for root in inputs for p in ([root] if root.is_file() else sorted(root.rglob("*")))]
    files = [p for p in files if p.is_file()]
    if not files:
        return f"no file at all under {', '.join(map(str, inputs))}"
    kinds = Counter(_kind_of(p) for p in files)
    said = []
    for kind, n in sorted(kinds.items(), key=lambda x: (x[0] not in _KINDS, -x[1])):
        one, many = _KINDS.get(kind, (f"{kind} file", f"{kind} files"))
        said.append(f"{n} {one if n == 1 else many}")
        if kind == "profiler":
            said[-1] += (
                ", which iosweep does not read yet (trace the job with Darshan or DFTracer, or "
                "run it through iosweep as a workload)"
            )
    return (
        f"{len(files)} file{'s' if len(files) > 1 else ''}, none a log iosweep reads (Darshan "
        f"*.darshan, DFTracer *.pfw[.gz], a DLIO output folder): {'; '.join(said)}"
    )


def outside(entries: list[LogEntry], folders: list[Path]) -> list[LogEntry]:
    """``entries`` less the logs under one of ``folders`` (a store's own merged log, a part's
    folder: written by iosweep, not the run's)."""
    gone = [Path(p).resolve() for p in folders]
    return [e for e in entries if not any(g in e.path.resolve().parents for g in gone)]


def load_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: manifest not found") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: manifest is not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: manifest is not a JSON object")
    return data


def _rank_info(d: Any, source: str, issues: list[Issue]) -> RankInfo | None:
    try:
        info = RankInfo(
            rank=int(d["rank"]),
            local_rank=int(d.get("local_rank", -1)),
            size=int(d.get("size", -1)),
            pid=int(d["pid"]),
            host=str(d.get("host") or ""),
        )
    except (TypeError, KeyError, ValueError) as e:
        issues.append(
            Issue(source, "bad-rank-file", f"not a rank record ({type(e).__name__}: {e})")
        )
        return None
    if info.rank < 0 or info.pid <= 0:
        issues.append(Issue(source, "bad-rank-file", f"invalid rank {info.rank} or pid {info.pid}"))
        return None
    return info


def find_rank_files(inputs: list[Path]) -> list[Path]:
    """ranks/rank-R.json beside or above each input directory (run dir, or run/logs)."""
    found: dict[Path, Path] = {}
    for root in inputs:
        root = Path(root)
        d = root if root.is_dir() else root.parent
        for cand in (d / "ranks", d.parent / "ranks"):
            if cand.is_dir():
                for f in sorted(cand.iterdir()):
                    if _RANK_FILE.match(f.name):
                        found.setdefault(f.resolve(), f)
                break
    return list(found.values())


def collect_ranks(
    manifest: dict[str, Any], rank_files: list[Path], issues: list[Issue]
) -> tuple[list[RankInfo], str]:
    """Ranks from the manifest, completed by rank files; and where they came from."""
    ranks: dict[int, RankInfo] = {}
    source = ""
    for i, d in enumerate(manifest.get("ranks") or []):
        info = _rank_info(d, f"manifest ranks[{i}]", issues)
        if info:
            ranks.setdefault(info.rank, info)
            source = "manifest"
    for f in rank_files:
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            issues.append(Issue(str(f), "bad-rank-file", f"not readable JSON ({e})"))
            continue
        info = _rank_info(d, str(f), issues)
        if info is None:
            continue
        known = ranks.get(info.rank)
        if known and (known.pid, known.host) != (info.pid, info.host):
            issues.append(
                Issue(
                    str(f),
                    "bad-rank-file",
                    f"rank {info.rank} is pid {info.pid} on {info.host!r} here but pid "
                    f"{known.pid} on {known.host!r} in the {source or 'other rank files'}",
                )
            )
            continue
        ranks.setdefault(info.rank, info)
        source = source or "rank-file"
    return [ranks[r] for r in sorted(ranks)], source
