"""Byte and call accounting, exact, per rank, per file and per class, on one fixture of each
tracer. The expected figures come from outside iosweep: PyDarshan's reading of the Darshan
logs, and the DFTracer traces' own JSON events read line by line here; ranks are tied to
processes by the fixture's rank files (``pid``), the classes by the file names (the IDX
files are the dataset, ``checkpoint-*.pt`` the checkpoints; README of the fixture)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import darshan
import pandas as pd
import pytest
from factories import pfw_events

from iosweep.analysis import analyze_run
from iosweep.trace.ingest import ingest

MNIST = "horovod-pytorch-mnist"
METRICS = ("reads", "writes", "bytes_read", "bytes_written", "opens")


def _class(path: str) -> str:
    name = Path(path).name
    if name.endswith("-ubyte"):
        return "dataset"
    return "checkpoint" if name.startswith("checkpoint-") else "other"


def _rank_of_pid(run: Path) -> dict[int, int]:
    return {
        (r := json.loads(f.read_text()))["pid"]: r["rank"]
        for f in sorted((run / "ranks").glob("rank-*.json"))
    }


def _darshan_expected(run: Path) -> dict[tuple[int, str], dict[str, int]]:
    """Per (rank, path): POSIX + STDIO counters as PyDarshan reads them; the standard
    streams (iosweep reports terminal output apart) left out."""
    ranks = _rank_of_pid(run)
    out: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: dict.fromkeys(METRICS, 0))
    for log in sorted((run / "logs").glob("*.darshan")):
        rep = darshan.DarshanReport(str(log), read_all=True)
        rank = ranks[int(rep.metadata["job"]["jobid"])]
        for mod in ("POSIX", "STDIO"):
            if mod not in rep.records:
                continue
            for row in rep.records[mod].to_df()["counters"].to_dict("records"):
                path = rep.name_records[int(row["id"])]
                if path.startswith("<"):
                    continue
                e = out[(rank, path)]
                for m in METRICS:
                    e[m] += int(row[f"{mod}_{m.upper()}"])
    return dict(out)


_READS = {"read", "pread", "pread64", "readv", "fread"}
_WRITES = {"write", "pwrite", "pwrite64", "writev", "fwrite"}
_OPENS = {"open", "open64", "openat", "fopen", "fopen64", "creat", "creat64"}


def _dftracer_expected(run: Path) -> dict[tuple[int, str], dict[str, int]]:
    """Per (rank, path): the traces' POSIX/STDIO events counted here, bytes from each call's
    return value; file names from the traces' FH (file hash) records."""
    ranks = _rank_of_pid(run)
    out: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: dict.fromkeys(METRICS, 0))
    for trace in sorted((run / "logs").glob("*.pfw.gz")):
        names: dict[str, str] = {}
        for ev in pfw_events(trace):
            args = ev.get("args", {})
            if ev["name"] == "FH":
                names[args["value"]] = args["name"]
            if ev.get("cat") not in ("POSIX", "STDIO") or "fhash" not in args:
                continue
            e = out[(ranks[ev["pid"]], names[args["fhash"]])]
            if ev["name"] in _READS:
                e["reads"] += 1
                e["bytes_read"] += args["ret"]
            elif ev["name"] in _WRITES:
                e["writes"] += 1
                e["bytes_written"] += args["ret"]
            elif ev["name"] in _OPENS:
                e["opens"] += 1
    return dict(out)


@pytest.fixture(scope="module", params=["darshan-np2", "dftracer-np2"])
def accounted(request, shared_data, tmp_path_factory):
    run = shared_data / MNIST / request.param
    base = tmp_path_factory.mktemp(request.param)
    ingest([run], base / "store")
    analyze_run(base / "store", base / "analysis")
    expected = (_darshan_expected if request.param.startswith("darshan") else _dftracer_expected)(
        run
    )
    return expected, base / "analysis"


def test_every_rank_and_file_is_counted_exactly(accounted):
    expected, out = accounted
    fr = pd.read_parquet(out / "file_ranks.parquet")
    got = {(int(r["rank"]), r["path"]): {m: int(r[m]) for m in METRICS} for _, r in fr.iterrows()}
    assert got == expected


def test_ranks_files_and_classes_are_the_sums(accounted):
    expected, out = accounted
    ranks = pd.read_parquet(out / "ranks.parquet").set_index("rank")
    files = pd.read_parquet(out / "files.parquet").set_index("path")
    per_rank: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    per_file: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for (rank, path), e in expected.items():
        for m, v in e.items():
            per_rank[rank][m] += v
            per_file[path][m] += v
        for d in ("read", "written"):
            per_rank[rank][f"bytes_{d}_{_class(path)}"] += e[f"bytes_{d}"]
    for rank, e in per_rank.items():
        for m, v in e.items():
            assert ranks.loc[rank, m] == v, (rank, m)
        assert ranks.loc[rank, "files"] == sum(1 for r, _ in expected if r == rank)
    for path, e in per_file.items():
        for m in METRICS:
            assert files.loc[path, m] == e[m], (path, m)
        assert files.loc[path, "class"] == _class(path)
        assert files.loc[path, "n_ranks"] == sum(1 for _, p in expected if p == path)
    assert set(files.index) == set(per_file)


def test_the_fixture_s_readme_figures(accounted):
    """Independent of both readers: each rank reads the four IDX files whole, once, then
    probes EOF (2 reads a file, 54,950,048 bytes: the four sizes summed by hand); only
    Darshan saw rank 0's two 61,135-byte checkpoints."""
    expected, out = accounted
    ranks = pd.read_parquet(out / "ranks.parquet").set_index("rank")
    assert ranks["bytes_read_dataset"].tolist() == [47_040_016 + 60_008 + 7_840_016 + 10_008] * 2
    ckpt = ranks["bytes_written_checkpoint"].tolist()
    saw_checkpoints = any(p.endswith(".pt") for _, p in expected)
    assert ckpt == ([2 * 61_135, 0] if saw_checkpoints else [0, 0])
