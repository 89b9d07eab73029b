"""Step timing without touching the training script.

The rank wrapper puts ``site/`` first on the rank's ``PYTHONPATH``; its ``sitecustomize``
(which Python imports at start-up) starts :mod:`.recorder` (:mod:`.install`) in the rank's process, then runs
any ``sitecustomize`` of the interpreter's own. The recorder patches the frameworks' data
iteration when, and only if, the script imports them (an import hook; nothing is imported
early):

- PyTorch ``DataLoader`` (:mod:`.torch_hooks`): each ``iter(loader)`` starts an epoch of
  that loop; the time blocked in ``next()`` is the wait for a batch, the time between two
  batches is the step. Worker processes are untouched (and stay traced).
- A loop no loader feeds (batches sliced from a ``np.memmap``, taken from a
  ``concurrent.futures`` pool): bounded by the thread's optimizer steps (torch's global step
  hook); at the first, a global ``torch.nn.Module`` forward pre-hook starts timing each
  step's first training forward. ``torch.save`` is timed too: a synchronous checkpoint is
  neither a step's compute nor its wait.
- ``tf.data`` iterated eagerly and Keras ``Model.fit`` (:mod:`.tf_hooks`): the same for
  eager ``for batch in dataset`` loops; ``fit``'s batches are timed by a callback, and its
  compiled step, which fetches its own input, is split so that the fetch is timed apart
  (or, where that cannot be done, the step is timed whole and the record says so).

Everything is kept in memory and written once, at exit, to the file the wrapper names
(``progress/hooks-rank-R.json``); :mod:`.steps` turns it into the manifest's step records.
The hooks never stop the script: a hook that fails is switched off and the failure recorded.
"""

from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"
