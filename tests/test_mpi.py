"""MPI jobs' Darshan logs: files shared by all ranks, which Darshan reduces to one record
(rank -1) keeping only the fastest and slowest rank's figures, and the MPI-IO layer.

Expected values are worked out by hand in each test from the records it states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import html_lines, pydarshan_records, shared_fixture
from factories import make_store

from iosweep.analysis import AnalysisSettings, analyze_run
from iosweep.trace.ingest import ingest, ingest_jobs

MiB = 1 << 20


def run(tmp_path: Path, store: Path) -> dict:
    return analyze_run(store, tmp_path / "out", AnalysisSettings.from_dict({}))


def ranks_table(tmp_path: Path) -> pd.DataFrame:
    return pd.read_parquet(tmp_path / "out" / "ranks.parquet").set_index("rank")


SHARED = {
    "rank": -1,
    "path": "/scratch/shared.dat",
    "opens": 4,
    "reads": 10,
    "bytes_read": 1000 * MiB,
    "max_byte_read": 1000 * MiB - 1,  # each rank reads a part of the 1000 MiB file
    "read_time": 10.0,
    "fastest_rank": 2,
    "fastest_rank_bytes": 100 * MiB,
    "fastest_rank_time": 1.0,
    "slowest_rank": 1,
    "slowest_rank_bytes": 400 * MiB,
    "slowest_rank_time": 4.0,
}


def test_a_reduced_shared_record_is_handed_to_the_ranks(tmp_path):
    # fastest rank 2: 100 MiB in 1 s; slowest rank 1: 400 MiB in 4 s; ranks 0 and 3 share
    # the rest evenly: (1000 - 100 - 400) / 2 = 250 MiB, (10 - 1 - 4) / 2 = 2.5 s each
    sm = run(tmp_path, make_store(tmp_path / "s", [], n_ranks=4, counters=[SHARED]))
    r = ranks_table(tmp_path)
    assert r["bytes_read"].tolist() == [250 * MiB, 400 * MiB, 100 * MiB, 250 * MiB]
    assert r["io_time"].tolist() == pytest.approx([2.5, 4.0, 1.0, 2.5])
    # 10 reads by bytes: 2.5, 4, 1, 2.5 -> whole numbers adding up to 10
    assert r["reads"].sum() == 10 and r.loc[1, "reads"] == 4 and r.loc[2, "reads"] == 1
    assert r["opens"].tolist() == [1, 1, 1, 1]
    # rank 1's 4 s exceeds the median (2.5 s) by more than straggler_excess (0.5)
    assert sm["imbalance"]["stragglers"] == [1]
    assert sm["headline"]["bytes_read"] == 1000 * MiB
    assert sm["trace"]["unattributed"]["records"] == 0
    assert sm["trace"]["counter_records"] == 1
    assert sm["trace"]["shared_records"] == _shared(1, 1, 0, 4)
    assert any("fastest and the slowest rank" in x for x in sm["limitations"])
    assert sm["access"]["other"]["read"] == "shared"


def _shared(records: int, spread: int, traced: int, ranks: int, **more) -> dict:
    """trace.shared_records of a run whose records all went to every rank evenly."""
    return {"records": records, "spread": spread, "traced": traced, "ranks": ranks,
            "concentrated": 0, "concentrated_bytes": 0, "movers": 0, "concentrated_paths": [],
            "traced_meta_time": 0.0, **more}  # fmt: skip


def test_spread_rows_are_per_rank_records_not_reduced_ones():
    # the record of SHARED (bytes in MiB) as analysis rows: handed to 4 ranks, each row is a
    # rank's own record, so none keeps a fastest or slowest rank (-1) or their figures (0)
    from iosweep.analysis.shared import SHARED_COLUMNS, reduced, share_records

    cdf = pd.DataFrame(
        {
            "actor": [-1], "file": [0], "module": [0], "opens": [4], "reads": [10],
            "bytes_read": [1000], "bytes_written": [0], "read_time": [10.0],
            "write_time": [0.0], "meta_time": [0.0], "fastest_rank": [2],
            "fastest_rank_bytes": [100], "fastest_rank_time": [1.0], "slowest_rank": [1],
            "slowest_rank_bytes": [400], "slowest_rank_time": [4.0],
        }
    )  # fmt: skip
    none = np.array([], np.int64)
    seg = {k: none for k in ("actor", "file", "module", "op", "length")}
    seg |= {"start": none.astype(float), "end": none.astype(float)}
    out, info = share_records(cdf, seg, none.astype(bool), 4, ["/out/shared"])
    assert out["actor"].tolist() == [0, 1, 2, 3]
    assert out["bytes_read"].tolist() == [250, 400, 100, 250]
    assert out["read_time"].tolist() == pytest.approx([2.5, 4.0, 1.0, 2.5])
    assert out[["fastest_rank", "slowest_rank"]].to_numpy().tolist() == [[-1, -1]] * 4
    for c in SHARED_COLUMNS:
        if not c.endswith("rank") and c in cdf:
            assert out[c].tolist() == [0] * 4, c
    assert not reduced(out).any()
    assert info.to_json() == _shared(1, 1, 0, 4)
    # no ranks to hand it to (a log without a rank count): the record stays as it was
    same, info = share_records(cdf, seg, none.astype(bool), 0, ["/out/shared"])
    assert same is cdf and info.to_json() == _shared(1, 0, 0, 0)


def test_dxt_and_a_reduced_record_of_one_file_count_its_bytes_once(tmp_path):
    # DXT stays per rank when Darshan reduces the counters: 2 ranks x 2 reads of 100 MiB;
    # the reduced record counts those 4 reads plus one DXT did not keep (another 100 MiB)
    segs = [
        (r, "/scratch/shared.dat", "read", (2 * r + k) * 100 * MiB, 100 * MiB, k, k + 0.5)
        for r in range(2)
        for k in range(2)
    ]
    rec = {
        **SHARED,
        "opens": 2,
        "reads": 5,
        "bytes_read": 500 * MiB,
        "max_byte_read": 500 * MiB - 1,
        "read_time": 2.5,
        "meta_time": 0.2,
        "fastest_rank": 0,
        "slowest_rank": 1,
    }
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2, counters=[rec]))
    assert sm["headline"]["bytes_read"] == 500 * MiB  # not 900 MiB
    assert sm["headline"]["reads"] == 5
    r = ranks_table(tmp_path)
    assert r["bytes_read"].tolist() == [200 * MiB, 200 * MiB]
    assert r["io_time"].tolist() == pytest.approx([1.0, 1.0])
    assert sm["trace"]["shared_records"] == _shared(1, 0, 1, 0, traced_meta_time=0.2)
    assert sm["trace"]["unattributed"]["records"] == 0
    assert not [i for i in sm["insights"] if "redundant" in i["id"]]


@pytest.mark.parametrize("version", ["3.1.8", "3.2.1", "3.4.0", "3.4.7", "3.5.0"])
def test_release_logs_give_every_rank_its_part_of_the_shared_file(tmp_path, version):
    # mpi-io-test, 4 ranks, each writing then reading 16 MiB of one shared file (README);
    # Darshan reduced it to one POSIX record
    log = shared_fixture("darshan-logs/release_logs") / f"mpi-io-test-x86_64-{version}.darshan"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / log.name).symlink_to(log)
    ingest([tmp_path / "logs"], tmp_path / "store")
    sm = run(tmp_path, tmp_path / "store")
    r = ranks_table(tmp_path)
    assert len(r) == 4
    assert r["bytes_read"].tolist() == [16 * MiB] * 4
    assert r["bytes_written"].tolist() == [16 * MiB] * 4
    assert sm["headline"]["bytes_read"] == 64 * MiB
    assert list(sm["access"].values()) == [{"read": "shared", "write": "shared"}]
    assert sm["trace"]["shared_records"]["spread"] == 1


def test_mpi_io_layer_of_mpi_io_test_is_what_the_application_printed(tmp_path):
    # README of the log: 32 ranks, 4 iterations of 16 MiB blocks, independent (coll = 0);
    # "Write: min_t = 2.686803, max_t = 7.584249, mean_t = 5.374464"
    # "Read:  min_t = 0.813663, max_t = 2.657060, mean_t = 1.740801"; total_size 2 GiB
    src = shared_fixture("darshan-logs/mpi_io_test_with_dxt")
    ingest([src], tmp_path / "store")
    sm = run(tmp_path, tmp_path / "store")
    m = sm["mpiio"]
    assert (m["source"], m["ranks"]) == ("dxt", 32)
    assert m["write"]["time"] == pytest.approx(
        {"min": 2.686803, "mean": 5.374464, "max": 7.584249}, abs=2e-4
    )
    assert m["read"]["time"] == pytest.approx(
        {"min": 0.813663, "mean": 1.740801, "max": 2.657060}, abs=2e-4
    )
    assert (m["write"]["collective"], m["write"]["independent"]) == (0, 128)
    assert m["write"]["bytes"] == m["read"]["bytes"] == 2 << 30
    # the POSIX writes under them took about 0.03 s a rank: the time is above POSIX
    assert m["write"]["posix_time"]["max"] < 0.05 and m["write"]["gap_mean"] > 5.3
    # ... which the findings say: the writes wait in MPI-IO; the reads do not (1.74 s of
    # MPI-IO over about as much POSIX time)
    (over,) = [i for i in sm["insights"] if i["id"] == "mpiio_overhead"]
    assert over["numbers"]["op"] == "write" and "5.37 s in MPI-IO writes" in over["message"]
    # MPI-IO bytes are POSIX's too: read once, not twice
    assert sm["headline"]["bytes_read"] == 2 << 30
    # the straggler is the rank whose reads the application timed at max_t (2.657 s)
    assert sm["imbalance"]["stragglers"] == [14]
    fr = pd.read_parquet(tmp_path / "out" / "file_ranks.parquet")
    shared = fr[fr["path"] == "/yellow/users/treddy/mpi_io_rough_work/test.out"]
    assert shared["rank"].nunique() == 32
    files = pd.read_parquet(tmp_path / "out" / "files.parquet").set_index("path")
    f = files.loc["/yellow/users/treddy/mpi_io_rough_work/test.out"]
    assert (f["n_ranks"], f["write_strategy"]) == (32, "shared-disjoint")


@pytest.mark.parametrize("version", ["3.1.8", "3.5.0"])
def test_reduced_mpi_io_record_gives_fastest_and_slowest_rank_times(tmp_path, version):
    # PyDarshan's reading of the same log states the record's counters
    import darshan

    log = shared_fixture("darshan-logs/release_logs") / f"mpi-io-test-x86_64-{version}.darshan"
    rep = darshan.DarshanReport(str(log), read_all=True)
    c = rep.records["MPI-IO"].to_df()["counters"].iloc[0]
    f = rep.records["MPI-IO"].to_df()["fcounters"].iloc[0]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / log.name).symlink_to(log)
    ingest([tmp_path / "logs"], tmp_path / "store")
    m = run(tmp_path, tmp_path / "store")["mpiio"]
    assert (m["source"], m["ranks"]) == ("counters", 4)
    total = f["MPIIO_F_READ_TIME"] + f["MPIIO_F_WRITE_TIME"] + f["MPIIO_F_META_TIME"]
    share = f["MPIIO_F_WRITE_TIME"] / total
    assert m["write"]["time"] == pytest.approx(
        {
            "min": f["MPIIO_F_FASTEST_RANK_TIME"] * share,
            "mean": f["MPIIO_F_WRITE_TIME"] / 4,
            "max": f["MPIIO_F_SLOWEST_RANK_TIME"] * share,
        }
    )
    assert m["write"]["collective"] == c["MPIIO_COLL_WRITES"]
    assert m["write"]["ops"] == sum(
        c[f"MPIIO_{k}_WRITES"] for k in ("INDEP", "COLL", "SPLIT", "NB")
    )
    assert m["read"]["bytes"] == c["MPIIO_BYTES_READ"] == 64 * MiB


# --- several jobs in one input ------------------------------------------------------------


def _job_facts(log: Path) -> tuple[int, int]:
    """(job id, nprocs) as PyDarshan reads them from the log's header."""
    import darshan

    with darshan.DarshanReport(str(log), read_all=False) as rep:
        job = rep.metadata["job"]
        return int(job["jobid"]), int(job["nprocs"])


def test_logs_of_unrelated_jobs_become_one_store_per_job(tmp_path, capsys):
    from iosweep.cli import main as cli

    src = shared_fixture("darshan-logs/release_logs")
    facts = sorted(_job_facts(f) for f in src.glob("*.darshan"))
    # the README: five releases' runs of mpi-io-test with 4 processes each
    assert len(facts) == 5 and {n for _, n in facts} == {4}
    stores = ingest_jobs([src], tmp_path / "out", run_id="releases")
    assert sorted(int(p.name.rsplit("job", 1)[1]) for p, _ in stores) == [j for j, _ in facts]
    assert [meta.run_id for p, meta in stores] == [f"releases.{p.name}" for p, _ in stores]
    for path, meta in stores:
        assert path.parent == tmp_path / "out" and (path / "run.json").is_file()
        assert [r.rank for r in meta.ranks] == [0, 1, 2, 3]
        assert len({p.source for p in meta.processes}) == 1
        (warning,) = [i for i in meta.issues if i.kind == "mixed-jobs"]
        assert warning.severity == "warning" and "5 unrelated jobs" in warning.message
        assert all(f"job id {j}" in warning.message for j, _ in facts)
        # each job on its own: no run stretched over the years between the releases
        assert meta.end - meta.start < 60
    # no store at the top: analysing it there would merge the jobs again
    assert not (tmp_path / "out" / "run.json").exists()
    listing = json.loads((tmp_path / "out" / "jobs.json").read_text())
    # five logs; Darshan logs are read in one process (ingest.read_workers)
    assert (listing["logs"], listing["read_processes"]) == (5, 1)
    assert sorted(listing["jobs"]) == sorted(p.name for p, _ in stores)
    with pytest.raises(ValueError, match="5 different jobs"):
        ingest([src], tmp_path / "single")

    assert cli(["analyze", str(tmp_path / "out"), "-o", str(tmp_path / "an")]) == 0
    assert len(list((tmp_path / "an" / "runs").iterdir())) == 5
    sweep = pd.read_parquet(tmp_path / "an" / "sweep.parquet")
    assert len(sweep) == 5
    capsys.readouterr()


def test_a_split_ingest_is_reused_and_replaced_when_its_logs_change(tmp_path, capsys):
    from iosweep.cli import main as cli

    src = shared_fixture("darshan-logs/release_logs")
    logs = tmp_path / "logs"
    logs.mkdir()
    for f in sorted(src.glob("*.darshan"))[:2]:
        (logs / f.name).symlink_to(f)
    out = tmp_path / "out"
    assert cli(["ingest", str(logs), "-o", str(out)]) == 0
    first = capsys.readouterr().out
    assert "2 unrelated jobs" in first and first.count("wrote ") == 2
    assert cli(["ingest", str(logs), "-o", str(out)]) == 0
    assert capsys.readouterr().out.count("reused ") == 2
    # one job left: a single store at the top; the job stores of before are gone
    (logs / sorted(src.glob("*.darshan"))[1].name).unlink()
    assert cli(["ingest", str(logs), "-o", str(out)]) == 0
    assert (out / "run.json").is_file() and not (out / "jobs.json").exists()
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == []


def test_non_mpi_logs_stay_one_job_beside_an_mpi_job(tmp_path):
    # the 24 DLIO processes share one job; the MPI log beside them is a job of its own
    logs = tmp_path / "logs"
    logs.mkdir()
    for rel in ("darshan-logs/dlio_logs", "darshan-logs/mpi_io_test_with_dxt"):
        for f in shared_fixture(rel).glob("*.darshan"):
            (logs / f.name).symlink_to(f)
    stores = {p.name: meta for p, meta in ingest_jobs([logs], tmp_path / "out")}
    assert set(stores) == {"processes", "mpi-io-test-job4373053"}
    assert len(stores["processes"].processes) == 24
    assert len(stores["mpi-io-test-job4373053"].ranks) == 32


# --- the words of an MPI job's report -----------------------------------------------------

DL_WORDS = re.compile(
    r"(?i)\b(training|trains?|epochs?|data ?loaders?|loader workers?|tfrecords?|webdataset|"
    r"checkpoints?|datasets?|gpus?|accelerators?|batch(es)?|steps?|horovod|pytorch|tensorflow|"
    r"frameworks?|samples?/s|samplers?)"
)


@pytest.mark.slow
def test_the_report_of_mpi_jobs_speaks_no_deep_learning(tmp_path):
    from iosweep.analysis import analyze_sweep
    from iosweep.report import render_report

    logs = tmp_path / "logs"
    logs.mkdir()
    for rel in ("darshan-logs/mpi_io_test_with_dxt", "darshan-logs/release_logs"):
        for f in shared_fixture(rel).glob("*.darshan"):
            (logs / f.name).symlink_to(f)
    analyses = []
    for store, _meta in ingest_jobs([logs], tmp_path / "stores"):
        analyze_run(store, tmp_path / "an" / store.name, AnalysisSettings.from_dict({}))
        analyses.append(tmp_path / "an" / store.name)
    assert len(analyses) == 6
    analyze_sweep(analyses, tmp_path / "sweep")
    page = render_report(analyses, tmp_path / "sweep", tmp_path / "report.html").read_text()
    # the provenance section prints the analysis settings as configured (its default file
    # classes name checkpoints and datasets): words of the configuration, not of the report
    body = page.split('<section id="provenance"')[0]
    lines = html_lines(body)
    said = [line for line in lines if DL_WORDS.search(line)]
    assert not said, said
    # and it does say what matters for them
    assert "MPI-IO layer" in lines and "I/O layers" in lines


def test_a_reduced_record_s_counts_of_some_calls_are_not_multiplied(tmp_path):
    # a 4-rank job's shared file reduced by Darshan: of its 10 POSIX reads over all ranks, 6
    # misaligned in the file and 2 in memory; of its 16 MPI-IO writes, 12 collective and 4
    # non-blocking. Handed to the ranks, they still add up to 6, 2, 12 and 4 (repeated on
    # every rank they were 24, 8, ...)
    posix = {**SHARED, "file_not_aligned": 6, "mem_not_aligned": 2, "file_alignment": 4096}
    mpiio = {
        **SHARED,
        "module": "MPIIO",
        "reads": 0,
        "bytes_read": 0,
        "read_time": 0.0,
        "writes": 16,
        "bytes_written": 64 * MiB,
        "write_time": 8.0,
        "collective_writes": 12,
        "nonblocking_writes": 4,
    }
    sm = run(tmp_path, make_store(tmp_path / "s", [], n_ranks=4, counters=[posix, mpiio]))
    w = sm["mpiio"]["write"]
    assert (w["ops"], w["collective"], w["independent"], w["nonblocking"]) == (16, 12, 4, 4)
    a = sm["alignment"]
    assert (a["ops"], a["file_not_aligned"], a["mem_not_aligned"]) == (10, 6, 2)
    assert a["file_alignment"] == 4096


@pytest.mark.parametrize(
    "fixture, counter, direction",
    [
        ("partial_data_stdio", "MPIIO_F_WRITE_TIME", "write"),
        ("partial_data_dxt", "MPIIO_F_READ_TIME", "read"),
    ],
)
def test_mpi_io_time_of_the_partial_logs_is_darshan_s_own(tmp_path, fixture, counter, direction):
    """partial_data_dxt's DXT buffer ran out (65,529 of 1,000,000 MPI-IO reads traced): the
    time per rank comes from the counters, as PyDarshan reads them; the POSIX time under it
    is that of the file MPI-IO opened (partial_data_stdio's POSIX time on all files was
    5.4 s, and the gap read 'MPI-IO adds -5.41 s')."""
    src = shared_fixture(f"darshan-logs/{fixture}")
    (log,) = src.glob("*.darshan")
    mpiio = pydarshan_records(log, "MPI-IO")
    (mpi_file,) = mpiio["counters"]["id"]
    px = pydarshan_records(log)["fcounters"]
    posix_time = px.loc[px["id"] == mpi_file, counter.replace("MPIIO", "POSIX")].sum()
    ingest([src], tmp_path / "store")
    m = run(tmp_path, tmp_path / "store")["mpiio"][direction]
    assert m["time"]["mean"] == pytest.approx(mpiio["fcounters"][counter].sum(), rel=1e-9)
    assert m["posix_time"]["mean"] == pytest.approx(posix_time, rel=1e-9)
    assert m["gap_mean"] == pytest.approx(m["time"]["mean"] - posix_time) and m["gap_mean"] > 0


def test_misaligned_requests_are_darshan_s_counters(tmp_path):
    # Drishti's P08 on this log: 88.01% misaligned file requests; PyDarshan's sums agree
    src = shared_fixture("darshan-logs/nonmpi_dxt_anonymized")
    (log,) = src.glob("*.darshan")
    c = pydarshan_records(log)["counters"]
    ingest([src], tmp_path / "store")
    sm = run(tmp_path, tmp_path / "store")
    a = sm["alignment"]
    assert a["file_not_aligned"] == c["POSIX_FILE_NOT_ALIGNED"].sum() == 15_536
    assert a["mem_not_aligned"] == c["POSIX_MEM_NOT_ALIGNED"].sum() == 3
    assert a["ops"] == (c["POSIX_READS"] + c["POSIX_WRITES"]).sum() == 17_652
    assert a["file_alignment"] == 4096
    (ins,) = [i for i in sm["insights"] if i["id"] == "misaligned_requests"]
    assert "15,536 of 17,652 POSIX requests (88.0%)" in ins["message"]
    assert "4,096-byte blocks" in ins["message"]


def test_access_patterns_without_dxt_are_darshan_s_counters(tmp_path):
    # release log 3.5.0, no DXT: PyDarshan's POSIX_CONSEC_* / POSIX_SEQ_* of the shared record
    log = shared_fixture("darshan-logs/release_logs") / "mpi-io-test-x86_64-3.5.0.darshan"
    c = pydarshan_records(log)["counters"].sum(numeric_only=True)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / log.name).symlink_to(log)
    ingest([tmp_path / "logs"], tmp_path / "store")
    sm = run(tmp_path, tmp_path / "store")
    for op, OP in (("read", "READS"), ("write", "WRITES")):
        p = sm["spatial"]["counters"][op]
        assert p["ops"] == c[f"POSIX_{OP}"]
        assert p["consecutive"] == c[f"POSIX_CONSEC_{OP}"]
        assert p["sequential"] == c[f"POSIX_SEQ_{OP}"] - c[f"POSIX_CONSEC_{OP}"]
        assert p["random"] == c[f"POSIX_{OP}"] - c[f"POSIX_SEQ_{OP}"]


def test_an_mpi_simulation_s_hdf5_files_are_data_not_a_dataset(tmp_path):
    """4 ranks of an MPI job each read a shared grid.h5 whole and write their own out-R.h5
    (written here as one 4-rank Darshan log): *.h5 is the default `dataset` rule's, but the
    report of an MPI application calls the class `data`, and its advice on the repeated reads
    is MPI's (broadcast, collective reads), not a data loader's."""
    import numpy as np

    from iosweep.analysis import analyze_sweep
    from iosweep.report import render_report
    from iosweep.trace.darshan.read import SEGMENT_DTYPE
    from iosweep.trace.darshan.write import DxtFile, write_darshan_log

    def segs(rows):
        return np.array(rows, dtype=SEGMENT_DTYPE)

    files = []
    for r in range(4):
        grid = [(i * 4 * MiB, 4 * MiB, 1.0 + i * 0.1, 1.05 + i * 0.1) for i in range(4)]
        files.append(DxtFile("/scratch/sim/grid.h5", segs(grid), rank=r, host="n0"))
        out = [(i * MiB, MiB, 5.0 + i * 0.1, 5.05 + i * 0.1) for i in range(2)]
        files.append(DxtFile(f"/scratch/sim/out-{r}.h5", segs(out), writes=2, rank=r, host="n0"))
    logs = tmp_path / "logs"
    logs.mkdir()
    write_darshan_log(
        logs / "sim.darshan", files, start=1.7e9, end=1.7e9 + 10, exe="/apps/sim", jobid=7,
        nprocs=4,
    )  # fmt: skip
    ingest([logs], tmp_path / "store")
    sm = run(tmp_path, tmp_path / "store")
    assert sorted(sm["classes"]) == ["data"]
    (red,) = [i for i in sm["insights"] if i["id"] == "redundant_reads"]
    assert "MPI_Bcast" in red["recommendation"]
    analyze_sweep([tmp_path / "out"], tmp_path / "sweep")
    page = render_report([tmp_path / "out"], tmp_path / "sweep", tmp_path / "r.html").read_text()
    said = [line for line in html_lines(page.split('<section id="provenance"')[0])
            if DL_WORDS.search(line)]  # fmt: skip
    assert not said, said


def test_lustre_striping_is_read_and_meets_the_alignment_darshan_measured(tmp_path):
    """DLIO's 24 processes ran on Lustre: their LUSTRE records give each file's striping
    (PyDarshan 3.5 does not read that module; the check is Darshan's POSIX module, which
    measured its file alignment from the same file system: the 1 MiB stripe)."""
    ingest([shared_fixture("darshan-logs/dlio_logs")], tmp_path / "store")
    sm = run(tmp_path, tmp_path / "store")
    a = sm["alignment"]
    assert a["lustre"]["stripe_size"] == a["file_alignment"] == 1 << 20
    assert a["lustre"]["files"] > 0 and a["lustre"]["stripe_count"] >= 1
    assert "LUSTRE" not in {x["module"] for x in sm["layers"]}  # a layout, not I/O
    (ins,) = [i for i in sm["insights"] if i["id"] == "misaligned_requests"]
    assert "Lustre stripes (1,048,576 bytes" in ins["message"]


def test_alignment_and_striping_by_hand(tmp_path):
    # three POSIX files (16 requests, 4 misaligned in the file, 2 in memory; alignments 1 MiB,
    # 1 MiB, 4 KiB: the most common 1 MiB) and their LUSTRE layouts: 1 MiB x 4 stripes twice,
    # 4 MiB x 8 once; a fourth layout of stripe size 0 (unknown) is not counted, else the
    # widest would be its 16
    posix = [
        {"rank": 0, "path": f"/lus/f{i}", "reads": 4, "writes": 2, "file_not_aligned": fna,
         "mem_not_aligned": mna, "file_alignment": al}
        for i, (fna, mna, al) in enumerate([(0, 0, MiB), (2, 1, MiB), (2, 1, 4096)])
    ]  # fmt: skip
    layouts = [(MiB, 4), (MiB, 4), (4 * MiB, 8), (0, 16)]
    lustre = [
        {"rank": 0, "path": f"/lus/f{i}", "module": "LUSTRE", "stripe_size": sz,
         "stripe_count": n}
        for i, (sz, n) in enumerate(layouts)
    ]  # fmt: skip
    sm = run(tmp_path, make_store(tmp_path / "s", [], n_ranks=1, counters=posix + lustre))
    a = sm["alignment"]
    assert (a["ops"], a["file_not_aligned"], a["mem_not_aligned"]) == (18, 4, 2)
    assert a["file_share"] == pytest.approx(4 / 18) and a["mem_share"] == pytest.approx(2 / 18)
    assert a["file_alignment"] == MiB
    assert a["lustre"] == {
        "files": 3,
        "stripe_size": MiB,
        "stripe_count": 4,
        "stripe_count_max": 8,
    }
