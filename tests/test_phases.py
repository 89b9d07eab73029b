"""The verdict for traces iosweep did not run: steps, waits and epochs from a trace's own
annotations (analysis.phases), DFAnalyzer's overlap figures, DLIO's output and its DFTracer
1.x traces, and what is said when something does not fit. Expected values by hand."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from factories import make_store

from iosweep.analysis import analyze_run
from iosweep.analysis.data import load_run
from iosweep.analysis.pipeline.phases import steps_from_events
from iosweep.analysis.pipeline.verdict import verdict
from iosweep.analysis.settings import AnalysisSettings, parse_phase
from iosweep.cli.analyze import load_settings
from iosweep.trace.dftracer.read import read_dftracer_trace
from iosweep.trace.dlio import read_dlio_output
from iosweep.trace.ingest import ingest


def ev(cat, name, start, end, pid=1000, rank=0, step=None, path=None):
    return {"rank": rank, "cat": cat, "name": name, "start": start, "end": end, "pid": pid,
            "step": step, "path": path}  # fmt: skip


def _steps(tmp_path: Path, events: list[dict], settings: AnalysisSettings | None = None, **kw):
    store = make_store(tmp_path / "store", app_events=events, **kw)
    rd = load_run(store, settings or AnalysisSettings())
    return rd, steps_from_events(rd)


def _rows(found) -> list[tuple]:
    out = []
    for r in found.steps.itertuples():
        w = None if math.isnan(r.wait_start) else (round(r.wait_start, 6), round(r.wait_end, 6))
        out.append((r.epoch, r.step, round(r.start, 6), round(r.end, 6), w))
    return out


def test_the_documentations_annotations_give_steps_waits_and_epochs(tmp_path):
    # Profile("IO").iter(loader) around the loop (loop.iter: the wait, counting steps from 1
    # in each loop; loop.yield: the body) and Profile("computation") on forward, nested in
    # the body; a loader worker's __getitem__ (another pid) takes no part
    events = [
        ev("IO", "loop.iter", 0.0, 1.0, step=1), ev("IO", "loop.yield", 1.0, 1.5, step=1),
        ev("computation", "forward", 1.1, 1.3),
        ev("IO", "loop.iter", 1.5, 2.5, step=2), ev("IO", "loop.yield", 2.5, 3.0, step=2),
        ev("computation", "forward", 2.6, 2.9),
        ev("MyDataset", "__getitem__", 0.1, 0.9, pid=2000),
        ev("IO", "loop.iter", 3.2, 3.4, step=1), ev("computation", "forward", 3.5, 3.6),
        ev("IO", "loop.iter", 3.7, 3.8, step=2), ev("computation", "forward", 3.9, 4.0),
    ]  # fmt: skip
    _, found = _steps(tmp_path, events)
    assert _rows(found) == [
        (0, 0, 1.1, 1.3, (0.0, 1.0)),
        (0, 1, 2.6, 2.9, (1.5, 2.5)),
        (0, -1, 0.0, 2.9, None),  # the epoch: its first wait to its last step
        (1, 0, 3.5, 3.6, (3.2, 3.4)),  # iter() counted from 1 again: a new epoch
        (1, 1, 3.9, 4.0, (3.7, 3.8)),
        (1, -1, 3.2, 4.0, None),
    ]
    assert found.timing["source"] == "events" and found.timing["wait"] == "measured"
    assert found.timing["loop"] == "computation/forward"


def test_dlio_s_events_its_epochs_its_generator_and_its_break(tmp_path):
    # DLIO: DLIOBenchmark._train per epoch; its data generator iterates with iter() too,
    # before training; the loop leaves by break at its step limit, so the last iteration of
    # each epoch has a compute event but no fetch (iter() closed before it logs it)
    t, f, c = "DLIOBenchmark._train", "<module>.iter", "TorchFramework.compute"
    events = [
        ev("generator", f, 0.0, 0.1, step=1), ev("generator", f, 0.2, 0.3, step=2),
        ev("dlio_benchmark", t, 1.0, 2.0), ev("dlio_benchmark", t, 2.1, 3.0),
        ev("dlio_benchmark", f, 1.0, 1.2, step=1), ev("ai_framework", c, 1.25, 1.35),
        ev("dlio_benchmark", f, 1.4, 1.5, step=2), ev("ai_framework", c, 1.55, 1.65),
        ev("ai_framework", c, 1.7, 1.8),
        ev("dlio_benchmark", f, 2.1, 2.2, step=1), ev("ai_framework", c, 2.25, 2.35),
        ev("ai_framework", c, 2.4, 2.5),
    ]  # fmt: skip
    _, found = _steps(tmp_path, events)
    assert _rows(found) == [
        (0, 0, 1.25, 1.35, (1.0, 1.2)),
        (0, 1, 1.55, 1.65, (1.4, 1.5)),
        (0, 2, 1.7, 1.8, None),  # no fetch logged: its wait is the gap
        (0, -1, 1.0, 2.0, None),  # the epoch event
        (1, 0, 2.25, 2.35, (2.1, 2.2)),
        (1, 1, 2.4, 2.5, None),
        (1, -1, 2.1, 3.0, None),
    ]


def test_forward_backward_and_optimizer_events_of_one_batch_are_one_step(tmp_path):
    # DFTracer's AI events: dataloader fetch.iter, then compute/forward, backward, step
    events = [
        ev("dataloader", "fetch.iter", 0.0, 1.0, step=1),
        ev("compute", "forward", 1.0, 1.2), ev("compute", "backward", 1.2, 1.5),
        ev("compute", "step", 1.5, 1.6),
        ev("dataloader", "fetch.iter", 1.6, 1.7, step=2),
        ev("compute", "forward", 1.7, 1.8), ev("compute", "backward", 1.8, 2.0),
        ev("compute", "step", 2.0, 2.05),
    ]  # fmt: skip
    _, found = _steps(tmp_path, events)
    assert _rows(found)[:2] == [(0, 0, 1.0, 1.6, (0.0, 1.0)), (0, 1, 1.7, 2.05, (1.6, 1.7))]


def test_compute_events_alone_are_steps_and_their_gaps_the_waits(tmp_path):
    events = [ev("compute", "train", 0.0, 1.0), ev("compute", "inner", 0.2, 0.5),
              ev("compute", "train", 2.0, 3.0)]  # fmt: skip
    _, found = _steps(tmp_path, events)
    assert _rows(found) == [(0, 0, 0.0, 1.0, None), (0, 1, 2.0, 3.0, None), (0, -1, 0.0, 3.0, None)]
    assert found.timing["wait"] == "" and "gaps between them" in found.timing["method"]


def test_annotations_that_cross_and_rules_that_match_nothing_are_named(tmp_path):
    crossing = [ev("IO", "loop.iter", 0.0, 1.0, step=1), ev("computation", "forward", 0.5, 1.5)]
    _, found = _steps(tmp_path / "a", crossing)
    (issue,) = found.issues
    assert issue["kind"] == "crossing-events" and issue["source"] == "rank 0"
    assert issue["message"].startswith("1 compute events of pid 1000 overlap fetch events (IO)")
    settings = AnalysisSettings.from_dict({"phases": {"compute": [{"cat": "forwrd"}]}})
    _, found = _steps(tmp_path / "b", crossing, settings)
    assert found.issues[0] == {
        "source": "analysis.phases.compute", "kind": "no-match", "severity": "warning",
        "message": "analysis.phases.compute [{'cat': 'forwrd'}] matches no event of the "
        "trace; its categories are: IO, computation",
    }  # fmt: skip
    # the defaults matching nothing is no news: a trace without annotations
    _, found = _steps(tmp_path / "c", [ev("POSIX", "open64", 0.0, 0.1)])
    assert found is None


def test_unoverlapped_io_exact_and_as_dftracer_analyzer_sums_it(tmp_path):
    # one process: compute [0,1] and [2,3]; application I/O [0.5, 2.5]; POSIX reads
    # [0.2,0.3] [1.2,1.5] [2.9,3.5] and an open [1.6,1.7]
    events = [ev("computation", "forward", 0.0, 1.0), ev("computation", "forward", 2.0, 3.0),
              ev("IO", "loop.iter", 0.5, 2.5, step=1),
              ev("POSIX", "open64", 1.6, 1.7, path="/data/a")]  # fmt: skip
    segs = [
        (0, "/data/a", "read", 0, 10, a, b, 1000) for a, b in ((0.2, 0.3), (1.2, 1.5), (2.9, 3.5))
    ]
    store = make_store(tmp_path / "s", segs=segs, app_events=events, tracer="dftracer")
    summary = analyze_run(store, tmp_path / "an")["pipeline"]["unoverlapped"]
    table = pd.read_parquet(tmp_path / "an" / "unoverlapped.parquet")
    t = {k: round(v, 9) for k, v in summary["totals"].items()}
    assert t == {
        "compute_time": 2.0,
        "app_io_time": 2.0,
        "posix_io_time": 1.1,  # 0.1 + 0.3 + 0.6 + 0.1
        "unoverlapped_app_io_time": 1.0,  # [1, 2] with no compute
        "unoverlapped_posix_io_time": 0.9,  # [1.2,1.5] + [1.6,1.7] + [3.0,3.5]
        "u_app_io_dfa": 0.0,  # sums: 2.0 of I/O less 2.0 of compute
        "u_posix_io_dfa": 0.0,  # 1.1 less 2.0, clipped at 0
    }
    assert table[["rank", "pid"]].values.tolist() == [[0, 1000]]


def test_a_loop_that_neither_computes_nor_waits_is_held_back_by_itself():
    s = AnalysisSettings()
    tot = {"au": 0.5, "wait_per_rank": 1.9, "idle_per_rank": 4.0, "epoch_time_per_rank": 8.0,
           "read_in_wait_share": 0.1, "meta_in_wait_share": 0.0, "no_read_share": 0.9,
           "startup": 0.0, "training_time": 8.0, "run_time": 8.0, "epochs": 1}  # fmt: skip
    v = verdict(tot, {"loader_workers": 2}, s)
    assert v["kind"] == "loop-bound"  # 1.9 s of 4.0 s idle is waiting: under half
    assert v["text"].endswith(
        "but they do not compute for 4.0 s: 2.1 s of it is neither computing nor waiting for a "
        "batch, spent by the loop itself between steps (logging, metrics, synchronisation, "
        "evaluation)"
    )
    assert verdict({**tot, "wait_per_rank": 2.0}, {}, s)["kind"] == "input-bound-preprocessing"


def test_phase_options_on_the_command_line():
    assert parse_phase("compute:cat=computation") == ("compute", {"cat": "computation"})
    assert parse_phase("fetch:cat=IO:name=\\.iter$") == ("fetch", {"cat": "IO", "name": "\\.iter$"})
    s = load_settings(None, ["compute:cat=fw", "compute:name=^step$"])
    assert s.phases["compute"] == [{"cat": "fw"}, {"name": "^step$"}]
    assert s.phases["fetch"] == AnalysisSettings().phases["fetch"]  # the others stay
    for bad, said in (("compute", "expected KIND:cat=REGEX"), ("work:cat=x", "KIND one of"),
                      ("fetch:cat=(", "is not a regex"), ("fetch:tag=x", "expected cat=REGEX")):  # fmt: skip
        with pytest.raises(ValueError, match=said):
            parse_phase(bad)
        with pytest.raises(SystemExit, match=re.escape(f"iosweep analyze: --phase '{bad}'")):
            load_settings(None, [bad])


# Verbatim from DLIO 2.0.0's trace-1-of-2.pfw (pydftracer 1.0.2): a JSON array, numbers as
# strings (not always: "ret":26), the rank as pid, the file by name, a text "epoch".
DLIO_LINES = r"""[
{"id":"301","name":"TorchDataset.__init__","cat":"data_loader","pid":"1","tid":"20195","ts":"1795595059970055","dur":"255","ph":"X","args":{"hostname":"vm","p_idx":300,"level":6,"epoch":"train"}}
{"id":"348","name":"open64","cat":"POSIX","pid":"1","tid":"20203","ts":"1795595060499755","dur":"18","ph":"X","args":{"hostname":"vm","p_idx":347,"level":11,"ret":26,"flags":524288,"fname":"/tmp/dliorun/data/train/img_131_of_256.jpeg"}}
{"id":"349","name":"lseek64","cat":"POSIX","pid":"1","tid":"20203","ts":"1795595060499812","dur":"2","ph":"X","args":{"hostname":"vm","p_idx":347,"level":11,"ret":"0","whence":1,"offset":"0","fd":26,"fname":"/tmp/dliorun/data/train/img_131_of_256.jpeg"}}
{"id":"351","name":"read","cat":"POSIX","pid":"1","tid":"20203","ts":"1795595060499859","dur":"4","ph":"X","args":{"hostname":"vm","level":11,"ret":"2598","p_idx":347,"count":"4096","fd":26,"fname":"/tmp/dliorun/data/train/img_131_of_256.jpeg"}}
{"id":"352","name":"read","cat":"POSIX","pid":"1","tid":"20203","ts":"1795595060500129","dur":"3","ph":"X","args":{"hostname":"vm","level":11,"ret":"0","p_idx":347,"count":"61440","fd":26,"fname":"/tmp/dliorun/data/train/img_131_of_256.jpeg"}}
{"id":"353","name":"close","cat":"POSIX","pid":"1","tid":"20203","ts":"1795595060500250","dur":"5","ph":"X","args":{"hostname":"vm","p_idx":347,"level":11,"ret":0,"fd":26,"fname":"/tmp/dliorun/data/train/img_131_of_256.jpeg"}}
{"id":"307","name":"<module>.iter","cat":"dlio_benchmark","pid":"1","tid":"20195","ts":"1795595059971316","dur":"550239","ph":"X","args":{"hostname":"vm","p_idx":302,"level":6,"step":"1"}}
{"id":"306","name":"TorchFramework.compute","cat":"ai_framework","pid":"1","tid":"20195","ts":"1795595060521830","dur":"20346","ph":"X","args":{"hostname":"vm","p_idx":302,"level":6}}
"""


def test_dlio_s_dftracer_1x_trace_is_read_files_sizes_hosts_and_processes(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "trace-1-of-2.pfw").write_text(DLIO_LINES)
    log = read_dftracer_trace(out / "trace-1-of-2.pfw")
    seg = log.segments.to_pandas()
    assert seg[["path", "op", "offset", "length", "pid"]].values.tolist() == [
        ["/tmp/dliorun/data/train/img_131_of_256.jpeg", "read", 0, 2598, 20203],
        ["/tmp/dliorun/data/train/img_131_of_256.jpeg", "read", 2598, 0, 20203],
    ]  # the position after open and two seeks to 0; a zero-length read at end of file
    assert set(seg["host"]) == {"vm"} and log.host == "vm"
    app = log.app_events.to_pandas()
    assert app.loc[app["name"] == "<module>.iter", "step"].tolist() == [1]
    assert app.loc[app["name"] == "TorchDataset.__init__", "epoch"].isna().all()  # "train"
    assert sorted(set(app["pid"])) == [20195, 20203]  # threads: the loop, a loader worker
    assert not log.issues
    meta = ingest([out], tmp_path / "store")
    assert [r.rank for r in meta.ranks] == [1]  # trace-1-of-2: DLIO's rank 1


def _dlio_output(folder: Path, ranks: int, traces: list[int]) -> None:
    """A DLIO output folder as DLIO 2.0.0 lays it out (the keys iosweep reads)."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text(
        "workload:\n  model: default\n  framework: pytorch\n  dataset:\n    format: jpeg\n"
        "  reader:\n    data_loader: pytorch\n    batch_size: 8\n    read_threads: 2\n"
        "  train:\n    epochs: 2\n    computation_time: 0.02\n"
    )
    (folder / "summary.json").write_text(json.dumps({
        "num_accelerators": ranks, "num_hosts": 1, "hostname": "vm",
        "metric": {"train_au_percentage": [77.5, 81.5], "train_au_mean_percentage": 79.5,
                   "train_au_meet_expectation": "fail",
                   "train_throughput_mean_samples_per_second": 445.9},
    }))  # fmt: skip
    (folder / "0_output.json").write_text(json.dumps({
        "1": {"proc": {"block1": [0.03, 0.028, 0.029]}, "au": {"block1": 77.0},
              "compute": {"block1": [0.02, 0.02, 0.02]}},
        "hostname": "vm",
    }))  # fmt: skip
    for r in traces:
        (folder / f"trace-{r}-of-{ranks}.pfw").write_text(DLIO_LINES)


def test_dlio_s_own_account_of_its_run(tmp_path):
    _dlio_output(tmp_path / "out", 2, [0, 1])
    rec, issues = read_dlio_output(tmp_path / "out")
    assert not issues
    assert rec["params"] == {"framework": "pytorch", "workload": "dlio:default", "batch_size": 8,
                             "loader_workers": 2, "epochs": 2, "ranks": 2,
                             "dataset_format": "jpeg"}  # fmt: skip
    d = rec["dlio"]
    assert (d["au_percentage"], d["au_mean_percentage"], d["computation_time"]) == (
        [77.5, 81.5],
        79.5,
        0.02,
    )
    # per rank and epoch: AU per block, steps, the configured compute of the steps after the first
    assert d["ranks"] == {"0": {"1": {"au_percentage": {"block1": 77.0}, "steps": 3,
                                      "computation_time": pytest.approx(0.04)}}}  # fmt: skip


def test_a_dlio_rank_without_its_trace_is_an_error_and_two_runs_are_two_stores(tmp_path):
    _dlio_output(tmp_path / "one", 3, [0, 2])
    _rec, issues = read_dlio_output(tmp_path / "one")
    assert [(i.kind, i.severity) for i in issues] == [("missing-log", "error")]
    assert "DLIO ran 3 ranks but left no trace of rank(s) [1]" in issues[0].message
    # two DLIO runs in one folder: one store each, said so; ingest() of one store refuses
    _dlio_output(tmp_path / "both" / "run-a", 2, [0, 1])
    _dlio_output(tmp_path / "both" / "run-b", 2, [0, 1])
    from iosweep.trace.ingest import ingest_jobs

    stores = ingest_jobs([tmp_path / "both"], tmp_path / "st")
    assert sorted(p.name for p, _ in stores) == ["run-a", "run-b"]
    meta = stores[0][1]
    assert meta.manifest["dlio"]["folder"].endswith(stores[0][0].name)
    assert any(i.kind == "mixed-jobs" and "run-a (2 traces), run-b (2 traces)" in i.message
               for i in meta.issues)  # fmt: skip
    with pytest.raises(ValueError, match="2 different jobs"):
        ingest([tmp_path / "both"], tmp_path / "st2")


def test_traces_of_runs_at_different_times_in_one_folder_are_two_runs(tmp_path):
    # two traces a year apart (issue 50, item 8: runs that never overlapped are separate
    # runs, never one whose processes are compared): one store each, said so; ingest() of
    # one store refuses, naming both
    from iosweep.trace.ingest import ingest_jobs

    folder = tmp_path / "t"
    folder.mkdir()
    early = DLIO_LINES.replace('"1795595059', '"1695595059').replace('"1795595060', '"1695595060')
    (folder / "a.pfw").write_text(DLIO_LINES)
    (folder / "b.pfw").write_text(early)  # the same run, a year earlier
    stores = ingest_jobs([folder], tmp_path / "stores")
    assert [len(m.processes) for _, m in stores] == [1, 1]
    assert [Path(m.processes[0].source).name for _, m in stores] == ["b.pfw", "a.pfw"]
    assert all(np.isfinite(m.clock_zero) for _, m in stores)
    (mixed,) = [i for i in stores[0][1].issues if i.kind == "mixed-jobs"]
    assert "from 2023-09-24" in mixed.message and "from 2026-11-25" in mixed.message
    with pytest.raises(ValueError, match="2 different jobs"):
        ingest([folder], tmp_path / "store")


def test_an_untraced_dlio_run_s_steps_are_laid_from_its_own_times(tmp_path):
    """Rank 0, epoch 1, one block from 10:00:00 UTC: loads 2.0 and 0.5 s, processing (from the
    same start) 3.0 and 1.5 s: step 0 waits 0-2 and computes 2-3, step 1 waits 3-3.5 and
    computes 3.5-4.5 (s after the block's start); the epoch row is per_epoch_stats'."""
    from datetime import UTC, datetime

    folder = tmp_path / "out"
    _dlio_output(folder, 1, [])
    (folder / "0_output.json").write_text(json.dumps({
        "1": {"load": {"block1": [2.0, 0.5]}, "proc": {"block1": [3.0, 1.5]},
              "au": {"block1": 50.0}, "compute": {"block1": [1.0, 1.0]}},
        "hostname": "vm",
    }))  # fmt: skip
    (folder / "per_epoch_stats.json").write_text(json.dumps({
        "1": {"start": "2024-01-01T10:00:00", "end": "2024-01-01T10:00:05",
              "block1": {"start": "2024-01-01T10:00:00", "end": "2024-01-01T10:00:04.5"}},
    }))  # fmt: skip
    rec, issues = read_dlio_output(folder)
    t0 = datetime(2024, 1, 1, 10, tzinfo=UTC).timestamp()
    got = [(s["step"], s.get("wait_start", s["start"]) - t0, s.get("wait_end"), s["start"] - t0,
            s["end"] - t0) for s in rec["steps"]]  # fmt: skip
    assert [(k, ws, a, b) for k, ws, _, a, b in got] == [
        (0, 0.0, 2.0, 3.0),
        (1, 3.0, 3.5, 4.5),
        (-1, 0.0, 0.0, 5.0),
    ]
    assert {s["samples"] for s in rec["steps"] if s["step"] >= 0} == {8}  # the batch size
    assert rec["tracer"] == "none" and rec["ranks"] == [
        {"rank": 0, "pid": -1, "host": "vm", "size": 1}
    ]
    assert [i.kind for i in issues] == ["no-traces"]
