"""Dependencies on AWS through the real handlers on moto: POST /jobs -> admit ->
dispatch -> (FakeBatch) events -> reconcile. A chain of afterok jobs runs in
order; a failed parent ends its afterok child CANCELLED with the reason."""

from __future__ import annotations

import time

import pytest

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.models.errors import SpecError
from gqa.models.job import JobState
from tests.aws.fake_batch import CONTEXT, NAMES, WAKEUP_EVENT, Deployment, FakeBatch, deployment
from tests.builders import spec

pytestmark = [pytest.mark.aws, pytest.mark.slow]
S = JobState


def submit(world: Deployment, **overrides) -> str:
    job = world.send(spec(resources={"gpus": 1}, **overrides)).first
    assert world.admit.handler({"Records": world.receive()}, CONTEXT) == {"batchItemFailures": []}
    return job.id


def run_pass(world: Deployment, batch: FakeBatch, exit_codes: dict[str, int]) -> list[str]:
    """One dispatch pass; each job it launches runs and exits with its code (0 unless given)."""
    world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
    launched = batch.take_new()
    now = world.clock.now()
    for job in launched:
        code = exit_codes.get(job.job_id, 0)
        world.reconcile.handler(FakeBatch.event(job, "RUNNING", at=now + 1, started=now + 1), CONTEXT)
        world.reconcile.handler(FakeBatch.event(job, "SUCCEEDED" if code == 0 else "FAILED", at=now + 30,
                                                started=now + 1, exit_code=code), CONTEXT)
    world.clock.advance(60)
    return [job.job_id for job in launched]


def test_an_afterok_chain_runs_in_order():
    with deployment(now=time.time()) as world:
        world.dispatch.container()   # the cold start registers the GPUs admission checks
        batch = FakeBatch(world.dispatch.container().compute.client)
        prep = submit(world, name="prep")
        train = submit(world, name="train", after=f"afterok:{prep}")
        report = submit(world, name="report", after=f"afterany:{train}")
        store = DynamoDBStore(world.client("dynamodb"), NAMES)
        assert store.get(train).dependency == f"afterok:{prep}"

        order = [run_pass(world, batch, {}) for _ in range(4)]

        assert order == [[prep], [train], [report], []]
        assert [store.get(i).state for i in (prep, train, report)] == [S.SUCCEEDED] * 3


def test_a_failed_parent_ends_its_afterok_child_cancelled_with_the_reason():
    with deployment(now=time.time()) as world:
        world.dispatch.container()
        batch = FakeBatch(world.dispatch.container().compute.client)
        parent = submit(world, name="prep")
        child = submit(world, name="train", after=f"afterok:{parent}")
        cleanup = submit(world, name="cleanup", after=f"afternotok:{parent}")

        assert run_pass(world, batch, {parent: 1}) == [parent]
        assert run_pass(world, batch, {}) == [cleanup]

        store = DynamoDBStore(world.client("dynamodb"), NAMES)
        assert store.get(parent).state == S.FAILED
        cancelled = store.get(child)
        assert (cancelled.state, cancelled.reason) == (
            S.CANCELLED, f"dependency can never be met: job {parent} failed (afterok)")
        assert run_pass(world, batch, {}) == []
        assert [t.state for t in store.get(child).history].count(S.CANCELLED) == 1


def test_a_dependency_on_a_job_that_does_not_exist_is_refused_by_the_api():
    with deployment(now=time.time()) as world:
        world.dispatch.container()
        with pytest.raises(SpecError, match="job 99 does not exist"):
            world.send(spec(after="afterok:99"))
        assert world.receive() == []
