"""Shared pytest fixtures. Keep this small: fixtures used by one test file live in that file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest


def environment_is_ours() -> bool:
    """True under CI (``CI=true``) and in ``make test`` (``IOSWEEP_STRICT=1``): the machine was
    set up by tools/setup.sh, so a missing fixture, package or stack is a broken setup."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("IOSWEEP_STRICT") == "1"


def unavailable(reason: str) -> NoReturn:
    """Skip for ``reason`` where the environment is not ours; fail with it where it is, so that
    a broken setup never turns into a green run of skipped tests."""
    if environment_is_ours():
        pytest.fail(f"{reason} [a failure, not a skip: CI=true or IOSWEEP_STRICT=1]", pytrace=False)
    pytest.skip(reason)


def shared_dir() -> Path:
    """The project's ../shared folder (override with IOSWEEP_SHARED)."""
    return Path(os.environ.get("IOSWEEP_SHARED") or Path(__file__).resolve().parents[2] / "shared")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``shared/data``: the real trace fixtures (see :func:`unavailable` when absent)."""
    data = shared_dir() / "data"
    if not data.is_dir():
        unavailable(
            f"shared fixtures not found at {data} (set IOSWEEP_SHARED to the shared/ folder)"
        )
    return data


def shared_fixture(rel: str) -> Path:
    """One fixture folder or file under ``shared/data``, named in the failure when it is missing."""
    path = shared_dir() / "data" / rel
    if not path.exists():
        unavailable(f"shared fixture {rel} not found at {path}")
    return path
