"""Rules on how the ranks share the work: balance, aggregators, metadata, checkpoints,
and how much of the run the I/O takes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from iosweep.analysis.findings.rules.base import (
    Context,
    Outcome,
    files,
    found,
    make_insight,
    not_applicable,
    not_checked,
    passed,
    when_no_io,
)
from iosweep.analysis.patterns.mpiio import AGGREGATOR_BYTES, AGGREGATOR_RANKS, aggregator_ranks
from iosweep.units import human_bytes


def aggregators(c: Context) -> list[int] | None:
    """MPI-IO's aggregators (:func:`aggregator_ranks`) of the run the rules look at."""
    return aggregator_ranks(c.summary.get("mpiio"), c.ranks)


def _secs(v: float) -> str:
    return f"{v:,.0f} s" if v >= 100 else f"{v:.3g} s"


def _spread(v: np.ndarray) -> float | None:
    mx = float(v.max()) if len(v) else 0.0
    return (mx - float(v.min())) / mx if mx > 0 else None


def _balance(c: Context, r: pd.DataFrame) -> dict[str, tuple]:
    """The spread of bytes and I/O time over ``r``'s ranks, and their stragglers (I/O time
    above the median rank's by straggler_excess)."""
    s = c.settings
    b = (r["bytes_read"] + r["bytes_written"]).to_numpy(np.float64)
    t = r["io_time"].to_numpy(np.float64)
    med = float(np.median(t[t > 0])) if (t > 0).sum() > 1 else np.inf
    slow = r.loc[(t > med * (1 + s.straggler_excess)) & (t >= s.straggler_min_io_time_s), "rank"]
    return {
        "bytes_spread": (_spread(b), "share"),
        "bytes_max": (float(b.max()), "bytes"),
        "io_time_spread": (_spread(t), "share"),
        "io_time_max": (float(t.max()), "s"),
        "stragglers": ([int(x) for x in slow], "ranks"),
    }


def imbalance(c: Context) -> list[Outcome]:
    """Imbalance and stragglers across the ranks that do the file I/O: all ranks, or MPI-IO's
    aggregators where collective buffering funnels the I/O through a few (then the spread
    between aggregators and the others is the design; among the aggregators it is not)."""
    cid, title = "imbalance", "I/O balanced across ranks"
    if none := when_no_io(c, cid, title):
        return none
    if c.n_ranks < 2 or len(c.ranks) < 2:
        return [not_applicable(cid, title, f"one {c.who}: nothing to balance")]
    agg = aggregators(c)
    if c.concentrated and not agg:  # the ranks' own rows cannot say: MPI-IO's may
        return [_imbalance_at_mpiio(c)]
    if agg and len(agg) == 1:
        return [
            not_applicable(
                cid,
                title,
                f"one aggregator ({c.who} {agg[0]}) does all the "
                "file I/O (mpiio_aggregators): no balance to judge",
            )
        ]
    r = c.ranks[c.ranks["rank"].isin(agg)] if agg else c.ranks
    unknown = sorted(set(r["rank"]) & set(c.unknown_ranks))
    left_out = (
        f" ({c.who}{'s' if len(unknown) > 1 else ''} {_listed(unknown)} left out: "
        "figures not known, no trace or counters with impossible values)"
        if unknown
        else ""
    )
    r = r[~r["rank"].isin(unknown)]
    if len(r) < 2:
        return [
            not_checked(
                cid,
                title,
                f"fewer than two {c.whos} whose figures are known{left_out}: nothing to compare",
            )
        ]
    among = f"the {len(r)} aggregators" if agg else f"the {len(r)} {c.whos}"
    among += left_out
    s = c.settings
    bal = _balance(c, r)
    bs, ts = bal["bytes_spread"][0], bal["io_time_spread"][0]
    # (spread, the busiest rank's amount, its floor, how the floor reads)
    over = {
        "bytes_spread": (bs, bal["bytes_max"][0], s.imbalance_min_bytes, human_bytes),
        "io_time_spread": (ts, bal["io_time_max"][0], s.imbalance_min_io_time_s, _secs),
    }
    over = {k: v for k, v in over.items() if v[0] is not None and v[0] > s.imbalance_share}
    fired = {k: bal[k] for k, v in over.items() if v[1] >= v[2]}
    stragglers = bal["stragglers"][0]
    numbers = {
        **fired,
        "stragglers": (stragglers, "ranks"),
        "threshold_share": (s.imbalance_share, "share"),
        **({"unknown_ranks": (unknown, "ranks")} if unknown else {}),
    }
    if not fired and not stragglers:
        spreads = {k: bal[k] for k in ("bytes_spread", "io_time_spread")}
        if unknown:
            spreads["unknown_ranks"] = (unknown, "ranks")
        measured = (
            f"over {among}: (max - min) / max of bytes {bs or 0:.1%}, of I/O time {ts or 0:.1%}"
        )
        if not over:
            return [
                passed(
                    cid,
                    title,
                    f"{measured} (at most {s.imbalance_share:.0%}); no straggler",
                    spreads,
                )
            ]
        small = "; ".join(
            f"the busiest {c.who}'s {'bytes' if k == 'bytes_spread' else 'I/O time'} "
            f"{fmt(amount)} is under the floor of {fmt(floor)}"
            for k, (_, amount, floor, fmt) in over.items()
        )
        return [
            not_applicable(
                cid,
                title,
                f"{measured}: above {s.imbalance_share:.0%}, but too little to matter: {small}",
                spreads,
            )
        ]
    text = [
        f"(max - min) / max of {k.removesuffix('_spread').replace('_', ' ')} per rank is {v[0]:.1%}"
        for k, v in fired.items()
    ] + ([f"stragglers: ranks {stragglers}"] if stragglers else [])
    ins = make_insight(
        "imbalance",
        "warn",
        "I/O imbalance across ranks" + (" (among MPI-IO's aggregators)" if agg else ""),
        "; ".join(text) + left_out,
        numbers,
        "Balance the data each rank reads (equal shard sizes), and look at the "
        "stragglers' nodes (storage path, local contention)."
        if c.training_job
        else "Balance the bytes each rank moves (the decomposition of the domain), "
        "and look at the stragglers' nodes and storage targets (a slow OST, local "
        "contention).",
    )
    return [found(cid, title, ins)]


def _listed(ranks: list[int]) -> str:
    """Ranks by number, the first ten."""
    shown = ", ".join(str(r) for r in ranks[:10])
    return shown + (f" and {len(ranks) - 10:,} more" if len(ranks) > 10 else "")


def _unknown_movers(c: Context) -> str:
    """Why the ranks' bytes on the concentrated shared records are not known."""
    few = c.concentrated
    return (
        f"the {c.whos}' bytes on {files(few['concentrated'])} shared by every {c.who} are not "
        f"known: Darshan's variance of their bytes puts them on about {few['movers']} of "
        f"{c.n_ranks} {c.whos}, and which ones it does not record"
    )


def _imbalance_at_mpiio(c: Context) -> Outcome:
    """The balance judged where every rank asks for its own data: the MPI-IO layer, when the
    POSIX bytes went to a few ranks (collective buffering) that the counters do not name."""
    cid, title, s = "imbalance", "I/O balanced across ranks", c.settings
    m = c.summary.get("mpiio") or {}
    dirs = {d: m[d] for d in ("read", "write") if (m.get(d) or {}).get("ops")}
    if not dirs or any(not v.get("rank_bytes") or not v.get("time") for v in dirs.values()):
        return not_checked(cid, title, _unknown_movers(c) + ", nor at the MPI-IO layer")
    spreads: dict[str, tuple] = {}
    over: list[str] = []
    for d, v in dirs.items():
        b, t = v["rank_bytes"], v["time"]
        for what, st, floor in (
            ("bytes", b, s.imbalance_min_bytes),
            ("time", t, s.imbalance_min_io_time_s),
        ):
            share = (st["max"] - st["min"]) / st["max"] if st["max"] > 0 else None
            spreads[f"{d}_{what}_spread"] = (share, "share")
            if share is not None and share > s.imbalance_share and st["max"] >= floor:
                over.append(f"of MPI-IO {d} {what} per {c.who} is {share:.1%}")
    said = "; ".join(
        f"{k.removesuffix('_spread').replace('_', ' ')} {v:.1%}"
        for k, (v, _) in spreads.items()
        if v is not None
    )
    where = (
        f"judged at the MPI-IO layer, where every {c.who} asks for its own data (the POSIX "
        f"I/O under it goes through about {c.concentrated['movers']} of {c.n_ranks} "
        f"{c.whos}, MPI-IO's aggregators: mpiio_aggregators)"
    )
    numbers = {**spreads, "threshold_share": (s.imbalance_share, "share")}
    if not over:
        return passed(
            cid,
            title,
            f"{where}: (max - min) / max per {c.who} of {said} "
            f"(at most {s.imbalance_share:.0%}, or under the floors)",
            numbers,
        )
    ins = make_insight(
        "imbalance",
        "warn",
        "I/O imbalance across ranks (at the MPI-IO layer)",
        f"{where}: (max - min) / max " + "; ".join(over),
        numbers,
        "Balance the bytes each rank asks for (the decomposition of the domain); a time "
        "spread at equal bytes points at the aggregators' storage targets.",
    )
    return found(cid, title, ins)


def _aggregators_found(c: Context, count: int, collective: int, said: str) -> Outcome:
    """mpiio_aggregators found: ``count`` aggregators, ``said`` how they were told apart."""
    heavy = c.io_matters()
    ins = make_insight(
        "mpiio_aggregators",
        "warn" if heavy else "info",
        "Collective I/O through aggregator ranks",
        said + (f"; the busiest spends {c.io_share:.0%} of the run in I/O" if heavy else ""),
        {
            "aggregators": (count, "count"),
            "ranks": (c.n_ranks, "count"),
            "collective": (collective, "count"),
            "io_share_max": (c.io_share, "share"),
        },
        "The number of aggregators is the cb_nodes hint (on Lustre, by default, the file's "
        "stripe count; romio_cb_read/romio_cb_write turn collective buffering on or off): "
        "more aggregators, or a file striped over more OSTs, spread the file I/O.",
    )
    return found("mpiio_aggregators", "File I/O spread over the ranks", ins)


def mpiio_aggregators(c: Context) -> list[Outcome]:
    """Collective MPI-IO with a few ranks doing all file I/O: MPI-IO's aggregators. A warning
    when their I/O takes a large share of the run (the funnel is then the bottleneck)."""
    cid, title = "mpiio_aggregators", "File I/O spread over the ranks"
    if none := when_no_io(c, cid, title):
        return none
    m = c.summary.get("mpiio") or {}
    collective = sum(int((m.get(d) or {}).get("collective") or 0) for d in ("read", "write"))
    if not collective:
        return [not_applicable(cid, title, "no collective MPI-IO calls")]
    agg = aggregators(c)
    if not agg and (few := c.concentrated):  # (the counters name none: the variance counts)
        said = (
            f"about {few['movers']} of {c.n_ranks} ranks move the "
            f"{human_bytes(few['concentrated_bytes'])} of {files(few['concentrated'])} shared "
            f"by every rank under {collective:,} collective MPI-IO calls: MPI-IO's collective "
            "buffering aggregators; the others send them their data (counted from Darshan's "
            "variance of the ranks' bytes on the file's record; which ranks, it does not record)"
        )
        return [_aggregators_found(c, few["movers"], collective, said)]
    if not agg:
        return [
            passed(
                cid,
                title,
                f"collective MPI-IO ({collective:,} calls), with the bytes "
                f"spread over {AGGREGATOR_RANKS:.0%} of the ranks or more",
                {"collective": (collective, "count")},
            )
        ]
    return [
        _aggregators_found(
            c,
            len(agg),
            collective,
            f"{len(agg)} of {c.n_ranks} ranks do {AGGREGATOR_BYTES:.0%} of the file I/O under "
            f"{collective:,} collective MPI-IO calls: MPI-IO's collective buffering "
            "aggregators; the others send them their data",
        )
    ]


def _spreads_said(b: float, t: float) -> str:
    """The largest spreads of bytes and of time, one of them under its floor said so."""
    if pd.isna(t):
        return f"{b:.1%} of bytes (time not judged: under its floor)"
    if pd.isna(b):
        return f"{t:.1%} of time (bytes not judged: under their floor)"
    return f"{b:.1%} of bytes and {t:.1%} of time"


def _spread_text(value: float, fmt: str = ".1%") -> str:
    """A spread, or why there is none (under the floor)."""
    return format(value, fmt) if pd.notna(value) else "not judged (under the floor)"


def _judged_spreads(c: Context, op: str) -> tuple[pd.DataFrame, int]:
    """The spreads of ``op`` per shared file, less those of the files whose bytes went to a
    few ranks that Darshan does not name (their per-rank rows are no measure), and how many
    were left out."""
    sp = c.spreads[op] if c.spreads is not None else pd.DataFrame()
    paths = set(c.concentrated.get("concentrated_paths") or [])
    if not paths or not len(sp) or not len(c.files):
        return sp, 0
    blind = sp.index.isin(c.files.loc[c.files["path"].isin(paths), "file"])
    return sp[~blind], int(blind.sum())


def shared_file_imbalance(c: Context) -> list[Outcome]:
    """Per file shared by several ranks, the spread of the bytes and of the time each rank
    spent on it (Drishti's P18/P19 on shared files), per direction; among MPI-IO's
    aggregators where they do the file I/O."""
    out: list[Outcome] = []
    s = c.settings
    agg = aggregators(c)  # the spreads were taken among them
    for op, done in (("read", "read"), ("write", "written")):
        cid, title = f"shared_file_imbalance.{op}", f"Shared files {done} evenly by their ranks"
        if none := when_no_io(c, cid, title):
            out += none
            continue
        if c.spreads is None:
            out.append(not_checked(cid, title, "no per-file, per-rank table"))
            continue
        sp, blind = _judged_spreads(c, op)
        if not len(sp) and blind:
            out.append(not_checked(cid, title, _unknown_movers(c)))
            continue
        if not len(sp):
            out.append(
                not_applicable(
                    cid,
                    title,
                    f"no file is {done} by two {c.whos} or more"
                    + (" among MPI-IO's aggregators" if agg else ""),
                )
            )
            continue
        aside = f" ({files(blind)} left out: {_unknown_movers(c)})" if blind else ""
        worst = sp[["bytes", "time"]].max(axis=1)  # NaN: neither reaches its floor
        floors = (
            f"where the busiest rank moves {human_bytes(s.imbalance_min_bytes)} or spends "
            f"{s.imbalance_min_io_time_s} s"
        )
        if worst.isna().all():
            out.append(
                not_applicable(
                    cid,
                    title,
                    f"{files(len(sp))} {done} by several {c.whos}, none enough to judge: "
                    f"spreads are counted {floors}{aside}",
                )
            )
            continue
        numbers = {
            "files": (len(sp), "count"),
            "uneven_files": (int((worst > s.imbalance_share).sum()), "count"),
            "bytes_spread_max": (float(sp["bytes"].max()), "share"),
            "time_spread_max": (float(sp["time"].max()), "share"),
            "threshold_share": (s.imbalance_share, "share"),
        }
        if worst.max() <= s.imbalance_share:
            out.append(
                passed(
                    cid,
                    title,
                    f"{files(len(sp))} {done} by several {c.whos}: the largest (max - min) "
                    f"/ max per rank is {_spreads_said(sp['bytes'].max(), sp['time'].max())} "
                    f"(at most {s.imbalance_share:.0%}; counted {floors}){aside}",
                    numbers,
                )
            )
            continue
        f = worst.idxmax()
        path = c.files.set_index("file")["path"].get(f, str(f)) if len(c.files) else f
        ins = make_insight(
            "shared_file_imbalance",
            "warn",
            f"Ranks {op} shared files unevenly",
            f"{numbers['uneven_files'][0]:,} of {files(len(sp))} {done} by several {c.whos} "
            f"have a (max - min) / max of bytes or time per rank above {s.imbalance_share:.0%}; "
            f"the most uneven, {path}: {human_bytes(int(sp.at[f, 'b_max']))} against "
            f"{human_bytes(int(sp.at[f, 'b_min']))}, time spread "
            f"{_spread_text(sp.at[f, 'time'], '.0%')}{aside}",
            {**numbers, "op": (op, "text")},
            "Give each rank an equal part of the shared file (the decomposition), or let "
            "collective MPI-IO aggregate the parts; a time spread at equal bytes points at the "
            "storage targets (striping) or contention.",
        )
        out.append(found(cid, title, ins))
    return out


def metadata_heavy(c: Context) -> list[Outcome]:
    """Metadata time: a large share of the I/O time (with a floor on the busiest rank), or
    above an absolute limit on one rank (Drishti's P17: 30 s). Where Darshan reduced shared
    files to one record, their metadata time is a sum over the ranks: the busiest rank's is
    known only between the mean and that sum, and the rule decides on those bounds or says
    it cannot."""
    cid, title = "metadata_heavy", "Metadata time"
    if none := when_no_io(c, cid, title):
        return none
    md, s = c.summary["metadata"], c.settings
    share = md.get("meta_time_share")
    if share is None:
        return [
            not_checked(
                cid,
                title,
                "no metadata timings (the tracer recorded no open, stat or seek durations)",
            )
        ]
    lo, hi, split = _busiest_meta_time(c)
    numbers = {
        "meta_time_share": (share, "share"),
        "max_rank_meta_time": (None if split else lo, "s"),
        "max_rank_meta_time_low": (lo, "s"),
        "max_rank_meta_time_high": (hi, "s"),
        "opens": (md["totals"]["opens"], "count"),
        "stats": (md["totals"]["stats"], "count"),
        "seeks": (md["totals"]["seeks"], "count"),
        "threshold_share": (s.metadata_time_share, "share"),
        "threshold_rank_s": (s.metadata_rank_time_s, "s"),
    }
    limits = (
        f"found above {s.metadata_time_share:.0%} with {s.metadata_min_time_s} s on one "
        f"{c.who}, or above {s.metadata_rank_time_s} s on one"
    )
    spread = ((c.summary.get("trace") or {}).get("shared_records") or {}).get("spread")
    low = "(the mean)" if spread else "(its own)"
    unknown = (
        f"the busiest {c.who}'s is not known: Darshan reduced {split:,} shared "
        f"{'file' if split == 1 else 'files'} to one record each, summing their metadata "
        f"time over the {c.whos}; it lies between {_secs(lo)} {low} and {_secs(hi)}"
    )
    by_share = share > s.metadata_time_share and lo >= s.metadata_min_time_s
    if not by_share and lo <= s.metadata_rank_time_s:
        clear = (share <= s.metadata_time_share or hi < s.metadata_min_time_s) and (
            hi <= s.metadata_rank_time_s
        )
        spent = f"{unknown}" if split else f"the busiest {c.who} spends {lo:.2f} s on it"
        reason = f"{share:.1%} of I/O time is metadata and {spent} ({limits})"
        if clear:
            return [passed(cid, title, reason, numbers)]
        return [not_checked(cid, title, f"{reason}: which side of the limits, not known", numbers)]
    ins = make_insight(
        "metadata_heavy",
        "warn",
        "Metadata-heavy I/O",
        f"{share:.1%} of I/O time is metadata (open, stat, seek, sync); the "
        f"busiest {c.who} spends "
        + (f"at least {_secs(lo)}" if split else f"{lo:.2f} s")
        + " on it",
        numbers,
        "Open each file once and keep it open, pack many small files into few large ones, "
        "and avoid repeated stat/exists checks in the data loader."
        if c.training_job
        else "Open each file once (on one rank, or collectively with MPI_File_open), avoid "
        "repeated stat calls and per-step opens, and pack many small files into few.",
    )
    return [found(cid, title, ins)]


def _busiest_meta_time(c: Context) -> tuple[float, float, int]:
    """The busiest rank's metadata seconds, as (low, high, reduced records summing metadata
    over the ranks): measured (low = high) unless Darshan reduced shared files to records
    whose metadata time is a sum over the ranks. Spread over the ranks (no DXT), the split is
    iosweep's: between the mean and the run's sum. Traced (DXT splits the reads and writes,
    not the metadata), the record kept its sum at rank -1: between the busiest rank's own and
    that plus the sum."""
    md = c.summary["metadata"]
    mx = float(md.get("max_rank_meta_time") or 0.0)
    shared = (c.summary.get("trace") or {}).get("shared_records") or {}
    if shared.get("spread"):
        total = float(md.get("meta_time") or 0.0)
        return total / max(c.n_ranks, 1), total, int(shared["spread"])
    if shared.get("traced_meta_time"):
        return mx, mx + float(shared["traced_meta_time"]), int(shared["traced"])
    return mx, mx, 0


def file_per_process_at_scale(c: Context) -> list[Outcome]:
    """File per process at scale."""
    cid, title = "file_per_process_at_scale", "Files per process at scale"
    if none := when_no_io(c, cid, title):
        return none
    s, n = c.settings, c.n_ranks
    if n < s.fpp_min_ranks:
        return [
            not_applicable(
                cid,
                title,
                f"{n} {c.whos}, under the {s.fpp_min_ranks} at which "
                "per-rank files load the metadata servers together",
                {"ranks": (n, "count"), "threshold_ranks": (s.fpp_min_ranks, "count")},
            )
        ]
    out: list[Outcome] = []
    for cls, acc in c.summary["classes"].items():
        for d in ("read", "write"):
            a = acc.get("access", {}).get(d)
            if not (a and a["strategy"] == "file-per-process"):
                continue
            ins = make_insight(
                "file_per_process_at_scale",
                "warn",
                f"File-per-process {cls} {d}s at {n} ranks",
                f"{a['evidence']['files']} {cls} files, one set per rank, opened by {n} ranks",
                {
                    "ranks": (n, "count"),
                    "files": (a["evidence"]["files"], "count"),
                    "op": (d, "text"),
                    "threshold_ranks": (s.fpp_min_ranks, "count"),
                },
                "Many ranks opening their own files load the metadata servers together; use "
                "fewer, shared files (collective or aggregated I/O) or stagger the opens.",
                cls,
            )
            out.append(found(f"{cid}.{cls}.{d}", title, ins))
    return out or [passed(cid, title, f"no class of files is file-per-process at {n} ranks")]


def single_rank_checkpoint(c: Context) -> list[Outcome]:
    """One rank writes every checkpoint."""
    what = "checkpoints" if c.training_job else "restart files"
    cid, title = "single_rank_checkpoint", f"{what.capitalize()} written by more than one rank"
    if none := when_no_io(c, cid, title):
        return none
    ck, s, n = c.summary.get("checkpoints", {}), c.settings, c.n_ranks
    if not ck.get("available") or not ck.get("n_writers"):
        return [not_applicable(cid, title, f"no rank writes {what}")]
    if n < max(s.rank0_checkpoint_min_ranks, 2):
        return [not_applicable(cid, title, f"{n} {c.who}: nothing to share")]
    if ck["n_writers"] > 1:
        return [passed(cid, title, f"{ck['n_writers']} {c.whos} write {what}")]
    w = ck["writers"][0]
    ins = make_insight(
        "single_rank_checkpoint",
        "info",
        f"Only {c.who} {w} writes checkpoints",
        f"{c.who.capitalize()} {w} writes all {human_bytes(ck['bytes_written'])} of checkpoints"
        + (
            f" in {ck['n_checkpoints']} bursts of {ck['duration_mean']:.3f} s on average"
            if ck.get("n_checkpoints")
            else ""
        )
        + f" while the other {n - 1} {c.whos} write none",
        {
            "writer": (w, "ranks"),
            "ranks": (n, "count"),
            "bytes_written": (ck["bytes_written"], "bytes"),
            "checkpoints": (ck.get("n_checkpoints"), "count"),
            "duration_mean": (ck.get("duration_mean"), "s"),
            "interval_mean": (ck.get("interval_mean"), "s"),
        },
        "Fine for small models; for large ones the other ranks wait at the next collective "
        "while one rank writes: use asynchronous or sharded (per-rank) checkpointing.",
        "checkpoint",
    )
    return [found(cid, title, ins)]
