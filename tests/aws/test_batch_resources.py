"""What a CPU-only or exclusive job asks Batch for (moto as an API stub, the
SubmitJob request captured as built): a CPU-only job names no GPU and goes
to the cheapest on-demand pool; an exclusive one takes every vCPU of its
pool's largest instance."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.batch_compute import BatchCompute
from gqa.adapters.aws.batch_resources import cpu_pool
from gqa.adapters.aws.resources import Pool
from gqa.adapters.aws.s3_checkpoints import S3Checkpoints
from gqa.models.errors import LaunchFailed
from tests.aws.moto_support import FakeClock, capture, create_batch, session
from tests.builders import job_record
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
BUCKET = "gqa-ckpt"
POOLS = (
    Pool("a10g", spot=True, max_gpus=8, price=0.4, instance_types=("g5.xlarge", "g5.12xlarge"), instance_gpus=4),
    Pool("l4", spot=False, max_gpus=4, price=0.8, instance_types=("g6.xlarge", "g6.2xlarge")),
    Pool("h100", spot=False, max_gpus=8, price=6.0),
)


@pytest.fixture
def compute():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws(config={"batch": {"use_docker": False}}):
        create_batch(session(), POOLS)
        s3 = session().client("s3")
        s3.create_bucket(Bucket=BUCKET)
        yield BatchCompute(session().client("batch"), POOLS, "gqa-train", S3Checkpoints(s3, BUCKET, "checkpoints"),
                           FakeClock(), sleep=lambda _: None, attempts=1)


def submitted(compute: BatchCompute, resources: dict, gpus: tuple[int, ...], **spec) -> dict:
    record = job_record(id="7", spec={"resources": resources, **spec})
    calls = capture(compute.client, "SubmitJob")
    compute.launch(record, gpus, 1)
    [request] = calls
    return request


def resources_of(request: dict) -> dict[str, str]:
    return {r["type"]: r["value"] for r in request["containerOverrides"]["resourceRequirements"]}


@pytest.mark.parametrize("resources, gpus, queue, asked", [
    pytest.param({"gpus": 0}, (), "gqa-l4-ondemand", {"VCPU": "1", "MEMORY": str(14 * 1024 // 4)},
                 id="CPU-only, nothing named: one vCPU and its share of memory, no GPU"),
    pytest.param({"gpus": 0, "cpus": 8, "memory": "20Gi"}, (), "gqa-l4-ondemand",
                 {"VCPU": "8", "MEMORY": str(20 * 1024)}, id="CPU-only with its CPUs and memory"),
    pytest.param({"gpus": 0, "cpus": 3}, (), "gqa-l4-ondemand", {"VCPU": "3", "MEMORY": str(3 * 14 * 1024 // 4)},
                 id="CPU-only: memory follows its vCPUs"),
    pytest.param({"gpus": 1, "exclusive": True}, (0,), "gqa-a10g-spot",
                 {"GPU": "1", "VCPU": "48", "MEMORY": str(14 * 1024)},
                 id="exclusive: every vCPU of the pool's largest instance (g5.12xlarge)"),
    pytest.param({"gpus": 0, "exclusive": True}, (), "gqa-l4-ondemand", {"VCPU": "8", "MEMORY": str(14 * 1024 // 4)},
                 id="exclusive and CPU-only: a whole g6.2xlarge"),
    pytest.param({"gpus": 2}, (8, 9), "gqa-l4-ondemand", {"GPU": "2", "VCPU": "8", "MEMORY": str(2 * 14 * 1024)},
                 id="a GPU job as before"),
])
def test_what_a_job_asks_batch_for(compute, resources, gpus, queue, asked):
    request = submitted(compute, resources, gpus)
    assert request["jobQueue"] == queue
    assert resources_of(request) == asked
    assert request["tags"]["gqa:pool"] == queue.removeprefix("gqa-")


def test_a_cpu_only_job_has_no_gpu_hour_timeout_but_keeps_its_wall_time(compute):
    request = submitted(compute, {"gpus": 0}, (), limits={"wall_time": "2h", "max_gpu_hours": 0.1})
    assert request["timeout"] == {"attemptDurationSeconds": 2 * 3600 + 10}


@pytest.mark.parametrize("pools, chosen", [
    (POOLS, "l4-ondemand"),                                                    # on demand beats a cheaper spot pool
    ((POOLS[2], POOLS[1]), "l4-ondemand"),                                     # the cheapest on-demand one
    ((POOLS[0],), "a10g-spot"),                                                # only spot: the cheapest there is
    ((Pool("x", False, 1, 1.0), Pool("y", False, 1, 1.0)), "x-ondemand"),    # equal prices: the first listed
])
def test_the_pool_a_cpu_only_job_runs_in(pools, chosen):
    assert cpu_pool(pools).name == chosen


@pytest.mark.parametrize("resources, gpus, why", [
    ({"gpus": 1, "exclusive": True}, (12,), "pool h100-ondemand lists no instance types"),
    ({"gpus": 0, "exclusive": True, "cpus": 16}, (), "asks for 16 vCPUs; the largest instances of pool l4-ondemand "
                                                     "have 8"),
])
def test_an_exclusive_job_that_no_instance_can_hold_alone_fails_the_launch(compute, resources, gpus, why):
    calls = capture(compute.client, "SubmitJob")
    with pytest.raises(LaunchFailed, match=why):
        compute.launch(job_record(id="7", spec={"resources": resources}), gpus, 1)
    assert calls == []


def test_on_aws_the_pass_sees_no_exclusive_flag_and_a_running_job_ends_by_its_granted_wall_time():
    # a machine there is an instance: Batch gives the exclusive job a whole one, and the pass must not wait
    # for the whole cluster to empty; a --time-min attempt is bounded by what backfill granted it
    from gqa.adapters.aws import items

    base = {"id": "7", "grp": "7", "team": "nlp", "owner": "alice", "tier": 1, "gpus": 1, "submitted_at": 1.0,
            "seq": 7, "wall_time": 3600, "exclusive": True, "time_min": 60}
    pending = items.pending_job({**base, "state": "QUEUED"})
    assert (pending.exclusive, pending.time_min) == (False, 60.0)
    running = items.running_job({**base, "state": "RUNNING", "assigned": [0], "started_at": 5.0, "time_limit": 100})
    assert (running.exclusive, running.wall_time, running.ends_by) == (False, 100.0, 105.0)
    assert items.running_job({**base, "state": "RUNNING", "assigned": [0], "started_at": 5.0}).wall_time == 3600
