"""Batch's view of time, through the real handlers on moto: a submitted Batch
job may wait RUNNABLE for an instance for hours. Until Batch's RUNNING event
the job is STARTING: no wall time used (so never timed out for a wait), no
live spend, no fair-share usage, and `gqa status` and `gqa queue` say what it
waits for, in minutes; the scheduled passes ask Batch about it and change
nothing while it waits. The queue's capacity wait (compute.capacity_wait)
ends such a wait as a capacity retry, and repeated ones move a spot job to
on demand: never the job's own failure, never charged."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.models.batch_events import CAPACITY_WAIT_REASON, TIME_LIMIT_CANCELLED
from gqa.models.job import JobRecord, JobState
from gqa.scheduling.budget import period_of
from gqa.services.cost import CostService
from tests.aws.api_gateway import rest_event, user_arn
from tests.aws.fake_batch import API_CONTEXT, CONTEXT, NAMES, POOLS, WAKEUP_EVENT, Deployment, FakeBatch, deployment
from tests.aws.lambda_driver import SCHEDULE_EVENT
from tests.aws.test_lost_events import BatchTruth
from tests.builders import spec

pytestmark = pytest.mark.aws
S = JobState
HOUR = 3600.0
CAPACITY_WAIT = TIME_LIMIT_CANCELLED + CAPACITY_WAIT_REASON     # what the queue's time limit action says


class Batch:
    """What the dispatcher asked of Batch (SubmitJob, TerminateJob) and, for
    DescribeJobs, what Batch holds: every job RUNNABLE until told otherwise."""

    def __init__(self, world: Deployment):
        client = world.dispatch.container().compute.client
        self.fake = FakeBatch(client)
        self.truth = BatchTruth(client, world.clock)
        self.terminated: list[str] = []
        client.meta.events.register("before-parameter-build.batch.TerminateJob",
                                    lambda params, **_: self.terminated.append(params["jobId"]))

    def launch(self, world: Deployment) -> list:
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        new = self.fake.take_new()
        for job in new:
            self.truth.learn(job, [])
        return new


def submit(world: Deployment, **overrides: Any) -> str:
    [job_id] = world.send(spec(**overrides)).ids
    assert world.admit.handler({"Records": world.receive()}, CONTEXT) == {"batchItemFailures": []}
    return job_id


def api_get(world: Deployment, path: str) -> dict[str, Any]:
    answer = world.api.handler(rest_event("GET", path, arn=user_arn("alice")), API_CONTEXT)
    assert answer["statusCode"] == 200, answer
    return json.loads(answer["body"])


def test_a_one_hour_job_batch_never_starts_is_not_timed_out_for_its_wait():
    """Once recorded RUNNING at SubmitJob, such a job ended TIMED_OUT with 0 GPU-seconds."""
    with deployment(now=time.time()) as world:
        batch = Batch(world)
        job_id = submit(world, name="never", resources={"gpus": 1}, limits={"wall_time": "1h"})
        [submitted] = batch.launch(world)
        world.clock.advance(2 * HOUR)
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)       # the pass that enforces wall time
        assert batch.terminated == []

        world.clock.advance(2 * HOUR)                       # the queue's capacity wait runs out
        world.reconcile.handler(FakeBatch.event(submitted, "FAILED", at=world.clock.now(), reason=CAPACITY_WAIT),
                                CONTEXT)
        job = DynamoDBStore(world.client("dynamodb"), NAMES).get(job_id)
        assert (job.state, job.gpu_seconds, job.error_retries, job.capacity_failures) == (S.RETRY_WAIT, 0.0, 0, 1)
        assert job.reason.startswith(f"the infrastructure failed before it ran ({CAPACITY_WAIT})")


def test_a_job_batch_has_not_started_uses_no_wall_time_costs_nothing_and_says_why():
    with deployment(now=time.time()) as world:
        batch = Batch(world)
        job_id = submit(world, name="waits", resources={"gpus": 1}, limits={"wall_time": "1h"})
        [submitted] = batch.launch(world)
        store = DynamoDBStore(world.client("dynamodb"), NAMES)
        launched = store.get(job_id)
        assert (launched.state, launched.attempts, launched.proc_token) == (S.STARTING, 1, submitted.batch_job_id)
        launch = world.clock.now()

        # three hours RUNNABLE: the scheduled passes ask Batch about it and leave it as it is
        for _ in range(18):
            world.clock.advance(600)
            world.dispatch.handler(SCHEDULE_EVENT, CONTEXT)
        waiting = store.get(job_id)
        assert (waiting.state, waiting.proc_token, batch.terminated) == (S.STARTING, submitted.batch_job_id, [])
        assert batch.truth.calls > 0
        assert CostService(store, world.clock).report().teams == []                  # nothing spent, live or settled
        assert store.usage(world.clock.now(), store.policy().half_life) == {}
        why = f"waiting for on-demand capacity in pool a10g-ondemand, 3 h 00 min (attempt 1 launched as " \
              f"{submitted.batch_job_id})"
        [seen] = api_get(world, f"/jobs/{job_id}")["jobs"]
        assert seen["reason"] == why
        assert [j["reason"] for j in api_get(world, "/queue")["running"]] == [why]

        # Batch starts it: from then its hour counts, and the pass after it stops it
        started = launch + 3 * HOUR
        world.reconcile.handler(FakeBatch.event(submitted, "RUNNING", at=started, started=started), CONTEXT)
        assert (store.get(job_id).state, store.get(job_id).started_at) == (S.RUNNING, pytest.approx(started))
        world.clock.advance(HOUR - 60)
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        assert batch.terminated == []
        world.clock.advance(120)
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        assert batch.terminated == [submitted.batch_job_id]
        world.reconcile.handler(FakeBatch.event(submitted, "FAILED", at=started + HOUR + 60, started=started,
                                                reason="Essential container in task exited", exit_code=143), CONTEXT)
        done = store.get(job_id)
        assert (done.state, done.gpu_seconds) == (S.TIMED_OUT, pytest.approx(HOUR + 60, abs=0.01))


def test_waits_past_the_capacity_wait_are_capacity_retries_then_on_demand_never_charged():
    with deployment(now=time.time()) as world:
        batch = Batch(world)
        job_id = submit(world, name="spot", spot=True, resources={"gpus": 1}, retries={"on_capacity": 1})
        store = DynamoDBStore(world.client("dynamodb"), NAMES)
        queues = []
        for _ in range(3):
            [submitted] = batch.launch(world)
            queues.append(submitted.request["jobQueue"])
            world.clock.advance(4 * HOUR)                   # compute.capacity_wait: the queue cancels it
            world.reconcile.handler(FakeBatch.event(submitted, "FAILED", at=world.clock.now(),
                                                    reason=CAPACITY_WAIT), CONTEXT)
            job = store.get(job_id)
            assert job.state == S.RETRY_WAIT, job.reason
            world.clock.advance(HOUR)                        # past its backoff

        assert queues == [POOLS[0].queue_name, POOLS[0].queue_name, POOLS[1].queue_name]
        job: JobRecord = store.get(job_id)
        assert (job.spot, job.error_retries, job.gpu_seconds) == (False, 0, 0.0)
        assert S.RUNNING not in [t.state for t in job.history] and S.FAILED not in [t.state for t in job.history]
        assert any("falls back to on demand" in t.reason for t in job.history)
        assert store.spend(period_of(world.clock.now())) == {}
