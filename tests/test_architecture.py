"""The stages' contract, at run time: the report formats what the analysis handed on
(summary.json and its declared tables) and nothing else."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from iosweep.analysis import analyze_run
from iosweep.analysis.summary import SCHEMA, SummaryError, read_summary
from iosweep.report import ReportSettings, render_report
from iosweep.trace.ingest import ingest

NP2 = "horovod-pytorch-mnist/darshan-np2"


def test_importing_the_report_loads_no_trace_or_analysis_code():
    code = (
        "import sys, iosweep.report, iosweep.cli.report\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith("
        "('iosweep.trace', 'iosweep.run', 'iosweep.analysis'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # the hand-off package and its own modules, nothing else of the analysis
    assert sorted(out.stdout.split()) == [
        "iosweep.analysis",
        "iosweep.analysis.summary",
        *(
            f"iosweep.analysis.summary.{m}"
            for m in ("base", "host", "io", "pipeline", "run", "sweep", "tune")
        ),
    ]


@pytest.fixture
def analysed_without_store(shared_data: Path, tmp_path: Path) -> Path:
    """An analysis of the PyTorch np2 Darshan run whose trace store was then deleted."""
    ingest([shared_data / NP2], tmp_path / "store")
    analyze_run(tmp_path / "store", tmp_path / "analysis")
    shutil.rmtree(tmp_path / "store")
    return tmp_path / "analysis"


def test_report_needs_only_the_analysis(analysed_without_store: Path, tmp_path: Path):
    out = render_report(
        [analysed_without_store], None, tmp_path / "r" / "report.html", ReportSettings()
    )
    index = json.loads((tmp_path / "r" / "figures" / "figures.json").read_text())
    drawn = {Path(f["file"]).name for f in index}
    # the per-operation plots come from ops_sample.parquet, not from the (deleted) store
    assert {"spatial.png", "temporal.png"} <= drawn
    page = out.read_text()
    assert "not found" not in page and "unreadable" not in page
    # Below plot_sample_ops the sample is every operation: per the fixture README each of the
    # 2 ranks reads each of the 4 IDX files with one whole-file read and one read at EOF.
    sm = read_summary(analysed_without_store)
    assert sm.ops_sample.total == sm.ops_sample.shown
    ops = pd.read_parquet(analysed_without_store / "ops_sample.parquet")
    reads = ops[(ops["class"] == "dataset") & ~ops["write"]]
    assert len(reads) == 16 and sorted(reads["rank"].unique()) == [0, 1]


def test_summary_of_another_version_is_refused_by_name(analysed_without_store: Path):
    f = analysed_without_store / "summary.json"
    d = json.loads(f.read_text())
    d["schema"] = "iosweep.analysis.run/1"
    f.write_text(json.dumps(d))
    with pytest.raises(SummaryError, match=r"summary.json: summary schema .*run/1.*rerun the"):
        read_summary(f)
    d["schema"] = SCHEMA
    del d["checkpoints"]
    f.write_text(json.dumps(d))
    with pytest.raises(SummaryError, match=r"summary.json: checkpoints: Field required"):
        read_summary(f)


def test_report_lists_an_outdated_summary_as_a_problem(analysed_without_store: Path, tmp_path):
    f = analysed_without_store / "summary.json"
    d = json.loads(f.read_text())
    d["schema"] = "iosweep.analysis.run/1"
    f.write_text(json.dumps(d))
    out = render_report(
        [analysed_without_store], None, tmp_path / "r" / "report.html", ReportSettings()
    )
    assert "rerun the analysis" in out.read_text()


def test_every_fixture_the_tests_name_is_checked_at_session_start():
    """conftest.FIXTURES is what CI=true checks before running anything: every fixture
    folder a test names must be in it, or a missing one would only show test by test."""
    import re

    from conftest import FIXTURES

    named = set()
    for src in (Path(__file__).parent).glob("*.py"):
        for m in re.finditer(
            r"\b((?:darshan-logs|horovod-pytorch-mnist|horovod-tf2-mnist|imagenet-style-resnet50-h100)"
            r"/[A-Za-z0-9_.-]+)",
            src.read_text(),
        ):
            named.add("/".join(m.group(1).split("/")[:2]))
    # names built with an f-string ("darshan-np{n}") are covered by their expansions
    unlisted = {n for n in named if not n.endswith("-np") and n not in FIXTURES}
    assert not unlisted, unlisted


def test_no_module_is_past_800_lines_and_the_check_says_which(tmp_path):
    check = [sys.executable, str(Path(__file__).resolve().parents[1] / "tools" / "check_sizes.py")]
    ok = subprocess.run(check, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    (tmp_path / "big.py").write_text("x = 1\n" * 801)
    (tmp_path / "fine.py").write_text("x = 1\n" * 800)
    bad = subprocess.run([*check, str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert (
        bad.stdout == f"{tmp_path / 'big.py'}: 801 lines, more than 800: split it along its seams\n"
    )


def test_no_line_is_packed_past_the_formatter(tmp_path):
    check = [sys.executable, str(Path(__file__).resolve().parents[1] / "tools" / "check_sizes.py")]
    (tmp_path / "packed.py").write_text("x = [1,\n     2]  # fmt: skip\n")
    bad = subprocess.run([*check, str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stdout == f"{tmp_path / 'packed.py'}:2: # fmt: skip: let the formatter lay it out\n"


def test_sections_by_one_interface_are_found_in_their_rooms_and_fill_the_summary(
    analysed_without_store: Path, shared_data: Path
):
    # the registry finds the sections each room registers (importing every room module), each
    # key a field of the hand-off; a second section under one key is refused by name; and a
    # run's summary holds what each section's of_run made of its parts
    import darshan
    import numpy as np

    from iosweep.analysis.sections import Section, register, sections
    from iosweep.analysis.summary.run import RunSummary

    order = [s.key for s in sections()]
    found = {s.key: s for s in sections()}
    moved = {"checkpoints", "metadata", "overlap", "pipeline", "sizes", "spatial", "temporal"}
    assert {"alignment", "layers"} | moved <= found.keys()
    assert order.index("sizes") < order.index("pipeline")  # its context reads the sizes
    fields = {f.alias or n for n, f in RunSummary.model_fields.items()}
    assert found.keys() <= fields
    with pytest.raises(ValueError, match="two summary sections are registered as 'layers'"):
        register(Section("layers", found["layers"].of_part, found["alignment"].of_run))
    summary = json.loads((analysed_without_store / "summary.json").read_text())
    # the logs' own POSIX records, as PyDarshan reads them: the most common file alignment
    alignments = []
    for log in sorted((shared_data / NP2).rglob("*.darshan")):
        rep = darshan.DarshanReport(str(log), read_all=True)
        alignments += rep.records["POSIX"].to_df()["counters"]["POSIX_FILE_ALIGNMENT"].tolist()
    values, counts = np.unique(alignments, return_counts=True)
    assert summary["alignment"]["file_alignment"] == int(values[counts.argmax()])
    assert "POSIX" in [layer["module"] for layer in summary["layers"]]


def test_sections_run_after_those_they_read_and_one_table_is_made_once(
    analysed_without_store: Path, monkeypatch
):
    # a section runs after the sections it names in ``after`` (their run values are made
    # first), one naming a section nobody registered is refused by name; every analysis
    # table is made (by a section or the put-together step) and written
    from iosweep.analysis import sections as registry
    from iosweep.analysis.sections import Section, register, sections
    from iosweep.analysis.summary import ANALYSIS_TABLES

    def nothing(*_):
        return None

    sections()  # every room imported (and registered) before the registry is swapped
    monkeypatch.setattr(registry, "_REGISTERED", {})
    register(Section("trace", nothing, nothing, after=("volume",)))
    register(Section("volume", nothing, nothing, after=("alignment",)))
    register(Section("alignment", nothing, nothing))
    assert [s.key for s in sections()][-3:] == ["alignment", "volume", "trace"]
    register(Section("imbalance", nothing, nothing, after=("nodez",)))
    with pytest.raises(ValueError, match=r"'imbalance' runs after unknown \['nodez'\]"):
        sections()
    written = json.loads((analysed_without_store / "summary.json").read_text())["tables"]
    assert sorted(written) == sorted(ANALYSIS_TABLES)
    assert all((analysed_without_store / f).exists() for f in written.values())


def test_a_summary_section_is_typed_where_it_is_made(analysed_without_store: Path):
    # each section is checked against its field of the hand-off when it is set: the wrong
    # shape is named with the section and the field inside it, an unknown section too; the
    # summary is put together from the typed sections, as read_summary reads the file
    from iosweep.analysis.summary.build import SummarySections

    made = SummarySections()
    ranks = {"count": 2, "kind": "rank", "with_io": 2, "nodes": None, "hosts": [], "per_node": {}}
    with pytest.raises(SummaryError, match=r"summary section 'ranks': count: .*integer"):
        made["ranks"] = {**ranks, "count": "two"}
    with pytest.raises(SummaryError, match=r"no section 'rnaks'"):
        made["rnaks"] = ranks
    made["ranks"] = ranks
    assert made["ranks"] is ranks  # read back as made
    with pytest.raises(SummaryError, match=r"run_id: Field required"):
        made.model()
    written = json.loads((analysed_without_store / "summary.json").read_text())
    whole = SummarySections()
    whole.update(written)
    assert whole.model() == read_summary(analysed_without_store)
