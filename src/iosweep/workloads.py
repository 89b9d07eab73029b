"""Workloads: what a sweep point runs, as a command template.

A workload is a command template (one per framework it runs under), how its ranks are
launched, how its steps are timed and where its data come from. iosweep's own MNIST and
ImageNet-style jobs are workloads like the user's (:func:`builtin_workloads`): their
templates name iosweep's training modules. A user's workload comes from the config's
``workloads:`` section (:func:`user_workloads`), is checked before anything runs
(:func:`check_workloads`), and runs unmodified: its command is split as a shell splits
words (never run by a shell) and each word's ``{placeholders}`` are filled per sweep point
(:func:`render`); ``{rank}``, ``{local_rank}`` and ``{world_size}`` are filled on each rank
by the rank wrapper, from the launcher's variables.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FRAMEWORKS = ("pytorch", "tensorflow")

# Sweep dimensions a command may use: placeholder -> (sweep list, SweepPoint field). A
# dimension the sweep varies for a workload whose command does not use it is an error
# (the points would be one run under several names).
DIMENSIONS = {
    "epochs": ("epochs", "epochs"),
    "steps_per_epoch": ("steps_per_epoch", "steps"),
    "batch_size": ("batch_size", "batch_size"),
    "loader_workers": ("loader_workers", "loader_workers"),
}
# Every placeholder a command may use, with its meaning (docs and error messages).
PLACEHOLDERS = {
    "python": "the workload's interpreter (`python`, else the framework's stack)",
    "data": "the dataset directory the ranks read (the node-local copy when staged)",
    "run_dir": "the run's folder (`results/runs/<run id>`)",
    "checkpoint_dir": "`{run_dir}/checkpoints`: traced, and its files are listed in the manifest",
    "workdir": "the folder the command runs in",
    "progress": "`{run_dir}/progress/rank-{rank}.json`, for scripts that write iosweep's step records",
    "threads": "`training.threads_per_rank` (also OMP_NUM_THREADS)",
    "framework": "`pytorch` or `tensorflow`",
    "tracer": "the point's tracer (`darshan`, `dftracer`, `none`)",
    "nodes": "nodes of the point",
    "procs_per_node": "ranks per node",
    "ranks": "ranks of the point (nodes x procs_per_node)",
    "epochs": "sweep dimension `epochs`",
    "steps_per_epoch": "sweep dimension `steps_per_epoch`",
    "batch_size": "sweep dimension `batch_size`",
    "loader_workers": "sweep dimension `loader_workers`",
    "staging": "sweep dimension `staging` (`none`, `node-local`)",
    "rep": "the repeat (0, 1, ...)",
    "rank": "this rank (filled on each rank from the launcher's variables)",
    "local_rank": "this rank on its node (likewise)",
    "world_size": "ranks in the job (likewise)",
}
RANK_PLACEHOLDERS = ("rank", "local_rank", "world_size")
PREPARE_PLACEHOLDERS = ("python", "data", "workdir")
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# What a user parameter may be called: a word of the run id that is no placeholder's name.
_RUN_ID_KEYS = {
    "framework",
    "workload",
    "tracer",
    "nodes",
    "ppn",
    "epochs",
    "steps",
    "batch",
    "workers",
    "staging",
    "rep",
}


class PerRank(str):
    """A placeholder's value that holds rank placeholders itself (``.../rank-{rank}.json``):
    left for the rank wrapper to fill, not escaped as literal braces."""


class WorkloadError(ValueError):
    """A workload that cannot run as configured; the message names the config key."""


@dataclass(frozen=True)
class Workload:
    name: str
    commands: dict[str, str]  # framework -> command template
    launch: str = "mpi"  # mpi (launcher.kind), torchrun, single
    timing: str = "hooks"  # hooks (iosweep times the loop), script (it writes progress files)
    prepare: str | None = None  # made once per dataset: a command template
    data: str | None = None  # or a dataset that exists
    python: str | None = None
    workdir: str | None = None
    params: dict[str, list[Any]] = field(default_factory=dict)  # extra sweep dimensions
    env: dict[str, str] = field(default_factory=dict)
    trace_dirs: tuple[str, ...] = ()
    builtin: bool = False

    @property
    def frameworks(self) -> list[str]:
        return [f for f in FRAMEWORKS if f in self.commands]

    def key(self, what: str) -> str:
        """The config key of one of this workload's settings, for messages."""
        where = "built-in workload" if self.builtin else "workloads"
        return f"{where}.{self.name}.{what}"

    def uses(self, framework: str) -> set[str]:
        """The placeholders the command for ``framework`` names."""
        return placeholders(self.commands[framework])

    def defines_data(self) -> bool:
        return self.builtin or bool(self.data or self.prepare)


def placeholders(template: str) -> set[str]:
    """The placeholder names a template uses ({{ and }} are literal braces)."""
    out = set()
    for word in _words(template, "command"):
        for _, name, spec, conv in string.Formatter().parse(word):
            if name is not None:
                out.add(name)
                if spec or conv:
                    raise WorkloadError(f"placeholder {{{name}}}: format specs are not supported")
    return out


def _words(template: str, what: str) -> list[str]:
    try:
        return shlex.split(template)
    except ValueError as e:  # an unclosed quote
        raise WorkloadError(f"the {what} cannot be split into words: {e}") from None


def render(template: str, values: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """(argv, environment assignments): ``template`` split into words as a shell would, each
    word's placeholders filled from ``values``; leading ``NAME=value`` words set variables,
    as in a shell. Rank placeholders stay (``{rank}``) for the rank wrapper to fill; literal
    braces stay escaped (``{{``), since the wrapper formats every word again."""
    argv: list[str] = []
    env: dict[str, str] = {}
    for word in _words(template, "command"):
        text = ""
        for literal, name, _, _ in string.Formatter().parse(word):
            text += literal.replace("{", "{{").replace("}", "}}")
            if name is None:
                continue
            value = "{" + name + "}" if name in RANK_PLACEHOLDERS else values[name]
            if isinstance(value, PerRank) or name in RANK_PLACEHOLDERS:
                text += str(value)
            else:
                text += str(value).replace("{", "{{").replace("}", "}}")
        if not argv and _ENV_WORD.match(word):
            k, _, v = text.partition("=")
            env[k] = v
        else:
            argv.append(text)
    return argv, env


def fill_rank(argv: list[str], rank: int, local_rank: int, size: int) -> list[str]:
    """The rank wrapper's half of :func:`render`: the rank placeholders filled, literal braces
    unescaped."""
    vals = {"rank": rank, "local_rank": local_rank, "world_size": size}
    return [w.format(**vals) if "{" in w or "}" in w else w for w in argv]


# --- iosweep's own workloads ------------------------------------------------------------


def builtin_workloads(training: dict[str, Any]) -> dict[str, Workload]:
    """MNIST and the ImageNet-style job: iosweep's training modules, which time their own
    steps (``timing: script``), with the ``training:`` settings written into the command."""
    common = (
        "--data {data} --epochs {epochs} --steps-per-epoch {steps_per_epoch} "
        "--batch-size {batch_size} --threads {threads} --progress {progress} "
        f"--lr {training['learning_rate']}"
    )
    ckpt = " --checkpoint-dir {checkpoint_dir}" if training["checkpoint"] else ""
    im = training["imagenet"]
    image = (
        f" --image-size {im['image_size']} --arch {im['arch']} --device {im['device']} "
        "--loader-workers {loader_workers}"
    )
    module = "{python} -m iosweep.run.training."
    return {
        "mnist": Workload(
            "mnist",
            {
                "pytorch": f"{module}pytorch_mnist {common} --loader-workers {{loader_workers}}{ckpt}",
                "tensorflow": f"{module}tensorflow2_mnist {common}{ckpt}",
            },
            timing="script",
            builtin=True,
        ),
        "imagenet": Workload(
            "imagenet",
            {
                "pytorch": f"{module}pytorch_imagenet {common}{image}{ckpt}",
                "tensorflow": f"{module}tensorflow2_imagenet {common}{image}{ckpt}",
            },
            timing="script",
            builtin=True,
        ),
    }


# --- the user's workloads ---------------------------------------------------------------


def user_workloads(section: dict[str, Any]) -> dict[str, Workload]:
    """The config's ``workloads:`` (already schema-checked) as :class:`Workload` objects."""
    out = {}
    for name, w in (section or {}).items():
        command = w["command"]
        if isinstance(command, str):
            if not w.get("framework"):
                raise WorkloadError(
                    f"config key 'workloads.{name}.framework' is missing: a workload with one "
                    f"command says which framework it is ({', '.join(FRAMEWORKS)}), or gives "
                    "`command` per framework"
                )
            commands = {w["framework"]: command}
        else:
            commands = dict(command)
            if w.get("framework") and w["framework"] not in commands:
                raise WorkloadError(
                    f"config key 'workloads.{name}.framework': {w['framework']!r} has no command "
                    f"(commands for: {', '.join(commands)})"
                )
        out[name] = Workload(
            name=name,
            commands=commands,
            launch=w["launch"],
            timing=w["timing"],
            prepare=w.get("prepare"),
            data=w.get("data"),
            python=w.get("python"),
            workdir=w.get("workdir"),
            params={k: list(v) for k, v in (w.get("params") or {}).items()},
            env=dict(w.get("env") or {}),
            trace_dirs=tuple(w.get("trace_dirs") or ()),
        )
    return out


def all_workloads(config: dict[str, Any]) -> dict[str, Workload]:
    """Built-in and configured workloads by name (a configured one may not take a built-in's
    name)."""
    builtin = builtin_workloads(config["training"])
    user = user_workloads(config.get("workloads") or {})
    clash = sorted(set(builtin) & set(user))
    if clash:
        raise WorkloadError(
            f"config key 'workloads.{clash[0]}': {clash[0]!r} is a built-in workload; "
            "give yours another name"
        )
    return {**builtin, **user}


def check_workloads(workloads: dict[str, Workload]) -> None:
    """Everything about each user workload that can be known before anything runs: its
    templates' placeholders, its parameters, and the interpreter, folders and script it names."""
    for w in workloads.values():
        if w.builtin:
            continue
        _check_templates(w)
        _check_params(w)
        _check_paths(w)
        if w.launch == "torchrun" and "tensorflow" in w.commands:
            raise WorkloadError(
                f"config key {w.key('launch')!r}: torchrun starts PyTorch jobs only "
                "(a TensorFlow job is launched with `mpi` or `single`)"
            )


def _check_templates(w: Workload) -> None:
    known = set(PLACEHOLDERS) | set(w.params)
    for fw, template in w.commands.items():
        key = w.key("command") + (f".{fw}" if len(w.commands) > 1 else "")
        try:
            used = placeholders(template)
            if not _words(template, "command") or all(
                _ENV_WORD.match(x) for x in _words(template, "command")
            ):
                raise WorkloadError("the command is empty")
        except WorkloadError as e:
            raise WorkloadError(f"config key {key!r}: {e}") from None
        _unknown(key, used - known, known)
        if "data" in used and not w.defines_data():
            raise WorkloadError(
                f"config key {key!r} uses {{data}}, but the workload gives neither `data` (a "
                "dataset that exists) nor `prepare` (a command that makes it)"
            )
    if w.prepare:
        key = w.key("prepare")
        try:
            used = placeholders(w.prepare)
        except WorkloadError as e:
            raise WorkloadError(f"config key {key!r}: {e}") from None
        _unknown(key, used - set(PREPARE_PLACEHOLDERS), set(PREPARE_PLACEHOLDERS))
    if w.prepare and w.data:
        raise WorkloadError(
            f"config keys {w.key('prepare')!r} and {w.key('data')!r}: give one (a command that "
            "makes the dataset, or the dataset that exists), not both"
        )


def _unknown(key: str, unknown: set[str], known: set[str]) -> None:
    if unknown:
        names = ", ".join("{" + u + "}" for u in sorted(unknown))
        raise WorkloadError(
            f"config key {key!r}: unknown placeholder {names}; known: "
            + ", ".join("{" + k + "}" for k in sorted(known))
        )


def _check_params(w: Workload) -> None:
    for name, values in w.params.items():
        key = w.key(f"params.{name}")
        if name in PLACEHOLDERS or name in _RUN_ID_KEYS:
            raise WorkloadError(
                f"config key {key!r}: {name!r} is the name of one of iosweep's placeholders or "
                "run-id words; call the parameter something else"
            )
        if not any(name in w.uses(fw) for fw in w.commands):
            raise WorkloadError(
                f"config key {key!r}: the command does not use {{{name}}}, so its values "
                f"{values} would be the same run"
            )


def _check_paths(w: Workload) -> None:
    workdir = Path(os.path.expanduser(w.workdir or ".")).resolve()
    if not workdir.is_dir():
        raise WorkloadError(f"config key {w.key('workdir')!r}: {workdir} is not a directory")
    if w.python:
        py = Path(os.path.expanduser(w.python))
        if not py.is_file() or not os.access(py, os.X_OK):
            raise WorkloadError(
                f"config key {w.key('python')!r}: {w.python} is not an executable interpreter"
            )
    if w.data:
        data = Path(os.path.expanduser(w.data))
        if not (data if data.is_absolute() else workdir / data).exists():
            raise WorkloadError(f"config key {w.key('data')!r}: {w.data} does not exist")
    for fw, template in w.commands.items():
        missing = _missing_program(template, workdir)
        if missing:
            key = w.key("command") + (f".{fw}" if len(w.commands) > 1 else "")
            raise WorkloadError(f"config key {key!r}: {missing}")


def _missing_program(template: str, workdir: Path) -> str:
    """Why the command's program or script cannot be found ('' when it can, or when it cannot
    be told before the run: a placeholder other than {workdir} in its path)."""
    words = [x for x in shlex.split(template) if not _ENV_WORD.match(x)]
    program, args = words[0], words[1:]
    if program == "{python}":
        script = next((a for a in args if not a.startswith("-")), None)
        if not args or args[0] in ("-m", "-c") or script is None or not script.endswith(".py"):
            return ""
        target = script.replace("{workdir}", str(workdir))
        if "{" in target:
            return ""
        path = Path(os.path.expanduser(target))
        path = path if path.is_absolute() else workdir / path
        return "" if path.is_file() else f"the script {script} is not there ({path})"
    if "{" in program:
        return ""
    if "/" in program:
        path = Path(os.path.expanduser(program))
        path = path if path.is_absolute() else workdir / path
        return (
            ""
            if os.access(path, os.X_OK)
            else f"the program {program} is not an executable ({path})"
        )
    return "" if shutil.which(program) else f"the program {program} is not on PATH"
