"""The C side: PyDarshan's cffi binding of libdarshan-util, opened on a log that
:func:`~iosweep.trace.darshan.check.check_log` has validated, and what it returns checked
(a record that cannot be what it claims is an error, not a crash)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from iosweep.trace.darshan.check import JOB_RECORD_SIZE
from iosweep.trace.logs import LogError
from iosweep.trace.schema import Issue

#: numpy view of libdarshan-util's ``segment_info`` (darshan-dxt-log-format.h)
SEGMENT_DTYPE = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])


def backend():
    # imported lazily: loading libdarshan-util and its cdef costs a few hundred ms
    from darshan.backend import cffi_backend as cb

    if cb.ffi.sizeof("segment_info") != SEGMENT_DTYPE.itemsize:
        raise RuntimeError("libdarshan-util's segment_info differs from SEGMENT_DTYPE")
    return cb


def lib_version() -> str:
    """The bundled libdarshan-util's version (its structs are the current format's)."""
    return str(backend().get_lib_version())


class RecordError(Exception):
    """darshan_log_get_record returned an error in the middle of a module region."""


class LogHandle:
    """An open libdarshan-util log handle."""

    def __init__(self, path: Path):
        self.cb = backend()
        self.ffi, self.lib = self.cb.ffi, self.cb.libdutil
        self.path = path
        self.h = self.lib.darshan_log_open(os.fsencode(path))
        if self.h == self.ffi.NULL:
            raise LogError(path, "corrupt", "libdarshan-util cannot open the log")

    def close(self) -> None:
        if self.h is not None:
            self.lib.darshan_log_close(self.h)
            self.h = None

    def reopen(self) -> None:
        self.close()
        self.h = self.lib.darshan_log_open(os.fsencode(self.path))
        if self.h == self.ffi.NULL:
            self.h = None
            raise LogError(self.path, "corrupt", "libdarshan-util cannot reopen the log")

    def job(self) -> dict[str, Any]:
        ffi, lib = self.ffi, self.lib
        job = ffi.new("struct darshan_job *")
        if lib.darshan_log_get_job(self.h, job) < 0:
            raise LogError(self.path, "corrupt", "libdarshan-util cannot read the job record")
        exe = ffi.new("char[]", JOB_RECORD_SIZE)
        lib.darshan_log_get_exe(self.h, exe)
        meta = {}
        for line in ffi.string(job.metadata, 1024).decode("utf-8", "replace").splitlines():
            k, sep, v = line.partition("=")
            if sep:
                meta[k] = v
        mounts = []
        mnts = ffi.new("struct darshan_mnt_info **")
        cnt = ffi.new("int *")
        if lib.darshan_log_get_mounts(self.h, mnts, cnt) == 0 and cnt[0] > 0:
            mounts = [
                (
                    ffi.string(mnts[0][i].mnt_path).decode("utf-8", "replace"),
                    ffi.string(mnts[0][i].mnt_type).decode("utf-8", "replace"),
                )
                for i in range(cnt[0])
            ]
            lib.darshan_free(mnts[0])
        return {
            "uid": int(job.uid),
            "start": int(job.start_time_sec) + int(job.start_time_nsec) * 1e-9,
            "end": int(job.end_time_sec) + int(job.end_time_nsec) * 1e-9,
            "nprocs": int(job.nprocs),
            "jobid": int(job.jobid),
            "exe": ffi.string(exe).decode("utf-8", "replace").strip(),
            "metadata": meta,
            "mounts": mounts,
        }

    def modules(self) -> dict[str, dict[str, Any]]:
        """name -> {idx, len, ver, partial}, in libdarshan-util's module numbering."""
        ffi = self.ffi
        mods = ffi.new("struct darshan_mod_info **")
        cnt = ffi.new("int *")
        self.lib.darshan_log_get_modules(self.h, mods, cnt)
        out = {}
        for i in range(cnt[0]):
            m = mods[0][i]
            out[ffi.string(m.name).decode()] = {
                "idx": int(m.idx),
                "len": int(m.len),
                "ver": int(m.ver),
                "partial": bool(m.partial_flag),
            }
        if cnt[0]:
            self.lib.darshan_free(mods[0])
        return out

    def records(self, idx: int, ctype: str):
        """Yield each record of module ``idx`` as a ``ctype`` pointer, freed after use."""
        buf = self.ffi.new("void **")
        while True:
            buf[0] = self.ffi.NULL
            r = self.lib.darshan_log_get_record(self.h, idx, buf)
            if r == 0:
                return
            if r < 0:
                raise RecordError
            try:
                yield self.ffi.cast(ctype, buf[0])
            finally:
                self.lib.darshan_free(buf[0])


class NameDict:
    """Values of one dictionary-encoded column, shared by every batch of a log."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        return self.values.setdefault(value, len(self.values))

    def array(self) -> pa.Array:
        return pa.array(list(self.values), pa.string())


def log_issue(
    path: Path, kind: str, message: str, severity: str = "error", field: str | None = None
) -> Issue:
    return Issue(source=str(path), kind=kind, message=message, severity=severity, field=field)
