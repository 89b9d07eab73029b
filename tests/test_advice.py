"""Advice from evidence: the rate model's arithmetic on hand-made figures, and the rule that
a lever the sweep measured no better or worse is never advised (hand-made sweep tables, the
figures of the issue's own runs on 2 cores)."""

from __future__ import annotations

import pandas as pd
import pytest

from iosweep.analysis.findings.sweep import advised
from iosweep.analysis.pipeline.advice import better, overrule
from iosweep.analysis.pipeline.levers import lever_series, pipeline_across
from iosweep.analysis.pipeline.rates import limits, predict, rate_inputs, rate_model
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.summary import Lever, LeverSeries, PipelineAcross

S = AnalysisSettings()
PARAMS = ["framework", "loader_workers", "staging", "batch_size", "rep"]


def _tot(**kw) -> dict:
    """A rank's steady state: 1,000 samples in 10 s (100/s), 4 s of it computing, 5 s
    waiting; 1,200 samples in 12 s of epochs; 2 ranks."""
    return {
        "ranks": 2, "steady_samples_per_rank": 1000.0, "steady_time_per_rank": 10.0,
        "compute_per_rank": 4.0, "wait_per_rank": 5.0, "samples": 2400.0,
        "epoch_time_per_rank": 12.0, "bytes_read_in_epochs": 2400 * 100_000,
    } | kw  # fmt: skip


def _host(rank_cores=1.0, other_cores=0.0, cores=2.0, ranks=2, wait=0.0) -> dict:
    return {
        "available": True, "rank_cores": rank_cores, "other_cores": other_cores,
        "core_wait_share": wait,
        "nodes": [{"cores_usable": cores, "ranks": ranks, "busy_share": 0.95}],
    }  # fmt: skip


def test_the_rate_model_by_hand_on_one_core_a_rank():
    r, why = rate_inputs(_tot(), _host(), 0)
    assert why == "" and r is not None
    # 100 samples/s a rank; compute 4 ms, preprocessing in process 5 ms (the wait a sample);
    # CPU 1 core x 12 s / 1,200 samples = 10 ms a sample; 2 cores / 2 ranks
    assert (r.rate, r.compute_s, r.prep_s, r.cpu_s, r.cores_per_rank) == pytest.approx(
        (100.0, 0.004, 0.005, 0.01, 1.0)
    )
    assert limits(r, 0, S) == pytest.approx(
        {"compute": 250.0, "compute and preprocessing in turn": 1 / 0.009, "the host's CPU": 100.0}
    )
    # with workers the CPU still holds it: 1 core a rank at 10 ms a sample
    two = predict(r, 2, S)
    assert two["bottleneck"] == "the host's CPU" and two["factor"] == pytest.approx(1.0)
    assert two["samples_per_s"] == pytest.approx(200.0)  # both ranks
    assert two["au"] == pytest.approx(0.4)  # 4 ms of compute a sample x 100 samples/s


def test_loader_threads_in_the_ranks_own_process_cost_its_cpu_less_its_compute():
    # tf.data's parallel map: no process below the rank; 10 ms of CPU a sample, 4 ms compute
    r, _ = rate_inputs(_tot(), _host(rank_cores=1.0, other_cores=0.0), 2)
    assert r is not None and r.prep_s == pytest.approx(0.006)
    assert r.prep_source.startswith("the rank's CPU time a sample less its compute time")
    # forked workers: their own CPU, 0.5 cores x 12 s / 1,200 samples = 5 ms
    r, _ = rate_inputs(_tot(), _host(rank_cores=1.0, other_cores=0.5), 2)
    assert r is not None and r.prep_s == pytest.approx(0.005) and r.cpu_s == pytest.approx(0.015)


def test_the_rate_model_without_the_hosts_figures_is_an_upper_bound():
    # 4 workers, the host not measured: a worker's cost is its wall time, 4 / 100 = 40 ms
    m = rate_model(_tot(), {"available": False}, 4, S)
    assert m["available"] and m["prep_s"] == pytest.approx(0.04) and m["cpu_s"] is None
    pred = {p["workers"]: p for p in m["predictions"]}
    assert sorted(pred) == [0, 1, 2, 4, 8, 16]  # 0 .. 4x its own count, cores unknown
    assert pred[4]["samples_per_s"] == pytest.approx(200.0)  # its own: the measured rate
    assert pred[8]["samples_per_s"] == pytest.approx(400.0)  # workers double the rate
    # 16 workers: 400 / 0.04 a rank, past the compute's 250: compute-bound, AU 100%
    assert pred[16]["bottleneck"] == "compute" and pred[16]["au"] == pytest.approx(1.0)
    assert any("upper bounds" in a for a in m["assumptions"])
    assert rate_model(_tot(), {"available": False}, None, S) == {
        "available": False,
        "reason": "the number of loader workers is not known (no loader_workers parameter)",
    }


def _table(workers, sps, framework="pytorch", reps=None) -> pd.DataFrame:
    reps = reps or [0] * len(workers)
    return pd.DataFrame(
        {
            "run_id": [f"{framework}-w{w}-r{r}" for w, r in zip(workers, reps, strict=True)],
            "framework": framework,
            "loader_workers": [float(w) for w in workers],  # a column with gaps is float
            "staging": "none",
            "rep": reps,
            "ranks": 2,
            "nodes": 1,
            "au": 0.5,
            "compute_share": 0.5,
            "samples_per_s": sps,
            "read_bandwidth_per_rank": 1e6,
        }
    )


def _series(df: pd.DataFrame) -> list[LeverSeries]:
    return [LeverSeries.model_validate(x) for x in lever_series(df, PARAMS, S)]


MORE = Lever(text="more loader workers", param="loader_workers", direction="more")
FEWER = Lever(text="fewer processes per core", param="loader_workers", direction="fewer")
OTHER = Lever(text="store samples pre-decoded")


def test_a_lever_measured_worse_is_never_advised():
    # the TensorFlow runs on 2 cores: workers 0 -> 2 -> 4, samples/s 35 -> 31 -> 30
    (sr,) = _series(_table([0, 2, 4], [35.0, 31.0, 30.0]))
    assert sr.values == [0, 2, 4] and sr.best == 0
    assert sr.text.startswith("loader workers 0 → 2 → 4:")  # as set: not 0.0 → 2.0
    got = overrule([MORE, OTHER], {"framework": "pytorch", "staging": "none",
                                   "loader_workers": 0.0}, [sr], S)  # fmt: skip
    assert MORE not in got and OTHER in got
    assert got[0].source == "measured" and got[0].text.startswith("keep loader workers 0:")


def test_the_best_value_measured_leads_and_only_ways_that_helped_stay():
    # the PyTorch runs: workers 0 -> 2 -> 4, samples/s 157 -> 170 -> 134
    (sr,) = _series(_table([0, 2, 4], [157.0, 170.0, 134.0]))
    assert sr.best == 2
    assert "measured best: loader workers 2 (170 samples/s, 1 run)" in sr.advice
    assert "0 → 2: +8%, 2 → 4: -21%" in sr.advice and "measured worse than 2: 0, 4" in sr.advice
    point = {"framework": "pytorch", "staging": "none"}
    # from 0, more helped (2 is better): it stays, after the measured best
    got = overrule([MORE, OTHER], point | {"loader_workers": 0}, [sr], S)
    assert [g.text for g in got][1:] == [MORE.text, OTHER.text]
    assert got[0].text == (
        "loader workers 2: measured best in this series (170 samples/s against 157 with 0, +8%)"
    )
    # from 2, more was measured worse: gone, and 2 is to be kept
    got = overrule([MORE, OTHER], point | {"loader_workers": 2}, [sr], S)
    assert [g.text.split(":")[0] for g in got] == ["keep loader workers 2", OTHER.text]
    # from 4, fewer helped: it stays; more, past what was measured, goes where a measured
    # value (2) beats this run's: the measurement leads, not the rule
    got = overrule([FEWER, MORE], point | {"loader_workers": 4}, [sr], S)
    assert got[0].text.startswith("loader workers 2: measured best") and got[1:] == [FEWER]
    # a sweep table's float column (a gap elsewhere) is the same point: 16.0 is 16
    (sr16,) = _series(_table([0, 2, 4], [157.0, 170.0, 134.0]).assign(batch_size=16))
    assert sr16.key["batch_size"] == 16
    got = overrule([MORE], point | {"batch_size": 16.0, "loader_workers": 2.0}, [sr16], S)
    assert MORE not in got
    # another framework's run is not this series'
    assert overrule([MORE], {"framework": "tensorflow", "staging": "none",
                             "loader_workers": 2}, [sr], S) == [MORE]  # fmt: skip


def test_within_the_spread_of_repeats_is_no_better():
    # 2 workers: 170 and 140; 4 workers: 150 and 160: means 155 and 155 -> no better either way;
    # 8 workers: 180 and 190, ranges clear of both: better
    df = _table([2, 2, 4, 4, 8, 8], [170.0, 140.0, 150.0, 160.0, 180.0, 190.0], reps=[0, 1] * 3)
    (sr,) = _series(df)
    pts = {p.value: p.model_dump() for p in sr.points}
    assert (pts[2]["samples_per_s_min"], pts[2]["samples_per_s_max"]) == (140.0, 170.0)
    assert not better(pts[4], pts[2], S) and not better(pts[2], pts[4], S)
    assert better(pts[8], pts[4], S) and better(pts[8], pts[2], S)
    # one run each: 5% above (lever_min_gain) is better, 4% is not
    a, b = {"samples_per_s": 105.0, "runs": 1}, {"samples_per_s": 100.0, "runs": 1}
    assert better(a, b, S) and not better(a | {"samples_per_s": 104.0}, b, S)


def test_the_sweep_analysis_lists_each_runs_levers_as_measurements_leave_them():
    df = _table([0, 2, 4], [35.0, 31.0, 30.0])
    pipe = PipelineAcross.model_validate(pipeline_across(df, PARAMS, S))
    rule = {"text": "more loader workers", "param": "loader_workers", "direction": "more"}
    sums = [{"run_id": r, "pipeline": {"verdict": {"levers": [rule]}}} for r in df["run_id"]]
    got = {a.run_id: [lv.text.split(":")[0] for lv in a.levers] for a in advised(sums, df, pipe, S)}
    # at 0: keep 0 (more measured worse); at 2 and 4: 0 measured best, more gone
    assert got == {
        "pytorch-w0-r0": ["keep loader workers 0"],
        "pytorch-w2-r0": ["loader workers 0"],
        "pytorch-w4-r0": ["loader workers 0"],
    }
