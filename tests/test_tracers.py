"""Tracer discovery and the environment each rank gets."""

import re
import sys
from pathlib import Path

import pytest
from conftest import unavailable

from iosweep.config import ConfigError, validate_config
from iosweep.run.tracers import (
    TracerError,
    TracerSpec,
    darshan_config_text,
    ere_escape,
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
    assert "MAX_RECORDS 5000" in conf and "^/etc" in conf and f"^{ere_escape(sys.prefix)}" in conf


def test_darshan_auto_prefers_env_lib(tmp_path, monkeypatch):
    lib = tmp_path / "libdarshan.so"
    lib.write_bytes(b"\x7fELF")
    monkeypatch.setenv("DARSHAN_RUNTIME_LIB", str(lib))
    assert resolve_tracer("auto", tmp_path, [tmp_path]).name == "darshan"


def test_auto_falls_back_to_dftracer(tmp_path, monkeypatch):
    if find_dftracer_lib() is None:
        unavailable("dftracer pip package not installed (run tools/setup.sh)")
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


# --- What Darshan traces, by darshan-runtime 3.5.0's own rule ----------------------------------
# darshan-core.c, darshan_core_excluded_path(): a path is excluded when it starts with an entry
# of DARSHAN_EXCLUDE_DIRS (which replaces the built-in list) or of the built-in list, or when a
# NAME_EXCLUDE regex of the config file matches; a NAME_INCLUDE regex (or a built-in include
# dir, when DARSHAN_EXCLUDE_DIRS is unset) supersedes the exclusion.
DARSHAN_350_EXCLUDES = ["/etc/", "/dev/", "/usr/", "/bin/", "/boot/", "/lib/", "/opt/", "/sbin/",
                        "/sys/", "/proc/", "/var/"]  # fmt: skip
DARSHAN_350_INCLUDES = ["/var/opt/cray/dws/mounts/"]


def _regexes(conf: str, key: str) -> list[str]:
    out = []
    for line in conf.splitlines():
        parts = line.split()
        if parts and parts[0] == key:
            out += parts[1].split(",")
    return out


def darshan_traces(path: str, env: dict[str, str], conf: str) -> bool:
    user = env.get("DARSHAN_EXCLUDE_DIRS")
    dirs = user.split(",") if user else DARSHAN_350_EXCLUDES
    excluded = any(path.startswith(d) for d in dirs) or any(
        re.search(rx, path) for rx in _regexes(conf, "NAME_EXCLUDE")
    )
    if not excluded:
        return True
    if not user and any(path.startswith(d) for d in DARSHAN_350_INCLUDES):
        return True
    return any(re.search(rx, path) for rx in _regexes(conf, "NAME_INCLUDE"))


def test_the_darshan_environment_traces_dev_shm_and_the_dataset(tmp_path):
    lib = tmp_path / "libdarshan.so"
    lib.write_bytes(b"\x7fELF")
    stage, data = "/dev/shm/iosweep.0a1b2c", "/scratch/my.data+set"
    spec = resolve_tracer(
        "darshan",
        tmp_path,
        [Path(data), Path(stage), tmp_path / "checkpoints"],
        darshan_lib=str(lib),
        exclude=["^/proc", "^/sys", "^/dev", "^/etc", "^/usr", "\\.py$"],  # the config's default
    )
    env = rank_environment(spec, tmp_path / "traces" / "rank-0", {})
    conf = Path(env["DARSHAN_CONFIG_PATH"]).read_text()
    for traced in (
        f"{stage}/train/n00000000/n00000000_0.JPEG",
        f"{data}/train/n00000001/n00000001_7.JPEG",
        f"{tmp_path}/checkpoints/checkpoint-0.pt",
    ):
        assert darshan_traces(traced, env, conf), traced
    for untraced in (
        "/dev/null",
        "/dev/shm/other/file",
        "/proc/self/status",
        f"{sys.prefix}/lib/python3.11/os.py",
        "/dev/shm/iosweepX0a1b2c/file",  # the staging dir's '.' is a literal dot
    ):
        assert not darshan_traces(untraced, env, conf), untraced
    # What the ImageNet fixture's darshan8shm run had: Darshan's defaults, and staged data
    # in /dev/shm that the trace silently lacks.
    assert not darshan_traces(f"{stage}/train/a/b.JPEG", {}, "")


def test_darshan_records_are_sized_for_the_dataset(tmp_path):
    lib = tmp_path / "libdarshan.so"
    lib.write_bytes(b"\x7fELF")
    spec = resolve_tracer(
        "darshan", tmp_path, [tmp_path / "data"], darshan_lib=str(lib), max_records=8192,
        dataset_files=20_000,
    )  # fmt: skip
    conf = Path(spec.config_file).read_text()
    assert "MAX_RECORDS 21024 " in conf  # every file, by one loader worker, and a margin
    assert "NAMEMEM" in conf  # 21,024 names do not fit Darshan's default 1 MiB
    assert any("raised from 8192" in w for w in spec.warnings)
    small = resolve_tracer("darshan", tmp_path, [tmp_path], darshan_lib=str(lib), dataset_files=6)
    assert "MAX_RECORDS 8192 " in Path(small.config_file).read_text() and not small.warnings


def test_darshan_modmem_that_writes_no_log_is_refused():
    with pytest.raises(ConfigError, match=r"tracer.modmem_mb.*4096.*no log at all"):
        validate_config({"tracer": {"modmem_mb": 4096}})
    validate_config({"tracer": {"modmem_mb": 4095}})
