"""What AWS bills is what gqa records, through the real handlers on moto: an
attempt is charged from Batch's startedAt to its stoppedAt, however long it
waited in Batch's queue after the dispatcher launched it, and nothing if its
container never started."""

from __future__ import annotations

import time

import pytest

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.models.job import JobState
from gqa.scheduling.budget import period_of
from gqa.services.cost import CostService
from tests.aws.fake_batch import CONTEXT, NAMES, POOLS, WAKEUP_EVENT, FakeBatch, deployment
from tests.builders import spec

pytestmark = pytest.mark.aws
S = JobState
HOUR = 3600.0
ON_DEMAND = POOLS[1].price      # per GPU-hour; the jobs below ask for on-demand GPUs
PULL = "CannotPullContainerError: pull access denied for 123.dkr.ecr.us-east-1.amazonaws.com/train"


def test_attempts_are_charged_from_batchs_start_to_its_stop_and_nothing_if_never_started():
    with deployment(now=time.time()) as world:
        batch = FakeBatch(world.dispatch.container().compute.client)
        for team in ("waits", "unpulled"):   # two teams, to tell their charges apart: an admin submits for both
            world.send(spec(name=team, team=team, resources={"gpus": 2}, limits={"wall_time": "2h"}), owner="root-ops")
        assert world.admit.handler({"Records": world.receive()}, CONTEXT) == {"batchItemFailures": []}
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        launched = {s.job_id: s for s in batch.take_new()}
        assert len(launched) == 2
        store = DynamoDBStore(world.client("dynamodb"), NAMES)
        waits, unpulled = (next(j for j in store.list() if j.team == t) for t in ("waits", "unpulled"))
        launch = world.clock.now()

        # an hour in Batch's queue before an instance is free, then 10 minutes of running
        world.clock.advance(HOUR)
        world.reconcile.handler(FakeBatch.event(launched[waits.id], "RUNNING", at=launch + HOUR,
                                                started=launch + HOUR), CONTEXT)
        # meanwhile the other's image cannot be pulled: its container never started
        world.reconcile.handler(FakeBatch.event(launched[unpulled.id], "FAILED", at=launch + HOUR, reason=PULL),
                                CONTEXT)
        # while it runs, its live cost counts from Batch's start, not from the launch an hour before
        world.clock.advance(60)
        live = CostService(store, world.clock).report(team="waits").teams[0]
        assert live.running == pytest.approx(2 * ON_DEMAND * 60 / HOUR, rel=1e-3)   # Batch's times are in ms
        assert store.get(waits.id).started_at == pytest.approx(launch + HOUR, abs=1e-3)

        world.clock.advance(540)
        world.reconcile.handler(FakeBatch.event(launched[waits.id], "SUCCEEDED", at=launch + HOUR + 600,
                                                started=launch + HOUR, exit_code=0), CONTEXT)

        done, failed = store.get(waits.id), store.get(unpulled.id)
        assert (done.state, done.gpu_seconds) == (S.SUCCEEDED, pytest.approx(2 * 600, abs=1e-2))
        assert (failed.state, failed.gpu_seconds) == (S.RETRY_WAIT, 0.0)
        assert "the infrastructure failed before it ran" in failed.reason
        assert store.spend(period_of(launch)) == {"waits": pytest.approx(2 * ON_DEMAND * 600 / HOUR, rel=1e-4)}
