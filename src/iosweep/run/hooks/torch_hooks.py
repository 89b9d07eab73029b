"""PyTorch ``DataLoader`` iteration, timed: ``iter(loader)`` starts a loop, each ``next()``
that returns a batch is a wait (asked .. returned), StopIteration ends the loop.

Patched on the classes (``DataLoader.__iter__``, ``_BaseDataLoaderIter.__next__``), so every
loader of the process is seen, however the script iterates it (``for``, ``enumerate``,
``next``, a library's training loop). Forked loader workers run their own code paths and
are not touched. Optimizer steps and backward passes are counted per thread: the thread that
runs them is the training thread (:mod:`.steps`). The blocking collectives of
``torch.distributed`` and Horovod are timed: what a rank waits for the others in its steps.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import socket
import time
from typing import Any

from iosweep.run.hooks.recorder import Recorder, caller_site, recorder

_serials = itertools.count()


def _loader_serial(loader: Any) -> int:
    """A number per DataLoader object (ids are reused once an object is freed)."""
    serial = loader.__dict__.get("_iosweep_serial")
    if serial is None:
        serial = next(_serials)
        loader.__dict__["_iosweep_serial"] = serial  # past DataLoader's __setattr__ checks
    return serial


def patch(module: Any, rec: Recorder) -> str:
    loader_cls, iter_cls = module.DataLoader, module._BaseDataLoaderIter
    real_iter, real_next = loader_cls.__iter__, iter_cls.__next__

    def __iter__(self):
        t = time.time()
        it = real_iter(self)
        r = recorder()
        if r is not None:
            r.begin(
                it,
                "torch",
                caller_site(2),
                _loader_serial(self),
                t,
                workers=int(getattr(self, "num_workers", 0) or 0),
                batch_size=getattr(self, "batch_size", None),
                persistent=bool(getattr(self, "persistent_workers", False)),
            )
        return it

    def __next__(self):
        r = recorder()
        if r is None:
            return real_next(self)
        t0 = time.time()
        r.inside.on = True  # the loader's own queues (pin memory) are not hand-offs
        try:
            batch = real_next(self)
        except StopIteration:
            r.stop(self, t0)
            raise
        finally:
            r.inside.on = False
        r.batch(self, "torch", t0, time.time(), batch)
        return batch

    loader_cls.__iter__ = __iter__
    iter_cls.__next__ = __next__
    return "torch.utils.data.DataLoader"


def _count_train_call(*_args: Any) -> None:
    r = recorder()
    if r is not None:
        r.train_call()


def patch_optimizer(module: Any, rec: Recorder) -> str:
    """Every optimizer's steps, through torch's global step hook (torch >= 2.0). At the first
    step of a thread that no loader or queue fed, a global forward pre-hook starts timing the
    training forwards: a loop that slices its own batches (a memory-mapped token file) or
    waits on a future is bounded by its steps. Not before: a module hook slows every call."""
    import torch  # imported already: the optimizer module is torch's own

    hooked = False

    def forward_pre(_module: Any, inputs: Any) -> None:
        r = recorder()
        if r is not None and torch.is_grad_enabled():  # (evaluation runs without grad)
            r.forward(inputs)

    def after_step(*_args: Any) -> None:
        nonlocal hooked
        r = recorder()
        if r is not None and r.optimizer_step() and not hooked:
            hooked = True
            torch.nn.modules.module.register_module_forward_pre_hook(forward_pre)
            r.hooked.append("torch.nn.Module forward (steps without a data loader)")

    module.register_optimizer_step_post_hook(after_step)
    return ""


def patch_save(module: Any, rec: Recorder) -> str:
    """``torch.save``, timed: a synchronous checkpoint in the training loop is neither its
    compute nor its wait for data (and DFTracer does not see its writes)."""
    real_save = module.save

    @functools.wraps(real_save)
    def save(*args, **kwargs):
        t0 = time.time()
        try:
            return real_save(*args, **kwargs)
        finally:
            r = recorder()
            if r is not None:
                r.saved(t0, time.time())

    module.save = save
    return "torch.save"


def patch_backward(module: Any, rec: Recorder) -> str:
    """``Tensor.backward``: a training step without a torch optimizer still runs one."""
    cls = module.Tensor
    real_backward = cls.backward

    def backward(self, *args, **kwargs):
        _count_train_call()
        return real_backward(self, *args, **kwargs)

    cls.backward = backward
    return ""


def _record_join(module: Any) -> None:
    """This process joined the job's process group: its rank, written beside the step records
    (``progress/joins/``), so that a rank the job started itself is found and counted."""
    out = os.environ.get("IOSWEEP_HOOKS_OUT", "")
    if not out:
        return
    try:
        rank, size = int(module.get_rank()), int(module.get_world_size())
    except Exception:  # a group torch cannot describe: nothing to record
        return
    host = socket.gethostname()
    doc = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "host": host,
        "rank": rank,
        "world_size": size,
        "local_rank": os.environ.get("LOCAL_RANK"),
        "time": time.time(),
    }
    folder = os.path.join(os.path.dirname(out), "joins")
    with contextlib.suppress(OSError):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"join-{host}-{os.getpid()}.json"), "w") as f:
            json.dump(doc, f)


def _timed_call(real: Any, label: str) -> Any:
    """``real``, its calls timed as collectives (not those inside another timed call: Horovod's
    ``allreduce`` synchronizes through ``synchronize``). Not in a process that uses CUDA: there
    the host's wait also holds the GPU's work the collective waits for (a backward pass still
    running), so it is counted, not timed apart."""
    import torch  # imported already: these are torch's and Horovod's torch modules

    @functools.wraps(real)
    def call(*args, **kwargs):
        r = recorder()
        if r is None or getattr(r.in_collective, "on", False):
            return real(*args, **kwargs)
        if torch.cuda.is_initialized():
            r.collective_on_gpu(label)
            return real(*args, **kwargs)
        r.in_collective.on = True
        t0 = time.time()
        try:
            return real(*args, **kwargs)
        finally:
            r.in_collective.on = False
            r.collective(label, t0, time.time())

    return call


def _time_collectives(module: Any, names: tuple[str, ...], prefix: str) -> str:
    """Wrap the module's functions ``names`` (those it has) as :func:`_timed_call`; the hook's
    description, '' if none."""
    found = [n for n in names if callable(getattr(module, n, None))]
    for name in found:
        setattr(module, name, _timed_call(getattr(module, name), f"{prefix}.{name}"))
    return f"{prefix} blocking collectives ({len(found)} calls)" if found else ""


# blocking collectives a training loop calls from Python (an async_op=True call returns at
# once: its wait() is not seen); DDP's gradient all-reduce runs in torch's C++ reducer,
# overlapped with backward, and is not among them
C10D_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "monitored_barrier",
)
# Horovod's: DistributedOptimizer.step() waits for the gradients' all-reduce in synchronize()
HOROVOD_COLLECTIVES = (
    "synchronize",
    "allreduce",
    "allreduce_",
    "grouped_allreduce",
    "grouped_allreduce_",
    "allgather",
    "broadcast",
    "broadcast_",
    "alltoall",
    "reducescatter",
    "join",
    "barrier",
)


def patch_c10d(module: Any, rec: Recorder) -> str:
    """``init_process_group``: who joined the job's process group, as which rank; the
    blocking collectives, timed (before ``torch.distributed`` takes their names)."""
    real = module.init_process_group

    def init_process_group(*args, **kwargs):
        out = real(*args, **kwargs)
        _record_join(module)
        return out

    module.init_process_group = init_process_group
    return _time_collectives(module, C10D_COLLECTIVES, "torch.distributed")


def patch_horovod(module: Any, rec: Recorder) -> str:
    """Horovod's PyTorch collectives, timed before its optimizer and functions import them."""
    return _time_collectives(module, HOROVOD_COLLECTIVES, "horovod.torch")


PATCHES = {
    "torch.utils.data.dataloader": patch,
    "torch.distributed.distributed_c10d": patch_c10d,
    "torch.optim.optimizer": patch_optimizer,
    "torch.serialization": patch_save,
    "torch._tensor": patch_backward,
    "horovod.torch.mpi_ops": patch_horovod,
}
