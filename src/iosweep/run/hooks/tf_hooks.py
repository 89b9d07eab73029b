"""TensorFlow: ``tf.data`` iterated eagerly, and Keras ``Model.fit``.

Eager loops (``for batch in dataset``, ``next(iterator)``) are timed as PyTorch's are: each
``iter(dataset)`` starts a loop, each eager ``next()`` is a wait. Iteration inside a
``tf.function`` is graph code that Python never sees, and is left alone.

``fit`` runs a compiled step that fetches its own input (``next(iterator)`` inside the
``tf.function``): the wait cannot be told from the step there. Where ``fit`` runs one step
per call on the default strategy (Keras 2, TF <= 2.15: what Horovod builds against), the
hooks split Keras' own step function in two, as Keras writes it, minus the fetch: the batch
is fetched eagerly, timed, and handed to the compiled step (``split``: the step's
computation is unchanged; one eager call per step is added, and the hooks' record says so).
Elsewhere (several steps per call, a ``tf.distribute`` strategy, parameter servers, another
Keras) each call is timed whole, fetch included, and the record says why.
"""

from __future__ import annotations

import inspect
import math
import time
from typing import Any

from iosweep.run.hooks.recorder import Recorder, caller_site, recorder, samples_of


def patch_iterator(module: Any, rec: Recorder) -> str:
    from tensorflow.python.eager import context

    cls = module.OwnedIterator
    real_next = cls.__next__

    def __next__(self):
        r = recorder()
        if r is None or getattr(r.quiet, "on", False) or not context.executing_eagerly():
            return real_next(self)
        t0 = time.time()
        try:
            batch = real_next(self)
        except StopIteration:
            r.stop(self, t0)
            raise
        r.batch(self, "tf.data", t0, time.time(), batch)
        return batch

    cls.__next__ = __next__
    return "tf.data iterators (eager)"


def patch_dataset(module: Any, rec: Recorder) -> str:
    from tensorflow.python.eager import context

    cls = module.DatasetV2
    real_iter = cls.__iter__

    def __iter__(self):
        t = time.time()
        it = real_iter(self)
        r = recorder()
        if r is not None and context.executing_eagerly() and not getattr(r.quiet, "on", False):
            r.begin(it, "tf.data", caller_site(2), -1, t)
        return it

    cls.__iter__ = __iter__
    return ""


# --- Keras fit -----------------------------------------------------------------------------


def _unsplittable(model: Any) -> str:
    """Why this fit's compiled step cannot be split ('' when it can)."""
    if getattr(model, "_cluster_coordinator", None):
        return "parameter-server training (a cluster coordinator schedules the steps)"
    spe = getattr(model, "_steps_per_execution", None)
    n = int(spe.numpy().item()) if spe is not None else 1
    if n != 1 or getattr(model, "autotune_steps_per_execution", False):
        return f"steps_per_execution={n}: several steps run in one compiled call"
    strategy = type(model.distribute_strategy).__name__
    if strategy != "_DefaultDistributionStrategy":
        return f"a tf.distribute strategy ({strategy}) runs the step"
    return ""


def _split_step(training: Any, model: Any):
    """Keras 2's ``step_function`` (keras/src/engine/training.py, make_train_function) on a
    batch given to it: the same computation, without the ``next(iterator)`` inside."""
    import tensorflow as tf

    def run_step(data):
        outputs = model.train_step(data)
        with tf.control_dependencies(training._minimum_control_deps(outputs)):
            model._train_counter.assign_add(1)
        return outputs

    if model.jit_compile:
        run_step = tf.function(run_step, jit_compile=True, reduce_retracing=True)

    def step(data):
        outputs = model.distribute_strategy.run(run_step, args=(data,))
        return training.reduce_per_replica(
            outputs, model.distribute_strategy, reduction=model.distribute_reduction_method
        )

    return step if model.run_eagerly else tf.function(step, reduce_retracing=True)


def _timed_function(model: Any, training: Any, fit: dict[str, Any]):
    """The fit's ``train_function``, timed: split where it can be, else whole."""
    real = model.train_function
    cached = model.__dict__.get("_iosweep_train")
    if cached is not None and cached[0] is real:
        fit["split"], fit["why"] = cached[2], cached[3]
        return cached[1]
    why = _unsplittable(model)
    if why or not hasattr(training, "reduce_per_replica"):
        why = why or "this Keras has no step function iosweep knows how to split"

        def whole(iterator):
            r, t0 = recorder(), time.time()
            out = real(iterator)
            if r is not None:
                _step(r, t0, math.nan, time.time(), -1)
            return out

        fn = whole
    else:
        step = _split_step(training, model)

        def split(iterator):
            r, t0 = recorder(), time.time()
            if r is not None:
                r.quiet.on = True  # the eager-loop hook leaves this fetch to us
            try:
                data = next(iterator)
            except StopIteration:
                raise
            finally:
                if r is not None:
                    r.quiet.on = False
            t1 = time.time()
            out = step(data)
            if r is not None:
                _step(r, t0, t1, time.time(), samples_of(data))
            return out

        fn = split
    fit["split"], fit["why"] = not why, why
    model.__dict__["_iosweep_train"] = (real, fn, not why, why)
    return fn


def _step(r: Recorder, t0: float, fetched: float, t1: float, samples: int) -> None:
    fit = r.fits[-1] if r.fits and r.fits[-1]["end"] is None else None
    if fit is None:  # train_on_batch outside fit: not a loop we time
        return
    t = time.time()
    fit["steps"].append([fit["epoch"], t0, fetched, t1, samples])
    r.overhead += time.time() - t


def _callback_class(keras_callbacks: Any):
    class IosweepTiming(keras_callbacks.Callback):
        """Epoch boundaries of a fit (no batch hooks: Keras calls none it did not before)."""

        def __init__(self, rec: Recorder, fit: dict[str, Any], training: Any):
            super().__init__()
            self._supports_tf_logs = True
            self.rec, self.fit, self.training = rec, fit, training

        def on_train_begin(self, logs=None):
            self.model.train_function = _timed_function(self.model, self.training, self.fit)

        def on_epoch_begin(self, epoch, logs=None):
            self.fit["epoch"] = epoch
            self.fit["epochs"].append([epoch, time.time(), None])

        def on_epoch_end(self, epoch, logs=None):
            if self.fit["epochs"]:
                self.fit["epochs"][-1][2] = time.time()

    return IosweepTiming


def patch_keras(module: Any, rec: Recorder) -> str:
    import importlib

    package = module.__name__.rsplit(".engine.", 1)[0]  # keras.src, keras, tf_keras.src
    callbacks = importlib.import_module(f"{package}.callbacks")
    timing = _callback_class(callbacks)
    model_cls = module.Model
    real_fit = model_cls.fit
    signature = inspect.signature(real_fit)

    def fit(self, *args, **kwargs):
        r = recorder()
        if r is None:
            return real_fit(self, *args, **kwargs)
        bound = signature.bind(self, *args, **kwargs)
        record = {
            "start": time.time(),
            "end": None,
            "site": caller_site(2),
            "split": None,
            "why": "",
            "epoch": -1,
            "epochs": [],
            "steps": [],
        }
        cb = timing(r, record, module)
        given = bound.arguments.get("callbacks")
        if isinstance(given, callbacks.CallbackList):
            given.append(cb)
            given.set_model(self)
        else:
            bound.arguments["callbacks"] = [*(given or []), cb]
        r.fits.append(record)
        try:
            return real_fit(*bound.args, **bound.kwargs)
        finally:
            record["end"] = time.time()

    model_cls.fit = fit
    return f"Keras Model.fit ({package})"


PATCHES = {
    "tensorflow.python.data.ops.iterator_ops": patch_iterator,
    "tensorflow.python.data.ops.dataset_ops": patch_dataset,
    "keras.src.engine.training": patch_keras,  # Keras 2.13-2.15
    "keras.engine.training": patch_keras,  # Keras <= 2.12
    "tf_keras.src.engine.training": patch_keras,  # tf-keras (Keras 2 beside TF >= 2.16)
}
