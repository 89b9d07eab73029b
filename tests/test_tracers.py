"""Tracer discovery and the environment each rank gets."""

import sys
from pathlib import Path

import pytest

from iosweep.run.tracers import (
    TracerError,
    TracerSpec,
    darshan_config_text,
    find_dftracer_lib,
    rank_environment,
    resolve_tracer,
)


def test_darshan_requested_but_missing_names_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.delenv("DARSHAN_RUNTIME_LIB", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no darshan-config
    with pytest.raises(TracerError, match="DARSHAN_RUNTIME_LIB"):
        resolve_tracer("darshan", tmp_path, [tmp_path], darshan_lib=str(tmp_path / "nope.so"))


def test_darshan_environment(tmp_path):
    lib = tmp_path / "libdarshan.so"
    lib.write_bytes(
        b"\x7fELF"
    )  # only its existence is checked here; the real library is preloaded in runs
    spec = resolve_tracer(
        "darshan", tmp_path, [tmp_path], darshan_lib=str(lib), exclude=["^/etc"], max_records=5000
    )
    assert spec.name == "darshan"
    env = rank_environment(spec, tmp_path / "traces" / "rank-3", {"LD_PRELOAD": "/other.so"})
    assert env["LD_PRELOAD"] == f"{lib}:/other.so"
    assert env["DARSHAN_ENABLE_NONMPI"] == "1" and env["DXT_ENABLE_IO_TRACE"] == "1"
    assert env["DARSHAN_LOGPATH"].endswith("rank-3")
    conf = Path(env["DARSHAN_CONFIG_PATH"]).read_text()
    assert "MAX_RECORDS 5000" in conf and "^/etc" in conf and f"^{sys.prefix}" in conf


def test_darshan_auto_prefers_env_lib(tmp_path, monkeypatch):
    lib = tmp_path / "libdarshan.so"
    lib.write_bytes(b"\x7fELF")
    monkeypatch.setenv("DARSHAN_RUNTIME_LIB", str(lib))
    assert resolve_tracer("auto", tmp_path, [tmp_path]).name == "darshan"


def test_auto_falls_back_to_dftracer(tmp_path, monkeypatch):
    if find_dftracer_lib() is None:
        pytest.skip("dftracer pip package not installed")
    monkeypatch.delenv("DARSHAN_RUNTIME_LIB", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    spec = resolve_tracer("auto", tmp_path, [tmp_path / "data"])
    assert spec.name == "dftracer" and Path(spec.library).is_file()
    env = rank_environment(spec, tmp_path / "traces" / "rank-0", {})
    assert env["DFTRACER_ENABLE"] == "1"
    assert env["DFTRACER_LOG_FILE"] == str(tmp_path / "traces" / "rank-0" / "trace")
    assert str((tmp_path / "data").resolve()) in env["DFTRACER_DATA_DIR"].split(":")


def test_none_changes_nothing(tmp_path):
    spec = resolve_tracer("none", tmp_path, [])
    assert rank_environment(spec, tmp_path, {"A": "1"}) == {"A": "1"}
    assert rank_environment(TracerSpec("none"), tmp_path, {}) == {}


def test_config_text_lists_exclusions():
    text = darshan_config_text(["\\.py$"], 100)
    assert text.splitlines()[1].startswith("NAME_EXCLUDE ") and text.splitlines()[1].endswith(" *")
