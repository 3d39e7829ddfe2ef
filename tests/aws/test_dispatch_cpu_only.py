"""The dispatch Lambda handler with a CPU-only job (moto DynamoDB, Batch as an
API stub, S3): it holds no GPU slot, so it starts while every GPU slot is
taken, and its SubmitJob asks Batch for no GPU, in the cheapest on-demand pool."""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.resources import Pool
from gqa.adapters.aws.tables import TableNames
from gqa.adapters.clock import SystemClock
from gqa.models.job import JobState
from gqa.services.submit import SubmitService
from tests.aws.deployed import create_tables
from tests.aws.moto_support import LambdaContext, capture, create_batch, session
from tests.builders import spec
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
NAMES = TableNames.prefixed("gqa-cpu-")
BUCKET = "gqa-cpu-checkpoints"
POOLS = (Pool("a10g", spot=True, max_gpus=4, price=0.5), Pool("a10g", spot=False, max_gpus=2, price=1.2))
WAKEUP = {"Records": [{"messageId": "w-1", "body": '{"wake": true}', "eventSource": "aws:sqs",
                       "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:gqa-wakeup"}]}


@pytest.fixture
def module():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws(config={"batch": {"use_docker": False}}):
        create_tables(session().client("dynamodb"), NAMES)
        create_batch(session(), POOLS)
        session().client("s3").create_bucket(Bucket=BUCKET)
        pools = [{"gpu_type": p.gpu_type, "spot": p.spot, "max_gpus": p.max_gpus, "price": p.price} for p in POOLS]
        env = {"GQA_JOBS_TABLE": NAMES.jobs, "GQA_SETTINGS_TABLE": NAMES.settings,
               "GQA_LEDGER_TABLE": NAMES.ledger, "GQA_POOLS": json.dumps(pools),
               "GQA_JOB_DEFINITION": "gqa-train", "GQA_CHECKPOINT_BUCKET": BUCKET}
        with mock.patch.dict(os.environ, env):
            from lambdas import dispatch
            dispatch.container.cache_clear()
            yield dispatch
            dispatch.container.cache_clear()


def test_a_cpu_only_job_starts_with_every_gpu_slot_taken_and_asks_batch_for_no_gpu(module):
    store = DynamoDBStore(session().client("dynamodb"), NAMES)
    submit = SubmitService(store, SystemClock()).submit
    submits = capture(module.container().compute.client, "SubmitJob")
    gpu_jobs = [job.id for _ in range(2) for job in submit(spec(resources={"gpus": 1}))]   # both on-demand slots
    [cpu_job] = submit(spec(resources={"gpus": 0, "cpus": 2}))

    answer = module.handler(WAKEUP, LambdaContext(function_name="gqa-dispatch"))

    assert sorted(answer["started"]) == sorted([*gpu_jobs, cpu_job.id])
    [request] = [r for r in submits if r["jobName"].startswith(f"gqa-{cpu_job.id}-")]
    assert request["jobQueue"] == "gqa-a10g-ondemand"
    assert {r["type"]: r["value"] for r in request["containerOverrides"]["resourceRequirements"]} == \
        {"VCPU": "2", "MEMORY": str(2 * 14 * 1024 // 4)}
    started = store.get(cpu_job.id)
    assert (started.state, started.assigned) == (JobState.STARTING, ())

    [another] = submit(spec(resources={"gpus": 0}))        # the GPU slots are all held: it starts all the same
    assert module.handler(WAKEUP, LambdaContext(function_name="gqa-dispatch"))["started"] == [another.id]
