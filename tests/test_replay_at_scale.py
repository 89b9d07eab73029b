"""A real ImageNet-style run of 2 ranks (512 JPEGs, batch 32, 3 epochs, no loader workers,
DFTracer), replayed by DLIO 2.0.0 (``.venv-dlio``) at the same scale after one calibration pass
(``iosweep replay``, docs/replay.md): DLIO's run is analysed as the real one was, its AU is
within AU_TOLERANCE of the real run's with the same verdict (twice that where the run's host
held it back, which the replay's limits say sleeps cannot reproduce), and the report sets the
two side by side.

The file is `exclusive` (docs/testing.md): the run, the calibration pass and the replay are
three moments of one host, and the replay's figures are sleeps where the run's are CPU work,
so the comparison holds only where the host's load is the same at all three. With a busy
loop on one core and the other test worker beside it, it was not (2026-12-03): a run of AU
0.825 replayed at 0.651, the calibration pass's load of a sample 12.8 ms (a 4.9 ms sleep in it)
against the run's 6.5 ms, a correction no sleep can make (``preprocess_time`` 0). In the
exclusive phase with the busy loop: 0.822 against 0.719, the run host-CPU-bound.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import html_lines

from iosweep.analysis import AnalysisSettings, analyze_run
from iosweep.replay.workload import write_replay
from iosweep.trace.ingest import ingest

pytestmark = [pytest.mark.integration, pytest.mark.exclusive]

# docs/replay.md: DLIO's own bookkeeping between steps (outside its compute sleep and its
# fetch, some 20 ms a step here) idles the emulated accelerator a few points of AU at these
# steps of about 0.5 s (measured: 3.5 and 4.6 points), and two runs of one job on a 2-core
# machine differ by a few points more
AU_TOLERANCE = 0.10


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[dict, dict, Path]:
    from iosweep.config import expand_sweep, validate_config
    from iosweep.replay.dlio import run_dlio
    from iosweep.run.imagenet import prepare_imagenet
    from iosweep.run.program import resolve_python
    from iosweep.run.runner import run_point

    base = tmp_path_factory.mktemp("replay")
    images = base / "images"
    prepare_imagenet(images, classes=4, images_per_class=128, log=lambda m: None)
    config = validate_config(
        {
            "sweep": {"frameworks": ["pytorch"], "workloads": ["imagenet"],
                      "tracers": ["dftracer"], "procs_per_node": [2], "epochs": [3],
                      "steps_per_epoch": [0], "batch_size": [32], "loader_workers": [0],
                      "staging": ["none"]},
            "training": {"collect_wait": 20, "timeout": 900, "imagenet": {"image_size": 32}},
        }
    )  # fmt: skip
    (point,) = expand_sweep(config)
    if resolve_python(point.framework, None)[0] is None:
        pytest.fail("no Horovod PyTorch stack (tools/setup.sh)")
    run_dir = base / "run"
    man = run_point(config, point, run_dir, images, log=lambda m: None)
    assert man["status"] in ("ok", "partial"), man.get("reason")
    ingest([run_dir], run_dir / "store", manifest=run_dir / "manifest.json")
    real = analyze_run(run_dir / "store", run_dir / "analysis")
    r = write_replay(
        run_dir / "store", real, base / "cfg" / "workload" / "rep.yaml", calibrate=base / "cal"
    )
    run_dlio(base / "cfg", "rep", 2, base / "dlio")
    ingest([base / "dlio"], base / "dlio" / "store")
    rep = analyze_run(base / "dlio" / "store", base / "dlio" / "analysis", AnalysisSettings())
    report = base / "report.html"
    p = subprocess.run(
        [sys.executable, "-m", "iosweep", "report", base / "dlio" / "analysis", "-o", report],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    return real, rep, r.workload, report


def test_the_replay_at_the_run_s_scale_has_its_au_and_its_verdict(replayed):
    real, rep, workload, report = replayed
    a, b = real["pipeline"], rep["pipeline"]
    # the replay's costs are sleeps that compete for no core: it is set beside the run's
    # reading from its steps and trace (the same as its verdict unless the host's changed it)
    kind = a["verdict"]["trace_kind"] or a["verdict"]["kind"]
    assert kind == b["verdict"]["kind"], (a["verdict"], b["verdict"])
    au_real, au_rep = a["totals"]["au"], b["totals"]["au"]
    # A run its host's cores held back is one the replay says sleeps cannot reproduce (the
    # limit is checked below): beside it, the same regime, not the same figure. With a busy
    # loop on one core (12-03): 0.822 against 0.719, host-CPU-bound; quiet, within 0.046.
    held = a["verdict"]["kind"] == "host-cpu-bound"
    assert abs(au_real - au_rep) < AU_TOLERANCE * (2 if held else 1), (au_real, au_rep, held)
    # DLIO's own account of the replay is read beside iosweep's (trace.dlio), and the
    # replayed run's answer, which the workload carries, beside the replay's, in the report too
    assert b["dlio"]["au_mean"] is not None
    rp = b["dlio"]["replay"]
    assert rp["of_run"] == real["run_id"] and rp["au_of_run"] == pytest.approx(au_real, abs=1e-5)
    assert rp["verdict_of_run"] == kind and rp["ranks_of_run"] == 2
    text = "\n".join(html_lines(report.read_text()))
    assert f"replays run {real['run_id']} (2 rank(s)) at 2 rank(s)" in text
    assert f"against the run's {au_real:.1%}" in text
    # what DLIO cannot express, as the workload's header lists it, in the report too
    header = workload.read_text().split("\nmodel:")[0]
    for limit in rp["limits"]:
        assert f"#  - {limit}" in header and limit in text
    assert any("a sleep per step" in x for x in rp["limits"])
    # a calibration that would need a negative sleep per sample says the replay waits longer
    short = any("which no sleep can shorten" in x for x in rp["limits"])
    assert short == (yaml.safe_load(workload.read_text())["reader"]["preprocess_time"] == 0)
    # and in the sweep section's table of replays, beside the run it replays
    cells = text[text.index("Replays") :].split("\n")
    row = cells[cells.index(real["run_id"]) :][:10]
    assert row[:4] == [real["run_id"], "yes", "2", "2"], row
    assert row[4:6] == [f"{au_real:.1%}", f"{au_rep:.1%}"] and row[8:] == [kind] * 2
    if held:
        assert any(x.startswith("the host's CPU: the run was held back") for x in rp["limits"])


def test_the_replay_reads_each_of_the_run_s_files_once_an_epoch(replayed):
    real, rep, workload, _ = replayed
    w = yaml.safe_load(workload.read_text())
    files = sorted(Path(w["dataset"]["data_folder"], "train").glob("*/*.jpeg"))
    assert len(files) == 512 and all(os.path.realpath(f).endswith(".JPEG") for f in files)
    for sm in (real, rep):
        read = sm["classes"]["dataset"]
        assert read["files"] == 512 and read["reads"] > 0
