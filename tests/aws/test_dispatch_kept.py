"""The dispatch function's container keeps what its passes plan from (the records
made of the live jobs, the estimated ones and the scheduler's index): a warm
pass brings them along by what changed, through the real handlers on moto, and
starts what a pass over the queue read afresh would start."""

from __future__ import annotations

import time

import pytest

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.scheduling import plan
from gqa.services.snapshot import read_snapshot
from tests.aws.fake_batch import CONTEXT, NAMES, WAKEUP_EVENT, deployment
from tests.aws.test_batch_time import submit

pytestmark = [pytest.mark.aws, pytest.mark.slow]


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
