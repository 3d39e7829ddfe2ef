"""Which Batch events concern a job (services/reconcile.judge): an event of the
attempt the job is on, while that attempt is open, or of the attempt a claimed
job is being launched for (adopted: it records the launch). A claimed job whose
launch is not recorded yet still counts the attempt that ended before the claim:
that attempt's late or redelivered events are stale."""

from __future__ import annotations

import pytest

from gqa.models.batch_events import BatchJobEvent
from gqa.models.job import JobState
from gqa.services.reconcile import judge
from tests.builders import job_record

S = JobState
CLAIMED = "the job was claimed for attempt {next}, whose launch is not recorded yet"


def job(state: JobState, attempts: int, token: str | None):
    return job_record(state=state, attempts=attempts, proc_token=token, pid=None if token is None else 0)


def event(attempt: int, batch_id: str, status: str = "FAILED") -> BatchJobEvent:
    return BatchJobEvent(batch_id, "1", attempt, status, None, None, None, 100.0)


@pytest.mark.parametrize("status", ["RUNNING", "SUCCEEDED", "FAILED"])
@pytest.mark.parametrize("record, attempt, batch_id, adopted, why", [
    # launched, waiting for Batch or running: its own attempt's events concern it
    (job(S.STARTING, 1, "b-1"), 1, "b-1", False, ""),
    (job(S.RUNNING, 1, "b-1"), 1, "b-1", False, ""),
    (job(S.RUNNING, 3, "b-3"), 3, "b-3", False, ""),
    # ... and no other attempt's, nor another Batch job's
    (job(S.STARTING, 1, "b-1"), 1, "b-lost", False, "event of Batch job b-lost"),
    (job(S.RUNNING, 2, "b-2"), 1, "b-1", False, "event of attempt 1; the job is on attempt 2"),
    (job(S.RUNNING, 2, "b-2"), 3, "b-3", False, "event of attempt 3; the job is on attempt 2"),
    # claimed, its launch not recorded: the attempt being launched is adopted
    (job(S.STARTING, 0, None), 1, "b-1", True, ""),
    (job(S.STARTING, 1, None), 2, "b-2", True, ""),
    # ... and the attempt that ended before the claim is over, whatever comes late
    (job(S.STARTING, 1, None), 1, "b-1", False, CLAIMED.format(next=2)),
    (job(S.STARTING, 2, None), 1, "b-1", False, CLAIMED.format(next=3)),
    (job(S.STARTING, 1, None), 3, "b-3", False, CLAIMED.format(next=2)),
    # settled, back in the queue, or ended
    (job(S.RETRY_WAIT, 1, "b-1"), 1, "b-1", False, "attempt 1 already settled (job is RETRY_WAIT)"),
    (job(S.QUEUED, 1, "b-1"), 1, "b-1", False, "attempt 1 already settled (job is QUEUED)"),
    (job(S.SUCCEEDED, 1, "b-1"), 1, "b-1", False, "job already ended (SUCCEEDED)"),
], ids=["launched", "running", "running-third", "other-batch-job", "earlier-attempt", "later-attempt",
        "claimed-first-adopted", "claimed-next-adopted", "claimed-previous-attempt", "claimed-older-attempt",
        "claimed-beyond-next", "settled", "requeued", "ended"])
def test_which_events_concern_the_job(record, attempt, batch_id, adopted, why, status):
    found, adopt, stale = judge(record, event(attempt, batch_id, status))

    assert (adopt is not None, stale == "") == (adopted, why == "")
    assert why in stale
    if adopted:   # the launch recorded from the event, as the dispatcher would have
        assert (found.attempts, found.proc_token) == (attempt, batch_id)
        assert (adopt.expect, adopt.to) == (S.STARTING, None)
    else:
        assert found is record
