"""iosweep's step hooks, loaded by Python at start-up in every process of a rank.

Active only in the rank's own process (the pid the rank wrapper names): a Python program the
job starts is left alone. Then the interpreter's own ``sitecustomize``, if it has one, runs
as it would have without us.
"""

import os
import sys


def _install() -> None:
    if os.environ.get("IOSWEEP_RANK_PID") != str(os.getpid()):
        return
    try:
        from iosweep.run.hooks import recorder

        recorder.install(os.environ.get("IOSWEEP_HOOKS_OUT", ""))
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
