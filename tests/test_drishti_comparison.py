"""benchmarks/drishti_comparison.py on two of the shared logs: Drishti 0.8 beside iosweep.

Drishti's findings on mpi_io_test_with_dxt are read from Drishti's own CSV; the facts
iosweep must state for them are hand-checked against the log's README (32 ranks writing
and reading a shared file with independent, blocking MPI-IO calls)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_dir, shared_fixture, unavailable

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_iosweep_states_drishti_s_findings_and_survives_where_drishti_crashes():
    if not (REPO / ".venv-tools/bin/drishti").exists():
        unavailable(".venv-tools/bin/drishti not found (tools/setup.sh installs it)")
    shared_fixture("darshan-logs/mpi_io_test_with_dxt")
    shared_fixture("darshan-logs/partial_data_dxt")
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks/drishti_comparison.py"),
            "--shared",
            str(shared_dir()),
            "--only",
            "mpi_io_test_with_dxt",
            "--only",
            "partial_data_dxt",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = {
        (cells[1].split("/")[0], cells[2].split(" ")[0]): cells
        for line in res.stdout.splitlines()
        if line.startswith("| ") and len(cells := [c.strip() for c in line.split("|")]) > 4
    }
    # Drishti 0.8 fails on the partial log (UnboundLocalError); iosweep analyses it
    (crash,) = [v for k, v in rows.items() if k[0] == "partial_data_dxt"]
    assert "Drishti crashed" in crash[2] and "iosweep: partial" in crash[3]
    mpi = {k[1]: v for k, v in rows.items() if k[0] == "mpi_io_test_with_dxt"}
    # Drishti prints "write operation intensive (60.00% writes vs. 40.00% reads)": 192 and
    # 128 of 320 POSIX calls; 32 ranks x 4 blocking MPI-IO reads and writes (README)
    assert set(mpi) >= {"P01", "M06", "M07"}
    assert mpi["P01"][4] == "same" and "128 read, 192 written" in mpi["P01"][3]
    # blocking MPI-IO (M06/M07): iosweep says so where a rank's calls take more than 20% of
    # the run: the writes (5.37 s a rank, the MPI-IO paragraph) do, the reads do not, and
    # the check says how much they take
    assert mpi["M07"][4] == "same" and "0 of 128 MPI-IO writes are non-blocking" in mpi["M07"][3]
    assert mpi["M06"][4] == "stated" and "0 of 128 MPI-IO reads are non-blocking" in mpi["M06"][3]
    assert "of the run in them (at most 20%)" in mpi["M06"][3]
    assert all(v[4] not in ("differs", "silent") for v in mpi.values())
    # every Drishti finding meets a check of iosweep's: found too, or another stated outcome
    assert "silent: 0;" in res.stdout
    # M02/M03 (no collective I/O) fire on 128 independent calls; iosweep's floor is more than
    # 1,000 (Drishti's own absolute count), and it says so
    if "M03" in mpi:
        assert mpi["M03"][4] == "stated" and "floor: more than 1,000" in mpi["M03"][3]
