"""The ImageNet-style dataset as the training scripts see it: the image files in a stable
order with their class labels, and the training-loop bookkeeping both frameworks share.
Stdlib only: imported by every framework's interpreter."""

from __future__ import annotations

import os
from pathlib import Path

SUFFIXES = (".jpeg", ".jpg", ".png")


def image_files(data: str | Path) -> tuple[list[str], list[int], list[str]]:
    """(paths, labels, class names) of ``data/train/<class>/*`` (or ``data/<class>/*``),
    classes and files sorted, as torchvision's ImageFolder orders them."""
    root = Path(data)
    root = root / "train" if (root / "train").is_dir() else root
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    paths: list[str] = []
    labels: list[int] = []
    for i, c in enumerate(classes):
        names = sorted(
            e.name
            for e in os.scandir(root / c)
            if e.is_file() and e.name.lower().endswith(SUFFIXES)
        )
        paths += [str(root / c / n) for n in names]
        labels += [i] * len(names)
    if not paths:
        raise FileNotFoundError(f"{root}: no images under <class> folders")
    return paths, labels, classes


class Annotations:
    """DFTracer's app-level events around the training loop's phases (``fetch``: waiting
    for the next batch; ``compute``: the step), when the run is traced by DFTracer (the
    preloaded library and ``DFTRACER_ENABLE=1``); otherwise nothing happens. The events
    land in the same trace as the process's POSIX events (DFTracer's hybrid mode)."""

    def __init__(self) -> None:
        self.enabled = os.environ.get("DFTRACER_ENABLE") == "1" and "dftracer" in os.environ.get(
            "LD_PRELOAD", ""
        )
        self._log = None
        if self.enabled:
            from dftracer.python import dftracer

            self._log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)

    def region(self, cat: str, name: str, epoch: int, step: int):
        """A context manager that records [enter, exit] as a ``cat`` event (or a no-op)."""
        if not self.enabled:
            return _NULL
        from dftracer.python import dft_fn

        return dft_fn(cat=cat, name=name, epoch=epoch, step=step)

    def finalize(self) -> None:
        """Nothing: the preloaded library writes the trace at process exit. Finalizing the
        Python logger earlier closes the trace, and the POSIX events after it are lost."""


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL = _Null()
