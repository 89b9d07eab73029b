"""Workloads as command templates (the built-ins and the user's own): how a command is filled
in, what the config refuses before anything runs, how the step hooks' record becomes steps,
and what the launchers say about a rank that failed. Expected values by hand."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from iosweep.config import ConfigError, expand_sweep, validate_config
from iosweep.run.collect import exited_ranks, hooks_timing, signaled_ranks
from iosweep.run.hooks.steps import steps_from_hooks
from iosweep.run.launch import LaunchError, TorchrunSpec, torchrun_command
from iosweep.run.rank_wrapper import detect_rank
from iosweep.workloads import fill_rank, placeholders, render

JOBS = Path(__file__).resolve().parent / "jobs"


def _config(tmp_path: Path, command: str, sweep: dict | None = None, **workload) -> dict:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return validate_config(
        {
            "sweep": {"workloads": ["mine"], "procs_per_node": [2], "include": [], **(sweep or {})},
            "workloads": {
                "mine": {
                    "command": command,
                    "framework": "pytorch",
                    "workdir": str(tmp_path),
                    **workload,
                }
            },
        }
    )


# --- templates --------------------------------------------------------------------------------


def test_a_command_is_split_like_a_shell_and_filled_word_by_word():
    argv, env = render(
        "OMP_PROC_BIND=close {python} train.py --data-dir={data} --out '{run_dir}/my out' "
        "--rank {rank} --json '{{\"a\": 1}}'",
        {"python": "/v/bin/python", "data": "/d with space", "run_dir": "/r"},
    )
    assert env == {"OMP_PROC_BIND": "close"}
    # a value with a space stays one word; rank placeholders and literal braces wait for the
    # rank wrapper, which fills them on each rank
    assert argv == ["/v/bin/python", "train.py", "--data-dir=/d with space", "--out", "/r/my out",
                    "--rank", "{rank}", "--json", '{{"a": 1}}']  # fmt: skip
    assert fill_rank(argv, 3, 1, 4)[-3:] == ["3", "--json", '{"a": 1}']


def test_placeholders_with_format_specs_or_unclosed_quotes_are_refused(tmp_path):
    assert placeholders("{python} t.py --bs {batch_size} {{not}}") == {"python", "batch_size"}
    with pytest.raises(
        ConfigError, match=r"'workloads.mine.command': placeholder \{batch_size\}: format specs"
    ):
        _config(tmp_path, "{python} train.py {batch_size:03d}")
    with pytest.raises(
        ConfigError, match=r"'workloads.mine.command': the command cannot be split.*quotation"
    ):
        _config(tmp_path, "{python} train.py --name 'unclosed")


# --- what the config refuses before anything runs ------------------------------------------------


def test_an_unknown_placeholder_is_named_with_its_key_and_the_known_ones(tmp_path):
    with pytest.raises(ConfigError) as e:
        _config(tmp_path, "{python} train.py --bs {batchsize}")
    msg = str(e.value)
    assert msg.startswith(
        "config key 'workloads.mine.command': unknown placeholder {batchsize}; known: "
    )
    assert "{batch_size}" in msg and "{loader_workers}" in msg and "{rank}" in msg


def test_a_dimension_the_sweep_varies_but_the_command_ignores_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as e:
        _config(tmp_path, "{python} train.py --bs {batch_size}", {"loader_workers": [0, 4]})
    assert str(e.value) == (
        "config key 'sweep.loader_workers' varies over [0, 4] for workload 'mine' (pytorch), "
        "whose command does not use {loader_workers}: those points would be one run under "
        "several names; use {loader_workers} in 'workloads.mine.command', or vary "
        "loader_workers in an include block without this workload"
    )
    # staging changes {data}: a command that reads no {data} cannot be staged
    with pytest.raises(ConfigError, match=r"'sweep.staging' varies over .* does not use \{data\}"):
        _config(tmp_path, "{python} train.py", {"staging": ["none", "node-local"]})


def test_unused_dimensions_are_unset_and_left_out_of_the_run_id(tmp_path):
    config = _config(tmp_path, "{python} train.py --bs {batch_size} --lr {lr}",
                     {"batch_size": [8, 16]}, params={"lr": [0.1, 0.4]})  # fmt: skip
    points = expand_sweep(config)
    assert [p.run_id for p in points] == [
        "framework~pytorch/nodes~1/ppn~2/batch~8/lr~0.1/rep~0",
        "framework~pytorch/nodes~1/ppn~2/batch~8/lr~0.4/rep~0",
        "framework~pytorch/nodes~1/ppn~2/batch~16/lr~0.1/rep~0",
        "framework~pytorch/nodes~1/ppn~2/batch~16/lr~0.4/rep~0",
    ]
    params = points[1].params()
    assert (params["lr"], params["batch_size"]) == (0.4, 8)
    assert params["epochs"] is None and params["loader_workers"] is None  # not the job's


def test_a_workload_runs_under_its_own_framework_whatever_the_sweep_lists(tmp_path):
    config = _config(tmp_path, "{python} train.py", {"frameworks": ["pytorch", "tensorflow"]},
                     framework="tensorflow")  # fmt: skip
    assert [p.run_id for p in expand_sweep(config)] == ["framework~tensorflow/nodes~1/ppn~2/rep~0"]


@pytest.mark.parametrize(
    ("command", "extra", "message"),
    [
        ("{python} nothere.py", {}, r"'workloads.mine.command': the script nothere.py is not there \("),
        ("./nothere.sh {data}", {"data": "."}, r"'workloads.mine.command': the program ./nothere.sh is not an executable"),
        ("no-such-program-x", {}, r"'workloads.mine.command': the program no-such-program-x is not on PATH"),
        ("{python} train.py", {"python": "/no/such/python"}, r"'workloads.mine.python': /no/such/python is not an executable interpreter"),
        ("{python} train.py {data}", {}, r"'workloads.mine.command' uses {data}, but the workload gives neither `data`"),
        ("{python} train.py {data}", {"data": "missing-dir"}, r"'workloads.mine.data': missing-dir does not exist"),
        ("{python} train.py {data}", {"data": ".", "prepare": "{python} p.py"}, r"'workloads.mine.prepare' and 'workloads.mine.data': give one"),
        ("{python} train.py", {"prepare": "{python} p.py --n {batch_size}"}, r"'workloads.mine.prepare': unknown placeholder {batch_size}; known: {data}, {python}, {workdir}"),
        ("{python} train.py", {"params": {"lr": [0.1]}}, r"'workloads.mine.params.lr': the command does not use {lr}"),
        ("{python} train.py {epochs}", {"params": {"epochs": [1]}}, r"'workloads.mine.params.epochs': 'epochs' is the name of one of iosweep's placeholders"),
        ("{python} train.py", {"launch": "single"}, r"'workloads.mine.launch' is single \(one process\), but the sweep gives workload 'mine' \[2\] ranks"),
        ("{python} train.py", {"launch": "torchrun", "framework": "tensorflow"}, r"'workloads.mine.launch': torchrun starts PyTorch jobs only"),
        ("{python} train.py", {"workdir": "/no/such/dir"}, r"'workloads.mine.workdir': /no/such/dir is not a directory"),
        ("FOO=1", {}, r"'workloads.mine.command': the command is empty"),
    ],
)  # fmt: skip
def test_a_workload_that_cannot_run_is_a_config_error_naming_the_key(
    tmp_path, command, extra, message
):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, command, **extra)


def test_the_sweep_names_a_workload_nobody_defined(tmp_path):
    with pytest.raises(ConfigError) as e:
        validate_config({"sweep": {"include": [{"workloads": ["mytrian"]}]}})
    assert str(e.value) == (
        "config key 'sweep.include[0].workloads': 'mytrian' is not a workload; known: imagenet, "
        "mnist (your own go under the top-level `workloads:`)"
    )
    with pytest.raises(ConfigError, match=r"'workloads\.mnist': 'mnist' is a built-in workload"):
        validate_config({"workloads": {"mnist": {"command": "x", "framework": "pytorch"}}})
    with pytest.raises(ConfigError, match=r"'workloads\.two\.framework' is missing"):
        validate_config({"workloads": {"two": {"command": "{python} x.py"}}})


def test_a_python_that_is_a_real_interpreter_and_a_script_under_workdir_pass(tmp_path):
    py = tmp_path / "venv" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.symlink_to(sys.executable)
    (tmp_path / "launch.sh").write_text("#!/bin/sh\n")
    (tmp_path / "launch.sh").chmod(stat.S_IRWXU)
    _config(tmp_path, "{python} {workdir}/train.py", python=str(py))
    _config(tmp_path, "./launch.sh --workers {loader_workers}")
    _config(tmp_path, "{python} -m some.module --rank={rank}")


# --- launchers ----------------------------------------------------------------------------------


def test_torchrun_runs_one_agent_per_node_without_starting_python_itself():
    one = torchrun_command(TorchrunSpec("/v/python", 1, 4, ["wrapper", "--", "job"]))
    assert one == ["/v/python", "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=4",
                   "--standalone", "--no-python", "wrapper", "--", "job"]  # fmt: skip
    two = torchrun_command(
        TorchrunSpec("/v/python", 2, 4, ["w"], endpoint="node1:29400", run_id="x")
    )
    assert two[5:9] == [
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=node1:29400",
        "--rdzv-id=x",
        "--no-python",
    ]
    with pytest.raises(LaunchError, match="rendezvous host"):
        torchrun_command(TorchrunSpec("/v/python", 2, 4, ["w"]))


def test_a_torchrun_worker_takes_its_rank_from_torchrun_not_from_the_srun_step_around_it():
    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8",
           "SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2", "PMIX_RANK": "1"}  # fmt: skip
    assert detect_rank(env) == (5, 1, 8)
    env.pop("TORCHELASTIC_RUN_ID")  # RANK alone is no torchrun's
    assert detect_rank(env) == (1, 0, 2)


# Verbatim from Open MPI 4.1 and torchrun (torch 2.13) when rank 1 of 2 called sys.exit(3).
MPIRUN_EXIT = """--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[19922,1],1]
  Exit code:    3
--------------------------------------------------------------------------"""
TORCHRUN_EXIT = """Root Cause (first observed failure):
[0]:
  time      : 2026-11-25_06:21:27
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 3 (pid: 8516)
  error_file: <N/A>"""


def test_the_launchers_reports_of_a_rank_that_exited_non_zero():
    assert exited_ranks(MPIRUN_EXIT) == {1: 3}
    assert exited_ranks(TORCHRUN_EXIT) == {1: 3}
    assert exited_ranks("srun: error: simnode2: tasks 2-3: Exited with exit code 7\n") == {
        2: 7,
        3: 7,
    }
    assert exited_ranks("srun: error: simnode2: task 1: Killed\n") == {}
    killed = TORCHRUN_EXIT.replace("exitcode  : 3", "exitcode  : -9")
    assert exited_ranks(killed) == {}
    assert signaled_ranks(killed) == [
        {"rank": 1, "host": "localhost", "signal": 9, "name": "SIGKILL"}
    ]


# --- the hooks' record -> steps -------------------------------------------------------------------


def _doc(loops, batches, fits=(), exit_t=100.0):
    return {"loops": loops, "batches": dict(zip(("loop", "request", "ready", "samples"),
            map(list, zip(*batches, strict=True)), strict=True)) if batches else {},
            "fits": list(fits), "exit": exit_t, "hooked": ["torch.utils.data.DataLoader"],
            "problems": [], "overhead_s": 0.001}  # fmt: skip


def _loop(start, site="/x/train.py:40", loader=0, stop=None, close=None):
    return {"kind": "torch", "site": site, "loader": loader, "start": start, "stop": stop,
            "close": close}  # fmt: skip


def test_the_training_loop_is_the_one_with_the_most_batches_and_each_iteration_an_epoch():
    # epoch 0: iter at 10, batches asked at 10.0/10.5, ready at 10.4/10.6, StopIteration at 10.9;
    # a validation loop (another place in the code) at 11; epoch 1 at 12, left by a break
    # (closed at 12.8)
    loops = [_loop(10.0, stop=10.9, close=10.9), _loop(11.0, site="/x/train.py:52", loader=1,
             stop=11.3), _loop(12.0, close=12.8)]  # fmt: skip
    batches = [(0, 10.0, 10.4, 8), (0, 10.5, 10.6, 8), (1, 11.0, 11.1, 4), (1, 11.1, 11.2, 4),
               (2, 12.0, 12.3, 8), (2, 12.5, 12.6, -1)]  # fmt: skip
    out = steps_from_hooks(_doc(loops, batches))
    steps = [(s["epoch"], s["step"], s["start"], s["end"], s.get("wait_start"), s.get("wait_end"),
              s.get("samples")) for s in out["steps"]]  # fmt: skip
    assert steps == [
        (0, 0, 10.4, 10.5, 10.0, 10.4, 8),
        (0, 1, 10.6, 10.9, 10.5, 10.6, 8),  # to the StopIteration
        (0, -1, 10.0, 10.9, None, None, None),
        (1, 0, 12.3, 12.5, 12.0, 12.3, 8),
        (1, 1, 12.6, 12.8, 12.5, 12.6, None),  # to the iterator's end; samples unknown
        (1, -1, 12.0, 12.8, None, None, None),
    ]
    t = out["timing"]
    assert (t["loop"], t["wait"], t["batches_timed"]) == ("torch at train.py:40", "measured", 6)
    assert t["other_loops"] == [{"kind": "torch", "site": "train.py:52", "batches": 2}]
    assert out["phases"] == {"loop train.py:52 #0": [11.0, 11.3]}


def test_each_epochs_iterator_build_is_its_pipeline_start():
    # iter() at 10 returned at 10.3 (workers started), at 12 at 12.0 (nothing to time); a
    # validation loop's build is not the training loop's start-up
    loops = [{**_loop(10.0, stop=10.9), "ready": 10.3}, {**_loop(12.0, close=12.8), "ready": 12.0},
             {**_loop(11.0, site="/x/v.py:1", loader=1, stop=11.3), "ready": 11.1}]  # fmt: skip
    batches = [(0, 10.3, 10.4, 8), (0, 10.5, 10.6, 8), (1, 12.0, 12.3, 8), (1, 12.5, 12.6, 8),
               (2, 11.1, 11.2, 4)]  # fmt: skip
    out = steps_from_hooks(_doc(loops, batches))
    assert out["phases"] == {"pipeline-start-0": [10.0, 10.3], "loop v.py:1 #0": [11.0, 11.3]}


def test_a_loop_no_loader_feeds_is_bounded_by_its_optimizer_steps_and_saves_set_apart():
    # the main thread's optimizer steps end at 1, 2, 3.5 and 5; the forward hook starts at
    # the first (no forward before it); a torch.save runs 3.5..4.2 before the 4th forward at
    # 4.6; a second optimizer (no forward of its own) ends at 5.1; a save in another thread
    doc = _doc([], [])
    doc["threads"] = [{"name": "MainThread", "main": True, "train_calls": 5},
                      {"name": "io", "main": False, "train_calls": 0}]  # fmt: skip
    doc["optimizer_steps"] = {"thread": [0, 0, 0, 0, 0], "forward": [-1.0, 1.3, 2.1, 4.6, -1.0],
                              "samples": [-1, 8, 8, 8, -1], "end": [1.0, 2.0, 3.5, 5.0, 5.1]}  # fmt: skip
    doc["saves"] = [[0, 3.5, 4.2], [1, 4.0, 4.4]]
    out = steps_from_hooks(doc)
    steps = [(s["epoch"], s["step"], s["start"], s["end"], s.get("wait_start"), s.get("wait_end"),
              s.get("samples")) for s in out["steps"]]  # fmt: skip
    assert steps == [
        (0, 0, 1.3, 2.0, 1.0, 1.3, 8),
        (0, 1, 2.1, 3.5, 2.0, 2.1, 8),
        (0, 2, 4.6, 5.1, 4.2, 4.6, 8),  # its wait after the save; the second optimizer's end
        (0, -1, 1.0, 5.1, None, None, None),
    ]
    assert out["phases"] == {"checkpoint-save-0": [3.5, 4.2]}  # the training thread's only
    t = out["timing"]
    assert t["loop"] == "optimizer steps in thread 'MainThread' (no data loader fed it)"
    assert t["wait"] == "measured" and "torch.save calls timed apart" in t["method"]
    # no forward timed (a loop of plain tensors, no torch.nn.Module): no step, as before
    doc["optimizer_steps"]["forward"] = [-1.0] * 5
    assert steps_from_hooks(doc)["steps"] == []


def test_an_open_last_step_ends_where_the_process_next_started_something_or_exited():
    loops = [_loop(1.0), _loop(5.0, site="/x/t.py:9", loader=1)]
    out = steps_from_hooks(_doc(loops, [(0, 1.0, 1.5, 2), (1, 5.0, 5.1, 2)]))
    assert out["steps"][0]["end"] == 5.0  # the next loop's start
    only = steps_from_hooks(_doc([_loop(1.0)], [(0, 1.0, 1.5, 2)], exit_t=9.0))
    assert only["steps"][0]["end"] == 9.0  # the exit


def test_one_helper_starting_two_loaders_gives_two_loops_and_new_loaders_each_epoch_one():
    # a run_epoch(loader) helper: the same place in the code for the train and val loaders
    site = "/x/lib.py:3"
    loops = [
        _loop(0, site, 0, 3),
        _loop(4, site, 1, 5),
        _loop(6, site, 0, 9),
        _loop(10, site, 1, 11),
    ]
    batches = [
        (0, 0, 1, 1),
        (0, 1, 2, 1),
        (1, 4, 4.5, 1),
        (2, 6, 7, 1),
        (2, 7, 8, 1),
        (3, 10, 10.5, 1),
    ]
    out = steps_from_hooks(_doc(loops, batches))
    assert [s["epoch"] for s in out["steps"] if s["step"] == -1] == [0, 1]
    assert out["timing"]["other_loops"][0]["batches"] == 2
    # a script that makes a new DataLoader every epoch: still one loop
    fresh = [_loop(0, site, 0, 3), _loop(6, site, 1, 9)]
    out = steps_from_hooks(_doc(fresh, [(0, 0, 1, 1), (1, 6, 7, 1)]))
    assert [s["epoch"] for s in out["steps"] if s["step"] == -1] == [0, 1]


def _fit(steps, epochs, split=True, why=""):
    return {"start": steps[0][1], "end": 50.0, "site": "/x/k.py:62", "split": split, "why": why,
            "epoch": 0, "epochs": epochs, "steps": steps}  # fmt: skip


def test_keras_fit_steps_are_measured_when_split_and_estimated_when_whole():
    nan = float("nan")
    split = _fit([[0, 1.0, 1.2, 1.5, 8], [0, 1.6, 1.9, 2.1, 8]], [[0, 0.9, 2.5]])
    out = steps_from_hooks(_doc([], [], [split]))
    assert [(s["start"], s["end"], s["wait_start"], s["wait_end"]) for s in out["steps"][:2]] == [
        (1.2, 1.5, 1.0, 1.2), (1.9, 2.1, 1.6, 1.9)]  # fmt: skip
    assert out["steps"][2] == {"epoch": 0, "step": -1, "start": 0.9, "end": 2.1}
    assert out["timing"]["wait"] == "measured"
    # whole steps of 0.5, 0.3, 0.2, 0.4 s: the fastest after the first is 0.2 s, so the waits
    # are estimated at 0 (the first), 0.1, 0, 0.2
    whole = _fit([[0, 0.0, nan, 0.5, -1], [0, 1.0, nan, 1.3, -1], [0, 2.0, nan, 2.2, -1],
                  [0, 3.0, nan, 3.4, -1]], [[0, 0.0, 3.5]], split=False,
                 why="steps_per_execution=2: several steps run in one compiled call")  # fmt: skip
    out = steps_from_hooks(_doc([], [], [whole]))
    waits = [round(s["wait_end"] - s["wait_start"], 9) for s in out["steps"] if s["step"] >= 0]
    assert waits == [0.0, 0.1, 0.0, 0.2]
    assert out["timing"]["wait"] == "estimated"
    assert out["timing"]["method"].startswith("Keras fit: steps_per_execution=2: several steps")


def test_why_there_are_no_steps_is_said():
    nothing = hooks_timing({}, 2)
    assert nothing["why_none"].startswith("no rank left a step record (of 2)")
    rec = steps_from_hooks(_doc([], []))
    assert rec["steps"] == []
    timing = hooks_timing({"0": rec["timing"] | {"steps": 0}}, 1)
    assert timing["why_none"] == (
        "the job never took a batch from the loaders the step hooks time "
        "(torch.utils.data.DataLoader were patched): it feeds its model some other way, e.g. "
        "batches it slices itself"
    )
    none = hooks_timing({"0": rec["timing"] | {"steps": 0, "hooked": []}}, 1)
    assert "imported none of the loaders" in none["why_none"]


def _threaded(batches_thread, handoffs, train_calls=(0, 5)):
    """A record whose loop (two epochs of two batches) runs in thread 1 ('prefetcher'), and
    whose main thread (0) ran ``train_calls[0]`` training calls, thread 1 ``train_calls[1]``."""
    loops = [_loop(1.0, stop=1.9), _loop(5.0, stop=5.9)]
    batches = [(0, 1.0, 1.2, 8), (0, 1.2, 1.4, 8), (1, 5.0, 5.2, 8), (1, 5.2, 5.4, 4)]
    doc = _doc(loops, batches, exit_t=9.0)
    doc["batches"]["thread"] = [batches_thread] * 4
    doc["threads"] = [{"name": "MainThread", "main": True, "train_calls": train_calls[0]},
                      {"name": "prefetcher", "main": False, "train_calls": train_calls[1]}]  # fmt: skip
    sites = ["/x/bg.py:30", "/x/log.py:5"]
    doc["handoffs"] = dict(zip(("thread", "site", "request", "ready", "samples"),
                               map(list, zip(*handoffs, strict=True)), strict=True)) if handoffs else {}  # fmt: skip
    doc["handoffs"]["sites"] = sites
    return doc


def test_a_loader_iterated_by_a_producer_thread_is_timed_at_the_training_threads_hand_off():
    # the main thread (4 optimizer steps) takes batches off a queue at bg.py:30: asked at 1.0,
    # 1.5 (ready 1.25, 1.5), then the sentinel at 2.0; epoch 1 asked at 5.0 (ready 5.3), 6.0
    # (ready 6.0), sentinel at 6.5; a get at log.py:5 of no batch, and the producer's own
    # get in thread 1, are not the hand-off
    gets = [(0, 0, 1.0, 1.25, 8), (0, 0, 1.5, 1.5, 8), (0, 0, 2.0, 2.0, -1),
            (0, 1, 3.0, 3.0, -1), (1, 0, 3.5, 3.6, 8),
            (0, 0, 5.0, 5.3, 8), (0, 0, 6.0, 6.0, 4), (0, 0, 6.5, 6.5, -1)]  # fmt: skip
    out = steps_from_hooks(_threaded(1, gets, train_calls=(4, 0)))
    steps = [(s["epoch"], s["step"], s["start"], s["end"], s.get("wait_start"),
              s.get("wait_end"), s.get("samples")) for s in out["steps"]]  # fmt: skip
    assert steps == [
        (0, 0, 1.25, 1.5, 1.0, 1.25, 8),
        (0, 1, 1.5, 2.0, 1.5, 1.5, 8),  # to the sentinel's get
        (0, -1, 1.0, 2.0, None, None, None),
        (1, 0, 5.3, 6.0, 5.0, 5.3, 8),
        (1, 1, 6.0, 6.5, 6.0, 6.0, 4),
        (1, -1, 5.0, 6.5, None, None, None),
    ]
    t = out["timing"]
    assert (
        t["loop"]
        == "hand-off at bg.py:30 in thread 'MainThread', fed by torch at train.py:40 in thread 'prefetcher'"
    )
    assert (
        t["training_thread"]
        == "MainThread: it ran the training calls (4 optimizer steps and backward passes)"
    )
    assert t["wait"] == "measured" and "blocked in queue.Queue.get" in t["method"]


def test_a_producer_whose_hand_off_cannot_be_timed_gives_no_steps_and_says_why():
    out = steps_from_hooks(_threaded(1, [(0, 1, 3.0, 3.0, -1)], train_calls=(4, 0)))
    assert out["steps"] == []
    why = out["timing"]["why_none"]
    assert why.startswith(
        "the loader (torch at train.py:40 in thread 'prefetcher') was iterated outside the training thread 'MainThread'"
    )
    assert "no verdict is drawn from the producer's figures" in why
    timing = hooks_timing({"0": out["timing"] | {"steps": 0}}, 1)
    assert timing["why_none"] == why
    # no training call seen anywhere: the main thread is taken as training's, and said so
    out = steps_from_hooks(_threaded(1, [], train_calls=(0, 0)))
    assert (
        "the main thread (no optimizer step or backward pass was seen" in out["timing"]["why_none"]
    )


def test_a_loader_in_the_thread_that_trains_is_timed_at_its_next_whatever_thread_that_is():
    # training in a worker thread (its optimizer steps there), the main thread idle: the loop
    # is training's own, timed as before
    out = steps_from_hooks(_threaded(1, [], train_calls=(0, 4)))
    assert [s["wait_end"] for s in out["steps"] if s["step"] >= 0] == [1.2, 1.4, 5.2, 5.4]
    assert out["timing"]["loop"] == "torch at train.py:40"
    assert out["timing"]["training_thread"].startswith("prefetcher: it ran the training calls")
