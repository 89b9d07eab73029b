"""iosweep's step hooks, loaded by Python at start-up in every process of a rank.

In the rank's own process (the pid the rank wrapper names) they write the rank's record; in a
Python program the job starts (a subprocess, a ``spawn``-ed process), a record of its own
(``hooks-child-PID.json``), kept only if that process joins the job's process group as a rank
the launcher did not start (Lightning's ``Trainer(devices=N)``, ``mp.spawn``). Then the
interpreter's own ``sitecustomize``, if it has one, runs as it would have without us.
"""

import os
import sys


def _install() -> None:
    out = os.environ.get("IOSWEEP_HOOKS_OUT", "")
    if not out:
        return
    if os.environ.get("IOSWEEP_RANK_PID") != str(os.getpid()):
        out = os.path.join(os.path.dirname(out), f"hooks-child-{os.getpid()}.json")
    try:
        from iosweep.run.hooks.install import install

        install(out)
    except Exception as e:  # never stop the user's job
        print(f"iosweep: step hooks not installed: {type(e).__name__}: {e}", file=sys.stderr)


def _chain() -> None:
    """Run the next ``sitecustomize`` on the path (a venv's or the site's)."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # as Python reports an error in sitecustomize, then goes on
        print(f"Error in sitecustomize ({spec.origin}): {e}", file=sys.stderr)


_install()
_chain()
