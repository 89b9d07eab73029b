"""Tracer discovery and the environment that puts a tracer into one training process.

Only the training processes are traced: the per-rank wrapper (:mod:`iosweep.run.rank_wrapper`)
applies :func:`rank_environment` just before it execs Python, so the launcher (mpirun,
srun, horovodrun) runs untraced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

TRACERS = ("darshan", "dftracer", "none")


class TracerError(RuntimeError):
    """The requested tracer is not available; the message says where we looked."""


@dataclass
class TracerSpec:
    """A resolved tracer: what to preload and which variables every rank gets."""

    name: str  # darshan | dftracer | none
    library: str = ""  # the LD_PRELOAD library
    env: dict[str, str] = field(default_factory=dict)  # rank-independent variables
    version: str = ""
    config_file: str = ""  # DARSHAN_CONFIG_PATH file, if any
    warnings: list[str] = field(default_factory=list)  # what may be lost, said before the run


def find_darshan_lib(configured: str | None = None) -> str | None:
    """libdarshan.so from (1) the config, (2) $DARSHAN_RUNTIME_LIB, (3) `darshan-config --pre-ld-flags`/libdir."""
    for candidate in (configured, os.environ.get("DARSHAN_RUNTIME_LIB")):
        if candidate:
            return candidate if Path(candidate).is_file() else None
    exe = shutil.which("darshan-config")
    if exe:
        try:
            out = subprocess.run(
                [exe, "--pre-ld-flags"], capture_output=True, text=True, timeout=10, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        # --pre-ld-flags prints e.g. "-L/opt/darshan/lib -ldarshan ..."
        for tok in out.split():
            if tok.startswith("-L"):
                lib = Path(tok[2:]) / "libdarshan.so"
                if lib.is_file():
                    return str(lib)
    return None


def darshan_version(lib: str | None = None) -> str:
    """darshan-runtime's version from ``darshan-config --version``: the one beside the
    library (``<prefix>/lib/libdarshan.so`` -> ``<prefix>/bin/darshan-config``), else on PATH."""
    exe = None
    if lib:
        beside = Path(lib).resolve().parent.parent / "bin" / "darshan-config"
        exe = str(beside) if beside.is_file() else None
    exe = exe or shutil.which("darshan-config")
    if not exe:
        return ""
    try:
        return subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def find_dftracer_lib() -> tuple[str, str] | None:
    """(path of libdftracer_preload.so, version) from the pip package `dftracer`, if installed."""
    try:
        import dftracer
    except ImportError:
        return None
    root = Path(dftracer.__file__).parent
    for sub in ("lib64", "lib"):
        lib = root / sub / "libdftracer_preload.so"
        if lib.is_file():
            try:
                from importlib.metadata import version

                v = version("dftracer")
            except Exception:  # metadata missing in odd installs; the path still works
                v = ""
            return str(lib), v
    return None


# darshan-core's built-in exclusions (darshan-runtime 3.5.0, darshan_path_exclusions): files
# whose path starts with one of these are not traced at all. DARSHAN_EXCLUDE_DIRS replaces
# the list as a whole; a NAME_INCLUDE regex of the config file overrides any exclusion.
DARSHAN_DEFAULT_EXCLUDES = (
    "/etc/", "/dev/", "/usr/", "/bin/", "/boot/", "/lib/", "/opt/", "/sbin/", "/sys/", "/proc/",
    "/var/",
)  # fmt: skip
_ERE_SPECIAL = set(".[]()*+?{}|^$\\")


def ere_escape(text: str) -> str:
    """``text`` as a literal POSIX extended regex (Darshan compiles its names with regcomp)."""
    return "".join("\\" + c if c in _ERE_SPECIAL else c for c in text)


def darshan_exclude_dirs(data_dirs: list[Path]) -> str:
    """DARSHAN_EXCLUDE_DIRS: Darshan's own list without the entries that hold a data
    directory (data staged in /dev/shm would otherwise go untraced, silently)."""
    dirs = [str(d).rstrip("/") + "/" for d in data_dirs]
    keep = [e for e in DARSHAN_DEFAULT_EXCLUDES if not any(d.startswith(e) for d in dirs)]
    return ",".join(keep)


def darshan_config_text(
    exclude: list[str],
    max_records: int,
    include: list[Path] = (),  # type: ignore[assignment]
    name_mem_mb: int = 0,
) -> str:
    """A DARSHAN_CONFIG_PATH file: exclude interpreter/library files, always trace the data
    directories (``include``: NAME_INCLUDE overrides every exclusion), raise record limits."""
    prefixes = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)}
    patterns = [f"^{ere_escape(p)}" for p in sorted(prefixes) if p and p != "/"] + list(exclude)
    lines = [
        "# Generated by iosweep: interpreter and system files out, dataset and staging always in.",
        f"NAME_EXCLUDE {','.join(patterns)} *",
    ]
    inc = [f"^{ere_escape(str(d).rstrip('/'))}/" for d in include if "," not in str(d)]
    if inc:
        lines.append(f"NAME_INCLUDE {','.join(inc)} *")
    lines.append(f"MAX_RECORDS {max_records} POSIX,STDIO,MPI-IO,DXT_POSIX,DXT_MPIIO")
    if name_mem_mb > 1:  # 1 MiB is Darshan's default; a site's build may have raised it
        lines.append(f"NAMEMEM {name_mem_mb}")
    return "\n".join(lines) + "\n"


def darshan_limits(
    max_records: int, modmem_mb: int, dataset_files: int, data_dirs: list[Path]
) -> tuple[int, int, list[str]]:
    """(MAX_RECORDS, NAMEMEM in MiB, warnings) for a dataset of ``dataset_files`` files: one
    process (a persistent loader worker) may open every file, and Darshan drops the records
    and names beyond its limits."""
    warnings = []
    records = max(max_records, dataset_files + 1024)
    if records > max_records:
        warnings.append(
            f"Darshan MAX_RECORDS raised from {max_records} (tracer.max_records) to {records}: "
            f"the dataset has {dataset_files} files and one loader process may open them all"
        )
    longest = max((len(str(d)) for d in data_dirs), default=0) + 64
    name_mem = -(-(records * (longest + 32)) // (1 << 20))
    need_mb = -(-(dataset_files * 1200) // (1 << 20))  # record + a few DXT segments per file
    if need_mb > modmem_mb:
        warnings.append(
            f"Darshan's module memory (tracer.modmem_mb = {modmem_mb} MiB) may not hold a process "
            f"that opens all {dataset_files} files (about {need_mb} MiB): its records or DXT "
            "segments would be lost (the ingest then reports partial data); raise "
            "tracer.modmem_mb (at most 4095)"
        )
    return records, max(name_mem, 1), warnings


def resolve_tracer(
    name: str,
    run_dir: Path,
    data_dirs: list[Path],
    darshan_lib: str | None = None,
    exclude: list[str] | None = None,
    max_records: int = 8192,
    modmem_mb: int = 256,
    dataset_files: int = 0,
) -> TracerSpec:
    """Turn a configured tracer (auto|darshan|dftracer|none) into a TracerSpec for ``run_dir``."""
    if name not in (*TRACERS, "auto"):
        raise TracerError(f"unknown tracer {name!r}; known: auto, {', '.join(TRACERS)}")
    if name == "none":
        return TracerSpec(name="none")
    lib = find_darshan_lib(darshan_lib) if name in ("auto", "darshan") else None
    if name == "darshan" and lib is None:
        raise TracerError(
            "tracer darshan: libdarshan.so not found (looked at config tracer.darshan_lib="
            f"{darshan_lib!r}, $DARSHAN_RUNTIME_LIB, and `darshan-config` on PATH); "
            "install darshan-runtime (e.g. `module load darshan`) or use tracer dftracer"
        )
    if lib:
        return _darshan(
            lib, run_dir, data_dirs, exclude or [], max_records, modmem_mb, dataset_files
        )
    found = find_dftracer_lib()
    if found is None:
        raise TracerError(
            f"tracer {name}: neither libdarshan.so nor the dftracer pip package was found; "
            "run tools/setup.sh or set tracer.darshan_lib"
        )
    dft_lib, version = found
    return TracerSpec(
        name="dftracer",
        library=dft_lib,
        version=version,
        env={
            "DFTRACER_ENABLE": "1",
            "DFTRACER_INIT": "PRELOAD",
            "DFTRACER_INC_METADATA": "1",
            "DFTRACER_TRACE_COMPRESSION": "1",
            "DFTRACER_BIND_SIGNALS": "0",
            # DFTracer traces only files under these prefixes (the data and the run's outputs).
            "DFTRACER_DATA_DIR": ":".join(str(Path(d).resolve()) for d in [*data_dirs, run_dir]),
        },
    )


def _darshan(
    lib: str,
    run_dir: Path,
    data_dirs: list[Path],
    exclude: list[str],
    max_records: int,
    modmem_mb: int,
    dataset_files: int,
) -> TracerSpec:
    records, name_mem, warnings = darshan_limits(max_records, modmem_mb, dataset_files, data_dirs)
    conf = run_dir / "darshan.conf"
    conf.write_text(darshan_config_text(exclude, records, data_dirs, name_mem))
    return TracerSpec(
        name="darshan",
        library=lib,
        version=darshan_version(lib),
        config_file=str(conf),
        env={
            "DARSHAN_ENABLE_NONMPI": "1",
            "DXT_ENABLE_IO_TRACE": "1",
            "DARSHAN_CONFIG_PATH": str(conf),
            "DARSHAN_MODMEM": str(modmem_mb),
            "DARSHAN_EXCLUDE_DIRS": darshan_exclude_dirs(data_dirs),
        },
        warnings=warnings,
    )


def rank_environment(spec: TracerSpec, trace_dir: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment for one rank's traced process, its logs going to ``trace_dir``."""
    env = dict(base)
    if spec.name == "none":
        return env
    env.update(spec.env)
    # Prepend, keeping anything the user preloads already.
    env["LD_PRELOAD"] = ":".join(p for p in (spec.library, base.get("LD_PRELOAD", "")) if p)
    if spec.name == "darshan":
        # LOGPATH, not LOGFILE: forked workers inherit it and must write logs of their own.
        env["DARSHAN_LOGPATH"] = str(trace_dir)
    else:
        env["DFTRACER_LOG_FILE"] = str(trace_dir / "trace")
    return env
