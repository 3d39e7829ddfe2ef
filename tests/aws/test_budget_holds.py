"""A team's whole queue crossing its budget, through the dispatch handler on
moto: a pass starts the other team's jobs first, then holds at most
HOLDS_PER_PASS of the team's tasks in one transaction and wakes the next pass
for the rest; holds DynamoDB throttles past the retries fail none of its
starts (services/holding.py)."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from botocore.exceptions import ClientError

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.errors import Retrying
from gqa.adapters.clock import SystemClock
from gqa.models.job import JobState
from gqa.scheduling import TeamPolicy
from gqa.services.submit import SubmitService
from tests.aws.fake_batch import CONTEXT, NAMES, deployment
from tests.aws.lambda_driver import SCHEDULE_EVENT
from tests.aws.moto_support import capture
from tests.builders import spec

pytestmark = pytest.mark.aws
S = JobState
TASKS = 250


@pytest.fixture
def world():
    """Team vision's 250 one-hour tasks queued, then its budget cut below one task's cap; team nlp's
    two jobs queued after them."""
    with mock.patch.object(Retrying, "delay", lambda self, retry: 0.0), deployment(1_000_000.0) as world:
        world.dispatch.container()
        store = DynamoDBStore(world.client("dynamodb"), NAMES)
        submit = SubmitService(store, SystemClock())
        world.vision = [j.id for j in submit.submit(spec(team="vision", array=f"0-{TASKS - 1}",
                                                         resources={"gpus": 1}, limits={"wall_time": "1h"}))]
        world.nlp = [j.id for _ in range(2) for j in submit.submit(spec(team="nlp", resources={"gpus": 1},
                                                                        limits={"wall_time": "1h"}))]
        store.set_team("vision", TeamPolicy(budget=0.1))
        world.store = store
        yield world


def states(world) -> dict[JobState, int]:
    out: dict[JobState, int] = {}
    for job in world.store.list(team="vision"):
        out[job.state] = out.get(job.state, 0) + 1
    return out


def holds_in(call: dict) -> int:
    return sum('"HELD"' in json.dumps(item) for item in call["TransactItems"])


def test_a_pass_starts_first_and_holds_a_paced_number_in_one_transaction(world):
    per_pass = world.dispatch.HOLDS_PER_PASS
    writes = capture(world.dispatch.container().store.client, "TransactWriteItems")

    answer = world.dispatch.handler(SCHEDULE_EVENT, CONTEXT)

    assert sorted(answer["started"]) == sorted(world.nlp)
    holding = [holds_in(w) for w in writes]
    first = next(i for i, n in enumerate(holding) if n)
    assert first > 0 and not any(holding[:first])              # the starts' claims and records came first
    assert [n for n in holding if n] == [per_pass]
    assert states(world) == {S.HELD: per_pass, S.QUEUED: TASKS - per_pass}
    assert world.wakeups_waiting()                              # the next pass holds the rest

    passes = 1
    while world.wakeups_waiting():
        assert world.dispatch.handler(world.wakeups(), CONTEXT) == {"started": []}
        passes += 1
    assert states(world) == {S.HELD: TASKS} and passes == -(-TASKS // per_pass)
    assert max(holds_in(w) for w in writes) == per_pass


def test_holds_dynamodb_throttles_past_the_retries_fail_none_of_the_starts(world):
    client = world.dispatch.container().store.client

    def throttle(params, model, **_):
        if '"HELD"' in json.dumps(params):
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, model.name)
    client.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", throttle)

    answer = world.dispatch.handler(SCHEDULE_EVENT, CONTEXT)

    assert sorted(answer["started"]) == sorted(world.nlp)
    assert {world.store.get(j).state for j in world.nlp} == {S.STARTING}
    assert states(world) == {S.QUEUED: TASKS}
    assert not world.wakeups_waiting()                          # the next tick, not a wake-up, tries again
