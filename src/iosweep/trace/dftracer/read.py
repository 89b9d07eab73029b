"""Read one DFTracer trace (``.pfw`` or ``.pfw.gz``) into a :class:`~iosweep.trace.logs.ProcessLog`.

A DFTracer trace is a stream of JSON objects, one per line (older versions open it with a
``[`` line and end lines with commas). ``.pfw.gz`` is gzip, possibly several members back to
back (one per buffer flush). Three kinds of lines matter here:

* metadata records (``ph`` 4 or ``"M"``): ``FH`` maps a file hash to its path, ``HH`` a host
  hash to the host name, ``SH`` a string hash to a string (command line, executable),
  ``PR``/``rank`` an MPI rank, ``CM``/``time_metric`` the time unit;
* complete events (``ph`` 1 or ``"X"``): ``ts``/``dur`` in the time unit (microseconds since the
  Unix epoch by default, from ``gettimeofday``), ``args`` with ``fhash``, ``hhash``, ``ret``,
  ``count``, ``offset``, ``whence``, ``flags``, ``size`` ...;
* DFTracer's own ``start``/``end`` events (cat ``dftracer``): command, ppid, version, and in
  ``end`` the number of events the tracer logged.

DFTracer does not log file descriptors, only the file hash of the descriptor, so the file
position is rebuilt per (pid, POSIX-or-STDIO, file); see ``docs/dftracer.md``.

Decoding (gunzip, lines, bulk JSON parse) is in :mod:`.decode`, the position model in
:mod:`.positions`; this module turns the normalised table into a :class:`ProcessLog`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.columns import arrow_codes, codes, distinct, ints_valid
from iosweep.files import shown
from iosweep.trace.dftracer.decode import (
    PH_AGGREGATED,
    PH_COMPLETE,
    PH_METADATA,
    PH_UNKNOWN,
    Lines,
    StreamProblem,
    as_int,
    gunzip,
    parse_lines,
    split_lines,
)
from iosweep.trace.dftracer.files import FilePaths, hash_ids
from iosweep.trace.dftracer.plausible import negative_durations, run_span, without_repeats
from iosweep.trace.dftracer.positions import (
    CAT_CODE,
    MODULE_OPS,
    O_APPEND,
    Kind,
    bytes_moved,
    position_inputs,
    positions,
)
from iosweep.trace.logs import LogError, ProcessLog
from iosweep.trace.schema import Issue, conform

TRACER = "dftracer"
#: ProcessLog.incomplete entry for a trace that lost events (cut, damaged or unfinished).
INCOMPLETE_TRACE = "trace"

_TIME_SCALE = {"US": 1e-6, "NS": 1e-9, "MS": 1e-3, "SEC": 1.0, "S": 1.0}
_INT_ARGS = ("ret", "count", "size", "offset", "whence", "flags", "ret_len", "str_len")


# ------------------------------------------------------------------------------------------------
# public API


def read_dftracer_trace(path: Path) -> ProcessLog:
    """Decode one DFTracer trace file.

    Returns a :class:`ProcessLog` whose ``segments`` hold the POSIX/STDIO read/write calls and
    whose ``app_events`` hold every other timed event (POSIX/STDIO metadata calls, application
    annotations). Times are seconds from ``ProcessLog.start`` (epoch seconds of the earliest
    event); ``rank`` is -1 unless the trace itself records an MPI rank.

    Raises :class:`LogError` when nothing usable can be read (kind ``unreadable``, ``empty``,
    ``corrupt`` or ``truncated``). A file that is readable in part yields the events before the
    damage, with an :class:`Issue` in ``issues`` and ``"trace"`` in ``incomplete``.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise LogError(path, "unreadable", f"cannot read DFTracer trace: {e.strerror or e}") from e
    if not raw:
        raise LogError(path, "empty", "DFTracer trace is empty (0 bytes): nothing was flushed")

    problems: list[StreamProblem] = []
    warnings: list[Issue] = []
    if raw[:2] == b"\x1f\x8b":
        text, problem, note = gunzip(raw)
        if note:
            warnings.append(Issue(str(path), "trailing-bytes", note, "warning"))
        if problem is not None:
            if not text or text.isspace():
                raise LogError(path, problem.kind, problem.message + "; no event could be read")
            problems.append(problem)
    elif path.name.endswith(".gz"):
        raise LogError(
            path, "corrupt", f"not a gzip file: starts with {raw[:8]!r}, not the gzip magic 1f 8b"
        )
    else:
        text = raw
    if not text or text.isspace():
        raise LogError(path, "empty", "DFTracer trace holds no data (only whitespace)")

    lines, cut_tail = split_lines(text)
    if cut_tail is not None and not problems:
        problems.append(
            StreamProblem(
                "truncated",
                f"the last line ({cut_tail[0]}) ends mid-event: the file was cut while written",
            )
        )
    norm, bad = parse_lines(lines)
    return _build(path, norm, lines, bad, problems, warnings)


# ------------------------------------------------------------------------------------------------
# normalised table -> ProcessLog


def _dict_array(codes: np.ndarray, values: list[str | None] | pa.Array) -> pa.DictionaryArray:
    """Dictionary column from codes into ``values``; code -1 or a None value gives null."""
    values = values if isinstance(values, pa.Array) else pa.array(values, type=pa.string())
    known = pc.is_valid(values).to_numpy(zero_copy_only=False)
    dictionary = pc.fill_null(values.cast(pa.string()), "")
    ok = np.append(known, False)[codes]  # code -1 reads the trailing False
    indices = pa.array(codes, type=pa.int32(), mask=~ok)
    return pa.DictionaryArray.from_arrays(indices, dictionary)


def _unhashed(path: Path, norm: pa.Table) -> pa.Table:
    """DFTracer 1.x names a call's file (``fname``) and host (``hostname``) in its args
    instead of hashing them: the path and host stand in for their hashes (and are their own
    metadata records, :func:`_metadata`). Under DLIO 2.0.0 (pydftracer 1.0.x) it also writes
    as ``pid`` the rank DLIO gives it (``trace-R-of-N.pfw``, pid R) for every process of the
    rank: there the thread id stands in for the process (each of DLIO's forked loader workers
    has one thread, whose id is its pid). Elsewhere (Stormer's traces: pid 1064335 in both
    the app file and the POSIX file of one rank) the pid is the process's own, and the
    loader workers it forked keep it: swapping would split one rank's files apart."""
    cols = {n: norm.column(n) for n in norm.column_names}
    named = {
        hashed: cols[name].null_count < len(norm) and cols[hashed].null_count == len(norm)
        for hashed, name in (("a_fhash", "a_fname"), ("a_hhash", "a_hostname"))
    }
    if not any(named.values()):
        return norm  # DFTracer's own format: hashes and real pids
    # (an app-annotation file of 1.x names its host but no file)
    for hashed, name in (("a_fhash", "a_fname"), ("a_hhash", "a_hostname")):
        if named[hashed]:
            cols[hashed] = pc.coalesce(cols[hashed], cols[name])
    if named["a_fhash"] and _pid_is_dlio_rank(path, cols["pid"]):
        cols["pid"] = pc.coalesce(cols["tid"], cols["pid"])
    return pa.table(cols, schema=norm.schema)


_DLIO_NAME = re.compile(r"^trace-(\d+)-of-\d+\.pfw")


def _pid_is_dlio_rank(path: Path, pid: pa.ChunkedArray) -> bool:
    """Whether every event's pid is the rank in DLIO's name of the trace."""
    m = _DLIO_NAME.match(path.name)
    if m is None:
        return False
    known = pc.unique(pc.drop_null(pid)).to_pylist()
    return known == [int(m.group(1))]


def _reparse(lines: Lines, wanted: np.ndarray) -> list[dict]:
    """Full JSON of a few rows (start/end/fopen), by line number: fields the bulk parse skips."""
    out = []
    for i in np.searchsorted(lines.numbers, wanted).tolist():
        try:
            obj = json.loads(lines.get(i))
        except (ValueError, IndexError):
            obj = {}
        out.append(obj if isinstance(obj, dict) else {})
    return out


def _by_start(t: pa.Table) -> pa.Table:
    """Rows in start-time order (the file holds them in completion order)."""
    start = t.column("start").to_numpy()
    if len(start) < 2 or bool((start[1:] >= start[:-1]).all()):
        return t
    return t.take(pa.array(np.argsort(start, kind="stable")))


@dataclass
class _Events:
    """The normalised table's columns as numpy arrays, and what every later step reuses."""

    src: str
    lines: Lines
    norm: pa.Table
    ph: np.ndarray
    ts: np.ndarray
    name_c: np.ndarray
    names: list
    cat_c: np.ndarray
    cats: list
    pid: np.ndarray
    pid_ok: np.ndarray
    line: np.ndarray
    timed: np.ndarray  # events with a name and a time (not metadata records)
    is_meta: np.ndarray
    cat_is_tracer: np.ndarray  # DFTracer's own events (cat "dftracer")
    hh_c: np.ndarray  # host-hash code per event
    hh_vals: list  # the host hashes
    warnings: list[Issue] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ph)


@dataclass
class _Meta:
    """What the metadata records say: hash -> path / host / string, ranks, the time unit."""

    files: FilePaths
    hosts: dict[str, str]
    strings: dict[str, str]
    rank_of_pid: dict[int, int]
    time_metric: str
    scale: float


def _build(
    path: Path,
    norm: pa.Table,
    lines: Lines,
    bad: list[tuple[int, str, bytes]],
    problems: list[StreamProblem],
    warnings: list[Issue],
) -> ProcessLog:
    issues, lost = _damage(path, norm, lines, bad, problems)
    norm = _unhashed(path, norm)
    norm, repeats = without_repeats(path, norm)
    ev = _events(path, norm, lines, warnings)
    meta = _metadata(ev)
    start_rows, end_rows, start_args, end_args = _tracer_events(ev)
    dur, _ = ints_valid(norm.column("dur"))
    negative = negative_durations(ev.src, ev.timed, dur, ev.line, ev.names, ev.name_c)
    t_first = int(ev.ts[ev.timed].min())
    t_last = int((ev.ts + np.maximum(dur, 0))[ev.timed].max())
    epoch_start = _check_epoch(ev, t_first, meta)
    rel_start = (ev.ts - t_first) * meta.scale
    # a negative duration is no end: the call's end (and its time) is unknown
    rel_end = np.where(negative.rows, np.nan, rel_start + dur * meta.scale)
    proc = _process(ev, meta, start_rows, start_args)
    lost |= _loss(ev, issues, problems, lost, start_rows, end_rows, end_args)
    span = run_span(ev.src, t_first, t_last, meta.scale, meta.time_metric)
    issues += [*repeats, *(i for i in (negative.issue, span) if i is not None)]
    copies = any(i.kind == "corrupt" for i in repeats)
    lost |= copies or negative.issue is not None
    io = _io_calls(ev)
    io["path_at"] = meta.files.found(io["fh_vals"])  # where each file hash's path is
    tables = _tables(path, ev, meta, io, rel_start, rel_end)
    _io_warnings(ev, io)
    pids = np.unique(ev.pid[ev.timed & ev.pid_ok & ~ev.cat_is_tracer])
    return ProcessLog(
        source=path,
        tracer=TRACER,
        pid=proc["pid"],
        exe=proc["exe"],
        start=epoch_start,
        end=t_last * meta.scale,
        segments=tables["segments"],
        host=proc["host"],
        nprocs=max(1, len(set(pids.tolist()) | {proc["pid"]})),
        # per-process trace: never the Darshan "one log, ranks 0..n-1" sense of mpi; a PR rank
        # record only fills the rank column
        mpi=False,
        version=proc["version"],
        counters=None,
        app_events=tables["app_events"],
        incomplete=[INCOMPLETE_TRACE] if lost else [],
        issues=issues + ev.warnings,
        ppid=proc["ppid"],
    )


def _damage(
    path: Path,
    norm: pa.Table,
    lines: Lines,
    bad: list[tuple[int, str, bytes]],
    problems: list[StreamProblem],
) -> tuple[list[Issue], bool]:
    """Errors for a damaged stream or bad lines; LogError when no event survived."""
    src, n_lines = str(path), len(lines)
    issues = [Issue(src, p.kind, p.message, "error") for p in problems]
    if bad:
        no, why, text = bad[0]
        issues.append(
            Issue(
                src,
                "corrupt",
                f"{len(bad)} of {n_lines} lines are not trace events and were skipped "
                f"(first: line {no}, {why}: {text!r})",
                "error",
            )
        )
    if norm.num_rows == 0 and problems:
        raise LogError(path, problems[0].kind, problems[0].message + "; no whole event before it")
    if norm.num_rows == 0:
        raise LogError(
            path,
            "corrupt",
            f"not a DFTracer trace: none of its {n_lines} lines is a JSON event"
            + (f" (line {bad[0][0]}: {bad[0][1]}: {bad[0][2]!r})" if bad else ""),
        )
    return issues, bool(issues)


def _events(path: Path, norm: pa.Table, lines: Lines, warnings: list[Issue]) -> _Events:
    """The columns every step uses; LogError when no line is a timed trace event."""
    ph = norm.column("ph").to_numpy(zero_copy_only=False)
    ts, ts_ok = ints_valid(norm.column("ts"))
    name_c, names = codes(norm.column("name"))
    is_meta = ph == PH_METADATA
    timed = ~is_meta & ts_ok & (name_c >= 0)
    if not timed.any():
        if (is_meta & (name_c >= 0)).any():
            raise LogError(
                path, "empty", "DFTracer trace holds metadata records but no timed event"
            )
        raise LogError(
            path, "corrupt", "not a DFTracer trace: no line has the name/ts/ph of a trace event"
        )
    src = str(path)
    untimed = int((~is_meta & ~timed).sum())
    if untimed:
        warnings.append(
            Issue(src, "corrupt", f"{untimed} events without name or ts were skipped", "warning")
        )
    cat_c, cats = codes(norm.column("cat"))
    pid, pid_ok = ints_valid(norm.column("pid"))
    hh_c, hh_vals = codes(norm.column("a_hhash"))
    return _Events(
        src=src,
        lines=lines,
        norm=norm,
        ph=ph,
        ts=ts,
        name_c=name_c,
        names=names,
        cat_c=cat_c,
        cats=cats,
        pid=pid,
        pid_ok=pid_ok,
        line=norm.column("line").to_numpy(),
        timed=timed,
        is_meta=is_meta,
        cat_is_tracer=np.array([c == TRACER for c in cats] + [False])[cat_c],
        hh_c=hh_c,
        hh_vals=hh_vals,
        warnings=warnings,
    )


def _metadata(ev: _Events) -> _Meta:
    """Metadata records: hash -> path / host / string, rank of a pid, time unit."""
    rows = ev.norm.filter(pa.array(ev.is_meta)).select(["name", "pid", "a_name", "a_value"])
    # FH records (one a file: most of them) stay Arrow columns; the few others, Python
    is_fh = pc.fill_null(
        pc.and_(pc.equal(rows.column("name"), "FH"), pc.not_equal(rows.column("a_value"), "")),
        False,
    )
    named = pc.unique(ev.norm.column("a_fname").drop_null())  # pydftracer 1.0.x: paths
    m = _Meta(FilePaths.of(rows.filter(is_fh), named), {}, {}, {}, "US", 1e-6)
    rows = rows.filter(pc.invert(is_fh))
    for rec, pid_m, key, value in zip(
        *(rows.column(c).to_pylist() for c in ("name", "pid", "a_name", "a_value")),
        strict=True,
    ):
        if rec == "HH" and value:
            m.hosts[value] = key
        elif rec == "SH" and value:
            m.strings[value] = key
        elif rec == "CM" and key == "time_metric" and value:
            m.time_metric = value.upper()
        elif rec == "PR" and key == "rank" and pid_m is not None:
            r = as_int(value)
            if r is not None:
                m.rank_of_pid[pid_m] = r
    for v in pc.unique(ev.norm.column("a_hostname").drop_null()).to_pylist():  # pydftracer 1.0.x
        m.hosts.setdefault(v, v)
    scale = _TIME_SCALE.get(m.time_metric)
    if scale is None:
        ev.warnings.append(
            Issue(
                ev.src,
                "bad-time-unit",
                f"unknown time_metric {m.time_metric!r}; read as µs",
                "warning",
            )
        )
        scale = 1e-6
    m.scale = scale
    return m


def _tracer_events(ev: _Events) -> tuple[np.ndarray, np.ndarray, list[dict], list[dict]]:
    """DFTracer's own start/end events: (start rows, end rows, their args)."""
    name_lookup = {v: i for i, v in enumerate(ev.names)}
    is_tr = ev.timed & ev.cat_is_tracer
    start_rows = np.flatnonzero(is_tr & (ev.name_c == name_lookup.get("start", -2)))
    end_rows = np.flatnonzero(is_tr & (ev.name_c == name_lookup.get("end", -2)))
    start_args = [o.get("args") or {} for o in _reparse(ev.lines, ev.line[start_rows])]
    end_args = [o.get("args") or {} for o in _reparse(ev.lines, ev.line[end_rows])]
    return start_rows, end_rows, start_args, end_args


def _check_epoch(ev: _Events, t_first: int, meta: _Meta) -> float:
    """The first event's Unix time; a warning when it cannot be one."""
    epoch_start = t_first * meta.scale
    if not (946684800.0 <= epoch_start <= 4102444800.0):  # 2000-01-01 .. 2100-01-01
        ev.warnings.append(
            Issue(
                ev.src,
                "bad-timestamps",
                f"first event time {t_first} ({meta.time_metric}) is not a Unix epoch time "
                "between 2000 and 2100: this trace cannot be put on the run's clock",
                "warning",
            )
        )
    return epoch_start


def _process(
    ev: _Events, meta: _Meta, start_rows: np.ndarray, start_args: list[dict]
) -> dict[str, Any]:
    """The traced process: pid, host, command, parent pid, DFTracer version."""
    if len(start_rows):
        main_pid = int(ev.pid[start_rows[0]])
    else:
        vals, counts = np.unique(ev.pid[ev.timed & ev.pid_ok], return_counts=True)
        main_pid = int(vals[np.argmax(counts)]) if len(vals) else -1
    hh_c = ev.hh_c
    host_vals = [meta.hosts.get(h) if h else None for h in ev.hh_vals]
    host: str | None = None
    if len(start_rows) and hh_c[start_rows[0]] >= 0:
        host = host_vals[hh_c[start_rows[0]]]
    if host is None:
        known = [h for h in host_vals if h]
        host = known[0] if known else None
    sa = start_args[0] if start_args else {}
    cmd = meta.strings.get(str(sa.get("cmd_hash")), "") if sa else ""
    exe = cmd.replace(";", " ") if cmd else meta.strings.get(str(sa.get("exec_hash")), "")
    return {
        "pid": main_pid,
        "host": host,
        "exe": exe,
        "ppid": as_int(sa.get("ppid")) if sa else None,
        "version": "" if sa.get("version") is None else str(sa.get("version")),
    }


def _loss(
    ev: _Events,
    issues: list[Issue],
    problems: list[StreamProblem],
    lost: bool,
    start_rows: np.ndarray,
    end_rows: np.ndarray,
    end_args: list[dict],
) -> bool:
    """Errors for an unfinished trace or one that lost events; True if events were lost."""
    if start_rows.size and not end_rows.size and not problems:
        issues.append(
            Issue(
                ev.src,
                "truncated",
                "no 'end' event: the process stopped before DFTracer finalised the trace "
                "(killed, crashed or still running); events after its last flush are lost",
                "error",
            )
        )
        return True
    if end_args and not lost:
        # DFTracer numbers the events it logs (counter series records carry no id)
        expected = as_int(end_args[-1].get("num_events"))
        has_id = pc.is_valid(ev.norm.column("id")).to_numpy()
        found = int((ev.timed & has_id).sum()) - len(end_rows)
        if (
            expected is not None
            and found < expected
            and _app_takeover(ev, has_id, expected - found)
        ):
            issues.append(
                Issue(
                    ev.src,
                    "hybrid-start",
                    f"DFTracer's Python API took this process's trace over (an -app trace): the "
                    f"{expected - found} events logged before that (the tracer's own start record, "
                    "calls before the training script's first line) are not in it",
                    "warning",
                )
            )
            return False
        if expected is not None and found < expected:
            issues.append(
                Issue(
                    ev.src,
                    "missing-events",
                    f"DFTracer logged {expected} events but {found} are in the file",
                    "error",
                )
            )
            return True
    return False


def _app_takeover(ev: _Events, has_id: np.ndarray, missing: int) -> bool:
    """True when the events missing from a trace are exactly its first ones and the trace is
    the ``-app`` file DFTracer's Python API writes (hybrid mode): the preloaded library's
    events before the Python logger started went to a ``-preload`` file left empty."""
    if "-app.pfw" not in Path(ev.src).name:
        return False
    ids = pc.drop_null(ev.norm.column("id")).to_numpy(zero_copy_only=False)
    return bool(len(ids)) and int(ids.min()) - 1 == missing


def _classify(ev: _Events) -> dict[str, np.ndarray]:
    """What each call does (kind, byte rule, direction), looked up once per distinct
    (module, name), then broadcast; ``catc`` is the module's code (CAT_CODE)."""
    n = len(ev)
    kind = np.zeros(n, dtype=np.int8)
    brule = np.zeros(n, dtype=np.int8)
    direction = np.zeros(n, dtype=np.int8)
    catc = np.zeros(n, dtype=np.int8)
    for module, ops in MODULE_OPS.items():
        if module not in ev.cats:
            continue
        table = np.zeros((len(ev.names) + 1, 3), dtype=np.int8)  # last row: null name
        for i, nm in enumerate(ev.names):
            table[i] = ops.get(nm, (0, 0, 0))
        in_mod = ev.cat_c == ev.cats.index(module)
        looked = table[ev.name_c[in_mod]]
        kind[in_mod], brule[in_mod], direction[in_mod] = looked[:, 0], looked[:, 1], looked[:, 2]
        catc[in_mod] = CAT_CODE[module]
    return {"kind": kind, "brule": brule, "direction": direction, "catc": catc}


def _io_calls(ev: _Events) -> dict[str, Any]:
    """Classify the calls, rebuild each read/write's offset, and pick segments and app events."""
    io: dict[str, Any] = _classify(ev)
    kind, catc = io["kind"], io["catc"]
    fh_c, fh_vals = arrow_codes(ev.norm.column("a_fhash"))
    complete = (ev.ph == PH_COMPLETE) | (ev.ph == PH_UNKNOWN)  # very old traces may lack "ph"
    modelled = ev.timed & complete & (kind > 0) & (fh_c >= 0)
    args = {c: ints_valid(ev.norm.column(f"a_{c}")) for c in _INT_ARGS}
    nbytes, failed = bytes_moved(io["brule"], kind, args)
    flags, flags_ok = args["flags"]
    append = (kind == Kind.OPEN) & flags_ok & ((flags & O_APPEND) != 0)
    fopen_rows = np.flatnonzero(modelled & (kind == Kind.OPEN) & (catc == CAT_CODE["STDIO"]))
    if fopen_rows.size:
        reparsed = _reparse(ev.lines, ev.line[fopen_rows])
        modes = [str((o.get("args") or {}).get("mode", "")) for o in reparsed]
        append[fopen_rows[np.array(["a" in mo for mo in modes])]] = True
    is_set, set_val, delta = position_inputs(kind, append, nbytes, failed, args)
    idx = np.flatnonzero(modelled)
    cols = (ev.pid, catc, fh_c, ev.ts, ev.line, kind, set_val, is_set, delta)
    pos_m, depth_m = positions(*(c[idx] for c in cols))
    pos = np.full(len(ev), np.nan)
    pos[idx] = pos_m
    depth = np.zeros(len(ev), dtype=np.int64)
    depth[idx] = depth_m
    offset, offset_ok = args["offset"]
    explicit = kind == Kind.IO_EXPLICIT
    is_seg = modelled & (kind >= Kind.IO_POS) & ~failed & ~np.isnan(nbytes)
    io.update(
        fh_c=fh_c,
        fh_vals=fh_vals,
        nbytes=nbytes,
        offset=np.where(explicit, np.where(offset_ok, offset, -1).astype(float), pos),
        ambiguous=int((modelled & (kind == Kind.IO_POS) & (depth > 1)).sum()),
        no_args=ev.timed & complete & (kind >= Kind.IO_POS) & (fh_c < 0),
        is_seg=is_seg,
        is_app=ev.timed & ~ev.cat_is_tracer & ~is_seg,
    )
    return io


def _io_warnings(ev: _Events, io: dict[str, Any]) -> None:
    """Warnings for I/O the trace cannot place or attribute."""
    if io["ambiguous"]:
        ev.warnings.append(
            Issue(
                ev.src,
                "ambiguous-offsets",
                f"{io['ambiguous']} reads/writes happened while a file had several open handles "
                "in one process; DFTracer does not log descriptors, so their offsets are "
                "unknown (-1)",
                "warning",
            )
        )
    if io["no_args"].any():
        ev.warnings.append(
            Issue(
                ev.src,
                "no-args",
                f"{int(io['no_args'].sum())} read/write calls carry no file hash or sizes "
                "(DFTRACER_INC_METADATA off?); they are kept as app events only",
                "warning",
            )
        )
    aggregated = int((ev.timed & (ev.ph == PH_AGGREGATED)).sum())
    if aggregated:
        ev.warnings.append(
            Issue(
                ev.src,
                "aggregated",
                f"{aggregated} aggregated events (DFTRACER aggregation on): per-call I/O is "
                "not in the trace; they are kept as app events",
                "warning",
            )
        )
    fh_c, fh_vals = io["fh_c"], io["fh_vals"]
    used = distinct(fh_c[io["is_seg"] | io["is_app"]])
    no_path = ~pc.is_valid(io["path_at"]).to_numpy(zero_copy_only=False)
    unknown = used[used >= 0]
    unknown_files = set(fh_vals.take(pa.array(unknown[no_path[unknown]])).to_pylist())
    if unknown_files:
        ev.warnings.append(
            Issue(
                ev.src,
                "unknown-file",
                f"{len(unknown_files)} file hashes have no FH record (path unknown), "
                f"e.g. {sorted(unknown_files)[0]}",
                "warning",
            )
        )


def _tables(
    path: Path,
    ev: _Events,
    meta: _Meta,
    io: dict[str, Any],
    rel_start: np.ndarray,
    rel_end: np.ndarray,
) -> dict[str, pa.Table]:
    """The SEGMENTS and APP_EVENTS tables, each in start-time order."""
    fh_c, fh_vals = io["fh_c"], io["fh_vals"]
    path_vals = meta.files.paths.take(io["path_at"])
    file_ids = pa.concat_arrays([hash_ids(fh_vals), pa.nulls(1, pa.uint64())])
    rank_col = np.full(len(ev), -1, dtype=np.int32)
    for rank_pid, rk in meta.rank_of_pid.items():
        rank_col[ev.pid == rank_pid] = rk
    hh_c = ev.hh_c
    host_vals = [meta.hosts.get(h) if h else None for h in ev.hh_vals]
    tid, tid_ok = ints_valid(ev.norm.column("tid"))

    def common(mask: np.ndarray) -> dict[str, Any]:
        rows = np.flatnonzero(mask)
        return {
            "rank": pa.array(rank_col[rows], type=pa.int32()),
            "host": _dict_array(hh_c[rows], host_vals),
            "pid": pa.array(ev.pid[rows], type=pa.int64(), mask=~ev.pid_ok[rows]),
            "thread": pa.array(tid[rows], type=pa.int64(), mask=~tid_ok[rows]),
            "start": pa.array(rel_start[rows]),
            "end": pa.array(rel_end[rows]),
            "source": _dict_array(np.zeros(len(rows), dtype=np.int32), [shown(path.name)]),
        }

    seg_rows = np.flatnonzero(io["is_seg"])
    seg_off = io["offset"][seg_rows]
    seg_cols = common(io["is_seg"])
    seg_cols.update(
        {
            "file_id": file_ids.take(
                pa.array(np.where(fh_c[seg_rows] >= 0, fh_c[seg_rows], len(fh_vals)))
            ),
            "path": _dict_array(fh_c[seg_rows], path_vals),
            "module": _dict_array((io["catc"][seg_rows] - 1).astype(np.int32), ["POSIX", "STDIO"]),
            "op": _dict_array((io["direction"][seg_rows] - 1).astype(np.int32), ["read", "write"]),
            "offset": pa.array(np.where(np.isnan(seg_off), -1, seg_off).astype(np.int64)),
            "length": pa.array(io["nbytes"][seg_rows].astype(np.int64)),
        }
    )
    app_rows = np.flatnonzero(io["is_app"])
    app_cols = common(io["is_app"])
    app_cols.update(
        {
            "cat": _dict_array(ev.cat_c[app_rows], ev.cats),
            "name": _dict_array(ev.name_c[app_rows], ev.names),
            "path": _dict_array(fh_c[app_rows], path_vals),
            # the iteration an annotation names (DFTracer's iter() counts ``step`` from 1)
            "epoch": ev.norm.column("a_epoch").take(pa.array(app_rows)),
            "step": ev.norm.column("a_step").take(pa.array(app_rows)),
        }
    )
    return {
        "segments": _by_start(conform(pa.table(seg_cols), "segments")),
        "app_events": _by_start(conform(pa.table(app_cols), "app_events")),
    }


__all__ = ["INCOMPLETE_TRACE", "read_dftracer_trace"]
