"""Shared pytest fixtures. Keep this small: fixtures used by one test file live in that file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def shared_dir() -> Path:
    """The project's ../shared folder (override with IOSWEEP_SHARED)."""
    return Path(os.environ.get("IOSWEEP_SHARED") or Path(__file__).resolve().parents[2] / "shared")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``shared/data``: the real trace fixtures; the test is skipped when they are absent."""
    data = shared_dir() / "data"
    if not data.is_dir():
        pytest.skip(
            f"shared fixtures not found at {data} (set IOSWEEP_SHARED to the shared/ folder)"
        )
    return data
