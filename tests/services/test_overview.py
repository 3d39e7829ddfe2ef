"""OverviewService: one snapshot of the GPUs and their jobs, the queue's head
with its reasons, the teams against quota and budget, and the latest
transitions, over the real SQLite store."""

import pytest

from gqa.models.job import JobState as S
from gqa.ports import Inventory
from gqa.scheduling import Gpu
from gqa.services.overview import OverviewService
from gqa.services.quota import QuotaService

PRICE = 3.0


@pytest.fixture
def busy(queue):
    """4 GPUs (the last spot): vision runs a 3-GPU job for 30 min, a second waits for GPUs."""
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE, spot=i == 3) for i in range(4))))
    QuotaService(queue.store).set("vision", max_gpus=3, budget=50.0)
    train = queue.start(team="vision", name="train", resources={"gpus": 3}, limits={"wall_time": "2h"})
    queue.submit_one(team="vision", name="tune", resources={"gpus": 2}, limits={"wall_time": "1h"})
    queue.submit_one(team="nlp", name="embed", resources={"gpus": 2})
    queue.clock.advance(1800)
    return queue, train


def test_every_gpu_shows_its_pool_and_the_job_on_it(busy):
    queue, train = busy
    view = OverviewService(queue.store, queue.store, queue.clock).overview()
    assert [(g.index, g.type, g.spot) for g in view.gpus] == [(0, "a10g", False), (1, "a10g", False),
                                                              (2, "a10g", False), (3, "a10g", True)]
    holders = [g.job.id if g.job else None for g in view.gpus]
    assert sorted(h for h in holders if h) == [train.id] * 3 and view.free_gpus == 1
    job = next(g.job for g in view.gpus if g.job)
    assert (job.name, job.team, job.status, job.elapsed, job.time_left) == ("train", "vision", "running", 1800.0,
                                                                            5400.0)


def test_the_head_of_the_queue_says_why_each_job_waits(busy):
    queue, _ = busy
    view = OverviewService(queue.store, queue.store, queue.clock).overview()
    assert view.pending == 2
    # tune asks 1 hour, embed no wall time (ranked as the longest): tune first, though its team is at its cap
    assert [(e.position, e.name, e.reason) for e in view.head] == [
        (1, "tune", "team vision at 3 of 3 GPUs; needs 2 more"), (2, "embed", "needs 2 GPUs, 0 free")]
    assert len(OverviewService(queue.store, queue.store, queue.clock).overview(head=1).head) == 1


def test_teams_hold_gpus_against_their_cap_and_spend_against_their_budget(busy):
    queue, _ = busy
    view = OverviewService(queue.store, queue.store, queue.clock).overview()
    vision = next(t for t in view.teams if t.team == "vision")
    assert (vision.gpus_held, vision.max_gpus, vision.budget) == (3, 3, 50.0)
    assert vision.spend == pytest.approx(3 * PRICE * 0.5)      # 3 GPUs for half an hour so far


def test_events_are_the_latest_transitions_newest_first(busy):
    queue, train = busy
    queue.exit(train.id, 0)
    view = OverviewService(queue.store, queue.store, queue.clock).overview(events=3)
    assert len(view.events) == 3
    assert (view.events[0].job_id, view.events[0].state) == (train.id, S.SUCCEEDED)
    assert [e.at for e in view.events] == sorted((e.at for e in view.events), reverse=True)
    assert OverviewService(queue.store, queue.store, queue.clock).overview(events=0).events == []
