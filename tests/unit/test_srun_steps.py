"""srun's steps as Slurm shapes them on one node, without starting a step: the
GPUs each running step holds (gqa.runtime.step_gpus), the options Slurm takes
that mean little or nothing on one node, time limits and --gpu-bind=none."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from gqa.runtime import slurm_tools, srun_options, step_gpus
from gqa.runtime.srun_options import SrunError

GPUS = ["4", "5", "6", "7"]
JOB = {"SLURM_JOB_ID": "41", "SLURM_NTASKS": "4", "CUDA_VISIBLE_DEVICES": ",".join(GPUS), "GQA_JOB_ID": "41"}


@pytest.fixture
def job(tmp_path):
    return {**JOB, slurm_tools.STEP_STATUS_ENV: str(tmp_path / "steps")}


@pytest.fixture
def sleeper():
    """A process that stands for another step's srun, and can be killed as one."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        started.append(subprocess.Popen(["sleep", "60"]))
        return started[-1]

    yield start
    for process in started:
        process.kill()
        process.wait()


# -- the GPUs each step holds -------------------------------------------------------------------------------
def test_steps_running_at_once_take_distinct_gpus_and_a_step_is_refused_more_than_are_free(job, sleeper):
    first, second = sleeper(), sleeper()
    assert step_gpus.take(job, GPUS, 1, first.pid) == ["4"]
    assert step_gpus.take(job, GPUS, 2, second.pid) == ["5", "6"]
    assert step_gpus.take(job, GPUS, 2, sleeper().pid) is None
    step_gpus.release(job, second.pid)
    assert step_gpus.take(job, GPUS, 3, sleeper().pid) == ["5", "6", "7"]


def test_the_gpus_of_a_step_killed_outright_come_back(job, sleeper):
    holder = sleeper()
    assert step_gpus.take(job, GPUS, 4, holder.pid) == GPUS
    assert step_gpus.take(job, GPUS, 1, sleeper().pid) is None
    holder.kill()
    holder.wait()
    assert step_gpus.take(job, GPUS, 4, sleeper().pid) == GPUS


def test_steps_starting_at_once_never_take_the_same_gpu(job, sleeper):
    holder = sleeper()
    gpus = [str(n) for n in range(16)]
    taken: list[list[str] | None] = []
    threads = [threading.Thread(target=lambda: taken.append(step_gpus.take(job, gpus, 1, holder.pid)))
               for _ in gpus]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(gpu for got in taken for gpu in got or []) == sorted(gpus)


def test_outside_a_job_a_step_takes_the_first_gpus_and_holds_nothing(sleeper):
    pid = sleeper().pid
    assert step_gpus.take(JOB, GPUS, 2, pid) == ["4", "5"] == step_gpus.take(JOB, GPUS, 2, pid)
    step_gpus.release(JOB, pid)


def test_a_step_waits_for_busy_gpus_saying_so_once_and_starts_when_they_are_given_back(job, sleeper, capsys):
    holder = sleeper()
    step_gpus.take(job, GPUS, 3, holder.pid)
    got: list[list[str]] = []
    waiting = threading.Thread(target=lambda: got.append(step_gpus.acquire(job, GPUS, 2, sleeper().pid)))
    waiting.start()
    time.sleep(4 * step_gpus.RETRY_EVERY)
    assert not got
    holder.kill()
    holder.wait()
    waiting.join(10)
    assert got == [["4", "5"]]
    assert capsys.readouterr().err == ("srun: Job 41 step creation temporarily disabled, retrying (Requested "
                                       "nodes are busy)\nsrun: Step created for job 41\n")


def test_a_step_asking_for_no_gpus_holds_none_and_sees_the_jobs():
    opts = srun_options.parse(["-n", "1", "true"], {})
    assert srun_options.step_gpu_count(opts, JOB, 1) is None
    [task] = srun_options.task_environments(opts, JOB, 0, "gpu-host")
    assert task["CUDA_VISIBLE_DEVICES"] == "4,5,6,7" and task["SLURM_STEP_GPUS"] == "4,5,6,7"
    [none] = envs(["-n", "1", "--gres=none"])
    assert none["CUDA_VISIBLE_DEVICES"] == ""


# -- options that mean little on one node ------------------------------------------------------------------
def envs(args, env=JOB, held=None):
    return srun_options.task_environments(srun_options.parse([*args, "true"], env), env, 2, "gpu-host", held)


@pytest.mark.parametrize("args", [
    ["--exact"], ["--hint=nomultithread"], ["-m", "block:block"], ["--distribution", "block:block"],
    ["--cpus-per-gpu=1"], ["-t", "1"], ["--time", "1"], ["--ntasks-per-gpu=1"], ["-w", "localhost"],
    ["--nodelist", "gpu-host"], ["--jobid=41"], ["--cpu_bind=cores"], ["--threads-per-core=1"],
    ["--accel-bind=g"], ["--open-mode=append"], ["--network=x"],
])
def test_options_slurm_takes_are_taken(args):
    env = {**JOB, "SLURMD_NODENAME": "gpu-host"}
    assert srun_options.parse([*args, "true"], env).command == ["true"]


def test_options_with_no_meaning_on_one_node_say_so_and_those_with_one_do_not():
    assert srun_options.parse(["--hint=nomultithread", "-m", "block:block", "true"], {}).notes == [
        "srun: --hint=nomultithread: a placement hint; the step's tasks share the job's one node",
        "srun: -m=block:block: lays tasks out across nodes; the step's tasks share the job's one node"]
    assert srun_options.parse(["--exact", "--cpus-per-gpu=2", "--open-mode=append", "true"], {}).notes == []


@pytest.mark.parametrize("args, why", [
    (["-w", "other-host"], r"Requested node configuration is not available \(other-host is not this job.s node"),
    (["--jobid=99999"], "Unable to confirm allocation for job 99999: Invalid job id specified"),
    (["--ntasks-per-gpu=1", "--gpus-per-task=1"], "--gpus-per-task is mutually exclusive with --ntasks-per-gpu"),
])
def test_another_node_or_job_is_refused_as_slurm_refuses_it(args, why):
    with pytest.raises(SrunError, match=why) as refused:
        envs(args, {**JOB, "SLURMD_NODENAME": "gpu-host"})
    assert refused.value.code == 1


@pytest.mark.parametrize("text, seconds", [
    ("1", 60), ("0:5", 5), ("2:00:01", 7201), ("1-2", 93600), ("1-0:1:2", 86462), ("0", None), ("UNLIMITED", None),
])
def test_a_time_limit_takes_slurms_forms(text, seconds):
    assert srun_options.parse(["-t", text, "true"], {}).time_limit == seconds


def test_a_bad_time_or_open_mode_is_refused():
    with pytest.raises(SrunError, match="not a time"):
        srun_options.parse(["-t", "soon", "true"], {})
    with pytest.raises(SrunError, match="takes append or truncate"):
        srun_options.parse(["--open-mode=keep", "true"], {})


# -- binding GPUs to tasks ---------------------------------------------------------------------------------
def test_gpu_bind_none_leaves_each_task_all_of_the_steps_gpus():
    bound = envs(["-n", "2", "--gpus-per-task=1"])
    assert [t["CUDA_VISIBLE_DEVICES"] for t in bound] == ["4", "5"]
    unbound = envs(["-n", "2", "--gpus-per-task=1", "--gpu-bind=none"])
    assert [t["CUDA_VISIBLE_DEVICES"] for t in unbound] == ["4,5", "4,5"]
    from_job = envs(["-n", "2", "--gpus-per-task=1"], {**JOB, "SLURM_GPU_BIND": "none"})
    assert [t["CUDA_VISIBLE_DEVICES"] for t in from_job] == ["4,5", "4,5"]
    again = envs(["-n", "2", "--gpus-per-task=1", "--gpu-bind=closest"], {**JOB, "SLURM_GPU_BIND": "none"})
    assert [t["CUDA_VISIBLE_DEVICES"] for t in again] == ["4", "5"]


def test_a_step_binds_the_gpus_it_was_given_and_ntasks_per_gpu_shares_each():
    given = envs(["-n", "2", "--gpus-per-task=1"], held=["6", "7"])
    assert [t["CUDA_VISIBLE_DEVICES"] for t in given] == ["6", "7"]
    assert given[0]["SLURM_STEP_GPUS"] == "6,7"
    shared = envs(["-n", "4", "--ntasks-per-gpu=2"])
    assert [t["CUDA_VISIBLE_DEVICES"] for t in shared] == ["4", "4", "5", "5"]
