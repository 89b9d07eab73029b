"""The tune's decisions (iosweep.tune.steps) on measurements given by hand: what is kept,
what stops it, where each prediction comes from. Figures computed by hand in each test."""

from __future__ import annotations

import pytest

from iosweep.analysis.summary import RatePrediction, TuneLedger, TuneMeasurement
from iosweep.tune.steps import advance, predictions


def ledger(budget: int = 3, target: float = 0.9) -> TuneLedger:
    return TuneLedger(
        workload="imagenet",
        framework="pytorch",
        start={"ranks": 1, "loader_workers": 0},
        target_au=target,
        budget=budget,
        repeats=2,
        min_gain=0.05,
    )


def model(*points: tuple[int, float, float]) -> list[RatePrediction]:
    return [
        RatePrediction(workers=w, samples_per_s=r, au=au, bottleneck="compute", factor=1.0)
        for w, r, au in points
    ]


def measured(workers, lo, hi, au=0.5, verdict="input-bound-preprocessing", m=(), share=0.4):
    return TuneMeasurement(
        loader_workers=workers,
        run_ids=[f"w{workers}/rep~0", f"w{workers}/rep~1"],
        ok=2,
        samples_per_s=(lo + hi) / 2,
        samples_per_s_min=lo,
        samples_per_s_max=hi,
        au=au,
        wait_share=share,
        verdict=verdict,
        verdict_title=verdict,
        model=list(m),
    )


def failed(workers):
    return TuneMeasurement(
        loader_workers=workers,
        run_ids=[f"w{workers}/rep~0", f"w{workers}/rep~1"],
        ok=0,
        failures=[f"w{workers}/rep~0: the run failed: exit 1", f"w{workers}/rep~1: ..."],
    )


START_MODEL = model((0, 60, 0.5), (1, 110, 0.95), (2, 120, 0.97), (4, 120, 0.97))


def test_a_start_at_the_target_needs_no_rerun():
    out = advance(ledger(), {}, measured(0, 99, 101, au=0.93, m=START_MODEL))
    assert out.stop == "nothing-to-tune" and out.next is None
    assert "AU 93% already meets the target of 90%" in out.stop_reason
    assert out.recommendation.startswith("nothing to tune") and out.best_step == 0


def test_a_loop_that_does_not_wait_for_data_is_not_tuned():
    out = advance(ledger(), {}, measured(0, 99, 101, au=0.6, verdict="compute-bound", share=0.01))
    assert out.stop == "nothing-to-tune" and "1% of the step time" in out.stop_reason


def test_the_largest_predicted_gain_is_run_next_fewest_workers_on_a_tie():
    out = advance(ledger(), {}, measured(0, 58, 62, m=START_MODEL))
    # 2 and 4 workers both predict 120 samples/s: the fewer workers; gain 120 / 60 - 1
    assert out.next == 2 and out.next_prediction is not None
    assert out.next_prediction.gain == pytest.approx(1.0)
    assert out.next_prediction.from_runs == ["w0/rep~0", "w0/rep~1"]


def test_a_measured_gain_is_kept_with_the_models_error_and_the_target_stops_it():
    out = advance(ledger(), {}, measured(0, 58, 62, m=START_MODEL))
    out = advance(out, {}, measured(2, 108, 112, au=0.95))
    step = out.steps[1]
    assert step.outcome == "accepted" and step.lever == "loader workers 0 -> 2"
    assert step.error == pytest.approx((120 - 110) / 110)
    assert out.stop == "target-met" and out.best_step == 1
    assert out.gain == pytest.approx(110 / 60 - 1)


def test_a_point_measured_worse_is_rejected_against_its_prediction():
    out = advance(ledger(), {}, measured(0, 58, 62, m=START_MODEL))
    out = advance(out, {}, measured(2, 50, 54, au=0.8, m=model((1, 70, 0.7), (4, 52, 0.8))))
    step = out.steps[1]
    assert step.outcome == "rejected" and "measured worse" in step.why
    assert "contradicts the prediction of +100%" in step.why
    # the next candidates: 1 from the start's model or 2's? 1 is as near to 0 as to 2: the
    # latest step's model (70); 4 from 2's model (52): nothing beats 60 by 5% -> 1 (70, +17%)
    assert out.next == 1 and out.next_prediction.samples_per_s == 70
    assert out.next_prediction.from_runs == ["w2/rep~0", "w2/rep~1"]


def test_a_failed_rerun_is_recorded_and_the_tune_goes_on():
    out = advance(ledger(), {}, measured(0, 58, 62, m=START_MODEL))
    out = advance(out, {}, failed(2))
    assert out.steps[1].outcome == "failed" and "exit 1" in out.steps[1].why
    assert out.steps[1].error is None
    assert out.next in (1, 4) and not out.stop  # 4 (120) before 1 (110)
    assert out.next == 4


def test_the_budget_ends_it():
    out = advance(ledger(budget=1), {}, measured(0, 58, 62, m=START_MODEL))
    out = advance(out, {}, measured(2, 70, 72, au=0.6, m=START_MODEL))
    assert out.stop == "budget-spent" and out.reruns == 1
    assert out.best_step == 1  # 71 against 60: +18%, ranges apart


def test_no_gain_above_the_spread_of_repeats_stops_it():
    # start 100 [90-110]: a spread of 20%; the best prediction +15%
    m = model((0, 100, 0.5), (1, 115, 0.6))
    out = advance(ledger(), {}, measured(0, 90, 110, m=m))
    assert out.stop == "no-gain" and "above 20%" in out.stop_reason
    assert out.recommendation.startswith("keep loader workers 0")


def test_no_rate_model_is_said_not_guessed():
    m = measured(0, 58, 62).model_copy(update={"model_reason": "no steady state"})
    out = advance(ledger(), {}, m)
    assert out.stop == "no-prediction" and "no steady state" in out.stop_reason


def test_predictions_come_from_the_nearest_measured_point():
    out = advance(ledger(), {}, measured(0, 58, 62, m=START_MODEL))
    out = advance(out, {}, measured(2, 108, 112, au=0.8, m=model((1, 100, 0.8), (4, 130, 0.9))))
    by_workers = {p.loader_workers: p for p in predictions(out.steps)}
    assert by_workers[4].samples_per_s == 130  # 2's model, not the start's 120
    assert by_workers[4].gain == pytest.approx(130 / 110 - 1)  # over the best measured
    assert by_workers[1].samples_per_s == 100  # as near 0 as 2: the latest step's


def test_a_start_that_failed_stops_with_its_reasons():
    out = advance(ledger(), {}, failed(0))
    assert out.stop == "start-failed" and "exit 1" in out.stop_reason
    assert out.recommendation.startswith("none")
