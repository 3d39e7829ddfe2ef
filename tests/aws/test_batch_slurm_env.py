"""A Batch attempt's Slurm environment: the SubmitJob request carries the
SLURM_* values that do not depend on the instance, and a spec at the edge of
what the API accepts still fits Batch's 30 KiB with them (aws_limits.py
refuses a larger request, as Batch does)."""

from __future__ import annotations

import pytest

from gqa.adapters.aws.batch_payload import GQA_ALLOWANCE, JOB_PAYLOAD_LIMIT, payload_problem, request_bytes, spec_bytes
from gqa.models.burst import INLINE_KEY_BYTES
from gqa.models.expand import expand
from gqa.models.slurm_env import ARRAY_TASK_BASE
from tests.aws.test_batch_compute import aws, clock, compute, env_of, launched_request  # noqa: F401 (fixtures)
from tests.builders import job_record, spec

pytestmark = pytest.mark.aws


def test_submitjob_carries_an_array_tasks_slurm_values(compute):  # noqa: F811
    (task_spec, index, extra), *_ = expand(spec(name="lr_sweep", team="nlp", owner="alice", array="0-6:2",
                                                 resources={"gpus": 2, "cpus": 8, "tasks": 2}))
    record = job_record(spec=task_spec, id="12_0", group="12", array_index=index, extra_env=extra, seq=31)
    env = env_of(launched_request(compute, record, (0, 1), attempt=2)[0])
    assert {k: v for k, v in env.items() if k.startswith("SLURM_") or k.endswith("_NUM_THREADS")} == {
        "SLURM_JOB_ID": str(ARRAY_TASK_BASE + 31), "SLURM_JOBID": str(ARRAY_TASK_BASE + 31),
        "SLURM_JOB_NAME": "lr_sweep", "SLURM_JOB_USER": "alice", "SLURM_JOB_ACCOUNT": "nlp",
        "SLURM_JOB_PARTITION": "default", "SLURM_JOB_QOS": "normal", "SLURM_CLUSTER_NAME": "gqa",
        "SLURM_NTASKS": "2", "SLURM_NPROCS": "2", "SLURM_NTASKS_PER_NODE": "2", "SLURM_TASKS_PER_NODE": "2",
        "SLURM_NNODES": "1", "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0", "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0", "SLURM_RESTART_COUNT": "1", "SLURM_GPUS_ON_NODE": "2",
        "SLURM_CPUS_PER_TASK": "4", "OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4",
        "SLURM_CPUS_ON_NODE": "8", "SLURM_JOB_CPUS_PER_NODE": "8",
        "SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_MAX": "6", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_STEP": "2"}
    assert env["GQA_JOB_ID"] == "12_0"
    for name in ("SLURM_JOB_NODELIST", "SLURMD_NODENAME", "SLURM_JOB_GPUS", "SLURM_SUBMIT_DIR"):
        assert name not in env                    # the instance's: the job's runtime sets them


def test_the_jobs_own_env_wins_over_slurms_values_on_batch(compute):  # noqa: F811
    record = job_record(id="4", group="4", spec={"resources": {"cpus": 16}, "env": {"OMP_NUM_THREADS": "2"}})
    env = env_of(launched_request(compute, record, (0,))[0])
    assert (env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"], env["SLURM_CPUS_ON_NODE"]) == ("2", "16", "16")


def test_a_spec_at_the_apis_limit_still_fits_batchs_payload_with_slurms_values(compute):  # noqa: F811
    """The largest of everything gqa adds around a spec the API just accepts: a
    200-character name, the longest team and owner, an array task's span, a
    trigger's inline keys; the request stays within 30 KiB (a larger one is
    refused by the limits layer, as Batch refuses it)."""
    room = JOB_PAYLOAD_LIMIT - GQA_ALLOWANCE
    fields = dict(name="n" * 200, team="t" * 63, owner="o" * 129, array="0-99999",
                  resources={"gpus": 4, "cpus": 4096, "tasks": 1024, "gpus_per_task": 1, "memory": "1TiB"},
                  limits={"wall_time": "14d"}, tags={f"k{i}": "v" * 200 for i in range(8)})
    fields["resources"]["gpus"] = 1024
    pad = room - spec_bytes(spec(**fields, env={"PAD": ""}))
    big = spec(**fields, env={"PAD": "x" * pad})
    assert spec_bytes(big) == room and payload_problem(big) is None
    (task_spec, index, extra), = expand(big)[-1:]
    extra = extra | {"GQA_TRIGGER_KEYS": "k" * INLINE_KEY_BYTES, "GQA_TRIGGER_ID": "t" * 64,
                     "GQA_TRIGGER_BUCKET": "b" * 63, "GQA_TRIGGER_COUNT": "1000000"}
    record = job_record(spec=task_spec, id=f"{10**9}_{index}", group=str(10**9), array_index=index,
                        extra_env=extra, seq=10**12)
    request, _ = launched_request(compute, record, (13,), attempt=100)
    assert request_bytes(request) <= JOB_PAYLOAD_LIMIT
    assert request_bytes(request) - room > 6 * 1024           # what gqa added, Slurm's values among it
