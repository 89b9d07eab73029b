"""Install the step hooks in this process (called by ``site/sitecustomize.py``): the
recorder started with every framework's patches. Kept apart from :mod:`.recorder`, which the
frameworks' hooks import."""

from __future__ import annotations

from iosweep.run.hooks import recorder, tf_hooks, torch_hooks


def install(out: str) -> recorder.Recorder:
    """Start recording in this process. In the rank's own process ``out`` is the rank's
    record; in a Python process below it, ``hooks-child-PID.json`` beside it, which becomes a
    rank's record if the process joins the job's process group as a rank the launcher did
    not start (:func:`iosweep.run.hooks.torch_hooks.patch_c10d` writes the join)."""
    return recorder.start(out, {**torch_hooks.PATCHES, **tf_hooks.PATCHES})
