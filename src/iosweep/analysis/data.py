"""Load a trace store into compact numpy columns for the analysis.

Only the needed columns are read; strings (paths, hosts, modules, ops) become integer codes
into small lookup lists, so ten million segments stay a few hundred MB.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.analysis.classify import classify_paths, matches
from iosweep.analysis.intervals import merge
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.shared import (
    ACCESS_COLUMNS,
    SHARED_COLUMNS,
    SUBCOUNTS,
    SharedRecords,
    reduced,
    share_records,
)
from iosweep.analysis.subset import RankSubset
from iosweep.columns import distinct, numbers
from iosweep.trace.schema import SIZE_BINS, Issue, RunMeta
from iosweep.trace.store import open_store

READ, WRITE = 0, 1
OPS = ("read", "write")
WHO = {"read": "readers", "write": "writers"}  # column names: n_readers, whole_writers, ...

COUNTER_COLUMNS = [
    "rank",
    "pid",
    "host",
    "path",
    "module",
    "opens",
    "stats",
    "seeks",
    "fsyncs",
    "reads",
    "writes",
    "bytes_read",
    "bytes_written",
    "max_byte_read",
    "max_byte_written",
    "read_time",
    "write_time",
    "meta_time",
    "open_start",
    "close_end",
    *[f"size_read_{b}" for b in SIZE_BINS],
    *[f"size_write_{b}" for b in SIZE_BINS],
    *SUBCOUNTS,
    *ACCESS_COLUMNS,
    "file_alignment",
    "stripe_size",
    "stripe_count",
    *SHARED_COLUMNS,
]


#: the name of the ``dataset`` class in an MPI application's run (RunData.class_names)
DATA_CLASS = "data"


class StringCodes:
    """A growing list of distinct strings; ``codes`` maps Arrow string columns onto it.

    Lookups are hash joins on whole dictionaries (pandas), never a Python call per string:
    an ImageNet-scale store names a million paths.
    """

    def __init__(self) -> None:
        self.values: list[str] = []
        self._index: pd.Index | None = None  # of ``values``, built when first looked up

    def codes(self, col: pa.ChunkedArray | Iterable[pa.Array], null: str | None) -> np.ndarray:
        """int32 codes of a (dictionary or plain) string column, whole or chunk by chunk; nulls
        get the code of ``null``, or -1 when ``null`` is None. Values get codes in the order
        the rows first use them (a dictionary's unused values get none): the same codes
        however a store cuts its rows into row groups, whatever dictionary each group has."""
        out = []
        last: tuple[pa.Array, np.ndarray] | None = None
        for chunk in col.chunks if isinstance(col, pa.ChunkedArray) else col:
            if not pa.types.is_dictionary(chunk.type):
                chunk = chunk.dictionary_encode()
            # Map the chunk's dictionary once, then gather: no per-row Python. Row groups of
            # one file usually repeat the same dictionary (a million paths at ImageNet scale):
            # keep the mapping while it is equal (-2: a value not mapped yet).
            if last is None or not chunk.dictionary.equals(last[0]):
                last = (chunk.dictionary, np.full(len(chunk.dictionary) + 1, -2, np.int64))
            lut = last[1]
            idx = pc.fill_null(chunk.indices, len(lut) - 1).to_numpy(zero_copy_only=False)
            self._map_used(chunk.dictionary, lut, idx, null)
            out.append(lut[idx].astype(np.int32, copy=False))
        return np.concatenate(out) if out else np.empty(0, np.int32)

    def _map_used(self, dictionary: pa.Array, lut: np.ndarray, idx: np.ndarray, null) -> None:
        """Codes into ``lut`` for the dictionary values ``idx`` uses that have none yet, in
        dictionary order; the last slot (nulls) gets the code of ``null``, or -1."""
        used = np.bincount(idx, minlength=len(lut)) > 0
        new = np.flatnonzero(used & (lut == -2))
        if not len(new):
            return
        values = new[new < len(lut) - 1]
        if len(values):
            names = dictionary.take(pa.array(values)).cast(pa.string()).to_pylist()
            lut[values] = self.lookup(np.array(names, dtype=object), add=True)
        if new[-1] == len(lut) - 1:
            lut[-1] = (
                self.lookup(np.array([null], dtype=object), add=True)[0] if null is not None else -1
            )

    def lookup(self, strings: np.ndarray, add: bool = False) -> np.ndarray:
        """Codes of ``strings`` (an object array): -1 for the unknown, or new codes with ``add``."""
        if not self.values:
            idx = np.full(len(strings), -1, np.int64)
        else:
            if self._index is None:
                self._index = pd.Index(self.values, dtype=object)
            idx = self._index.get_indexer(strings)
        miss = idx < 0
        if add and miss.any():
            inv, uniq = pd.factorize(strings[miss])
            idx[miss] = len(self.values) + inv
            self.values.extend(uniq.tolist())
            self._index = None
        return idx

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Ops:
    """The analysed segments (one per traced read/write), as parallel numpy arrays.

    ``pid``, ``thread``, ``host`` and ``module`` are released (set to None) once the
    timeline and the volume tables are built: later steps do not need them and they weigh
    ~28 bytes per segment.
    """

    actor: np.ndarray  # int32: rank, or process ordinal when no rank is known
    pid: np.ndarray | None  # int64
    thread: np.ndarray | None  # int64, -1 where the tracer records none (DXT)
    host: np.ndarray | None  # int32 code into RunData.hosts
    file: np.ndarray  # int32 code into RunData.paths
    op: np.ndarray  # int8: READ | WRITE
    module: np.ndarray | None  # int32 code into RunData.modules
    offset: np.ndarray  # int64, -1 where unknown
    length: np.ndarray  # int64
    start: np.ndarray  # float64 seconds from run start
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.actor)

    def take(self, idx: np.ndarray) -> Ops:
        return Ops(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})


@dataclass
class RunData:
    """Everything the analysis reads from one trace store."""

    store: Path
    meta: RunMeta
    settings: AnalysisSettings
    paths: list[str]
    file_class: np.ndarray  # int8 class code per path (index into settings.class_names)
    hosts: list[str]
    modules: list[str]
    ops: Ops
    counters: pd.DataFrame  # per (actor, file, module), numeric columns, one row per record
    app_events: pd.DataFrame  # actor, cat, name, start, end, file, pid, thread, epoch, step
    steps: pd.DataFrame  # actor, epoch, step, start, end
    actor_kind: str  # "rank" | "process"
    actor_host: dict[int, str]  # host of each actor
    n_ranks: int  # ranks of the run (from the rank files / manifest, else actors seen)
    run_start: float
    run_end: float
    excluded_ops: int  # segments dropped by exclude_pattern / modules
    excluded_io_ops: int  # of which reads and writes on excluded paths
    excluded_records: int  # counter records of analysed modules on excluded paths
    excluded_paths: list[str]  # the first 5 in path order of the excluded paths touched
    other_layer_ops: dict[str, int]  # reads and writes of modules not analysed (e.g. MPIIO)
    unattributed: dict[str, int]  # I/O by processes not tied to any rank
    shared_records: SharedRecords = field(default_factory=SharedRecords)  # MPI reduced records
    # actors whose counters held impossible values (read as unknown: _unknown_actors)
    unknown_actors: list[int] = field(default_factory=list)
    mpiio: MpiioLayer | None = None  # the MPI-IO layer's operations and records, if any
    # Lustre striping of the analysed paths (LUSTRE records): file, stripe_size, stripe_count
    lustre: pd.DataFrame = field(default_factory=pd.DataFrame)
    layers: pd.DataFrame = field(default_factory=pd.DataFrame)  # every module's totals, by source
    issues: list[Issue] = field(default_factory=list)  # found while loading
    untimed: int = 0  # segments left out without start or end times (an issue of those)
    limitations: list[str] = field(default_factory=list)  # of the data read (a rank subset)
    # how the steps were timed where they come from the trace's own annotations
    # (pipeline.phases.use_annotated_steps; None: step records, or no steps)
    timing: dict[str, Any] | None = None
    # the evaluation loops' steps found there (phases.EVAL_COLUMNS; empty: none known)
    eval_steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    cache: dict = field(default_factory=dict, repr=False)  # sorts and unions several steps reuse

    @property
    def class_names(self) -> list[str]:
        return class_names(self.settings, self.meta, not self.steps.empty)

    def time_order(self) -> np.ndarray:
        """Indices of the operations by start time."""
        if "time_order" not in self.cache:
            self.cache["time_order"] = np.argsort(self.ops.start, kind="stable")
        return self.cache["time_order"]

    def time_rank(self) -> np.ndarray:
        """Each operation's position in start-time order (a sort key for order_by)."""
        if "time_rank" not in self.cache:
            r = np.empty(len(self.ops), np.int64)
            r[self.time_order()] = np.arange(len(self.ops))
            self.cache["time_rank"] = r
        return self.cache["time_rank"]

    def actor_time_order(self) -> np.ndarray:
        """Indices of the ranks' operations (actor >= 0) by (actor, start time)."""
        if "actor_time_order" not in self.cache:
            to = self.time_order()
            to = to[self.ops.actor[to] >= 0]
            a = self.ops.actor[to]
            # A stable sort by rank keeps the time order within each rank (radix sort for
            # 16-bit keys: fast, unlike a two-key lexsort).
            a = a.astype(np.int16) if len(a) and a.max() < 1 << 15 else a
            self.cache["actor_time_order"] = to[np.argsort(a, kind="stable")]
        return self.cache["actor_time_order"]

    def io_spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per rank (actor >= 0), the union in time of its operations: (actor, lo, hi)."""
        if "io_spans" not in self.cache:
            o = self.actor_time_order()
            self.cache["io_spans"] = merge(
                self.ops.actor[o].astype(np.int64), self.ops.start[o], self.ops.end[o]
            )
        return self.cache["io_spans"]

    @property
    def run_time(self) -> float:
        return max(0.0, self.run_end - self.run_start)


def untimed_issue(n: int) -> Issue:
    """The issue of ``n`` segments left out for want of start or end times."""
    return Issue(
        "segments.parquet",
        UNTIMED,
        f"{n} segments without start/end times were left out",
        "warning",
    )


UNTIMED = "corrupt"  # the kind of untimed_issue


def class_names(settings: AnalysisSettings, meta: RunMeta, has_steps: bool) -> list[str]:
    """The file classes' names; an MPI application's logs from elsewhere (an MPI job with
    neither a framework nor training steps) call the ``dataset`` class ``data``: its ``*.h5``
    files are a simulation's data, not a training set."""
    names = settings.class_names
    mpi_application = not ((meta.params or {}).get("framework") or has_steps) and any(
        p.attributed_by == "mpi" for p in meta.processes
    )
    return [DATA_CLASS if n == "dataset" else n for n in names] if mpi_application else names


def load_run(
    store_path: Path,
    settings: AnalysisSettings,
    phases: dict[str, list] | None = None,
    subset: RankSubset | None = None,
) -> RunData:
    """The store's tables, ready to analyse. Phase rules: ``phases`` (a caller's own, e.g.
    ``iosweep analyze --phase``) over those declared at ingest (``run.json``) over
    ``settings.phases``, kind by kind. ``subset``: only those ranks' rows
    (:mod:`iosweep.analysis.subset`)."""
    store = open_store(store_path)
    meta = subset.meta if subset is not None else store.meta
    if meta.phases or phases:
        settings = replace(settings, phases={**settings.phases, **meta.phases, **(phases or {})})
    issues: list[Issue] = []
    paths, hosts, modules = StringCodes(), StringCodes(), StringCodes()
    seg = _read_segments(store, paths, hosts, modules, subset)
    cdf = _read_counters(store, paths, hosts, modules, subset)
    app = _load_app_events(store, paths, subset)

    # Path-level decisions on the distinct paths, vectorised (a million at ImageNet scale).
    path_array = pa.array(paths.values, pa.string())
    keep_module = np.array([m in settings.modules for m in modules.values], bool)
    keep_path = (
        ~matches(path_array, settings.exclude_pattern)
        if settings.exclude_pattern
        else (np.ones(len(paths), bool))
    )
    file_class = classify_paths(path_array, settings)
    del path_array

    module, path, op = seg["module"], seg["file"], seg["op"]
    n_total = len(op)
    keep = keep_module[module] & keep_path[path] & (op >= 0)
    bad_time = ~(np.isfinite(seg["start"]) & np.isfinite(seg["end"]))
    untimed = int(bad_time.sum())
    if untimed:
        issues.append(untimed_issue(untimed))
        keep &= ~bad_time
    # reads and writes left out: on excluded paths, and of modules not analysed (by name)
    io = op >= 0
    on_excluded = io & keep_module[module] & ~keep_path[path]
    excluded_io_ops = int(on_excluded.sum())
    excluded_files = distinct(path[on_excluded])
    other = np.unique(module[io & ~keep_module[module]], return_counts=True)
    other_layer_ops = {modules.values[m]: int(n) for m, n in zip(*other, strict=True)}
    mpiio = _mpiio_layer(seg, cdf, modules, io & keep_path[path])
    lustre, cdf = _lustre_layout(cdf, modules, keep_path)
    layers = _layer_totals(seg, cdf, modules, io & keep_path[path], keep_path)
    del module, path, op, io, on_excluded

    c_module = keep_module[cdf["module"].to_numpy()]
    c_keep = c_module & keep_path[cdf["file"].to_numpy()]
    # what the excluded paths took (a log of terminal output only: the tracer did work)
    excluded_records = int((c_module & ~c_keep).sum())
    excluded_files = np.union1d(excluded_files, cdf["file"].to_numpy()[c_module & ~c_keep])
    if not c_keep.all():
        cdf = cdf[c_keep].reset_index(drop=True)
    actor_kind = _actors(meta, seg, keep, cdf)
    unknown_actors = _unknown_actors(cdf, modules.values, len(meta.ranks))
    shared = SharedRecords()
    if actor_kind == "rank":
        # the job's ranks (not only those with I/O of their own) share a reduced record
        job_ranks = len(meta.ranks) or len(np.unique(cdf["actor"][cdf["actor"] >= 0]))
        cdf, shared = share_records(cdf, seg, keep, job_ranks, paths.values)
    unattributed = _unattributed(seg, keep, cdf, issues) if actor_kind == "rank" else None
    ops = _kept_ops(seg, keep)
    excluded_ops = int(n_total - len(ops))
    del seg, keep

    # calls on excluded paths are left out, as Darshan's counter records of them are
    ev_file = app["file"].to_numpy()
    named = ev_file >= 0
    on_kept = ~named
    on_kept[named] = keep_path[ev_file[named]]
    app = app[on_kept].reset_index(drop=True)
    if actor_kind == "process":
        app["actor"] = -1  # without ranks, app events cannot be tied to the process actors
    steps = store.table("steps", row_groups=subset.groups["steps"] if subset else None)
    steps = steps.to_pandas()
    if subset is not None:
        steps = steps[subset.rows["steps"]].reset_index(drop=True)
    steps = (
        steps.rename(columns={"rank": "actor"})
        if actor_kind == "rank"
        else steps.iloc[0:0].rename(columns={"rank": "actor"})
    )

    actor_host = _actor_hosts(meta, ops, cdf, hosts.values, actor_kind)
    n_ranks = len(meta.ranks) or len(actor_host)
    run_start, run_end = _run_span(meta, ops, cdf)
    return RunData(
        store=Path(store_path),
        meta=meta,
        settings=settings,
        paths=paths.values,
        file_class=file_class,
        hosts=hosts.values,
        modules=modules.values,
        ops=ops,
        counters=cdf,
        app_events=app,
        steps=steps,
        actor_kind=actor_kind,
        actor_host=actor_host,
        n_ranks=n_ranks,
        run_start=run_start,
        run_end=run_end,
        excluded_ops=excluded_ops,
        excluded_io_ops=excluded_io_ops,
        excluded_records=excluded_records,
        # in path order: the same 5 however the run's rows are read (whole or in parts)
        excluded_paths=sorted(paths.values[int(f)] for f in excluded_files)[:5],
        other_layer_ops=other_layer_ops,
        unattributed=unattributed or {"ops": 0, "bytes": 0, "records": 0},
        shared_records=shared,
        unknown_actors=unknown_actors,
        mpiio=mpiio,
        lustre=lustre,
        layers=layers,
        issues=issues,
        untimed=untimed,
        limitations=[subset.limitation()] if subset is not None else [],
    )


@dataclass
class MpiioLayer:
    """The MPI-IO layer, above POSIX: analysed on its own (its bytes are POSIX's too)."""

    ops: pd.DataFrame  # DXT_MPIIO: rank, file, op (READ/WRITE), length, start, end
    records: pd.DataFrame  # MPI-IO counter records, as ``counters`` (actor = the log's rank)


def _lustre_layout(
    cdf: pd.DataFrame, modules: StringCodes, keep_path: np.ndarray
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The LUSTRE records (each file's striping, on the paths kept), and ``cdf`` without
    them: they describe a layout, not I/O."""
    if "LUSTRE" not in modules.values:
        return pd.DataFrame(columns=["file", "stripe_size", "stripe_count"]), cdf
    is_lustre = cdf["module"].to_numpy() == modules.values.index("LUSTRE")
    rows = cdf[is_lustre & keep_path[cdf["file"].to_numpy()]]
    layout = rows[["file", "stripe_size", "stripe_count"]].drop_duplicates("file")
    return layout.reset_index(drop=True), cdf[~is_lustre].reset_index(drop=True)


def _mpiio_layer(
    seg: dict[str, np.ndarray], cdf: pd.DataFrame, modules: StringCodes, io: np.ndarray
) -> MpiioLayer | None:
    if "MPIIO" not in modules.values:
        return None
    code = modules.values.index("MPIIO")
    m = io & (seg["module"] == code)
    ops = pd.DataFrame({k: seg[k][m] for k in ("file", "op", "length", "start", "end")})
    ops.insert(0, "rank", seg["actor"][m])
    records = cdf[cdf["module"].to_numpy() == code].reset_index(drop=True)
    return MpiioLayer(ops, records)


def _layer_totals(
    seg: dict[str, np.ndarray],
    cdf: pd.DataFrame,
    modules: StringCodes,
    io: np.ndarray,
    keep_path: np.ndarray,
) -> pd.DataFrame:
    """Per module, analysed or not, on the paths kept: records, reads, writes, bytes and
    seconds, from its counter records (``source`` counters) and from its segments (segments):
    the section takes the counters where a module has any (:mod:`.patterns.layers`)."""
    c = cdf[keep_path[cdf["file"].to_numpy()]]
    secs = c[["read_time", "write_time", "meta_time"]].fillna(0).clip(lower=0).sum(axis=1)
    by = c.assign(time=secs).groupby("module")
    counted = pd.DataFrame(
        {
            "records": by.size(),
            **{k: by[k].sum() for k in ("reads", "writes", "bytes_read", "bytes_written")},
            "time": by["time"].sum(),
        }
    )
    rows = [
        {"module": modules.values[code], "source": "counters", **counted.loc[code].to_dict()}
        for code in counted.index
    ]
    for code, name in enumerate(modules.values):
        m = io & (seg["module"] == code)
        if not m.any():
            continue
        op, length = seg["op"][m], seg["length"][m]
        rows.append(
            {
                "module": name,
                "source": "segments",
                "records": 0,
                "reads": int((op == READ).sum()),
                "writes": int((op == WRITE).sum()),
                "bytes_read": int(length[op == READ].sum()),
                "bytes_written": int(length[op == WRITE].sum()),
                "time": float((seg["end"][m] - seg["start"][m]).clip(min=0).sum()),
            }
        )
    return pd.DataFrame(rows, columns=LAYER_COLUMNS)


LAYER_COLUMNS = [
    "module",
    "source",
    "records",
    "reads",
    "writes",
    "bytes_read",
    "bytes_written",
    "time",
]


class _Columns:
    """Reads the columns of one of a store's tables, one at a time (the chosen ranks' rows of
    it, with a ``subset``); with ``missing_as_null``, a column a store written before it was
    added reads as nulls."""

    def __init__(
        self, store, table: str, subset: RankSubset | None, missing_as_null: bool = False
    ) -> None:
        self.store, self.table, self.subset, self.missing_as_null = (
            store,
            table,
            subset,
            missing_as_null,
        )
        self.groups = subset.groups[table] if subset else None

    def __call__(self, name: str) -> pa.ChunkedArray:
        """The column, whole."""
        return self._read(name, self.groups, 0)

    def by_group(self, name: str) -> Iterator[pa.Array]:
        """The column a Parquet row group at a time: every group repeats a dictionary column's
        dictionary (a million paths: 72 MB), so a string column read whole would hold them
        all at once."""
        rows = self.store.group_rows(self.table)  # one footer read for every group
        offset = 0
        for g in self.groups if self.groups is not None else range(len(rows)):
            c = self._read(name, [g], offset)
            offset += rows[g]
            yield from c.chunks

    def _read(self, name: str, groups: Collection[int] | None, offset: int) -> pa.ChunkedArray:
        c = self.store.table(
            self.table, [name], missing_as_null=self.missing_as_null, row_groups=groups
        )[name]
        if self.subset is None:
            return c
        return self.subset.keep(self.table, c, offset)


def _read_segments(
    store, paths: StringCodes, hosts: StringCodes, modules: StringCodes, subset: RankSubset | None
) -> dict[str, np.ndarray]:
    """The segments as arrays: strings as codes, ``op`` as READ / WRITE / -1 (other calls)."""

    # One column at a time: the Arrow copy of a column is freed before the next is read.
    col = _Columns(store, "segments", subset)

    op_codes = StringCodes()
    op_raw = op_codes.codes(col.by_group("op"), "")
    op_lut = np.array(
        [READ if v == "read" else WRITE if v == "write" else -1 for v in op_codes.values], np.int8
    )
    return {
        "actor": numbers(col("rank"), np.int32, -1),  # the rank until _actors decides
        "pid": numbers(col("pid"), np.int64, -1),
        "thread": numbers(col("thread"), np.int64, -1),
        "host": hosts.codes(col.by_group("host"), ""),
        "file": paths.codes(col.by_group("path"), "<unknown>"),
        "op": op_lut[op_raw] if len(op_raw) else np.empty(0, np.int8),
        "module": modules.codes(col.by_group("module"), ""),
        "offset": numbers(col("offset"), np.int64, -1),
        "length": numbers(col("length"), np.int64, 0),
        "start": numbers(col("start"), np.float64, np.nan),
        "end": numbers(col("end"), np.float64, np.nan),
    }


def _read_counters(
    store, paths: StringCodes, hosts: StringCodes, modules: StringCodes, subset: RankSubset | None
) -> pd.DataFrame:
    """One row per counter record: the numeric counters, then actor (the rank until
    :func:`_actors` decides), pid, and host, file and module as codes."""

    # One column at a time, and no copy into pandas' 2-D blocks: the records are a quarter
    # of the segments at ImageNet scale, and the whole Arrow table beside its consolidated
    # copy was the analysis's peak (2.4 GB more at 2.56 M records).
    col = _Columns(store, "counters", subset, missing_as_null=True)

    timed = ("_time", "_start", "_end")  # seconds, NaN where unknown; the rest are counts
    # -1 where unknown: a rank number, and the furthest byte (DFS, DAOS and HDF5 keep none;
    # 0 would say the file is one byte long)
    unknown_is_minus_1 = ("_rank", "max_byte_read", "max_byte_written")
    cols = {
        c: numbers(col(c), np.float64, np.nan)
        if c.endswith(timed)
        else numbers(col(c), np.int64, -1 if c.endswith(unknown_is_minus_1) else 0)
        for c in COUNTER_COLUMNS[5:]
    }
    # a count or time the log held as an impossible value is null in the store (the
    # plausibility check at ingest): the record's figures are not known (_unknown_actors)
    cols[DOUBTFUL] = np.logical_or.reduce(
        [np.asarray(col(c).is_null()) for c in (*_CORE_COUNTS, *_CORE_TIMES)]
    )
    cols["actor"] = numbers(col("rank"), np.int32, -1)
    cols["pid"] = numbers(col("pid"), np.int64, -1)
    cols["host"] = hosts.codes(col.by_group("host"), "")
    cols["file"] = paths.codes(col.by_group("path"), "<unknown>")
    cols["module"] = modules.codes(col.by_group("module"), "")
    return pd.DataFrame(cols, copy=False)


DOUBTFUL = "doubtful"  # (a column of the counters while they are read)
# what every POSIX and STDIO record counts (other layers lack some: H5F moves no bytes)
_CORE_COUNTS = ("reads", "writes", "bytes_read", "bytes_written")
_CORE_TIMES = ("read_time", "write_time")


def _unknown_actors(cdf: pd.DataFrame, modules: list[str], n_ranks: int) -> list[int]:
    """Actors whose figures are not known: a POSIX or STDIO record of theirs holds a count or
    a time that the log held as an impossible value (every rank, where it is a record Darshan
    reduced over all of them). Takes the :data:`DOUBTFUL` column out of ``cdf``."""
    doubtful = cdf.pop(DOUBTFUL).to_numpy()
    if len(modules):
        core = np.isin(np.asarray(modules, dtype=object), ["POSIX", "STDIO"])
        doubtful = doubtful & core[cdf["module"].to_numpy()]
    actors = np.unique(cdf["actor"].to_numpy()[doubtful])
    if len(actors) and actors[0] < 0:
        return list(range(n_ranks))
    return [int(a) for a in actors]


def _actors(meta: RunMeta, seg: dict[str, np.ndarray], keep: np.ndarray, cdf: pd.DataFrame) -> str:
    """Who the analysis attributes I/O to: ranks when the store knows them ("rank"), else each
    process ("process": ``actor`` becomes the process ordinal, in ``seg`` and ``cdf``)."""
    if (seg["actor"][keep] >= 0).any() or (cdf["actor"] >= 0).any() or meta.ranks:
        return "rank"
    c_pid = cdf["pid"].to_numpy()
    all_pids = np.unique(np.concatenate([seg["pid"][keep], c_pid]))
    seg["actor"] = np.searchsorted(all_pids, seg["pid"]).astype(np.int32)
    cdf["actor"] = np.searchsorted(all_pids, c_pid).astype(np.int32)
    return "process"


def _unattributed(
    seg: dict[str, np.ndarray], keep: np.ndarray, cdf: pd.DataFrame, issues: list[Issue]
) -> dict[str, int]:
    """I/O of processes not tied to any rank (counted in totals, not per rank); an issue."""
    ua = keep & (seg["actor"] < 0)
    out = {
        "ops": int(ua.sum()),
        "bytes": int(seg["length"][ua].sum()),
        # a reduced shared record is every rank's, not an unknown process's
        "records": int(((cdf["actor"] < 0).to_numpy() & ~reduced(cdf)).sum()),
    }
    if out["ops"] or out["records"]:
        issues.append(
            Issue(
                "segments.parquet",
                "unattributed",
                f"{out['ops']} operations ({out['bytes']} bytes) and {out['records']} counter "
                "records belong to processes not tied to a rank; they count in totals but not "
                "in per-rank figures",
                "warning",
            )
        )
    return out


def _kept_ops(seg: dict[str, np.ndarray], keep: np.ndarray) -> Ops:
    """The kept segments as :class:`Ops`, emptying ``seg`` as it goes."""
    if not keep.all():
        # Filter one column at a time so only one column is ever held twice.
        idx = np.flatnonzero(keep)
        for k in seg:
            seg[k] = seg[k][idx]
    return Ops(**{k: seg.pop(k) for k in list(seg)})


def unsized_io_calls(ev: pd.DataFrame) -> int:
    """Reads and writes among the app events: DFTracer's calls that named no file or size
    (traced without metadata), which could not become segments."""
    from iosweep.trace.dftracer.positions import MODULE_OPS, Kind

    n = 0
    for cat, ops in MODULE_OPS.items():
        names = [name for name, (kind, *_) in ops.items() if kind >= Kind.IO_POS]
        n += int(((ev["cat"] == cat) & ev["name"].isin(names) & (ev["file"] < 0)).sum())
    return n


def events_matching(ev: pd.DataFrame, rules: list[dict[str, str]]) -> np.ndarray:
    """Rows of app events matching any rule ``{cat: regex, name: regex}`` (``re.search``; a
    rule without one of them matches any), decided per distinct category and name."""
    hit = np.zeros(len(ev), bool)
    for rule in rules:
        m = np.ones(len(ev), bool)
        for key in ("cat", "name"):
            if rule.get(key):
                m &= category_matches(ev[key], rule[key], search=True)
        hit |= m
    return hit


def category_matches(col: pd.Series, pattern: str, search: bool = False) -> np.ndarray:
    """Rows of a categorical column whose value matches ``pattern`` (``re.match``, or
    ``re.search`` with ``search``), decided once per distinct value: app events run to
    millions of rows over a few dozen names."""
    cat = col.cat
    rx = re.compile(pattern)
    find = rx.search if search else rx.match
    hit = np.array([find(v) is not None for v in cat.categories.astype(str)], bool)
    codes = cat.codes.to_numpy()
    return (codes >= 0) & hit[np.maximum(codes, 0)] if len(hit) else np.zeros(len(col), bool)


def _load_app_events(store, paths: StringCodes, subset: RankSubset | None) -> pd.DataFrame:
    """The app events: ``cat`` and ``name`` as categoricals (a few dozen values over millions
    of rows), ``file`` as a code into ``paths`` like the segments' (-1: no path)."""

    # One column at a time, as for the segments: a million-path dictionary per row group.
    # Stores written before a column was added read it as nulls (epoch, step).
    col = _Columns(store, "app_events", subset, missing_as_null=True)

    def category(name: str) -> pd.Categorical:
        names = StringCodes()
        codes = names.codes(col.by_group(name), None)
        return pd.Categorical.from_codes(codes, categories=pd.Index(names.values, dtype=object))

    return pd.DataFrame(
        {
            "actor": numbers(col("rank"), np.int32, -1),
            "cat": category("cat"),
            "name": category("name"),
            "start": numbers(col("start"), np.float64, np.nan),
            "end": numbers(col("end"), np.float64, np.nan),
            "file": paths.codes(col.by_group("path"), None),
            "pid": numbers(col("pid"), np.int64, -1),
            "thread": numbers(col("thread"), np.int64, -1),
            "epoch": numbers(col("epoch"), np.int64, -1),  # as the annotation names them
            "step": numbers(col("step"), np.int64, -1),
        }
    )


def _actor_hosts(
    meta: RunMeta, ops: Ops, cdf: pd.DataFrame, hosts: list[str], kind: str
) -> dict[int, str]:
    out: dict[int, str] = {}
    if kind == "rank":
        out = {r.rank: r.host for r in meta.ranks}
    seen = pd.DataFrame({"actor": ops.actor, "host": ops.host})
    if len(cdf):
        seen = pd.concat([seen, cdf[["actor", "host"]]], ignore_index=True)
    seen = seen[seen["actor"] >= 0].drop_duplicates("actor")
    for a, h in zip(seen["actor"].to_numpy(), seen["host"].to_numpy(), strict=True):
        out.setdefault(int(a), hosts[h] if h < len(hosts) else "")
    return dict(sorted(out.items()))


def _run_span(meta: RunMeta, ops: Ops, cdf: pd.DataFrame) -> tuple[float, float]:
    """Run start/end (s from clock zero): the manifest's, else the processes', else the I/O's."""
    cands_s = [meta.start] if meta.start is not None else []
    cands_e = [meta.end] if meta.end is not None else []
    if not cands_s:
        cands_s = [p.start for p in meta.processes if p.start is not None]
    if not cands_e:
        cands_e = [p.end for p in meta.processes if p.end is not None]
    if len(ops):
        cands_s.append(float(np.min(ops.start)))
        cands_e.append(float(np.max(ops.end)))
    if len(cdf):
        for col, lst in (("open_start", cands_s), ("close_end", cands_e)):
            v = cdf[col].to_numpy()
            v = v[np.isfinite(v)]
            if len(v):
                lst.append(float(v.min() if col == "open_start" else v.max()))
    if meta.start is not None and meta.end is not None:
        return float(meta.start), float(meta.end)
    s = min(cands_s) if cands_s else 0.0
    e = max(cands_e) if cands_e else s
    return float(s), float(max(e, s))
