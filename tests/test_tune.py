"""``iosweep tune`` for real: the ImageNet-style job at 1 rank with a heavy decode
(tests/configs/tune.yaml), started at 0 loader workers, tuned through the workflow; a
compute-bound MNIST start that needs no rerun; a start that fails; refusals before any run.

Each figure of the ledger is checked against the runs' own analyses (summary.json: the
steady state's samples and time, the rate model's predictions), not against the tune's code.
How close the tune comes to the best of a full grid is benchmarks/bench_tune.py's to measure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from statistics import mean

import pytest
from conftest import REPO, html_lines

pytestmark = pytest.mark.integration

IOSWEEP = [sys.executable, "-m", "iosweep"]


def tune(tmp: Path, *args: str, extra: str = "") -> subprocess.CompletedProcess:
    cfg = tmp / "tune.yaml"
    cfg.write_text(
        (REPO / "tests" / "configs" / "tune.yaml").read_text()
        + f"results: {tmp / 'results'}\n"
        + extra
    )
    return subprocess.run(
        [*IOSWEEP, "tune", "--configfile", str(cfg), "--cores", "2", *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def _summary(results: Path, run_id: str) -> dict:
    return json.loads((results / "runs" / run_id / "analysis" / "summary.json").read_text())


def _steady(sm: dict) -> float:
    t = sm["pipeline"]["totals"]
    return t["steady_samples_per_rank"] / t["steady_time_per_rank"] * t["ranks"]


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tune")
    proc = tune(tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    results = tmp / "results"
    return results, json.loads((results / "tune" / "ledger.json").read_text()), proc.stdout


def test_each_step_is_measured_as_its_runs_measured_it(imagenet):
    results, ledger, _ = imagenet
    assert ledger["steps"][0]["measured"]["loader_workers"] == 0
    assert 1 <= len(ledger["steps"]) <= 1 + ledger["budget"]
    for step in ledger["steps"]:
        m = step["measured"]
        assert len(m["run_ids"]) == 2 and m["ok"] == 2
        rates = [_steady(_summary(results, r)) for r in m["run_ids"]]
        assert m["samples_per_s"] == pytest.approx(mean(rates), rel=1e-6)
        assert m["samples_per_s_min"] == pytest.approx(min(rates), rel=1e-6)
        assert m["samples_per_s_max"] == pytest.approx(max(rates), rel=1e-6)


def test_each_prediction_is_a_measured_points_rate_model_and_its_error_is_stated(imagenet):
    results, ledger, _ = imagenet
    for step in ledger["steps"][1:]:
        p, m = step["prediction"], step["measured"]
        # the rate models of the runs it names, at its worker count, averaged
        models = [_summary(results, r)["pipeline"]["rates"] for r in p["from_runs"]]
        at = [
            next(q for q in md["predictions"] if q["workers"] == p["loader_workers"])
            for md in models
        ]
        assert p["samples_per_s"] == pytest.approx(mean(q["samples_per_s"] for q in at))
        assert step["error"] == pytest.approx(
            (p["samples_per_s"] - m["samples_per_s"]) / m["samples_per_s"]
        )


def test_a_point_is_kept_only_when_measured_better(imagenet):
    _, ledger, _ = imagenet
    best = ledger["steps"][0]["measured"]
    for step in ledger["steps"][1:]:
        m = step["measured"]
        if step["outcome"] == "accepted":
            assert m["samples_per_s"] >= best["samples_per_s"] * 1.05
            assert m["samples_per_s_min"] > best["samples_per_s_max"]
            best = m
        else:
            assert step["outcome"] in ("rejected", "failed")
    chosen = ledger["steps"][ledger["best_step"]]["measured"]
    assert chosen == best
    assert ledger["gain"] == pytest.approx(
        chosen["samples_per_s"] / ledger["steps"][0]["measured"]["samples_per_s"] - 1
    )
    assert ledger["stop"] in ("target-met", "no-gain", "budget-spent")


def test_the_terminal_show_and_the_report_tell_the_same_ledger(imagenet, tmp_path):
    results, ledger, printed = imagenet
    shown = subprocess.run([*IOSWEEP, "show", str(results)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    for out in (printed, shown.stdout):
        assert f"recommendation: {ledger['recommendation']}" in out
        assert f"stopped ({ledger['stop']})" in out
    # the tune's runs are told by the ledger, not one by one
    assert "framework~pytorch/tune~" not in shown.stdout.split("recommendation:")[0]
    from iosweep.report import render_report

    runs = sorted(p.parent for p in results.glob("runs/**/analysis/summary.json"))
    html = render_report(runs, None, tmp_path / "r.html", ledger=results / "tune" / "ledger.json")
    lines = html_lines(html.read_text())
    assert "Tuning" in lines
    assert any(ledger["recommendation"] in ln for ln in lines)
    assert any(ln.startswith("Proved by tuning") for ln in lines)


def test_a_sweep_with_a_tune_reports_it(imagenet):
    """tune.enabled in the config: the sweep's report has the Tuning section, and the tuned
    job's verdict links to it (the tune's runs are reused: the same results)."""
    results, ledger, _ = imagenet
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(REPO / "Snakefile"),
            "--cores",
            "2",
            "--configfile",
            str(results.parent / "tune.yaml"),
        ],
        cwd=results.parent,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    lines = html_lines((results / "report" / "report.html").read_text())
    assert "Tuning" in lines and any(ledger["recommendation"] in ln for ln in lines)
    assert any(ln.startswith("Proved by tuning") for ln in lines)
    assert json.loads((results / "tune" / "ledger.json").read_text()) == ledger


def test_a_compute_bound_start_has_nothing_to_tune_and_no_rerun(tmp_path):
    # 400 steps an epoch, not 60: on a faster 2-core machine (2026-11-29) 60 steps trained in
    # 1.4 s, less than the start-up before them, and the start was "dominated by start-up"
    proc = tune(
        tmp_path,
        "--repeats",
        "1",
        "--start",
        "workload=mnist",
        "--start",
        "steps_per_epoch=400",
        "--start",
        "batch_size=64",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    ledger = json.loads((tmp_path / "results" / "tune" / "ledger.json").read_text())
    assert ledger["stop"] == "nothing-to-tune" and len(ledger["steps"]) == 1
    assert ledger["recommendation"].startswith("nothing to tune")
    runs = list((tmp_path / "results" / "runs").glob("**/manifest.json"))
    assert len(runs) == 1  # the start only


def test_a_start_that_fails_is_recorded_with_its_reason(tmp_path):
    broken = (
        "workloads:\n  broken:\n    framework: pytorch\n    launch: single\n"
        "    command: \"{python} -c 'raise SystemExit(3)' {loader_workers}\"\n"
    )
    proc = tune(tmp_path, "--repeats", "1", "--start", "workload=broken", extra=broken)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    ledger = json.loads((tmp_path / "results" / "tune" / "ledger.json").read_text())
    assert ledger["stop"] == "start-failed"
    (failure,) = ledger["steps"][0]["measured"]["failures"]
    assert "tune~broken" in failure and "failed" in failure
    assert "recommendation: none" in proc.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--budget", "0"], "config key 'tune.budget': 0 is less than the minimum of 1"),
        (
            ["--start", "framework=tensorflow", "--start", "workload=mnist"],
            "exposes none of the levers tune can predict",
        ),
        (["--start", "params.lr=0.1"], "'lr' is not a parameter of workload 'imagenet'"),
        (["--start", "loader_workers"], "give KEY=VALUE"),
    ],
)
def test_bad_requests_are_refused_before_any_run(tmp_path, args, said):
    proc = tune(tmp_path, *args)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert not (tmp_path / "results").exists()
