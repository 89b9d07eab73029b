"""Advice from evidence, for real: the ImageNet-style job, both frameworks, 2 ranks, loader
workers 0, 1, 2, 4, 8 on this machine's cores (tests/configs/advice.yaml), through the
workflow. Each framework's advice names the worker count with the best measured samples/s,
no lever it advises was measured worse, and the report, ``iosweep show`` and the end of the
sweep say the same. What counts as measured comes from the sweep table (sweep.csv), the
runs' own samples/s, not from the advice under test."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from conftest import REPO, html_lines, snakemake

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("advice")
    cfg = tmp / "advice.yaml"
    results = tmp / "results"
    cfg.write_text(
        (REPO / "tests" / "configs" / "advice.yaml").read_text() + f"results: {results}\n"
    )
    proc = snakemake("--cores", "2", "--configfile", str(cfg), "--keep-going")
    return results, proc.stdout + proc.stderr


def _table(results) -> pd.DataFrame:
    df = pd.read_csv(results / "sweep" / "sweep.csv")
    assert len(df) == 10 and set(df["status"]) == {"ok"}, df[["run_id", "status"]]
    return df


def _pipeline(results) -> dict:
    return json.loads((results / "sweep" / "pipeline.json").read_text())


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_each_frameworks_advice_names_the_best_measured_worker_count(sweep, framework):
    results, _ = sweep
    df = _table(results)
    runs = df[df["framework"] == framework].set_index("loader_workers")
    best = int(runs["samples_per_s"].idxmax())
    (series,) = [s for s in _pipeline(results)["levers"]
                 if s["lever"] == "loader_workers" and s["key"]["framework"] == framework]  # fmt: skip
    assert series["values"] == [0, 1, 2, 4, 8] and series["best"] == best
    assert f"measured best: loader workers {best} (" in series["advice"]
    # the leave-one-out prediction stands beside every value, said with its error
    assert all(p["predicted"] is not None and p["error"] is not None for p in series["points"])


def _measured_better(runs: pd.DataFrame, own: int, direction: str, gain: float) -> bool:
    """Whether some worker count in ``direction`` from ``own`` gave at least ``gain`` more
    samples/s than ``own`` (one run a value)."""
    sps = runs.set_index("loader_workers")["samples_per_s"]
    ahead = [w for w in sps.index if (w > own if direction == "more" else w < own)]
    return any(sps[w] >= sps[own] * (1 + gain) for w in ahead)


def test_no_advised_lever_was_measured_worse(sweep):
    results, _ = sweep
    df = _table(results)
    advised = {a["run_id"]: a["levers"] for a in _pipeline(results)["advised"]}
    checked = 0
    for row in df.itertuples():
        sm = json.loads((results / "runs" / row.run_id / "analysis" / "summary.json").read_text())
        v = sm["pipeline"]["verdict"]
        levers = advised.get(row.run_id, v["levers"] if v else [])
        runs = df[df["framework"] == row.framework]
        for lv in levers:
            if lv["param"] == "loader_workers" and lv["direction"] in ("more", "fewer"):
                checked += 1
                assert _measured_better(runs, int(row.loader_workers), lv["direction"], 0.05), (
                    row.run_id, lv, runs[["loader_workers", "samples_per_s"]])  # fmt: skip
            if lv["source"] == "measured" and lv["direction"] == "set":
                sps = runs.set_index("loader_workers")["samples_per_s"]
                best, own = int(sps.idxmax()), int(row.loader_workers)
                if lv["text"].startswith("keep "):  # nothing measured beat it by 5%
                    assert lv["text"].startswith(f"keep loader workers {own}:"), lv
                    assert sps[best] < sps[own] * 1.05, (row.run_id, lv, sps)
                else:  # the best measured leads
                    assert lv["text"].startswith(f"loader workers {best}: measured best"), lv
    assert checked or advised  # something was advised about the workers, or overruled


def test_the_report_show_and_the_end_of_the_sweep_say_the_same(sweep):
    results, log = sweep
    df = _table(results)
    advised = {a["run_id"]: a["levers"] for a in _pipeline(results)["advised"]}
    lines = html_lines((results / "report" / "report.html").read_text())
    text = "\n".join(lines)
    for framework in ("pytorch", "tensorflow"):
        sps = df[df["framework"] == framework].set_index("loader_workers")["samples_per_s"]
        best = int(sps.idxmax())
        # the group's verdict card, first in the report: its lever table's conclusion
        start = next(
            i for i, ln in enumerate(lines) if ln.startswith(f"{framework} · ImageNet-style: ")
        )
        card = "\n".join(lines[start : start + 20])
        assert f"Measured best: loader workers {best} (" in card, card
        # and the card's levers agree with it: the best leads, or this run's count is kept
        # where nothing measured beat it by 5%
        # this card's own "Levers to try:" line (the label may stand alone, its advice on the
        # next line: every card has one, so look from the card's start, not the page's)
        card_lines = lines[start : start + 30]
        at = next((k for k, ln in enumerate(card_lines) if ln.startswith("Levers to try:")), None)
        advice = card_lines[at].removeprefix("Levers to try:").strip() if at is not None else ""
        if at is not None and not advice:
            advice = card_lines[at + 1]
        if "loader workers" in advice.split(";")[0]:
            assert advice.startswith(
                (f"loader workers {best}: measured best", "keep loader workers")
            ), advice
    assert "loader workers 0.0" not in text and "→ 2.0" not in text  # as set
    shown = subprocess.run([sys.executable, "-m", "iosweep", "show", str(results), "--json"],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    for rec in json.loads(shown):
        run = rec["run_id"]
        sm = json.loads((results / "runs" / run / "analysis" / "summary.json").read_text())
        v = sm["pipeline"]["verdict"]
        first = (advised.get(run) or (v["levers"] if v else []) or [None])[0]
        assert rec["top_lever"] == (first["text"] if first else None), run
        if first:  # the end of the sweep printed the same first lever
            assert first["text"] in log, run
