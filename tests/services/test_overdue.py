"""Attempts whose events were lost: which are asked about (overdue, news_in:
pure, table-driven), and OverdueCheck on the SQLite store with a stand-in for
Batch's answers: an ended attempt settles as its event would have, one the
backend forgot goes back to the queue, a late real event changes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gqa.models.batch_events import BatchJobEvent
from gqa.models.errors import BackendUnavailable
from gqa.models.job import JobRecord, JobState, Transition
from gqa.ports import Change, Inventory
from gqa.scheduling import Gpu
from gqa.scheduling.budget import period_of
from gqa.services.overdue import QUIET, OverdueCheck, news_in, overdue
from gqa.services.reconcile import Action, ReconcileService
from tests.builders import job_record
from tests.services.conftest import T0

S = JobState
NOW = 10_000.0
HOUR = 3600.0
PRICE = 2.0
ESSENTIAL = "Essential container in task exited"


def record(job_id: str = "1", state: S = S.RUNNING, changed: float = NOW - QUIET, token: str | None = "b-1",
           started_at: float | None = None) -> JobRecord:
    return job_record(id=job_id, state=state, proc_token=token, attempts=1,
                      started_at=changed if started_at is None and state == S.RUNNING else started_at,
                      history=(Transition(state, changed, ""),))


@pytest.mark.parametrize("job, asked, due", [
    (record(), {}, True),                                           # quiet for QUIET: asked about
    (record(changed=NOW - QUIET + 1), {}, False),                   # news a moment ago: not yet
    (record(state=S.STARTING), {}, True),                           # STARTING with a Batch job (an adopted launch)
    (record(state=S.STARTING, token=None), {}, False),              # STARTING, launch unrecorded: the repair's
    (record(state=S.RETRY_WAIT), {}, False),                        # no attempt open
    (record(state=S.QUEUED, token=None), {}, False),
    (record(changed=NOW - 5 * QUIET), {"1": NOW - QUIET + 1}, False),  # asked a moment ago
    (record(changed=NOW - 5 * QUIET), {"1": NOW - QUIET}, True),       # asked QUIET ago: again
    (job_record(state=S.RUNNING, proc_token="b-1", attempts=1), {}, True),   # no history read: asked
], ids=["quiet", "recent-news", "starting-with-batch-job", "starting-unrecorded", "retry-wait", "queued",
        "asked-lately", "asked-long-ago", "no-history"])
def test_which_attempts_are_overdue(job, asked, due):
    assert overdue([job], NOW, asked) == ([job] if due else [])


def test_the_longest_unasked_come_first_and_a_pass_asks_about_at_most_limit():
    jobs = [record("1", changed=NOW - 4 * HOUR), record("2", changed=NOW - HOUR), record("3", changed=NOW - 2 * HOUR),
            record("4", changed=NOW - 9 * HOUR)]
    asked = {"4": NOW - 2 * QUIET, "2": NOW - 3 * QUIET}           # 1 and 3 never asked about
    assert [j.id for j in overdue(jobs, NOW, asked, limit=10)] == ["1", "3", "2", "4"]
    assert [j.id for j in overdue(jobs, NOW, asked, limit=2)] == ["1", "3"]


def answer(job: JobRecord, status: str, *, started: float | None = None, stopped: float | None = None,
           reason: str | None = None, code: int | None = None) -> BatchJobEvent:
    """What DescribeJobs says of the job's attempt, read as the event Batch would send."""
    return BatchJobEvent(job.proc_token or "", job.id, job.attempts, status, reason, code, None,
                         stopped or started or NOW, started_at=started)


@pytest.mark.parametrize("state, status, started, news", [
    (S.RUNNING, "SUCCEEDED", NOW - 100, True),
    (S.RUNNING, "FAILED", None, True),
    (S.STARTING, "FAILED", None, True),
    (S.STARTING, "RUNNING", NOW - 100, True),         # its RUNNING event was lost
    (S.RUNNING, "RUNNING", NOW - QUIET, False),       # runs as recorded: nothing to write
    (S.RUNNING, "RUNNING", NOW - QUIET + HOUR, True), # started an hour after its launch was recorded
    (S.RUNNING, "RUNNABLE", None, False),             # still waiting for an instance
    (S.STARTING, "RUNNABLE", None, False),
])
def test_news_in_an_answer(state, status, started, news):
    job = record(state=state, started_at=NOW - QUIET if state == S.RUNNING else None)
    assert news_in(job, answer(job, status, started=started)) == news


# -- OverdueCheck on a queue ------------------------------------------------------------------------

@dataclass
class BatchAnswers:
    """The AttemptStatus port: what Batch says, by job id (absent: Batch does not know it)."""

    said: dict[str, BatchJobEvent] = field(default_factory=dict)
    asked: list[list[str]] = field(default_factory=list)
    down: bool = False

    def attempts_now(self, jobs):
        jobs = list(jobs)
        if self.down:
            raise BackendUnavailable("Batch: throttled")
        self.asked.append([j.id for j in jobs])
        return {j.id: self.said.get(j.id) for j in jobs}


@pytest.fixture
def batch() -> BatchAnswers:
    return BatchAnswers()


@pytest.fixture
def check(queue, batch) -> OverdueCheck:
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(4))))
    return OverdueCheck(queue.store, batch, ReconcileService(queue.store, queue.rng), queue.clock)


def running(queue, **spec) -> JobRecord:
    """A job whose attempt 1 Batch accepted, recorded as the AWS dispatcher records it (RUNNING from T0)."""
    job = queue.submit_one(**spec)
    queue.store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", T0, {"assigned": (0,)})])
    [job] = queue.store.apply([Change(job.id, S.STARTING, S.RUNNING, "attempt 1 started", T0,
                                      {"attempts": 1, "pid": 0, "proc_token": f"batch-{job.id}-1", "started_at": T0})])
    return job


def test_an_attempt_whose_end_was_lost_is_settled_as_its_event_would_have_been(queue, batch, check):
    job = running(queue)
    end = answer(job, "SUCCEEDED", started=T0 + 60, stopped=T0 + 660, reason=ESSENTIAL, code=0)
    batch.said[job.id] = end

    queue.clock.advance(QUIET - 1)
    assert check.run().asked == [] and batch.asked == []       # quiet, but not for long enough: no call
    queue.clock.advance(1)
    checked = check.run()

    assert (checked.asked, checked.settled) == ([job.id], [job.id])
    done = queue.get(job.id)
    assert (done.state, done.reason, done.gpu_seconds) == (S.SUCCEEDED, "exit code 0", 600.0)
    assert queue.store.spend(period_of(T0)) == {job.team: pytest.approx(PRICE * 600 / HOUR)}
    # the real event, late: nothing changes
    assert ReconcileService(queue.store, queue.rng).handle(end).action == Action.IGNORED
    assert queue.get(job.id) == done


def test_an_attempt_batch_forgot_goes_back_to_the_queue_uncharged_and_not_as_an_error(queue, batch, check):
    job = running(queue, retries={"on_error": 0})
    queue.clock.advance(QUIET)

    checked = check.run()

    assert checked.lost == [job.id]
    lost = queue.get(job.id)
    assert (lost.state, lost.error_retries, lost.interruptions, lost.gpu_seconds) == (S.RETRY_WAIT, 0, 1, 0.0)
    assert lost.reason.startswith(f"the compute backend lost track of it (Batch no longer knows Batch job "
                                  f"batch-{job.id}-1; its run time is unknown and not charged); not counted as "
                                  "an error, resumes from its last checkpoint")
    assert queue.store.spend(period_of(T0)) == {}


def test_a_running_attempt_is_asked_about_once_per_quiet_period(queue, batch, check):
    job = running(queue)
    batch.said[job.id] = answer(job, "RUNNING", started=T0 + 5)
    queue.clock.advance(QUIET)
    assert check.run().asked == [job.id]
    queue.clock.advance(QUIET - 1)
    assert check.run().asked == []
    queue.clock.advance(1)
    assert check.run().asked == [job.id]
    assert batch.asked == [[job.id], [job.id]]
    assert queue.get(job.id).state == S.RUNNING              # still running: nothing written


def test_a_pass_asks_about_at_most_limit_attempts_and_the_next_takes_the_others(queue, batch, check):
    jobs = [running(queue) for _ in range(3)]
    check.limit = 2
    queue.clock.advance(QUIET)
    check.run()
    check.run()
    assert [sorted(a) for a in batch.asked] == [[jobs[0].id, jobs[1].id], [jobs[2].id]]


def test_a_start_whose_event_was_lost_is_recorded(queue, batch, check):
    job = queue.submit_one()
    # an adopted launch: STARTING with its Batch job, as a RUNNING event before the dispatcher's record leaves it
    [job] = queue.store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", T0,
                                      {"assigned": (0,), "attempts": 1, "proc_token": f"batch-{job.id}-1"})])
    batch.said[job.id] = answer(job, "RUNNING", started=T0 + 30)
    queue.clock.advance(QUIET)

    assert check.run().started == [job.id]
    assert (queue.get(job.id).state, queue.get(job.id).started_at) == (S.RUNNING, T0 + 30)


def test_when_batch_cannot_be_asked_nothing_changes_and_the_next_pass_asks(queue, batch, check):
    job = running(queue)
    queue.clock.advance(QUIET)
    batch.down = True
    assert check.run().asked == []
    batch.down = False
    batch.said[job.id] = answer(job, "FAILED", started=T0 + 5, stopped=T0 + 65, reason=ESSENTIAL, code=1)
    assert check.run().settled == [job.id]
    assert queue.get(job.id).state == S.FAILED


def test_a_job_that_moved_since_it_was_read_is_left_as_it_is(queue, batch, check):
    job = running(queue)
    queue.clock.advance(QUIET)
    # Batch forgot it, but a cancel settled it between the check's read and its write
    original = check.store.list

    def read_then_cancel(*args, **kwargs):
        jobs = original(*args, **kwargs)
        queue.store.apply([Change(job.id, S.RUNNING, S.CANCELLED, "cancelled by user", queue.clock.now(),
                                  {"assigned": ()})])
        return jobs

    check.store = type("Racing", (), {"list": staticmethod(read_then_cancel)})()
    checked = check.run()
    assert checked.asked == [job.id] and checked.lost == []
    assert queue.get(job.id).state == S.CANCELLED


def test_a_launched_attempt_whose_every_event_was_lost_is_asked_about_while_it_waits(queue, batch, check):
    """Launched and STARTING (a launch is not a start on Batch): asked about every
    QUIET while Batch keeps it queued, then recorded and settled from Batch's answer."""
    queue.compute.launch_is_start = False
    queue.submit_one()
    [job] = queue.supervisor.dispatch()
    assert (job.state, job.proc_token) == (S.STARTING, "token-1001")
    batch.said[job.id] = answer(job, "RUNNABLE")
    for _ in range(3):                               # hours waiting for capacity: asked, nothing written
        queue.clock.advance(QUIET)
        assert check.run().asked == [job.id]
    assert queue.get(job.id) == job
    started, stopped = T0 + 3 * QUIET + 10, T0 + 3 * QUIET + 610
    batch.said[job.id] = answer(job, "SUCCEEDED", started=started, stopped=stopped, reason=ESSENTIAL, code=0)
    queue.clock.advance(QUIET)

    assert check.run().settled == [job.id]
    done = queue.get(job.id)
    assert [t.state for t in done.history][-2:] == [S.RUNNING, S.SUCCEEDED]
    assert (done.started_at, done.gpu_seconds) == (started, pytest.approx(600.0))   # charged what Batch ran
