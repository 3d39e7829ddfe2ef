"""The dispatch function's container keeps what its passes plan from (the records
made of the live jobs, the estimated ones and the scheduler's index): a warm
pass brings them along by what changed, through the real handlers on moto, and
starts what a pass over the queue read afresh would start."""

from __future__ import annotations

import random
import time

import pytest

from gqa.adapters.aws import wakeups
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.models.job import JobState
from gqa.ports import Change
from gqa.scheduling import plan
from gqa.services.snapshot import read_snapshot
from tests.aws.fake_batch import CONTEXT, NAMES, WAKEUP_EVENT, deployment
from tests.aws.test_batch_time import submit
from tests.builders import spec

pytestmark = [pytest.mark.aws, pytest.mark.slow]
S = JobState


def test_warm_passes_keep_the_index_and_start_what_a_fresh_read_would():
    with deployment(now=time.time()) as world:
        wiring = world.dispatch.container()   # its cold start registers the pools
        for _ in range(60):   # 6 of them start on the 12 GPUs; their attempts wait STARTING for Batch
            submit(world, spot=True, resources={"gpus": 2})
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)   # the first pass builds the index
        kept = wiring.supervisor.kept
        index = kept.index
        assert kept.built == 1 and index is not None
        reader = DynamoDBStore(world.client("dynamodb"), NAMES)
        for _ in range(3):
            submit(world, spot=True, resources={"gpus": 1})
            world.clock.advance(60)
            fresh = plan(read_snapshot(reader, world.clock.now()), explain=False)
            started = world.dispatch.handler(WAKEUP_EVENT, CONTEXT)["started"]
            assert started == [s.job_id for s in fresh.starts]
        assert kept.built == 1 and kept.index is index            # brought along, never built again
        with wiring.store.pass_reads():
            pending, running = wiring.store.scheduling_view()
        assert {j.id for j in index.pending.values()} == {j.id for j in pending}
        assert set(index.running) == {r.id for r in running}


def test_warm_passes_fed_what_changed_start_what_a_fresh_read_would_and_list_as_a_whole_read():
    """Between passes another writer cancels, holds, releases, moves a job to another tier, ends attempts
    and submits: each warm pass is fed those jobs alone (listing.py), the supervisor's index takes
    them as named changes, and the container's listing is a whole read's, record for record, in order."""
    with deployment(now=time.time()) as world:
        wiring = world.dispatch.container()
        for n in range(4):   # 160 jobs: a pass's few changes are far fewer than a build is worth
            world.send(spec(spot=True, resources={"gpus": 1 + n % 2}, array="0-39"))
            world.admit.handler({"Records": world.receive()}, CONTEXT)
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        kept = wiring.supervisor.kept
        writer = DynamoDBStore(world.client("dynamodb"), NAMES)
        reader = DynamoDBStore(world.client("dynamodb"), NAMES)
        rng, hinted = random.Random(0), kept.hinted
        for step in range(6):
            now = world.clock.now()
            queued = sorted(j.id for j in writer.list([S.QUEUED]))
            held = [j.id for j in writer.list([S.HELD])]
            starting = [j.id for j in writer.list([S.STARTING])]
            changes = [Change(queued[0], S.QUEUED, S.CANCELLED, "cancelled", now, {"ended_at": now}),
                       Change(queued[1], S.QUEUED, S.HELD, "held", now),
                       Change(rng.choice(queued[2:]), S.QUEUED, None, "", now, {"tier": rng.choice((0, 2))})]
            changes += [Change(job_id, S.HELD, S.QUEUED, "released", now) for job_id in held[:1]]
            changes += [Change(job_id, S.STARTING, S.FAILED, "could not start", now,
                               {"ended_at": now, "assigned": ()}) for job_id in starting[:2]]
            for change in changes:
                writer.apply([change])
            submit(world, spot=True, resources={"gpus": 1})
            world.clock.advance(60)
            fresh = plan(read_snapshot(reader, world.clock.now()), explain=False)
            # the wake-ups the writers send: the admission's, and one naming the jobs changed here
            # (a job that leaves the live states leaves the index: only a wake-up tells of it)
            named = [c.job_id for c in changes]
            records = world.receive(url=world.urls.wakeup) + [
                {**WAKEUP_EVENT["Records"][0], "body": wakeups.body(named, writer.wakeup_items(named))}]
            started = world.dispatch.handler({"Records": records}, CONTEXT)["started"]
            assert started == [s.job_id for s in fresh.starts] and (step > 0 or started), step
            with wiring.store.pass_reads():
                listed = wiring.store.scheduling_view()
            assert listed == reader.scheduling_view(), step
        assert kept.built == 1 and kept.hinted > hinted   # the passes took the changes they were fed
        assert {j.tier for j in listed[0] + listed[1]} == {0, 1, 2}
