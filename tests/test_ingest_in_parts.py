"""Issue 51, item 3: a run's logs read by several jobs (parts), each on any node, then put
together into one store: the same store as one job makes, table by table."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from factories import store_frames

from iosweep.cli import main as cli_main
from iosweep.trace.ingest import ingest, inparts
from iosweep.trace.ingest.find import LogEntry
from iosweep.trace.schema import STORE_TABLES

RUNS = [
    "horovod-pytorch-mnist/darshan-np4",  # per-process Darshan logs, workers among them
    "horovod-tf2-mnist/dftracer-np4",  # DFTracer traces: application events too
    "darshan-logs/mpi_io_test_with_dxt",  # one MPI log of 32 ranks: parts with no log
]


def _same_store(a: Path, b: Path) -> None:
    ta, tb = store_frames(a), store_frames(b)
    for name in STORE_TABLES:
        pd.testing.assert_frame_equal(ta[name], tb[name], obj=name)
    assert json.loads((a / "run.json").read_text()) == json.loads((b / "run.json").read_text())


def _parts(logs: Path, where: Path, count: int) -> list[Path]:
    folders = [where / f"part-{k}" for k in range(count)]
    for k, f in enumerate(folders):
        inparts.read_part([logs], f, k, count)
    return folders


@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("run", RUNS)
def test_a_run_read_in_parts_makes_the_same_store(shared_data, tmp_path, run, count):
    logs = shared_data / run
    whole = ingest([logs], tmp_path / "whole")
    folders = _parts(logs, tmp_path, count)
    read = [inparts.load_part(f) for f in folders]
    # every log read by exactly one part
    paths = sorted(r.path for p in read for r in p.logs)
    found = sorted(str(p.resolve()) for p in logs.rglob("*") if p.suffix in (".darshan", ".gz"))
    assert paths == found
    made = ingest([logs], tmp_path / "put", from_parts=folders)
    _same_store(tmp_path / "whole", tmp_path / "put")
    assert made.processes == whole.processes and made.issues == whole.issues
    listing = json.loads((tmp_path / "put" / "inputs.json").read_text())
    assert listing["parts"] == count
    assert listing["read_processes"] == sum(p.readers for p in read)
    # the parts keep their files: a put-together that failed could run again
    for f, p in zip(folders, read, strict=True):
        for r in p.logs:
            for name, _n in r.log.spilled.values() if r.log else []:
                assert (f / name).is_file()
    assert not (tmp_path / "put" / ".ingest-parts").exists()


def test_logs_are_shared_by_size_the_largest_first(tmp_path):
    # sizes 5, 3, 3, 1 in two parts: 5 to part 0; 3 to part 1; the other 3 to part 1 (3 < 5);
    # 1 to part 0 (5 + 1 = 6 against 3 + 3 = 6, the lower part): 6 bytes each
    entries = []
    for name, size in [("a", 5), ("b", 3), ("c", 3), ("d", 1)]:
        p = tmp_path / f"{name}.darshan"
        p.write_bytes(b"x" * size)
        entries.append(LogEntry(path=p, tracer="darshan"))
    got = [[e.path.stem for e in part] for part in inparts.assign(entries, 2)]
    assert got == [["a", "d"], ["b", "c"]]
    assert [[e.path.stem for e in part] for part in inparts.assign(entries, 5)] == [
        ["a"], ["b"], ["c"], ["d"], []
    ]  # fmt: skip


def test_the_command_line_reads_parts_and_puts_them_together(shared_data, tmp_path, capsys):
    logs = shared_data / RUNS[0]
    assert cli_main(["ingest", str(logs), "-o", str(tmp_path / "whole")]) == 0
    capsys.readouterr()
    for k in (1, 2):
        assert (
            cli_main(["ingest", str(logs), "--part", f"{k}/2", "-o", str(tmp_path / f"p{k}")]) == 0
        )
    said = capsys.readouterr().out
    assert "part 1 of 2:" in said and "part 2 of 2:" in said
    args = ["ingest", str(logs), "-o", str(tmp_path / "put"), "--from-parts"]
    assert cli_main([*args, str(tmp_path / "p1"), str(tmp_path / "p2")]) == 0
    assert "in 2 parts" in capsys.readouterr().out
    _same_store(tmp_path / "whole", tmp_path / "put")
    # a wrong K/N names itself
    assert cli_main(["ingest", str(logs), "--part", "3/2", "-o", str(tmp_path / "p3")]) == 2
    assert "--part '3/2'" in capsys.readouterr().err


def test_a_damaged_log_is_said_by_the_store_made_from_parts(shared_data, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(shared_data / RUNS[0], run)
    damaged = sorted(run.rglob("*.darshan"))[0]
    damaged.write_bytes(damaged.read_bytes()[:300])
    whole = ingest([run], tmp_path / "whole")
    assert any(i.source.endswith(damaged.name) and i.severity == "error" for i in whole.issues)
    made = ingest([run], tmp_path / "put", from_parts=_parts(run, tmp_path, 2))
    assert made.issues == whole.issues and made.processes == whole.processes
    _same_store(tmp_path / "whole", tmp_path / "put")


def test_parts_that_do_not_fit_the_logs_are_refused_naming_the_culprit(shared_data, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(shared_data / RUNS[0], run)
    folders = _parts(run, tmp_path, 2)
    out = tmp_path / "store"
    # a part left out
    with pytest.raises(ValueError, match="not one whole"):
        ingest([run], out, from_parts=folders[:1])
    # a log changed after its part read it
    log = sorted(run.rglob("*.darshan"))[0]
    st = log.stat()
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(ValueError, match=f"{log.name}: changed since part"):
        ingest([run], out, from_parts=folders)
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns))
    # a log no part read (it came after the parts were read)
    extra = log.with_name("late_" + log.name)
    shutil.copy2(log, extra)
    with pytest.raises(ValueError, match=f"{extra.name}: read by none of the 2 parts"):
        ingest([run], out, from_parts=folders)
    extra.unlink()
    # a damaged part
    (folders[1] / inparts.PART_FILE).write_bytes(b"not a part")
    with pytest.raises(ValueError, match=f"{folders[1].name}/part.pkl: not a readable"):
        ingest([run], out, from_parts=folders)
    shutil.rmtree(folders[1])
    with pytest.raises(ValueError, match=f"{folders[1]}: no part.pkl"):
        ingest([run], out, from_parts=folders)
    assert not (out / "run.json").exists()
