"""Stage a dataset into node-local storage: one task per node copies it before training.

The runner starts ``python -m iosweep.run.stage copy --src DATA --dest DIR --record RECORDS``
with the run's launcher, one task per node (``mpirun --map-by ppr:1:node``, ``srun
--ntasks-per-node=1``), so every node holds its own copy, and ``remove --dest DIR`` after the
run. Each task writes ``RECORDS/<host>.json``: ``{host, src, dest, files, bytes, start, end}``,
the staging phase the manifest records. Free space is checked before anything is copied.
The copy is not traced: only the training processes are. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

# Room left beside the copy: file-system blocks and metadata take more than the bytes.
MARGIN = 1.05


class StagingError(RuntimeError):
    """The dataset cannot be staged here; the message names the path and what is missing."""


def tree_size(src: Path) -> tuple[int, int]:
    """(files, bytes) under ``src``."""
    files = size = 0
    for dirpath, _dirs, names in os.walk(src):
        for n in names:
            files += 1
            size += os.lstat(os.path.join(dirpath, n)).st_size
    return files, size


def check_room(dest: Path, need: int) -> None:
    """StagingError unless the file system holding ``dest`` has ``need`` bytes (+5 %) free."""
    probe = dest
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need * MARGIN:
        raise StagingError(
            f"staging directory {probe} has {free / 1e9:.2f} GB free; the dataset needs "
            f"{need * MARGIN / 1e9:.2f} GB (staging.dir)"
        )


def copy(src: Path, dest: Path, record_dir: Path) -> dict:
    """Copy ``src`` to ``dest`` (replacing an earlier copy) and write this node's record."""
    host = socket.gethostname()
    files, size = tree_size(src)
    if dest.exists():
        shutil.rmtree(dest)
    check_room(dest, size)
    t0 = time.time()
    shutil.copytree(src, dest, symlinks=False)
    rec = {
        "host": host,
        "src": str(src),
        "dest": str(dest),
        "files": files,
        "bytes": size,
        "start": t0,
        "end": time.time(),
    }
    record_dir.mkdir(parents=True, exist_ok=True)
    (record_dir / f"{host}.json").write_text(json.dumps(rec) + "\n")
    return rec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m iosweep.run.stage", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("copy", help="copy the dataset into node-local storage")
    c.add_argument("--src", type=Path, required=True)
    c.add_argument("--dest", type=Path, required=True)
    c.add_argument("--record", type=Path, required=True, help="directory of per-node records")
    r = sub.add_parser("remove", help="remove this node's copy")
    r.add_argument("--dest", type=Path, required=True)
    a = p.parse_args(argv)
    try:
        if a.cmd == "copy":
            rec = copy(a.src, a.dest, a.record)
            print(
                f"{rec['host']}: staged {rec['files']} files, {rec['bytes'] / 1e6:.1f} MB "
                f"in {rec['end'] - rec['start']:.2f} s -> {rec['dest']}",
                flush=True,
            )
        else:
            shutil.rmtree(a.dest, ignore_errors=True)
    except (StagingError, OSError) as e:
        print(f"{socket.gethostname()}: staging failed: {e}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
