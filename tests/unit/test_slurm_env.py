"""The SLURM_* variables of an attempt, its thread counts and sbatch's
filename patterns (gqa/models/slurm_env.py)."""

import pytest

from gqa.models.expand import expand
from gqa.models.slurm_env import (ARRAY_TASK_BASE, array_env, attempt_env, expand_pattern, job_pattern,
                                  slurm_env, slurm_job_id)
from tests.builders import job_record, spec


def task(index: int, seq: int, group: str = "12", **fields):
    return job_record(id=f"{group}_{index}", group=group, array_index=index, seq=seq, **fields)


@pytest.mark.parametrize("record, expected", [
    (job_record(id="12", group="12", seq=40), 12),                  # a job alone: its own number
    (task(3, seq=57), ARRAY_TASK_BASE + 57),                       # a task: above every job's number
    (task(0, seq=1, group="1"), ARRAY_TASK_BASE + 1),
])
def test_slurm_job_id_is_an_integer_unique_per_job_and_task(record, expected):
    assert slurm_job_id(record) == expected


def test_array_tasks_have_distinct_ids_and_ports_kept_across_attempts():
    tasks = [task(i, seq=100 + i) for i in range(50)]
    ids = [int(slurm_env(t, 1)["SLURM_JOB_ID"]) for t in tasks]
    assert len(set(ids)) == 50 and all(i > ARRAY_TASK_BASE for i in ids)
    assert len({10000 + i % 10000 for i in ids}) == 50           # the DDP idiom's ports differ
    assert [slurm_env(t, 3)["SLURM_JOB_ID"] for t in tasks] == [str(i) for i in ids]


@pytest.mark.parametrize("indices, span", [
    ([0, 1, 2, 3], ("0", "3", "4", "1")),
    ([0, 3, 6, 9], ("0", "9", "4", "3")),
    ([1, 3, 10], ("1", "10", "3", "1")),       # no common step: 1, as Slurm says
    ([7], ("7", "7", "1", "1")),
    (range(100_000), ("0", "99999", "100000", "1")),
])
def test_array_env_is_the_span_of_the_indices(indices, span):
    env = array_env(list(indices))
    assert (env["SLURM_ARRAY_TASK_MIN"], env["SLURM_ARRAY_TASK_MAX"], env["SLURM_ARRAY_TASK_COUNT"],
            env["SLURM_ARRAY_TASK_STEP"]) == span


def test_a_task_of_an_expanded_array_reads_its_span_and_index():
    (job_spec, index, extra), *_ = expand(spec(array="4-10:2%2", resources={"cpus": 8}))
    record = job_record(spec=job_spec, id="9_4", group="9", array_index=index, extra_env=extra, seq=3)
    env = attempt_env({}, slurm_env(record, 1), record.extra_env)
    assert {k: env[k] for k in ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN",
                                "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_STEP")} == {
        "SLURM_ARRAY_JOB_ID": "9", "SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "4",
        "SLURM_ARRAY_TASK_MAX": "10", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_STEP": "2"}


def test_one_node_values_of_a_job_with_cpus_tasks_memory_and_gpus():
    record = job_record(id="7", group="7", spec={
        "name": "bert lr=3e-4", "team": "nlp", "owner": "alice", "priority": "high",
        "workdir": "/work/run", "submit_dir": "/home/alice/proj", "limits": {"wall_time": "2h"},
        "resources": {"gpus": 4, "gpu_type": "a10g,l4", "cpus": 16, "tasks": 4, "gpus_per_task": 1,
                      "memory": "3GiB"}})
    env = slurm_env(record, 3, devices=(2, 3, 4, 5), host="box1", started_at=1000.5)
    assert env == {
        "SLURM_JOB_ID": "7", "SLURM_JOBID": "7", "SLURM_JOB_NAME": "bert lr=3e-4", "SLURM_JOB_USER": "alice",
        "SLURM_JOB_ACCOUNT": "nlp", "SLURM_JOB_PARTITION": "a10g", "SLURM_JOB_QOS": "high",
        "SLURM_CLUSTER_NAME": "gqa", "SLURM_SUBMIT_DIR": "/home/alice/proj",
        "SLURM_NTASKS": "4", "SLURM_NPROCS": "4", "SLURM_NTASKS_PER_NODE": "4", "SLURM_TASKS_PER_NODE": "4",
        "SLURM_NNODES": "1", "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0", "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0", "SLURM_RESTART_COUNT": "2", "SLURM_GPUS_ON_NODE": "4",
        "SLURM_CPUS_PER_TASK": "4", "OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4",
        "SLURM_CPUS_ON_NODE": "16", "SLURM_JOB_CPUS_PER_NODE": "16", "SLURM_GPUS_PER_TASK": "1",
        "SLURM_MEM_PER_NODE": "3072", "SLURM_JOB_GPUS": "2,3,4,5",
        "SLURM_JOB_NODELIST": "box1", "SLURM_NODELIST": "box1", "SLURMD_NODENAME": "box1",
        "SLURM_SUBMIT_HOST": "box1", "SLURM_TOPOLOGY_ADDR": "box1",
        "SLURM_JOB_START_TIME": "1000", "SLURM_JOB_END_TIME": "8200"}


def test_without_a_host_the_host_dependent_values_are_left_out():
    env = slurm_env(job_record(spec={"resources": {"gpus": 2}, "workdir": "/work"}), 1)
    assert env["SLURM_GPUS_ON_NODE"] == "2"
    for name in ("SLURM_RESTART_COUNT",    # a first attempt: Slurm sets it only on a requeue
                 "SLURM_JOB_NODELIST", "SLURMD_NODENAME", "SLURM_JOB_GPUS", "SLURM_JOB_START_TIME",
                 "SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS", "SLURM_MEM_PER_NODE", "SLURM_ARRAY_TASK_ID",
                 "SLURM_SUBMIT_DIR"):
        assert name not in env


@pytest.mark.parametrize("option, expected", [
    ("--gpus", {"SLURM_GPUS": "3"}),
    ("--gpus-per-node", {"SLURM_GPUS_PER_NODE": "3"}),   # torchrun --nproc_per_node=$SLURM_GPUS_PER_NODE
    (None, {}),                                          # --gres: Slurm sets neither
])
def test_the_gpu_option_asked_names_its_variable(option, expected):
    env = slurm_env(job_record(spec={"resources": {"gpus": 3, "gpus_option": option}}), 1)
    assert {k: v for k, v in env.items() if k in ("SLURM_GPUS", "SLURM_GPUS_PER_NODE")} == expected


def test_a_cpu_only_job_sees_no_gpus_and_the_cpus_it_may_use():
    env = slurm_env(job_record(spec={"resources": {"gpus": 0}}), 1, devices=(), host="h", cpus_on_node=12)
    assert (env["SLURM_GPUS_ON_NODE"], env["SLURM_CPUS_ON_NODE"]) == ("0", "12")
    assert "SLURM_JOB_GPUS" not in env


@pytest.mark.parametrize("base, job_env, expected_omp, expected_job", [
    ({}, {}, "4", "7"),
    ({"OMP_NUM_THREADS": "64"}, {}, "4", "7"),                  # the submitter's shell gives way to the CPUs
    ({}, {"OMP_NUM_THREADS": "1"}, "1", "7"),                   # the job's own env wins
    ({"SLURM_JOB_ID": "999", "SLURM_ARRAY_TASK_ID": "5"}, {}, "4", "7"),   # submitted from inside a Slurm job
])
def test_the_jobs_own_env_wins_over_slurms_values(base, job_env, expected_omp, expected_job):
    record = job_record(id="7", group="7", spec={"resources": {"cpus": 4}})
    env = attempt_env(base, slurm_env(record, 1), job_env)
    assert (env["OMP_NUM_THREADS"], env["SLURM_JOB_ID"]) == (expected_omp, expected_job)
    assert "SLURM_ARRAY_TASK_ID" not in env


PATTERN_VALUES = dict(job_id=1000000057, name="lr_sweep", user="alice", array_job_id=12, array_task=7,
                      host="gpu-box.example.com")


@pytest.mark.parametrize("pattern, expected", [
    ("slurm-%j.out", "slurm-1000000057.out"),
    ("%x-%A_%a.out", "lr_sweep-12_7.out"),
    ("%J.%s", "1000000057.batch"),
    ("%u@%N-%n-%t", "alice@gpu-box-0-0"),
    ("%4a", "0007"),
    ("%010A", "0000000012"),
    ("%12a", "0000000007"),                    # padding stops at 10
    ("%3x", "lr_sweep"),                        # a width means nothing for a name
    ("100%%-%b", "100%-7"),
    ("%q%", "%q%"),                             # not a pattern: kept
    ("logs\\%j.out", "logs%j.out"),             # a backslash: taken literally
])
def test_sbatch_filename_patterns(pattern, expected):
    assert expand_pattern(pattern, **PATTERN_VALUES) == expected


def test_outside_an_array_a_is_sbatchs_no_value_and_A_the_job():
    record = job_record(id="31", group="31", spec={"name": "prep", "owner": "bob"})
    assert job_pattern("%x-%A_%a-%j.out", record, "h") == "prep-31_4294967294-31.out"
    assert job_pattern("%x-%A_%a.out", task(2, seq=9, spec={"name": "s"}), "h") == "s-12_2.out"
