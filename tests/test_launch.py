"""Launcher command lines and the per-rank wrapper's rank detection."""

import pytest

from iosweep.run.launch import LaunchError, LaunchSpec, build_command, choose_launcher
from iosweep.run.rank_wrapper import detect_rank, prepare_darshan_logpath

PROG = ["python", "-m", "iosweep.run.rank_wrapper", "--run-dir", "/r", "--", "python", "train.py"]


def spec(launcher, nodes=1, ppn=2, **kw):
    return LaunchSpec(
        launcher=launcher, nodes=nodes, ppn=ppn, program=PROG, env_names=["PYTHONPATH"], **kw
    )


def test_mpirun_single_node():
    cmd = build_command(spec("mpirun", ppn=4), env={})
    assert cmd[:6] == ["mpirun", "-np", "4", "--map-by", "ppr:4:node", "--bind-to"]
    assert "--oversubscribe" in cmd and "--allow-run-as-root" in cmd
    assert cmd[cmd.index("-x") + 1] == "PYTHONPATH"
    assert cmd[-len(PROG) :] == PROG


def test_mpirun_multi_node_needs_hosts_or_allocation():
    with pytest.raises(LaunchError, match="no SLURM allocation"):
        build_command(spec("mpirun", nodes=2), env={})
    cmd = build_command(spec("mpirun", nodes=2, hosts=["n1", "n2"]), env={})
    assert cmd[cmd.index("--host") + 1] == "n1:2,n2:2"
    assert cmd[2] == "4"
    # inside an allocation mpirun takes the nodes from SLURM
    cmd = build_command(spec("mpirun", nodes=2), env={"SLURM_JOB_ID": "7"})
    assert "--host" not in cmd


def test_srun():
    cmd = build_command(spec("srun", nodes=2, ppn=3), env={"SLURM_JOB_ID": "7"})
    assert cmd[:4] == ["srun", "--nodes=2", "--ntasks=6", "--ntasks-per-node=3"]
    assert "--mpi=pmix" in cmd and "--export=ALL" in cmd and "--overlap" in cmd
    assert "--mpi=pmix" not in build_command(
        spec("srun", srun_mpi="none"), env={"SLURM_JOB_ID": "1"}
    )


def test_mpich_and_horovodrun():
    cmd = build_command(spec("mpirun-mpich", ppn=2), env={})
    assert cmd[:5] == ["mpiexec.hydra", "-n", "2", "-ppn", "2"]
    cmd = build_command(spec("horovodrun", ppn=4), env={})
    assert cmd[:5] == ["horovodrun", "-np", "4", "-H", "localhost:4"]
    assert cmd[cmd.index("--mpi-args") + 1] == "--oversubscribe --allow-run-as-root"


def test_values_stay_single_arguments():
    # A value with shell metacharacters stays one literal argv element: nothing is run by a shell.
    s = LaunchSpec("mpirun", 1, 1, program=["python", "x.py", "--data", "/d; rm -rf ~"])
    assert build_command(s, env={})[-1] == "/d; rm -rf ~"


def test_choose_launcher():
    assert choose_launcher("auto", env={}) == "mpirun"
    assert choose_launcher("horovodrun", env={}) == "horovodrun"
    with pytest.raises(LaunchError):
        choose_launcher("ssh", env={})


@pytest.mark.parametrize(
    "env, expected",
    [
        (
            {
                "OMPI_COMM_WORLD_RANK": "3",
                "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                "OMPI_COMM_WORLD_SIZE": "4",
            },
            (3, 1, 4),
        ),
        (
            {"PMIX_RANK": "2", "SLURM_LOCALID": "0", "SLURM_NTASKS": "4", "SLURM_PROCID": "2"},
            (2, 0, 4),
        ),
        ({"PMI_RANK": "1", "MPI_LOCALRANKID": "1", "PMI_SIZE": "2"}, (1, 1, 2)),
        ({"HOROVOD_RANK": "5", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_SIZE": "8"}, (5, 1, 8)),
        ({"SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NTASKS": "2"}, (1, 1, 2)),
        ({}, (0, 0, 1)),
    ],
)
def test_detect_rank(env, expected):
    assert detect_rank(env) == expected


def test_darshan_logpath_dirs(tmp_path):
    import datetime as dt

    prepare_darshan_logpath(tmp_path, dt.datetime(2026, 12, 31, 23, 59))
    assert (tmp_path / "2026" / "12" / "31").is_dir()
    assert (tmp_path / "2027" / "1" / "1").is_dir()


def test_salloc_asks_for_the_points_nodes_and_the_jobs_account():
    from iosweep.run.slurm import Request, salloc_command

    req = Request("iosweep-x", nodes=2, ppn=4, cpus_per_task=3, minutes=15, extra_args=("--qos=a",))
    env = {"SBATCH_ACCOUNT": "proj1", "SBATCH_PARTITION": "gpu", "SALLOC_PARTITION": "cpu"}
    # the partition salloc reads itself (SALLOC_PARTITION) is not overridden
    assert salloc_command(req, env, ["python", "-m", "x"]) == [
        "salloc", "--job-name=iosweep-x", "--nodes=2", "--ntasks-per-node=4",
        "--cpus-per-task=3", "--time=15", "--account=proj1", "--qos=a", "--", "python", "-m", "x",
    ]  # fmt: skip


def test_rerun_command_redoes_one_point_as_the_workflow_was_started():
    from iosweep.run.runner import rerun_command

    argv = [".venv/bin/snakemake", "--cores", "all", "-R", "a/manifest.json", "b", "--keep-going"]
    assert rerun_command(argv, "results/runs/x~1/manifest.json") == (
        ".venv/bin/snakemake --cores all --keep-going --forcerun 'results/runs/x~1/manifest.json'"
    )
