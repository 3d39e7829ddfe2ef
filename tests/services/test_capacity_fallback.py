"""Capacity failures in a row through reconcile and dispatch (SQLite store,
fake compute): a spot job moves to on-demand GPUs at the cap, then ends
FAILED at the cap there, with the numbers in its reason."""

from __future__ import annotations

from gqa.models.batch_events import BatchJobEvent
from gqa.models.job import JobState
from gqa.ports import Inventory
from gqa.scheduling import Gpu
from gqa.services.reconcile import ReconcileService

S = JobState
PULL = "CannotPullContainerError: failed to resolve ref train:latest"
POOLS = Inventory(gpus=(Gpu(0, "a10g", 0.4, spot=True), Gpu(1, "a10g", 1.2)))


def fail_to_place(queue, reconcile: ReconcileService, job_id: str) -> tuple[bool, JobState]:
    """Dispatch the job, and have Batch fail it before its container ran; (was it on spot, its state)."""
    queue.clock.advance(3600)                  # past any backoff
    queue.supervisor.promote_retries()
    [started] = queue.supervisor.dispatch()
    assert started.id == job_id
    queue.clock.advance(120)
    reconcile.handle(BatchJobEvent(started.proc_token, job_id, started.attempts, "FAILED", "Task failed to start",
                                   None, PULL, queue.clock.now()))
    return POOLS.gpus[started.assigned[0]].spot, queue.state(job_id)


def test_a_spot_job_falls_back_to_on_demand_then_fails_with_the_numbers(queue):
    queue.store.set_inventory(POOLS)
    reconcile = ReconcileService(queue.store, queue.rng)
    job = queue.submit_one(spot=True, retries={"on_capacity": 2}, resources={"gpu_type": "a10g"})

    tries = [fail_to_place(queue, reconcile, job.id) for _ in range(6)]

    assert tries == [(True, S.RETRY_WAIT)] * 3 + [(False, S.RETRY_WAIT)] * 2 + [(False, S.FAILED)]
    ended = queue.get(job.id)
    assert (ended.spot, ended.capacity_failures, ended.error_retries, ended.attempts) == (False, 3, 0, 6)
    assert ended.reason == f"no capacity for 1 x a10g after 3 attempts over 2h06m (last: {PULL})"
    fallback = [t.reason for t in ended.history if "falls back to on demand" in t.reason]
    assert len(fallback) == 1 and fallback[0].startswith("no capacity for 1 x a10g spot after 3 attempts over 2h06m")
