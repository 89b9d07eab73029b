"""The step hooks' record of one rank process: kept in memory, written once at exit.

Stdlib only: it runs inside the user's interpreter, whatever its packages. Loops are the
iterations of data loaders (one ``iter()`` each: an epoch of that loop), batches the
``next()`` calls that returned one; Keras ``fit`` calls are kept apart. Every batch carries
the thread that took it, and each thread its count of training calls (an optimizer step, a
backward pass): a loader iterated in another thread than the training one is a producer, and
what training waited for is its hand-off, the ``queue.Queue.get`` calls that returned a
batch (:func:`patch_queue`). :mod:`.steps` reads the file this writes.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import importlib.abc
import importlib.util
import json
import os
import queue
import sys
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Mapping
from typing import Any

FORMAT = "iosweep.hooks/1"
# a collective call that starts within this long of the same thread's previous one's end
# extends it: a Horovod optimizer step synchronizes each gradient in turn, one wait a step
COALESCE_S = 1e-3
_REC: Recorder | None = None


def recorder() -> Recorder | None:
    """The recorder of this process, if the hooks are on and this is the rank's process (a
    forked child, a loader worker, forgets it: :func:`_forget_in_child`)."""
    return _REC


def _forget_in_child() -> None:
    global _REC
    _REC = None


def caller_site(depth: int = 2) -> str:
    """``file:line`` of the code that started a loop (the frame ``depth`` up)."""
    try:
        f = sys._getframe(depth)
    except ValueError:
        return "?"
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def samples_of(batch: Any) -> int:
    """The batch's samples: the first dimension of its first array-like leaf; -1 if none."""
    if type(batch) in (tuple, list) and batch:  # the common (inputs, labels): one step down
        batch = batch[0]
    for _ in range(8):
        if isinstance(batch, dict):
            batch = next(iter(batch.values()), None)
        elif isinstance(batch, (list, tuple)):
            batch = batch[0] if batch else None
        else:
            break
    shape = getattr(batch, "shape", None)
    try:
        n = shape[0] if shape is not None and len(shape) else None
        return int(n) if n is not None else -1
    except (TypeError, ValueError, IndexError):
        return -1


class Recorder:
    def __init__(self, out: str):
        self.out = out
        self.pid = os.getpid()
        self.start = time.time()
        self.lock = threading.Lock()
        # one per iteration of a loader: kind, site, loader, start, stop, close, info
        self.loops: list[dict[str, Any]] = []
        self._loop_of: dict[int, int] = {}  # id(iterator) -> its current loop
        self.b_loop = array("l")
        self.b_request = array("d")
        self.b_ready = array("d")
        self.b_samples = array("l")
        self.b_thread = array("l")
        # threads by first use: ident -> index into thread_info (name, main, train_calls)
        self._thread_of: dict[int, int] = {}
        self.thread_info: list[dict[str, Any]] = []
        # hand-offs: queue.Queue.get calls outside the loaders' own next(), by thread and site
        self.h_thread = array("l")
        self.h_site = array("l")
        self.h_request = array("d")
        self.h_ready = array("d")
        self.h_samples = array("l")
        self._site_of: dict[str, int] = {}
        self.inside = threading.local()  # .on: within a hooked next() (its own queues)
        # optimizer steps (the bounds of a loop that no loader feeds): thread, the first
        # training forward since that thread's previous step and its samples, the step's end
        self.o_thread = array("l")
        self.o_forward = array("d")
        self.o_samples = array("l")
        self.o_end = array("d")
        self.open_step = threading.local()  # .forward, .samples: the open step's first forward
        self.fed_threads: set[int] = set()  # threads that took a batch from a loader or queue
        self.saves: list[list[float]] = []  # torch.save calls: thread, start, end
        # collective calls (torch.distributed, Horovod), coalesced: thread, start, end, calls
        self.collectives: list[list[float]] = []
        self._last_collective: dict[int, int] = {}  # thread -> its last span's index
        self.collective_calls: dict[str, int] = {}  # call -> how many
        self.gpu_collective_calls: dict[str, int] = {}  # those not timed (CUDA in use)
        self.in_collective = threading.local()  # .on: within a timed call (nested ones not)
        self.fits: list[dict[str, Any]] = []  # Keras fit calls (tf_hooks)
        self.hooked: list[str] = []
        self.problems: list[str] = []
        self.exit_code: int | None = None
        self.error = ""
        self.overhead = 0.0  # seconds spent in the hooks' bookkeeping
        self.quiet = threading.local()  # .on: a fetch another hook records (Keras fit)

    # --- threads ---------------------------------------------------------------------
    def thread_index(self) -> int:
        """This thread's index in :attr:`thread_info` (added on first use)."""
        ident = threading.get_ident()
        idx = self._thread_of.get(ident)
        if idx is None:
            with self.lock:
                idx = self._thread_of.setdefault(ident, len(self.thread_info))
                if idx == len(self.thread_info):
                    t = threading.current_thread()
                    main = t is threading.main_thread()
                    self.thread_info.append({"name": t.name, "main": main, "train_calls": 0})
        return idx

    def train_call(self) -> None:
        """This thread ran a training call (an optimizer step, a backward pass)."""
        self.thread_info[self.thread_index()]["train_calls"] += 1

    def optimizer_step(self) -> bool:
        """An optimizer's step ended in this thread; True while no loader or queue has fed
        this thread a batch (its steps then bound a loop the hooks cannot see otherwise)."""
        t = time.time()
        thread = self.thread_index()
        self.thread_info[thread]["train_calls"] += 1
        step = self.open_step
        forward, samples = getattr(step, "forward", -1.0), getattr(step, "samples", -1)
        step.forward, step.samples = -1.0, -1
        with self.lock:
            self.o_thread.append(thread)
            self.o_forward.append(forward)
            self.o_samples.append(samples)
            self.o_end.append(t)
        self.overhead += time.time() - t
        return thread not in self.fed_threads

    def forward(self, inputs: Any) -> None:
        """A training forward began in this thread: the first since its last step starts the
        step's compute."""
        step = self.open_step
        if getattr(step, "forward", -1.0) < 0:
            step.forward, step.samples = time.time(), samples_of(inputs)

    def saved(self, t0: float, t1: float) -> None:
        """A ``torch.save`` call ran from ``t0`` to ``t1`` in this thread."""
        thread = self.thread_index()
        with self.lock:
            self.saves.append([thread, t0, t1])

    def collective(self, name: str, t0: float, t1: float) -> None:
        """A collective call ``name`` ran from ``t0`` to ``t1`` in this thread."""
        thread = self.thread_index()
        with self.lock:
            self.collective_calls[name] = self.collective_calls.get(name, 0) + 1
            k = self._last_collective.get(thread)
            if k is not None and t0 - self.collectives[k][2] < COALESCE_S:
                self.collectives[k][2] = t1
                self.collectives[k][3] += 1
            else:
                self._last_collective[thread] = len(self.collectives)
                self.collectives.append([thread, t0, t1, 1])
        self.overhead += time.time() - t1

    def collective_on_gpu(self, name: str) -> None:
        """A collective call ``name`` in a process that uses CUDA: counted, not timed."""
        with self.lock:
            self.gpu_collective_calls[name] = self.gpu_collective_calls.get(name, 0) + 1

    def handoff(self, t0: float, t1: float, item: Any, site: str) -> None:
        """A ``queue.Queue.get`` asked at ``t0`` returned ``item`` at ``t1``."""
        n = samples_of(item)
        thread = self.thread_index()
        self.fed_threads.add(thread)
        with self.lock:
            code = self._site_of.setdefault(site, len(self._site_of))
            self.h_thread.append(thread)
            self.h_site.append(code)
            self.h_request.append(t0)
            self.h_ready.append(t1)
            self.h_samples.append(n)
        self.overhead += time.time() - t1

    # --- loops ---------------------------------------------------------------------
    def begin(self, it: Any, kind: str, site: str, loader: int, t: float, **info: Any) -> None:
        """A new iteration (``iter(loader)``) of iterator ``it`` started at ``t``."""
        t1 = time.time()
        with self.lock:
            prev = self._loop_of.get(id(it))
            if prev is not None and self.loops[prev]["close"] is None:
                self.loops[prev]["close"] = t  # a persistent iterator, reset for a new epoch
            self._loop_of[id(it)] = len(self.loops)
            # ready: iter() returned (its build, workers started, is the pipeline's start-up)
            loop = {"kind": kind, "site": site, "loader": loader, "start": t, "ready": t1}
            self.loops.append({**loop, "stop": None, "close": None, **info})
        if prev is None:
            # not weakly referable: the loop is closed by its StopIteration only
            with contextlib.suppress(TypeError):
                weakref.finalize(it, self._closed, id(it)).atexit = False
        self.overhead += time.time() - t1

    def _closed(self, key: int) -> None:
        with self.lock:
            idx = self._loop_of.pop(key, None)
            if idx is not None and self.loops[idx]["close"] is None:
                self.loops[idx]["close"] = time.time()

    def batch(self, it: Any, kind: str, t0: float, t1: float, data: Any) -> None:
        """``next(it)`` asked at ``t0`` and returned ``data`` at ``t1``."""
        idx = self._loop_of.get(id(it))
        if idx is None:  # an iterator made without iter(loader): a loop of its own
            self.begin(it, kind, "?", -1, t0)
            idx = self._loop_of[id(it)]
        n = samples_of(data)
        thread = self.thread_index()
        self.fed_threads.add(thread)
        with self.lock:
            self.b_thread.append(thread)
            self.b_loop.append(idx)
            self.b_request.append(t0)
            self.b_ready.append(t1)
            self.b_samples.append(n)
        self.overhead += time.time() - t1

    def stop(self, it: Any, t: float) -> None:
        """``next(it)``, asked at ``t``, raised StopIteration: the loop's end."""
        idx = self._loop_of.get(id(it))
        if idx is not None:
            with self.lock:
                loop = self.loops[idx]
                if loop["stop"] is None:
                    loop["stop"] = t
                if loop["close"] is None:
                    loop["close"] = t

    # --- the process's end -----------------------------------------------------------
    def document(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "pid": self.pid,
            "rank": os.environ.get("IOSWEEP_RANK"),
            "start": self.start,
            "exit": time.time(),
            "exit_code": self.exit_code,
            "error": self.error,
            "hooked": self.hooked,
            "problems": self.problems,
            "overhead_s": self.overhead,
            "loops": self.loops,
            "batches": {
                "loop": list(self.b_loop),
                "request": list(self.b_request),
                "ready": list(self.b_ready),
                "samples": list(self.b_samples),
                "thread": list(self.b_thread),
            },
            "threads": self.thread_info,
            "handoffs": {
                "sites": list(self._site_of),
                "thread": list(self.h_thread),
                "site": list(self.h_site),
                "request": list(self.h_request),
                "ready": list(self.h_ready),
                "samples": list(self.h_samples),
            },
            "optimizer_steps": {
                "thread": list(self.o_thread),
                "forward": list(self.o_forward),
                "samples": list(self.o_samples),
                "end": list(self.o_end),
            },
            "saves": self.saves,
            "collectives": {
                "spans": self.collectives,
                "calls": self.collective_calls,
                "on_gpu": self.gpu_collective_calls,
            },
            "fits": self.fits,
        }

    def write(self) -> None:
        if os.getpid() != self.pid or not self.out:
            return
        child = os.path.basename(self.out).startswith("hooks-child-")
        if child and not (self.loops or self.fits or len(self.h_request) or len(self.o_end)):
            return  # a process below the rank that took no batch: nothing to keep
        tmp = f"{self.out}.{self.pid}.tmp"
        try:
            os.makedirs(os.path.dirname(self.out) or ".", exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(self.document(), f)
            os.replace(tmp, self.out)
        except OSError as e:
            print(f"iosweep: cannot write the step record {self.out}: {e}", file=sys.stderr)


# --- patching the frameworks when the script imports them ---------------------------------


class _Patcher(importlib.abc.MetaPathFinder):
    """Runs ``patches[name](module)`` right after module ``name`` is first imported."""

    def __init__(self, rec: Recorder, patches: Mapping[str, Callable[[Any, Recorder], str]]):
        self.rec = rec
        self.patches = patches
        self.busy: set[str] = set()

    def find_spec(self, name, path, target=None):
        if name not in self.patches or name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, lambda m: self._apply(name, m))
        return spec

    def _apply(self, name: str, module: Any) -> None:
        try:
            what = self.patches[name](module, self.rec)
            if what:
                self.rec.hooked.append(what)
        except Exception as e:  # a framework version we do not know: no hook, said so
            self.rec.problems.append(f"{name}: {type(e).__name__}: {e}")


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, after: Callable[[Any], None]):
        self.loader = loader
        self.after = after

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.after(module)

    def __getattr__(self, name):  # get_source, is_package, ... of the real loader
        return getattr(self.loader, name)


def patch_queue() -> None:
    """Time ``queue.Queue.get`` (the hand-off of thread prefetchers: BackgroundGenerator, a
    thread and a queue around a loader), except inside a loader's own hooked ``next()``."""
    real_get = queue.Queue.get

    def get(self, block=True, timeout=None):
        r = recorder()
        if r is None or getattr(r.inside, "on", False):
            return real_get(self, block, timeout)
        t0 = time.time()
        item = real_get(self, block, timeout)
        r.handoff(t0, time.time(), item, caller_site(2))
        return item

    queue.Queue.get = get  # type: ignore[method-assign]


def _exit_code(code: Any) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _record_exits(rec: Recorder) -> None:
    """The script's exit status (sys.exit, exit(), an uncaught error): atexit cannot see it."""
    real_exit = sys.exit

    def exit(code: Any = None) -> None:
        rec.exit_code = _exit_code(code)
        real_exit(code)

    sys.exit = exit  # type: ignore[assignment]
    for name in ("exit", "quit"):
        quitter = getattr(builtins, name, None)
        if quitter is not None:
            setattr(builtins, name, _Quitter(quitter, rec))
    previous = sys.excepthook

    def excepthook(kind, error, tb):
        lines = [ln for ln in str(error).strip().splitlines() if ln.strip()]
        rec.error = f"{kind.__name__}: {lines[-1] if lines else ''}".rstrip(": ")
        rec.exit_code = 1
        previous(kind, error, tb)

    sys.excepthook = excepthook


class _Quitter:
    def __init__(self, quitter: Any, rec: Recorder):
        self.quitter, self.rec = quitter, rec

    def __repr__(self) -> str:
        return repr(self.quitter)

    def __call__(self, code: Any = None) -> None:
        self.rec.exit_code = _exit_code(code)
        self.quitter(code)


def start(out: str, patches: Mapping[str, Callable[[Any, Recorder], str]]) -> Recorder:
    """Start recording into ``out`` in this process: ``patches[name](module)`` applied as each
    framework module is imported (:mod:`iosweep.run.hooks.install`), the exit status
    recorded, the record written at exit."""
    global _REC
    rec = _REC = Recorder(out)
    os.register_at_fork(after_in_child=_forget_in_child)
    sys.meta_path.insert(0, _Patcher(rec, dict(patches)))
    patch_queue()
    _record_exits(rec)
    atexit.register(rec.write)
    return rec
