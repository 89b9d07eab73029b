# Helpers shared by all stages: validated config, sweep points, paths.
import errno
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

# The package holds all logic; import it from the source tree even when it is not installed
# (e.g. the interpreter of a --sdm conda run).
sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from iosweep.config import ConfigError, expand_sweep, validate_config  # noqa: E402
from iosweep.workloads import all_workloads  # noqa: E402
from iosweep.analysis.summary import (
    SWEEP_FILES,
    ANALYSIS_TABLES,
)  # noqa: E402
from iosweep.trace.schema import STORE_TABLES  # noqa: E402
from iosweep.analysis.budget import mem_mb as analysis_memory, to_mb  # noqa: E402
from iosweep.analysis.parts.analyze import read_plan  # noqa: E402
from iosweep.analysis.parts.combine import put_together_need  # noqa: E402
from iosweep.trace.ingest.inparts import part_entries  # noqa: E402
from iosweep.trace.ingest.need import estimate as ingest_estimate  # noqa: E402
from iosweep.tune.points import tune_plan  # noqa: E402
from iosweep.tune.ledger import next_workers  # noqa: E402

try:
    validate_config(config)
except ConfigError as e:
    raise WorkflowError(str(e)) from None

RESULTS = config["results"]
ENVS = Path(workflow.basedir) / "envs"
SRC = str(Path(workflow.basedir) / "src")

if config["ingest"]["enabled"]:
    # Analyse logs the workflow did not produce: one run per configured log set.
    POINTS = {}
    RUN_IDS = [f"external~{name}" for name in config["ingest"]["runs"]]
    if not RUN_IDS:
        raise WorkflowError(
            "ingest.enabled is true but ingest.runs names no log directories"
        )
else:
    POINTS = {p.run_id: p for p in expand_sweep(config)}
    RUN_IDS = list(POINTS)
WORKLOADS = all_workloads(config)
# The tune (config: tune): its start point and the run ids of the points it may ask for.
try:
    TUNE = tune_plan(config) if config["tune"]["enabled"] else None
except ConfigError as e:
    raise WorkflowError(str(e)) from None

# The user's own workloads (their datasets are made by rule prepare_workload); a pattern that
# matches none of them when there are none.
USER_WORKLOADS_RE = (
    "|".join(re.escape(w) for w in sorted(config["workloads"])) or "(?!)"
)

REPORT_HTML = f"{RESULTS}/report/report.html"
TUNE_LEDGER = f"{RESULTS}/tune/ledger.json"
RUN_DIR = f"{RESULTS}/runs/{{run_id}}"


# Every file a stage writes, by name, so Snakemake tracks, cleans and reruns them.
def store_files(run_dir):
    files = {"meta": f"{run_dir}/store/run.json"}
    files.update({t: f"{run_dir}/store/{t}.parquet" for t in STORE_TABLES})
    return files


def run_logs(run_id):
    """Where the run's logs are: the training run's folder, or the configured log set."""
    kind, _, name = run_id.partition("~")
    if kind == "external":
        return config["ingest"]["runs"][name]["logs"]
    return [RUN_DIR.format(run_id=run_id)]


def ingest_logs(wildcards):
    return run_logs(wildcards.run_id)


def ingest_part_inputs(wildcards):
    """What a part of the run's ingest waits for: a training run's manifest (written last)."""
    if wildcards.run_id.startswith("external~"):
        return {}
    return {"manifest": f"{RESULTS}/runs/{wildcards.run_id}/manifest.json"}


def ingest_run_id(wildcards):
    """The run an ingest job reads (rule ingest_external names it by its log set)."""
    return wildcards.get("run_id") or f"external~{wildcards.name}"


def ingest_part_dirs(wildcards):
    """The folders of the run's ingest parts (config: ingest.parts); none where one job reads
    the logs."""
    count = config["ingest"]["parts"]
    run_dir = RUN_DIR.format(run_id=ingest_run_id(wildcards))
    return (
        [f"{run_dir}/ingest-parts/part-{k:04d}" for k in range(count)]
        if count > 1
        else []
    )


def ingest_mem_mb(wildcards, input):
    """What the run's ingest job needs (MB), counted from its logs' sizes before it starts
    (iosweep.trace.ingest.need): a part's logs (config: ingest.parts), or, putting the parts
    together, the writer alone; at most analysis.memory_gb (over it, the job says so and
    stops). Until a training run's manifest exists, FileNotFoundError naming it, and
    Snakemake asks again when it does."""
    if hasattr(input, "manifest") and not Path(input.manifest).exists():
        raise FileNotFoundError(errno.ENOENT, "the run's manifest", input.manifest)
    run_id = ingest_run_id(wildcards)
    store = f"{RESULTS}/runs/{run_id}/store"
    part = wildcards.get("part")
    index, count = (int(part), config["ingest"]["parts"]) if part else (0, 1)
    entries = part_entries(
        [Path(p) for p in run_logs(run_id)], index, count, [Path(store)]
    )
    writer_only = count == 1 and bool(ingest_part_dirs(wildcards))
    return to_mb(ingest_estimate(entries, config["analysis"]["memory_gb"], writer_only))


def analysis_inputs(wildcards):
    """The run's store, its analysis plan and, where the plan cuts it into parts, the
    parts' results (``part<index>``)."""
    run_dir = RUN_DIR.format(run_id=wildcards.run_id)
    files = store_files(run_dir)
    files["plan"] = checkpoints.plan_analysis.get(run_id=wildcards.run_id).output.plan
    parts = read_plan(files["plan"])
    for p in parts if len(parts) > 1 else []:
        files[f"part{p.index}"] = f"{run_dir}/analysis-parts/{p.name}"
    return files


def analysis_mem_mb(wildcards, input):
    """What the run's analysis needs (MB), counted from its store; put together from parts,
    what putting them together needs, counted from the parts' results (over the budget, the
    job's log says so: a job asking for less would be killed). Until the store exists,
    FileNotFoundError naming input.meta, and Snakemake asks again when it does."""
    if not hasattr(
        input, "plan"
    ):  # the checkpoint has not run: asked again once it has
        raise FileNotFoundError(
            errno.ENOENT, "the run's analysis plan (checkpoint plan_analysis)", input[0]
        )
    parts = read_plan(input.plan)
    if len(parts) > 1:
        dirs = [Path(getattr(input, f"part{p.index}")) for p in parts]
        return to_mb(put_together_need(dirs, config["analysis"]["memory_gb"]))
    return analysis_memory(Path(input.meta).parent)


def part_mem_mb(wildcards, input):
    """What a part of the run's analysis needs (MB), from the plan."""
    part = read_plan(input.plan)[int(wildcards.index)]
    return to_mb(part.need.bytes)


def analysis_files(run_dir):
    files = {"summary": f"{run_dir}/analysis/summary.json"}
    files.update({t: f"{run_dir}/analysis/{t}.parquet" for t in ANALYSIS_TABLES})
    return files


def sweep_files():
    return {f.replace(".", "_"): f"{RESULTS}/sweep/{f}" for f in SWEEP_FILES}


def point(wildcards):
    found = POINTS.get(wildcards.run_id) or (TUNE and TUNE.point(wildcards.run_id))
    if not found:
        raise WorkflowError(
            f"run {wildcards.run_id!r} is no point of the sweep or the tune"
        )
    return found


def max_ranks(framework, workload):
    return max(
        (
            p.ranks
            for p in [*POINTS.values(), *([TUNE.start] if TUNE else [])]
            if p.framework == framework and p.workload == workload
        ),
        default=0,
    )


def workload_definition(wildcards):
    """What a point runs, as the command template and settings of its workload: a change
    to them makes the point's run stale."""
    p = point(wildcards)
    w = WORKLOADS[p.workload]
    return {
        "command": w.commands[p.framework],
        "launch": w.launch,
        "timing": w.timing,
        "python": w.python,
        "workdir": w.workdir,
        "env": w.env,
    }


# The tune (rules in tune.smk): each step's inputs, and the chain of steps to its end.
def tune_summary(run_id):
    return f"{RESULTS}/runs/{run_id}/analysis/summary.json"


def tune_step_inputs(wildcards):
    """Step K's inputs: the ledger of step K-1 (none at the start) and the analyses of the
    point it asks for, one per repeat."""
    k = int(wildcards.step)
    files = {}
    workers = TUNE.start.loader_workers
    if k > 0:
        files["previous"] = checkpoints.tune_step.get(step=k - 1).output.ledger
        workers = next_workers(files["previous"])
        if workers is None:
            raise WorkflowError(f"tune step {k - 1} stopped: there is no step {k}")
    files["runs"] = [tune_summary(run_id) for run_id in TUNE.run_ids(workers)]
    return files


def tune_chain(wildcards):
    """The last step of the tune: the chain followed until a step stops it."""
    for k in range(TUNE.budget + 1):
        ledger = checkpoints.tune_step.get(step=k).output.ledger
        if next_workers(ledger) is None:
            return {"last": ledger}
    raise WorkflowError(
        f"the tune did not stop within its budget of {TUNE.budget} reruns"
    )


def dataset_json(wildcards):
    """The description of the dataset a training point reads."""
    return f"{RESULTS}/datasets/{point(wildcards).workload}/dataset.json"


# How this workflow was started, for the command that redoes one point (train.py): in the
# environment, not a param, so that another command line does not make finished points stale.
os.environ.update(IOSWEEP_WORKFLOW_ARGV=shlex.join(sys.argv))  # set here, for train.py


def show_answers():
    """The end of a sweep: each analysed run's answer on the terminal (iosweep show)."""
    from iosweep.cli.show import show
    from iosweep.analysis.settings import AnalysisSettings
    from iosweep.analysis.summary import SummaryError, read_summary

    found = []
    for run_id in RUN_IDS:
        d = Path(RESULTS, "runs", run_id, "analysis")
        try:
            found.append((read_summary(d), d))
        except (OSError, SummaryError, ValueError):
            continue  # not analysed in this sweep (failed point, --until a stage)
    show(found, settings=AnalysisSettings.from_dict(config.get("analysis")))
