"""The points a tune runs: its start (``tune.start``, completed from the main sweep block),
the same point with another lever value, their run ids, and which of the job's knobs tune
can turn (the others, each with why not)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Any

from iosweep.config import ConfigError, SweepPoint, point_by_run_id, sweep_blocks
from iosweep.workloads import Workload, all_workloads

# the levers tune can predict, so run: the rate model's (iosweep.analysis.pipeline.rates)
MODELLED = ("loader_workers",)
_NOT_MODELLED = {
    "prefetch": (
        "no job here has a prefetch setting apart from its loader workers, and the rate model "
        "predicts no steady-state gain from a deeper buffer (it only hides jitter)"
    ),
    "staging": "the rate model predicts no figure for staging (try it as a sweep dimension)",
    "threads_per_rank": (
        "the rate model does not predict threads per rank (one run does not show how its "
        "compute scales with threads)"
    ),
    "procs_per_node": (
        "the rate model does not predict other ranks per node (it changes the training's "
        "global batch and its communication)"
    ),
    "batch_size": "the rate model does not predict another batch size",
}
_PLACEHOLDER = {"loader_workers": "loader_workers", "batch_size": "batch_size", "staging": "data"}
_START_KEYS = {  # tune.start key -> (sweep list, point field)
    "framework": ("frameworks", "framework"),
    "workload": ("workloads", "workload"),
    "tracer": ("tracers", "tracer"),
    "nodes": ("nodes", "nodes"),
    "procs_per_node": ("procs_per_node", "ppn"),
    "epochs": ("epochs", "epochs"),
    "steps_per_epoch": ("steps_per_epoch", "steps"),
    "batch_size": ("batch_size", "batch_size"),
    "loader_workers": ("loader_workers", "loader_workers"),
    "staging": ("staging", "staging"),
}
_TUNE_RUN = re.compile(r"/workers~(\d+)/rep~(\d+)$")


@dataclass(frozen=True)
class TunePlan:
    """A configured tune: its start point, its run ids, the levers it turns."""

    start: SweepPoint  # rep 0
    workload: Workload
    levers: tuple[str, ...]  # the levers it may turn (modelled and exposed)
    untried: tuple[tuple[str, str], ...]  # (lever, why not)
    repeats: int
    budget: int
    target_au: float
    prefix: str  # run ids: <prefix>/workers~W/rep~R

    def run_id(self, workers: int, rep: int) -> str:
        return f"{self.prefix}/workers~{workers}/rep~{rep}"

    def point(self, run_id: str) -> SweepPoint | None:
        """The point of one of this tune's run ids (None: not one of its)."""
        m = _TUNE_RUN.search(run_id)
        if not run_id.startswith(self.prefix + "/") or not m:
            return None
        workers, rep = int(m[1]), int(m[2])
        return replace(self.start, loader_workers=workers, rep=rep, run_id=run_id)

    def run_ids(self, workers: int) -> list[str]:
        return [self.run_id(workers, r) for r in range(self.repeats)]

    def settings(self, workers: int) -> dict[str, Any]:
        """The settings of the start point with ``workers`` loader workers."""
        p = replace(self.start, loader_workers=workers).params()
        p.pop("rep")
        return p


def _start_fields(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    start = config["tune"]["start"]
    main = sweep_blocks(config)[0]
    fields = {f: start.get(key, main[name][0]) for key, (name, f) in _START_KEYS.items()}
    return fields, dict(start.get("params") or {})


def _resolve_params(w: Workload, given: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    unknown = sorted(set(given) - set(w.params))
    if unknown:
        raise ConfigError(
            f"config key 'tune.start.params': {', '.join(map(repr, unknown))} is not a parameter "
            f"of workload {w.name!r} (its parameters: {', '.join(sorted(w.params)) or 'none'})"
        )
    return tuple((n, given.get(n, vals[0])) for n, vals in w.params.items())


def _levers(config: dict[str, Any], w: Workload, framework: str):
    """(levers tune turns, [(lever, why not)]) for the start's job."""
    used = w.uses(framework)
    turn, untried = [], []
    for lever in config["tune"]["levers"]:
        placeholder = _PLACEHOLDER.get(lever)
        if placeholder and placeholder not in used:
            untried.append(
                (
                    lever,
                    f"the command ({w.key('command')}) exposes no {{{placeholder}}}: tune can "
                    "only turn what the command's template exposes",
                )
            )
        elif lever in MODELLED:
            turn.append(lever)
        else:
            untried.append((lever, _NOT_MODELLED[lever]))
    skipped = sorted((set(_NOT_MODELLED) | set(MODELLED)) - set(config["tune"]["levers"]))
    for lever in skipped:
        why = "it changes the training" if lever == "batch_size" else "not listed"
        untried.append((lever, f"not in tune.levers ({why})"))
    return tuple(turn), tuple(untried)


def tune_plan(config: dict[str, Any]) -> TunePlan:
    """The configured tune, checked: ConfigError naming the key where it cannot run."""
    fields, given = _start_fields(config)
    workloads = all_workloads(config)
    w = workloads.get(fields["workload"])
    if w is None:
        raise ConfigError(
            f"config key 'tune.start.workload': {fields['workload']!r} is not a workload; "
            f"known: {', '.join(sorted(workloads))}"
        )
    if fields["framework"] not in w.commands:
        raise ConfigError(
            f"config key 'tune.start.framework': workload {w.name!r} has no command for "
            f"{fields['framework']!r} (it runs under {', '.join(w.commands)})"
        )
    levers, untried = _levers(config, w, fields["framework"])
    if not levers:
        raise ConfigError(
            f"tune: workload {w.name!r} ({fields['framework']}) exposes none of the levers tune "
            f"can predict ({', '.join(MODELLED)}), so nothing could be tuned: "
            + "; ".join(f"{lever}: {why}" for lever, why in untried)
        )
    used = w.uses(fields["framework"])
    for key, f in (
        ("epochs", "epochs"),
        ("steps_per_epoch", "steps"),
        ("batch_size", "batch_size"),
    ):
        if key not in used:
            fields[f] = None
    extra = _resolve_params(w, given)
    desc = json.dumps([fields, extra], sort_keys=True, default=str)
    digest = hashlib.sha1(desc.encode()).hexdigest()[:8]
    prefix = f"framework~{fields['framework']}/tune~{w.name}-{digest}"
    start = SweepPoint(
        **fields, rep=0, run_id=f"{prefix}/workers~{fields['loader_workers']}/rep~0", extra=extra
    )
    t = config["tune"]
    return TunePlan(
        start=start,
        workload=w,
        levers=levers,
        untried=untried,
        repeats=t["repeats"],
        budget=t["budget"],
        target_au=t["target_au"],
        prefix=prefix,
    )


def find_point(config: dict[str, Any], run_id: str) -> SweepPoint:
    """The point of a run id of the sweep or of the configured tune; ConfigError otherwise."""
    if config["tune"]["enabled"]:
        found = tune_plan(config).point(run_id)
        if found:
            return found
    return point_by_run_id(config, run_id)
