"""Benchmark: what iosweep's step hooks cost a training loop, beside what users otherwise run.

The same loops, each in a fresh interpreter, in turn (A B C A B C ...) so that a drift of
the machine's speed falls on every variant alike:

- **torch**: a PyTorch ``DataLoader`` (map-style, batch 32 of 32x32 tensors made in
  ``__getitem__``, 0 workers) feeding a small linear model, plus ``--step-ms`` of CPU per
  step for a bigger model (0: the hooks' worst case, a step of about a millisecond);
  steps/s after 20 warm-up steps. Variants: untimed; with iosweep's hooks (the rank wrapper's
  variables: ``sitecustomize`` on the path, the hooks' record written at exit); under
  ``torch.profiler.profile(activities=[CPU])``, which is how PyTorch users see the time spent
  in ``DataLoader.__next__`` (its "enumerate(DataLoader)" events); watched by iosweep's sampler
  of a rank's processes (``iosweep.run.procstat``, as the rank wrapper starts it: /proc every
  0.5 s), whose own CPU time per second of the run is printed beside (target: <= 1% of the
  loop's time).
- **torch without a loader**: batches sliced from a tensor in the loop (as a ``np.memmap``
  token loop does) through a model of 9 modules: the hooks bound each step by its optimizer
  step and time its first forward with a global module pre-hook (called on every module);
  untimed, with the hooks, under the profiler.
- **keras** (``--keras``, needs ``.venv-tf``): ``Model.fit`` over ``tf.data`` (batch 32),
  untimed and with the hooks (whose split adds one eager fetch per step); steps/s from the
  fit's own epoch times (the second epoch).

Printed per loop and variant: steps/s min / median / max over ``--repeat`` runs, and the
median of the per-round ratios variant / untimed (the cost: 1 - ratio). The hooks' own
account of their bookkeeping (``overhead_s`` in the record) is printed beside, per step.

Usage: python benchmarks/bench_hooks.py [--steps 2000] [--step-ms 0 10] [--repeat 5] [--keras]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from iosweep.run.hooks import SITE_DIR  # noqa: E402

TORCH_LOOP = r"""
import json, sys, time
import torch
steps, profile, step_s = int(sys.argv[1]), sys.argv[2] == "profile", float(sys.argv[3]) / 1e3
class D(torch.utils.data.Dataset):
    def __len__(self): return 10**7
    def __getitem__(self, i): return torch.full((32, 32), float(i % 7)), i % 10
loader = torch.utils.data.DataLoader(D(), batch_size=32, num_workers=0)
model = torch.nn.Linear(1024, 10)
opt = torch.optim.SGD(model.parameters(), 0.01)
def run(n, it):
    for _ in range(n):
        x, y = next(it)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x.flatten(1)), y).backward()
        opt.step()
        end = time.perf_counter() + step_s  # the rest of a bigger model
        while time.perf_counter() < end:
            pass
torch.set_num_threads(1)
it = iter(loader)
run(20, it)
t0 = time.perf_counter()
if profile:
    from torch.profiler import ProfilerActivity, profile as prof
    with prof(activities=[ProfilerActivity.CPU]) as p:
        run(steps, it)
else:
    run(steps, it)
print(json.dumps({"steps_per_s": steps / (time.perf_counter() - t0)}))
"""

# no DataLoader: batches sliced from a tensor (as from a np.memmap), a model of 9 modules,
# each of whose calls the hooks' global forward pre-hook sees once the first step is over
TORCH_NO_LOADER = r"""
import json, sys, time
import torch
steps, profile, step_s = int(sys.argv[1]), sys.argv[2] == "profile", float(sys.argv[3]) / 1e3
data = torch.randn(4096, 64)
labels = torch.arange(4096) % 10
model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)], torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), 0.01)
def run(n, k0):
    for k in range(k0, k0 + n):
        i = (k * 32) % 4064
        x, y = data[i:i + 32], labels[i:i + 32]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        end = time.perf_counter() + step_s  # the rest of a bigger model
        while time.perf_counter() < end:
            pass
torch.set_num_threads(1)
run(20, 0)
t0 = time.perf_counter()
if profile:
    from torch.profiler import ProfilerActivity, profile as prof
    with prof(activities=[ProfilerActivity.CPU]) as p:
        run(steps, 20)
else:
    run(steps, 20)
print(json.dumps({"steps_per_s": steps / (time.perf_counter() - t0)}))
"""

KERAS_LOOP = r"""
import json, sys, time
import tensorflow as tf
steps, step_ms = int(sys.argv[1]), float(sys.argv[3])
def spin():
    end = time.perf_counter() + step_ms / 1e3
    while time.perf_counter() < end:
        pass
    return 0.0
class Busy(tf.keras.layers.Layer):  # the rest of a bigger model
    def call(self, x):
        t = tf.numpy_function(spin, [], tf.float64)
        t.set_shape(())
        return x + tf.cast(t, x.dtype)
x = tf.random.stateless_normal((steps * 32, 64), seed=(1, 2))
y = tf.cast(tf.random.stateless_uniform((steps * 32,), seed=(3, 4), maxval=10, dtype=tf.int32), tf.int64)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(64), Busy(), tf.keras.layers.Dense(10)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
class Times(tf.keras.callbacks.Callback):
    def on_epoch_begin(self, e, logs=None): self.t = time.perf_counter()
    def on_epoch_end(self, e, logs=None): self.last = time.perf_counter() - self.t
t = Times()
model.fit(ds, epochs=2, verbose=0, callbacks=[t])
print(json.dumps({"steps_per_s": steps / t.last}))
"""


def _env(hooks: bool, out: Path) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    if hooks:
        path = [str(SITE_DIR), str(ROOT / "src"), env.get("PYTHONPATH", "")]
        env |= {"PYTHONPATH": os.pathsep.join(p for p in path if p),
                "IOSWEEP_HOOKS_OUT": str(out)}  # fmt: skip
    return env


def _sampled(python: str, script: Path, steps: int, step_ms: float, out: Path) -> dict:
    """The untimed loop, watched by the sampler of a rank's processes from its start."""
    env = _env(False, out)
    loop = subprocess.Popen([python, str(script), str(steps), "plain", str(step_ms)], env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    watcher = subprocess.Popen([python, "-m", "iosweep.run.procstat", str(loop.pid), str(out)],
                               env={**env, "PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    stdout, _ = loop.communicate()
    watcher.wait(timeout=60)
    rec = json.loads(stdout.strip().splitlines()[-1])
    doc = json.loads(out.read_text())
    span = max(doc["end"] - doc["start"], 1e-9)
    rec["sampler_cpu_share"] = doc["overhead_cpu_s"] / span  # its samples
    rec["sampler_process_share"] = doc["process_cpu_s"] / span  # with its interpreter's start
    rec["samples"] = len(doc["series"]["t"])
    return rec


def _one(python: str, script: Path, steps: int, variant: str, step_ms: float, tmp: Path) -> dict:
    out = tmp / f"hooks-{variant}.json"
    out.unlink(missing_ok=True)
    if variant == "sampler":
        return _sampled(python, script, steps, step_ms, out)
    hooks = variant == "hooks"
    # the hooks record in the pid the rank wrapper names: here, the interpreter exec'd by sh
    cmd = ["sh", "-c", 'IOSWEEP_RANK_PID=$$ exec "$0" "$@"', python, str(script), str(steps),
           variant, str(step_ms)]  # fmt: skip
    env = _env(hooks, out)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    if hooks:
        doc = json.loads(out.read_text())
        timed = len(doc["batches"]["loop"]) or len(doc["optimizer_steps"]["end"])
        rec["hook_s_per_step"] = doc["overhead_s"] / max(timed or len(
            (doc["fits"] or [{}])[-1].get("steps", [])), 1)  # fmt: skip
    return rec


def _table(name: str, results: dict[str, list[dict]]) -> None:
    base = [r["steps_per_s"] for r in results["plain"]]
    print(f"\n{name}: steps/s (min / median / max over {len(base)} runs), ratio to untimed")
    for variant, runs in results.items():
        v = [r["steps_per_s"] for r in runs]
        ratios = [a / b for a, b in zip(v, base, strict=True)]
        med = statistics.median(ratios)
        extra = ""
        if variant == "hooks":
            per = statistics.median(r["hook_s_per_step"] for r in runs)
            extra = f"   hooks' own bookkeeping: {per * 1e6:.1f} us/step"
        if variant == "sampler":
            per = statistics.median(r["sampler_cpu_share"] for r in runs)
            whole = statistics.median(r["sampler_process_share"] for r in runs)
            n = statistics.median(r["samples"] for r in runs)
            extra = (f"   sampler's CPU: {per:.2%} of the run's time in its {n:.0f} samples, "
                     f"{whole:.2%} with its own interpreter's start")  # fmt: skip
        print(f"  {variant:9s} {min(v):9.1f} {statistics.median(v):9.1f} {max(v):9.1f}   "
              f"ratio {med:.3f} (cost {1 - med:+.1%}){extra}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--steps", type=int, default=2000, help="steps of the 0 ms case (fewer for others)"
    )
    ap.add_argument(
        "--step-ms",
        type=float,
        nargs="+",
        default=[0.0, 10.0],
        help="extra CPU time per step: 0 is the worst case for the hooks",
    )
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keras", action="store_true")
    ap.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    ap.add_argument("--tf-python", default=str(ROOT / ".venv-tf" / "bin" / "python"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "torch_loop.py").write_text(TORCH_LOOP)
        (tmp / "keras_loop.py").write_text(KERAS_LOOP)
        (tmp / "torch_no_loader.py").write_text(TORCH_NO_LOADER)
        loops = [
            (
                "torch DataLoader",
                a.python,
                tmp / "torch_loop.py",
                ["plain", "hooks", "sampler", "profile"],
            ),
            (
                "torch without a loader (optimizer-step bounds, module forward hook)",
                a.python,
                tmp / "torch_no_loader.py",
                ["plain", "hooks", "profile"],
            ),
        ]
        if a.keras:
            loops.append(("Keras fit", a.tf_python, tmp / "keras_loop.py", ["plain", "hooks"]))
        for name, python, script, variants in loops:
            for ms in a.step_ms:
                steps = a.steps if not ms else max(50, int(a.steps / (1 + ms)))
                results: dict[str, list[dict]] = {v: [] for v in variants}
                for _ in range(a.repeat):
                    for v in variants:
                        results[v].append(_one(python, script, steps, v, ms, tmp))
                _table(f"{name}, +{ms:g} ms per step, {steps} steps", results)


if __name__ == "__main__":
    main()
