"""I/O layers other than POSIX and STDIO in Darshan logs: HDF5, PnetCDF, DFS and DAOS records
are read, a DFS job's I/O counts once (not again at the DAOS layer under it), a job whose
I/O only an unanalysed layer saw is told so, and damage in a module iosweep does not
analyse is still found.

The logs are written with libdarshan-util's own writer from counters stated in each test;
PyDarshan reads the same logs back as the independent check of what they hold."""

from __future__ import annotations

import shutil
from pathlib import Path

import darshan
import pandas as pd
import pytest
from conftest import shared_fixture

from iosweep.analysis import AnalysisSettings, analyze_run
from iosweep.trace.darshan.check import check_log
from iosweep.trace.darshan.read import read_darshan_log
from iosweep.trace.darshan.write import CounterRecord, write_darshan_log
from iosweep.trace.ingest import ingest

MiB = 1 << 20


def log_with(tmp_path: Path, records: list[CounterRecord], nprocs: int = 4) -> Path:
    (tmp_path / "logs").mkdir(exist_ok=True)
    return write_darshan_log(
        tmp_path / "logs" / "job.darshan",
        [],
        start=1_700_000_000.0,
        end=1_700_000_010.0,
        exe="/apps/ior -a DFS",
        jobid=4242,
        nprocs=nprocs,
        records=records,
    )


def analysed(tmp_path: Path, log: Path) -> dict:
    ingest([log.parent], tmp_path / "store")
    return analyze_run(tmp_path / "store", tmp_path / "out", AnalysisSettings.from_dict({}))


# IOR through DFS, as Darshan records it: the DFS file, and under it the DAOS array calls
# that DFS made (a few bytes more: DFS's own metadata), plus IOR's terminal output
DFS_JOB = [
    CounterRecord(
        "STDIO",
        "<STDOUT>",
        {"STDIO_WRITES": 128, "STDIO_BYTES_WRITTEN": 2214},
        rank=-1,
    ),
    CounterRecord(
        "DFS",
        "/testFile",
        {
            "DFS_OPENS": 4,
            "DFS_READS": 60,
            "DFS_READXS": 4,
            "DFS_NB_READS": 10,  # among the 64 above: not counted again
            "DFS_WRITES": 64,
            "DFS_BYTES_READ": 16 * MiB,
            "DFS_BYTES_WRITTEN": 16 * MiB,
        },
        {"DFS_F_READ_TIME": 0.25, "DFS_F_WRITE_TIME": 0.75},
        rank=-1,
    ),
    CounterRecord(
        "DAOS",
        "<DAOS array>",
        {
            "DAOS_ARRAY_READS": 64,
            "DAOS_ARRAY_WRITES": 64,
            "DAOS_OBJ_FETCHES": 7,
            "DAOS_BYTES_READ": 16 * MiB + 528,
            "DAOS_BYTES_WRITTEN": 16 * MiB + 88,
        },
        {"DAOS_F_READ_TIME": 0.25, "DAOS_F_WRITE_TIME": 0.75},
        rank=-1,
    ),
]


def test_every_layer_is_read_as_pydarshan_reads_it(tmp_path):
    records = [
        *DFS_JOB,
        CounterRecord("H5F", "/d/out.h5", {"H5F_OPENS": 4, "H5F_FLUSHES": 2}, rank=-1),
        CounterRecord(
            "H5D",
            "/d/out.h5:/grid",
            {"H5D_READS": 16, "H5D_WRITES": 8, "H5D_BYTES_READ": 4 * MiB},
            {"H5D_F_READ_TIME": 1.5},
            rank=-1,
        ),
        CounterRecord(
            "PNETCDF_VAR",
            "/d/out.nc:temp",
            {
                "PNETCDF_VAR_COLL_WRITES": 12,
                "PNETCDF_VAR_INDEP_WRITES": 4,
                "PNETCDF_VAR_BYTES_WRITTEN": 3 * MiB,
            },
            rank=2,
        ),
    ]
    log = log_with(tmp_path, records)
    with darshan.DarshanReport(str(log)) as rep:
        assert set(rep.modules) == {"STDIO", "DFS", "DAOS", "H5F", "H5D", "PNETCDF_VAR"}
        assert int(rep.records["DFS"].to_df()["counters"]["DFS_READXS"].sum()) == 4
    c = read_darshan_log(log).counters.to_pandas().set_index("module")
    # DFS: READS + READXS (the non-blocking ones are among them)
    assert (c.loc["DFS", "reads"], c.loc["DFS", "writes"]) == (64, 64)
    assert c.loc["DFS", "bytes_read"] == 16 * MiB and c.loc["DFS", "read_time"] == 0.25
    # DAOS: array reads + object fetches
    assert (c.loc["DAOS", "reads"], c.loc["DAOS", "bytes_written"]) == (71, 16 * MiB + 88)
    assert (c.loc["H5F", "opens"], c.loc["H5F", "fsyncs"]) == (4, 2)
    assert (c.loc["H5D", "reads"], c.loc["H5D", "bytes_read"]) == (16, 4 * MiB)
    v = c.loc["PNETCDF_VAR"]
    assert (v["writes"], v["collective_writes"], v["bytes_written"]) == (16, 12, 3 * MiB)
    # no layer but POSIX and STDIO records the furthest byte: unknown, not 0
    assert c.loc[["DFS", "DAOS", "H5D"], "max_byte_read"].isna().all()


def test_a_dfs_job_counts_its_io_once(tmp_path):
    sm = analysed(tmp_path, log_with(tmp_path, DFS_JOB))
    assert sm["analysis_status"] == "complete"
    # the DFS bytes, not DFS + DAOS (the same data one layer down)
    assert sm["headline"]["bytes_read"] == 16 * MiB
    assert sm["headline"]["bytes_written"] == 16 * MiB
    layers = {x["module"]: x for x in sm["layers"]}
    assert [x["module"] for x in sm["layers"]] == ["DFS", "DAOS"]  # <STDOUT> is excluded
    assert layers["DFS"]["analysed"] and not layers["DAOS"]["analysed"]
    assert layers["DAOS"]["bytes_read"] == 16 * MiB + 528
    assert layers["DFS"]["time"] == pytest.approx(1.0)
    assert "no_io_recorded" not in {i["id"] for i in sm["insights"]}
    # no furthest byte is known: no file size, so no "whole file" read by every rank
    files = pd.read_parquet(tmp_path / "out" / "files.parquet")
    assert files["size"].tolist() == [0] and files["whole_readers"].tolist() == [0]


def test_a_dfs_file_without_a_furthest_byte_is_not_said_rewritten(tmp_path):
    # issue 50 (snyder_ior-DFS): DFS's counters hold no highest byte, so no extent is known:
    # neither rewrites nor re-reads can be told (it was "16.8 MB of the 16.8 MB written go
    # to bytes already written"), the job wrote through DFS (not "POSIX alone"), and DXT
    # missed DFS, not only STDIO
    log = log_with(tmp_path, DFS_JOB)
    with darshan.DarshanReport(str(log)) as rep:
        names = rep.records["DFS"].to_df()["counters"].columns
    assert not any("MAX_BYTE" in n for n in names)
    sm = analysed(tmp_path, log)
    checks = {c["id"]: c for c in sm["checks"]}
    for cid, what in (("redundant_writes", "written"), ("redundant_reads", "read")):
        assert checks[cid]["outcome"] == "not-checked", checks[cid]
        assert f"no highest byte {what} among DFS's counters" in checks[cid]["reason"]
    assert checks["mpiio_use"]["outcome"] == "found"
    assert "through DFS alone" in checks["mpiio_use"]["reason"]
    (note,) = [i for i in sm["issues"] if i["kind"] == "no-dxt"]
    assert "its reads and writes are STDIO, DFS and DAOS, which DXT" in note["message"]


def test_a_job_whose_io_only_an_unanalysed_layer_saw_is_told_so(tmp_path):
    # a DAOS object-store job: 32 MiB written through the array API, no file layer at all
    records = [
        CounterRecord(
            "DAOS",
            "<DAOS array>",
            {"DAOS_ARRAY_WRITES": 32, "DAOS_BYTES_WRITTEN": 32 * MiB},
            {"DAOS_F_WRITE_TIME": 0.5},
            rank=r,
        )
        for r in range(2)
    ]
    sm = analysed(tmp_path, log_with(tmp_path, records, nprocs=2))
    ids = [i["id"] for i in sm["insights"]]
    assert "no_io_recorded" not in ids
    (found,) = [i for i in sm["insights"] if i["id"] == "io_outside_analysed_layers"]
    assert found["numbers"]["bytes"] == 64 * MiB
    assert "DAOS objects (DAOS)" in found["message"] and "DAOS" in found["recommendation"]


def test_a_log_of_terminal_output_only_is_not_a_missing_tracer(tmp_path):
    records = [CounterRecord("STDIO", "<STDOUT>", {"STDIO_WRITES": 40, "STDIO_BYTES_WRITTEN": 900})]
    sm = analysed(tmp_path, log_with(tmp_path, records, nprocs=1))
    ids = [i["id"] for i in sm["insights"]]
    assert ids == ["only_excluded_paths"]
    (found,) = sm["insights"]
    assert "<STDOUT>" in found["message"] and found["numbers"]["records"] == 1
    # issue 50 (item 7): a whole log of terminal output is no damaged one: not incomplete,
    # and no error with an empty store's message
    assert not sm["incomplete"]
    (empty,) = [i for i in sm["issues"] if i["kind"] == "empty"]
    assert empty["severity"] == "warning" and "left out (<STDOUT>)" in empty["message"]


def test_damage_in_a_module_iosweep_does_not_analyse_is_found(tmp_path):
    # 64 bytes overwritten in the middle of the HEATMAP region of Darshan 3.4.7's release log
    src = shared_fixture("darshan-logs/release_logs") / "mpi-io-test-x86_64-3.4.7.darshan"
    log = tmp_path / "damaged.darshan"
    shutil.copy(src, log)
    with darshan.DarshanReport(str(src), read_all=False) as rep:
        slot = rep.modules["HEATMAP"]["idx"]
        rep.read_all_heatmap_records()  # the log as released: PyDarshan reads it
        assert set(rep.heatmaps) == {"POSIX", "MPIIO", "STDIO"}
    off, length = check_log(log).regions[f"slot{slot}"]
    assert length > 128
    with log.open("r+b") as f:
        f.seek(off + length // 2)
        f.write(b"\xa5" * 64)
    # PyDarshan cannot read the damaged records (3.5.0 fails on a garbage bin count)
    with pytest.raises(OverflowError), darshan.DarshanReport(str(log), read_all=False) as rep:
        rep.read_all_heatmap_records()
    plog = read_darshan_log(log)
    (issue,) = [i for i in plog.issues if i.kind == "corrupt"]
    assert "HEATMAP" in issue.message and issue.severity == "warning"
    # the modules analysed are whole: the same counters as the undamaged log's
    whole = read_darshan_log(src).counters.to_pandas()
    got = plog.counters.to_pandas()
    assert got["bytes_read"].sum() == whole["bytes_read"].sum() > 0
    assert len(got) == len(whole)


def test_no_writes_is_said_of_the_analysed_paths_when_terminal_output_was_left_out(tmp_path):
    # issue 50 (apmpi): 10,620 STDIO writes to <STDOUT> and reads of an input file: "no
    # writes" is false against the counters; "no writes on the analysed paths" is not
    records = [
        CounterRecord("STDIO", "<STDOUT>", {"STDIO_WRITES": 10_620, "STDIO_BYTES_WRITTEN": 9000}),
        CounterRecord(
            "STDIO",
            "/runs/l1212.in",
            {"STDIO_OPENS": 1, "STDIO_READS": 949, "STDIO_BYTES_READ": 12_886},
        ),
    ]
    log = log_with(tmp_path, records, nprocs=1)
    with darshan.DarshanReport(str(log)) as rep:
        assert int(rep.records["STDIO"].to_df()["counters"]["STDIO_WRITES"].sum()) == 10_620
    sm = analysed(tmp_path, log)
    checks = {c["id"]: c for c in sm["checks"]}
    for cid in ("small_requests.write", "redundant_writes"):
        assert checks[cid]["reason"] == (
            "no writes on the analysed paths (I/O on <STDOUT> left out)"
        ), checks[cid]
