"""The login session ends mid-sweep (SIGHUP to make run's process group): Snakemake dies
without lifting its lock, and make run lifts it when no other Snakemake runs in the
repository. Under make test other test files run Snakemake here all the time, so this file
is `exclusive`: it runs after them, with the repository to itself (docs/testing.md)."""

import signal

import pytest
from interrupt import interrupt_and_restart

pytestmark = [pytest.mark.integration, pytest.mark.exclusive]


def test_a_sweep_whose_session_ended_restarts_where_it_stopped(tmp_path):
    interrupt_and_restart(tmp_path, signal.SIGHUP)
