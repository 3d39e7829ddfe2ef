"""A late or redelivered Batch event of attempt N, applied while the dispatcher
launches attempt N+1: the job is STARTING (claimed), its launch not recorded
yet, and still counts N attempts. The event must change nothing: not settle
the job again (a second reclaim, the run charged twice, the new launch's
record refused and its Batch job untracked), nor mark it RUNNING with no Batch
job. EventBridge and Lambda redeliver for minutes; a launch may go unrecorded
for up to LAUNCH_GRACE."""

from __future__ import annotations

import pytest

from gqa.models.batch_events import BatchJobEvent
from gqa.models.job import JobRecord, JobState
from gqa.ports import Inventory
from gqa.scheduling import Gpu
from gqa.scheduling.budget import period_of
from gqa.services.reconcile import Action, ReconcileService
from tests.services.conftest import T0

S = JobState
RECLAIM = "Host EC2 (instance i-0abc123def456) terminated."
PRICE = 2.0
START, STOP = T0 + 10, T0 + 130


def event(job: JobRecord, status: str, *, at: float, attempt: int | None = None, token: str | None = None,
          reason: str | None = None) -> BatchJobEvent:
    return BatchJobEvent(token or job.proc_token or "", job.id, attempt or job.attempts, status, reason, None, None,
                         at, started_at=START)


@pytest.fixture
def batch(queue) -> ReconcileService:
    """The queue as on AWS: a launch waits for Batch, whose events come through reconcile."""
    queue.compute.launch_is_start = False
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(4))))
    return ReconcileService(queue.store, queue.rng)


def reclaimed_and_due(queue, batch) -> tuple[JobRecord, BatchJobEvent]:
    """Attempt 1 launched, run, reclaimed and settled; its retry due. The reclaim's event is returned
    for redelivery."""
    job = queue.submit_one(spot=True, retries={"on_error": 3})
    [launched] = queue.supervisor.dispatch()
    batch.handle(event(launched, "RUNNING", at=START))
    reclaim = event(launched, "FAILED", at=STOP, reason=RECLAIM)
    assert batch.handle(reclaim).action == Action.SETTLED
    queue.clock.advance(600)            # past the reclaim's backoff
    return queue.get(job.id), reclaim


@pytest.mark.parametrize("late", ["FAILED", "RUNNING"], ids=["duplicate-reclaim", "late-running"])
def test_an_event_of_the_previous_attempt_during_the_launch_changes_nothing(queue, batch, monkeypatch, late):
    job, reclaim = reclaimed_and_due(queue, batch)
    stray = reclaim if late == "FAILED" else event(job, "RUNNING", at=START, attempt=1, token=reclaim.batch_job_id)
    seen: list[tuple[Action, JobState, int]] = []
    launch = queue.compute.launch

    def launch_while_redelivered(record, gpus, attempt):
        # the claim is written and SubmitJob is in flight: the event comes again now
        result = batch.handle(stray)
        claimed = queue.get(record.id)
        seen.append((result.action, claimed.state, claimed.attempts))
        return launch(record, gpus, attempt)

    monkeypatch.setattr(queue.compute, "launch", launch_while_redelivered)
    [started] = queue.supervisor.tick()

    assert seen == [(Action.IGNORED, S.STARTING, 1)]
    # the launch of attempt 2 is recorded; the one reclaim is counted and charged once
    assert (started.id, started.state, started.attempts, started.proc_token) == (job.id, S.STARTING, 2, "token-1002")
    assert (started.reclaims, started.gpu_seconds) == (1, STOP - START)
    assert queue.store.spend(period_of(STOP)) == {job.team: pytest.approx(PRICE * (STOP - START) / 3600)}
    assert len(queue.compute.launches) == 2
    # attempt 2's own events are applied
    assert batch.handle(event(started, "RUNNING", at=T0 + 700)).action == Action.RUNNING
    assert queue.get(job.id).state == S.RUNNING
    assert queue.supervisor.tick() == [] and len(queue.compute.launches) == 2


def test_the_event_of_the_attempt_being_launched_still_records_its_launch(queue, batch, monkeypatch):
    job, _ = reclaimed_and_due(queue, batch)
    launch = queue.compute.launch

    def launch_then_event(record, gpus, attempt):
        launched = launch(record, gpus, attempt)
        # Batch starts it before the dispatcher records the launch
        assert batch.handle(event(record, "RUNNING", at=T0 + 700, attempt=attempt,
                                  token=launched.token)).action == Action.RUNNING
        return launched

    monkeypatch.setattr(queue.compute, "launch", launch_then_event)
    queue.supervisor.tick()

    running = queue.get(job.id)
    assert (running.state, running.attempts, running.proc_token) == (S.RUNNING, 2, "token-1002")
