"""One step of a tune: the point just run, measured over its repeats; judged against what
was predicted for it and against the best point so far; then the next point, the one whose
predicted gain is the largest, or a stop and why (docs/analysis.md "Tuning").

Predictions come from the rate model (:mod:`iosweep.analysis.pipeline.rates`) of the measured
point nearest the candidate: each measurement refits the model to the newest figures, so a
point the first model got wrong corrects the predictions after it. A gain counts only above
``analysis.lever_min_gain`` and the spread of the best point's repeats, the bar the sweep's
advice holds its levers to.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean
from typing import Any

from iosweep.analysis.summary import (
    AnalysisFailure,
    RatePrediction,
    RunSummary,
    TuneLedger,
    TuneMeasurement,
    TunePrediction,
    TuneStep,
)
from iosweep.units import rate_text

NOT_WAITING = {"compute-bound", "loop-bound", "unexplained"}  # the loop does not wait for its data
UNJUDGED = {"startup", "too-short", "undecided"}


def _steady_rate(sm: RunSummary) -> float | None:
    """Steady-state samples/s over all ranks: what the rate model predicts."""
    if sm.pipeline.rates.available:
        return sm.pipeline.rates.samples_per_s
    tot = sm.pipeline.totals
    if tot and tot.steady_samples_per_rank and tot.steady_time_per_rank:
        return tot.steady_samples_per_rank / tot.steady_time_per_rank * tot.ranks
    return None


def _why_failed(run_id: str, sm: RunSummary | AnalysisFailure | None, error: str) -> str | None:
    if sm is None:
        return f"{run_id}: {error or 'no analysis'}"
    if isinstance(sm, AnalysisFailure):
        return f"{run_id}: the analysis failed: {sm.error}"
    if sm.status not in ("ok", "partial"):
        reason = sm.run_meta.manifest.get("reason") or "no reason recorded"
        return f"{run_id}: the run {sm.status}: {reason}"
    if _steady_rate(sm) is None:
        return f"{run_id}: no steady state to measure ({sm.pipeline.reason or 'no steps'})"
    return None


def _mean_model(runs: list[RunSummary]) -> tuple[list[RatePrediction], str]:
    """The runs' rate-model predictions averaged per worker count (those every model has)."""
    models = [sm.pipeline.rates for sm in runs if sm.pipeline.rates.available]
    if not models:
        reasons = {sm.pipeline.rates.reason for sm in runs} - {""}
        return [], "; ".join(sorted(reasons)) or "no run measured"
    shared = set.intersection(*({p.workers for p in m.predictions} for m in models))
    out = []
    for w in sorted(shared):
        preds = [next(p for p in m.predictions if p.workers == w) for m in models]
        out.append(
            RatePrediction(
                workers=w,
                samples_per_s=mean(p.samples_per_s for p in preds),
                au=mean(p.au for p in preds),
                bottleneck=preds[0].bottleneck,
                factor=mean(p.factor for p in preds),
            )
        )
    return out, ""


def measure(
    workers: int, runs: Sequence[tuple[str, RunSummary | AnalysisFailure | None, str]]
) -> TuneMeasurement:
    """One point measured over its runs: (run id, its analysis or None, why none)."""
    good: list[RunSummary] = []
    failures = []
    for run_id, sm, error in runs:
        why = _why_failed(run_id, sm, error)
        if why:
            failures.append(why)
        else:
            assert isinstance(sm, RunSummary)
            good.append(sm)
    m = TuneMeasurement(
        loader_workers=workers, run_ids=[r for r, _, _ in runs], ok=len(good), failures=failures
    )
    if not good:
        return m
    rates = [r for r in map(_steady_rate, good) if r is not None]
    tots = [sm.pipeline.totals for sm in good if sm.pipeline.totals]
    epoch = [t.samples_per_s for t in tots if t.samples_per_s]
    au = [t.au for t in tots if t.au is not None]
    share = [t.wait_share for t in tots if t.wait_share is not None]
    verdict = good[0].pipeline.verdict
    model, why = _mean_model(good)
    return m.model_copy(
        update={
            "samples_per_s": mean(rates),
            "samples_per_s_min": min(rates),
            "samples_per_s_max": max(rates),
            "epoch_samples_per_s": mean(epoch) if epoch else None,
            "au": mean(au) if au else None,
            "wait_share": mean(share) if share else None,
            "verdict": verdict.kind if verdict else "",
            "verdict_title": verdict.title if verdict else "",
            "model": model,
            "model_reason": why,
        }
    )


def best_step(steps: list[TuneStep]) -> TuneStep | None:
    """The start or the latest accepted step: the point tune recommends so far."""
    kept = [s for s in steps if s.outcome in ("start", "accepted") and s.measured.ok]
    return kept[-1] if kept else None


def predictions(steps: list[TuneStep]) -> list[TunePrediction]:
    """Each untried worker count's prediction, largest first (ties: fewer workers first)."""
    best = best_step(steps)
    if best is None or not best.measured.samples_per_s:
        return []
    tried = {s.measured.loader_workers for s in steps}
    measured = [s for s in steps if s.measured.model]
    out = []
    for w in sorted({p.workers for s in measured for p in s.measured.model} - tried):
        near = sorted(
            (s for s in measured if any(p.workers == w for p in s.measured.model)),
            key=lambda s: (abs(s.measured.loader_workers - w), -s.step),
        )[0]
        p = next(p for p in near.measured.model if p.workers == w)
        out.append(
            TunePrediction(
                loader_workers=w,
                samples_per_s=p.samples_per_s,
                au=p.au,
                bottleneck=p.bottleneck,
                gain=p.samples_per_s / best.measured.samples_per_s - 1,
                from_runs=near.measured.run_ids,
            )
        )
    return sorted(out, key=lambda p: (-round(p.samples_per_s, 6), p.loader_workers))


def _judge(m: TuneMeasurement, pred: TunePrediction | None, best: TuneStep, min_gain: float):
    """(outcome, why) of a rerun against the best point so far."""
    if not m.ok:
        return "failed", "no run measured: " + "; ".join(m.failures)
    b = best.measured
    assert m.samples_per_s is not None and b.samples_per_s
    change = m.samples_per_s / b.samples_per_s - 1
    apart = m.ok < 2 or b.ok < 2 or (m.samples_per_s_min or 0) > (b.samples_per_s_max or 0)
    than = (
        f"{rate_text(m.samples_per_s)} samples/s against {rate_text(b.samples_per_s)} with "
        f"loader workers {b.loader_workers} ({change:+.0%})"
    )
    if change >= min_gain and apart:
        return "accepted", f"measured better: {than}"
    words = "measured worse" if change < 0 else "measured no better by the bar"
    why = f"{words}: {than}; the bar: {min_gain:.0%} and repeats' ranges apart"
    if pred is not None and pred.gain > min_gain:
        why += f"; contradicts the prediction of {pred.gain:+.0%}"
    return "rejected", why


def _start_stop(m: TuneMeasurement, target_au: float) -> tuple[str, str]:
    if not m.ok:
        return "start-failed", "no run of the start measured anything: " + "; ".join(m.failures)
    if m.verdict in UNJUDGED:
        return "cannot-tune", f"the start cannot be judged: {m.verdict_title}"
    if m.au is not None and m.au >= target_au:
        return "nothing-to-tune", f"AU {m.au:.0%} already meets the target of {target_au:.0%}"
    if m.verdict in NOT_WAITING:
        share = f" ({m.wait_share:.0%} of the step time)" if m.wait_share is not None else ""
        return (
            "nothing-to-tune",
            f"{m.verdict_title}: the loop hardly waits for its data{share}, so no lever of the "
            "input pipeline can raise its rate",
        )
    return "", ""


def _next(ledger: TuneLedger, best: TuneStep) -> tuple[str, str, TunePrediction | None]:
    """(stop, why, the next point's prediction) after the steps so far."""
    b = best.measured
    assert b.samples_per_s is not None
    if ledger.steps[-1].step > 0 and b.au is not None and b.au >= ledger.target_au:
        return "target-met", f"AU {b.au:.0%} meets the target of {ledger.target_au:.0%}", None
    if ledger.reruns >= ledger.budget:
        return "budget-spent", f"the budget of {ledger.budget} reruns is spent", None
    preds = predictions(ledger.steps)
    if not preds:
        if not any(s.measured.model for s in ledger.steps):
            why = best.measured.model_reason or "no rate model"
            return "no-prediction", f"no rate model to predict from: {why}", None
        return "no-gain", "every worker count the rate model predicts has been measured", None
    top = preds[0]
    bar = max(ledger.min_gain, b.spread)
    if top.gain <= bar:
        return (
            "no-gain",
            f"no lever predicts a gain above {bar:.0%} (the larger of analysis.lever_min_gain "
            f"and the spread of repeats): the best prediction, loader workers "
            f"{top.loader_workers}, is {rate_text(top.samples_per_s)} samples/s ({top.gain:+.0%}, "
            f"limited by {top.bottleneck})",
            None,
        )
    return "", "", top


def _recommend(ledger: TuneLedger) -> TuneLedger:
    best = best_step(ledger.steps)
    if best is None:
        return ledger.model_copy(update={"recommendation": f"none: {ledger.stop_reason}"})
    start = ledger.steps[0].measured
    b = best.measured
    assert b.samples_per_s is not None and start.samples_per_s
    gain = b.samples_per_s / start.samples_per_s - 1
    if best.step == 0 and ledger.stop in ("nothing-to-tune", "cannot-tune"):
        text = f"nothing to tune: {ledger.stop_reason}"
    elif best.step == 0:
        tried = "no point tried beat it; " if ledger.reruns else ""
        text = f"keep loader workers {start.loader_workers}: {tried}{ledger.stop_reason}"
    else:
        au = f"AU {b.au:.0%}" if b.au is not None else "AU not known"
        text = (
            f"loader workers {b.loader_workers}: {rate_text(b.samples_per_s)} samples/s against "
            f"{rate_text(start.samples_per_s)} at the start ({gain:+.0%}), {au}, measured over "
            f"{b.ok} and {start.ok} runs ({', '.join(b.run_ids)})"
        )
    return ledger.model_copy(update={"best_step": best.step, "gain": gain, "recommendation": text})


def advance(ledger: TuneLedger, settings: dict[str, Any], m: TuneMeasurement) -> TuneLedger:
    """The ledger with the point just measured (``m``, run with ``settings``) recorded and the
    next point chosen, or the tune stopped with its recommendation."""
    k = len(ledger.steps)
    pred = ledger.next_prediction
    if k == 0:
        stop, why = _start_stop(m, ledger.target_au)
        step = TuneStep(
            step=0, lever="", settings=settings, measured=m, outcome="start", why="the start"
        )
    else:
        best = best_step(ledger.steps)
        assert best is not None
        outcome, why_step = _judge(m, pred, best, ledger.min_gain)
        error = (
            (pred.samples_per_s - m.samples_per_s) / m.samples_per_s
            if pred is not None and m.samples_per_s
            else None
        )
        step = TuneStep(
            step=k,
            lever=f"loader workers {best.measured.loader_workers} -> {m.loader_workers}",
            settings=settings,
            prediction=pred,
            measured=m,
            error=error,
            outcome=outcome,
            why=why_step,
        )
        stop = why = ""
    ledger = ledger.model_copy(update={"steps": [*ledger.steps, step], "next": None})
    nxt = None
    if not stop:
        best = best_step(ledger.steps)
        assert best is not None
        stop, why, nxt = _next(ledger, best)
    if stop:
        done = ledger.model_copy(update={"stop": stop, "stop_reason": why, "next_prediction": None})
        return _recommend(done)
    assert nxt is not None
    return ledger.model_copy(update={"next": nxt.loader_workers, "next_prediction": nxt})
