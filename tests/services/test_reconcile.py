"""ReconcileService: Batch job state events become job outcomes, through the
same exit rules, usage and cost as the supervisor; duplicates, reordering and
stale events change nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gqa.models.batch_events import BatchJobEvent
from gqa.models.errors import BackendUnavailable, NotFound
from gqa.models.job import JobRecord, JobState
from gqa.ports import Change, Inventory
from gqa.scheduling import Gpu
from gqa.scheduling.budget import period_of
from gqa.services.reconcile import Action, ReconcileService
from tests.services.conftest import T0
from tests.services.fakes import CountingWaker

S = JobState
GIB = 1024 ** 3
RECLAIM = "Host EC2 (instance i-0abc123def456) terminated."
ESSENTIAL = "Essential container in task exited"
OOM = "OutOfMemoryError: Container killed due to memory usage"
PULL = "CannotPullContainerError: failed to resolve ref 123.dkr.ecr.us-east-1.amazonaws.com/train:latest"
START, STOP = T0 + 10, T0 + 110       # when Batch says the container started and stopped


@pytest.fixture
def reconcile(queue) -> ReconcileService:
    return ReconcileService(queue.store, queue.rng)


def launched(queue, **spec) -> JobRecord:
    """A job whose attempt 1 was submitted to Batch and is waiting to run:
    STARTING, with its attempt and Batch job id recorded (as a dispatcher on AWS leaves it)."""
    job = queue.submit_one(**spec)
    [job] = queue.store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", T0,
                                      {"assigned": (0,), "attempts": 1, "proc_token": f"batch-{job.id}-1"})])
    return job


def event(job: JobRecord, status: str, *, at: float = STOP, started: float | None = START, reason: str | None = None,
          code: int | None = None, container: str | None = None, attempt: int | None = None,
          batch_id: str | None = None, memory: int | None = None) -> BatchJobEvent:
    return BatchJobEvent(batch_id or job.proc_token or "", job.id, job.attempts if attempt is None else attempt,
                         status, reason, code, container, at, started_at=started, memory=memory)


# the events of one attempt, by name, as Batch would send them
EVENTS = {
    "RUNNING": dict(status="RUNNING", at=START),
    "SUCCEEDED": dict(status="SUCCEEDED", code=0, reason=ESSENTIAL),
    "EXIT_1": dict(status="FAILED", code=1, reason=ESSENTIAL),
    "RECLAIMED": dict(status="FAILED", reason=RECLAIM),
    "OOM": dict(status="FAILED", code=137, reason=ESSENTIAL, container=OOM, memory=14 * GIB),
    "TIMEOUT": dict(status="FAILED", reason="Job attempt duration exceeded timeout"),
    "PULL_FAILED": dict(status="FAILED", reason="Task failed to start", container=PULL, started=None),
    "RUNNABLE": dict(status="RUNNABLE", at=T0 + 1, started=None),
}


def send(reconcile, job, names):
    actions = []
    for name in names:
        spec = dict(EVENTS[name])
        actions.append(reconcile.handle(event(job, spec.pop("status"), **spec)).action)
    return actions


def states(job):
    return [t.state for t in job.history]


A = Action
STARTED = [S.SUBMITTED, S.QUEUED, S.STARTING, S.RUNNING]


@pytest.mark.parametrize("names, actions, state, history, reclaims, gpu_seconds", [
    (["RUNNING", "SUCCEEDED"], [A.RUNNING, A.SETTLED], S.SUCCEEDED, STARTED + [S.SUCCEEDED], 0, 100.0),
    (["RUNNING", "RUNNING", "SUCCEEDED", "SUCCEEDED"], [A.RUNNING, A.IGNORED, A.SETTLED, A.IGNORED],
     S.SUCCEEDED, STARTED + [S.SUCCEEDED], 0, 100.0),
    (["SUCCEEDED", "RUNNING"], [A.SETTLED, A.IGNORED], S.SUCCEEDED, STARTED + [S.SUCCEEDED], 0, 100.0),
    (["RUNNABLE", "EXIT_1", "RUNNING"], [A.IGNORED, A.SETTLED, A.IGNORED], S.FAILED, STARTED + [S.FAILED], 0, 100.0),
    (["RUNNING", "RECLAIMED", "RECLAIMED", "RUNNING"], [A.RUNNING, A.SETTLED, A.IGNORED, A.IGNORED],
     S.RETRY_WAIT, STARTED + [S.RETRY_WAIT], 1, 100.0),
    (["RECLAIMED", "RUNNING"], [A.SETTLED, A.IGNORED], S.RETRY_WAIT, STARTED + [S.RETRY_WAIT], 1, 100.0),
    (["PULL_FAILED", "PULL_FAILED"], [A.SETTLED, A.IGNORED], S.RETRY_WAIT, STARTED[:3] + [S.RETRY_WAIT], 0, 0.0),
    (["RUNNING", "OOM"], [A.RUNNING, A.SETTLED], S.FAILED, STARTED + [S.FAILED], 0, 100.0),
    (["RUNNING", "TIMEOUT", "EXIT_1"], [A.RUNNING, A.SETTLED, A.IGNORED], S.TIMED_OUT, STARTED + [S.TIMED_OUT],
     0, 100.0),
], ids=["in-order", "duplicates", "succeeded-before-running", "failed-before-running", "reclaimed-twice-delivered",
        "reclaimed-before-running", "never-ran", "oom", "timeout-then-stray"])
def test_event_sequences(queue, reconcile, names, actions, state, history, reclaims, gpu_seconds):
    job = launched(queue, limits={"wall_time": "1h"})

    assert send(reconcile, job, names) == actions

    done = queue.get(job.id)
    assert (done.state, states(done), done.reclaims, done.error_retries) == (state, history, reclaims, 0)
    assert done.gpu_seconds == gpu_seconds
    assert (done.pid, done.assigned) == (None, ())


def test_reasons_say_what_happened(queue, reconcile):
    reasons = {}
    for name in ("SUCCEEDED", "EXIT_1", "RECLAIMED", "OOM", "TIMEOUT", "PULL_FAILED"):
        job = launched(queue, limits={"wall_time": "1h"})
        send(reconcile, job, [name])
        reasons[name] = queue.get(job.id).reason
    assert reasons == {
        "SUCCEEDED": "exit code 0",
        "EXIT_1": "exit code 1",
        "RECLAIMED": f"its instance was reclaimed ({RECLAIM}); not counted as an error, "
                     "resumes from its last checkpoint in 5s",
        "OOM": "ran out of memory: the container used more than its 14 GiB; ask for more with resources.memory",
        "TIMEOUT": "exceeded its wall time of 1h00m",
        "PULL_FAILED": f"the infrastructure failed before it ran ({PULL}); not counted as an error, "
                       "resumes from its last checkpoint in 5s",
    }


def test_running_records_when_the_container_started(queue, reconcile):
    job = launched(queue)

    result = reconcile.handle(event(job, "RUNNING", at=START))

    stored = queue.get(job.id)
    assert (result.action, result.job) == (Action.RUNNING, stored)
    assert (stored.state, stored.started_at, stored.reason) == (S.RUNNING, START, "attempt 1 started")
    assert stored.history[-1].at == START


def test_a_job_the_dispatcher_already_marked_running_stays_as_it_is(queue, reconcile):
    job = queue.start()        # the local dispatcher marks an attempt RUNNING as it launches it
    before = queue.get(job.id)

    result = reconcile.handle(event(job, "RUNNING", at=T0 + 5))

    assert (result.action, result.reason) == (Action.IGNORED, "already recorded as running")
    assert queue.get(job.id) == before


@pytest.mark.parametrize("names, wakes", [
    (["RUNNABLE", "RUNNING"], 0),
    (["RUNNING", "SUCCEEDED", "SUCCEEDED"], 1),
    (["RECLAIMED"], 1),
    (["PULL_FAILED", "RUNNING"], 1),
], ids=["queued-and-running", "succeeded-twice", "reclaimed", "never-ran"])
def test_an_ended_attempt_wakes_the_dispatcher_once(queue, names, wakes):
    waker = CountingWaker()
    service = ReconcileService(queue.store, queue.rng, waker)
    job = launched(queue)

    send(service, job, names)

    assert waker.wakes == wakes
    # the wake-up names the settled job: the pass reads it from the table, whatever the index's lag
    assert waker.named == [[job.id]] * wakes


class DownWaker:
    def wake(self, jobs=()):
        raise BackendUnavailable("SQS is throttling")


def test_a_failed_wake_up_does_not_undo_the_settlement(queue):
    job = launched(queue)
    result = ReconcileService(queue.store, queue.rng, DownWaker()).handle(event(job, "SUCCEEDED", code=0))
    assert (result.action, queue.state(job.id)) == (Action.SETTLED, S.SUCCEEDED)


def test_a_reclaim_is_retried_without_spending_an_error_retry(queue, reconcile):
    job = launched(queue, retries={"on_error": 1})

    send(reconcile, job, ["RUNNING", "RECLAIMED"])

    waiting = queue.get(job.id)
    assert (waiting.state, waiting.reclaims, waiting.interruptions, waiting.error_retries) == (S.RETRY_WAIT, 1, 1, 0)
    assert waiting.not_before == STOP + 5.0          # 10s backoff x 0.5 draw
    assert waiting.exit_code is None and waiting.ended_at is None


def test_settling_charges_the_team_as_the_supervisor_does(queue, reconcile):
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", 2.0) for i in range(4))))
    job = launched(queue, team="vision")

    send(reconcile, job, ["RUNNING", "SUCCEEDED"])

    assert queue.get(job.id).gpu_seconds == 100.0
    assert queue.store.spend(period_of(STOP)) == {"vision": pytest.approx(2.0 * 100 / 3600)}
    assert queue.store.usage(STOP, queue.store.policy().half_life) == {"vision": pytest.approx(100.0)}


def test_a_duplicate_settlement_charges_once(queue, reconcile):
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", 2.0) for i in range(4))))
    job = launched(queue, team="vision")

    send(reconcile, job, ["SUCCEEDED", "SUCCEEDED", "RUNNING", "SUCCEEDED"])

    assert queue.store.spend(period_of(STOP)) == {"vision": pytest.approx(2.0 * 100 / 3600)}


@pytest.mark.parametrize("change", [
    dict(attempt=0), dict(attempt=2), dict(batch_id="batch-from-a-lost-launch"),
], ids=["earlier-attempt", "later-attempt", "other-batch-job"])
@pytest.mark.parametrize("status", ["RUNNING", "SUCCEEDED", "FAILED"])
def test_events_of_another_attempt_change_nothing(queue, reconcile, change, status):
    job = launched(queue)
    before = queue.get(job.id)

    result = reconcile.handle(event(job, status, code=0 if status == "SUCCEEDED" else 1, **change))

    assert result.action == Action.IGNORED
    assert queue.get(job.id) == before


def test_an_event_for_an_unknown_job_is_not_found(queue, reconcile):
    job = launched(queue)
    with pytest.raises(NotFound):
        reconcile.handle(replace(event(job, "SUCCEEDED", code=0), job_id="99"))


def test_a_cancelled_attempt_ends_cancelled_whatever_batch_says(queue, reconcile):
    job = launched(queue)
    send(reconcile, job, ["RUNNING"])
    queue.control.cancel([job.id])
    queue.store.apply([Change(job.id, S.RUNNING, None, "", T0 + 20, {"kill_reason": "cancel"})])

    reconcile.handle(event(job, "FAILED", reason="gqa: cancel", code=143))

    done = queue.get(job.id)
    assert (done.state, done.reason, done.request, done.kill_reason) == (S.CANCELLED, "cancelled by user", None, None)


def test_an_event_for_a_job_cancelled_before_it_ran_changes_nothing(queue, reconcile):
    job = launched(queue)
    queue.store.apply([Change(job.id, S.STARTING, S.CANCELLED, "cancelled by user", T0 + 1)])
    before = queue.get(job.id)

    for status in ("RUNNING", "FAILED"):
        assert reconcile.handle(event(job, status, reason="gqa: cancel")).action == Action.IGNORED
    assert queue.get(job.id) == before


class StaleFirstRead:
    """A store whose first get() answers from an earlier read: the job moved
    between the service's read and its write, as when the dispatcher or a
    cancel races the event."""

    def __init__(self, store, stale):
        self.store, self.stale = store, stale

    def get(self, job_id):
        stale, self.stale = self.stale, None
        return stale if stale is not None else self.store.get(job_id)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_race_with_another_writer_is_read_again(queue):
    job = launched(queue)
    stale = queue.get(job.id)
    queue.store.apply([Change(job.id, S.STARTING, S.RUNNING, "attempt 1 started", T0 + 2, {"started_at": T0 + 2})])
    service = ReconcileService(StaleFirstRead(queue.store, stale), queue.rng)

    result = service.handle(event(job, "RUNNING", at=START))

    assert result.action == Action.IGNORED     # re-read: already running, nothing to write
    assert queue.get(job.id).started_at == T0 + 2


# -- spot: reclaims move a spot-tolerant job to on-demand capacity ---------------------------------

SPOT_AND_ON_DEMAND = Inventory(gpus=(Gpu(0, "a10g", 0.4, spot=True), Gpu(1, "a10g", 0.4, spot=True),
                                     Gpu(2, "a10g", 1.2), Gpu(3, "a10g", 1.2)))


@pytest.mark.parametrize("runs_for, then_spot", [
    pytest.param(60, False, id="reclaimed a minute in, each time: on demand next"),
    pytest.param(5 * 3600, True, id="reclaimed 5 hours in, each time: spot still first"),
])
def test_after_repeated_reclaims_the_next_dispatch_picks_by_how_long_the_job_ran(queue, reconcile, runs_for,
                                                                                then_spot):
    """The GPU time each reclaimed attempt used is settled on the record, and the pass counts the
    reclaims against it (one more allowed per 4 hours run)."""
    queue.store.set_inventory(SPOT_AND_ON_DEMAND)
    fallback_after = queue.store.policy().spot_fallback_after
    job = queue.submit_one(spot=True, retries={"on_error": 0})
    pools = []

    for reclaim in range(1, fallback_after + 1):
        [started] = queue.supervisor.dispatch()
        pools.append(SPOT_AND_ON_DEMAND.gpus[started.assigned[0]].spot)
        started = queue.get(job.id)
        queue.clock.advance(runs_for)
        reconcile.handle(event(started, "FAILED", reason=RECLAIM, at=queue.clock.now(), started=started.started_at))
        waiting = queue.get(job.id)
        assert (waiting.state, waiting.reclaims, waiting.error_retries) == (S.RETRY_WAIT, reclaim, 0)
        queue.clock.advance(3600)              # past any backoff
        queue.supervisor.promote_retries()

    [started] = queue.supervisor.dispatch()
    pools.append(SPOT_AND_ON_DEMAND.gpus[started.assigned[0]].spot)
    assert pools == [True] * fallback_after + [then_spot]
    assert started.attempts == fallback_after + 1
    assert queue.get(job.id).gpu_seconds == pytest.approx(fallback_after * runs_for, abs=1)


def test_a_job_that_does_not_allow_spot_never_runs_there(queue):
    queue.store.set_inventory(SPOT_AND_ON_DEMAND)
    job = queue.submit_one(spot=False)
    [started] = queue.supervisor.dispatch()
    assert started.id == job.id and not SPOT_AND_ON_DEMAND.gpus[started.assigned[0]].spot


def test_the_scheduler_sees_spot_and_reclaims(queue, reconcile):
    tolerant, strict = launched(queue, spot=True), queue.submit_one()
    send(reconcile, tolerant, ["RUNNING", "RECLAIMED"])
    queue.clock.advance(3600)
    queue.supervisor.promote_retries()

    pending, _ = queue.store.scheduling_view()

    assert {p.id: (p.spot, p.reclaims) for p in pending} == {tolerant.id: (True, 1), strict.id: (False, 0)}


# -- what an attempt is charged: Batch bills from the container's start ----------------------------------

HOUR = 3600.0
PRICE = 2.0        # per GPU-hour


def dispatched(queue, **spec) -> JobRecord:
    """A job as the dispatcher on AWS records a launch Batch accepted: RUNNING
    from that moment (T0), though Batch has yet to find the container an instance."""
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(4))))
    job = launched(queue, **spec)
    [job] = queue.store.apply([Change(job.id, S.STARTING, S.RUNNING, "attempt 1 started", T0,
                                      {"started_at": T0, "pid": 0})])
    return job


@pytest.mark.parametrize("events, state, ran, started_at", [
    # an hour in Batch's queue, then 10 minutes of running: the 10 minutes are charged
    ([("RUNNING", dict(at=T0 + HOUR, started=T0 + HOUR)), ("SUCCEEDED", dict(at=T0 + HOUR + 600, started=T0 + HOUR))],
     S.SUCCEEDED, 600.0, T0 + HOUR),
    # its RUNNING event lost: the ended event's startedAt says the same
    ([("SUCCEEDED", dict(at=T0 + HOUR + 600, started=T0 + HOUR))], S.SUCCEEDED, 600.0, T0 + HOUR),
    # reclaimed 20 minutes into its run
    ([("RECLAIMED", dict(at=T0 + HOUR + 1200, started=T0 + HOUR))], S.RETRY_WAIT, 1200.0, T0 + HOUR),
    # its image could not be pulled, after an hour of waiting: it never ran, nothing is charged
    ([("PULL_FAILED", dict(at=T0 + HOUR))], S.RETRY_WAIT, 0.0, T0),
    # its instance was reclaimed before the container started: likewise
    ([("RECLAIMED", dict(at=T0 + HOUR, started=None))], S.RETRY_WAIT, 0.0, T0),
], ids=["queued-then-ran", "running-event-lost", "reclaimed-while-running", "never-pulled", "reclaimed-before-start"])
def test_an_attempt_is_charged_from_its_containers_start_to_its_stop(queue, reconcile, events, state, ran,
                                                                     started_at):
    job = dispatched(queue)
    for name, overrides in events:
        spec = dict(EVENTS[name], **overrides)
        reconcile.handle(event(job, spec.pop("status"), **spec))

    done = queue.get(job.id)
    assert done.state == state
    assert done.gpu_seconds == pytest.approx(ran)
    assert queue.store.spend(period_of(T0)).get(job.team, 0.0) == pytest.approx(PRICE * ran / HOUR)
    assert done.started_at == started_at


@pytest.mark.parametrize("started, action, started_at", [
    (T0 + HOUR, Action.RUNNING, T0 + HOUR),    # an hour in Batch's queue: the record takes Batch's start
    (T0 + 30, Action.IGNORED, T0),             # within the slack: no write for half a minute
])
def test_a_running_event_moves_a_late_start_onto_the_record(queue, reconcile, started, action, started_at):
    job = dispatched(queue, limits={"wall_time": "1h"})

    result = reconcile.handle(event(job, "RUNNING", at=started, started=started))

    assert result.action == action
    running = queue.get(job.id)
    assert (running.state, running.started_at) == (S.RUNNING, started_at)
    assert states(running) == STARTED      # the history is unchanged: no second RUNNING step


def test_wall_time_counts_from_batchs_start_once_its_event_came(queue, reconcile):
    job = dispatched(queue, limits={"wall_time": "1h"})
    reconcile.handle(event(job, "RUNNING", at=T0 + HOUR, started=T0 + HOUR))
    queue.clock.advance(HOUR + 600)            # an hour past the launch, 10 minutes past the start

    queue.supervisor.enforce_wall_time()

    assert queue.compute.terminated == []
    queue.clock.advance(HOUR)
    queue.supervisor.enforce_wall_time()
    assert [t[0] for t in queue.compute.terminated] == [job.id]


@pytest.mark.parametrize("names, cause", [
    (["RUNNING", "SUCCEEDED"], "app"), (["RUNNING", "RECLAIMED"], "reclaimed"), (["RUNNING", "OOM"], "oom"),
    (["RUNNING", "TIMEOUT"], "timeout"), (["PULL_FAILED"], "capacity"), (["SUCCEEDED"], "app"),
])
def test_a_settlement_says_what_ended_the_attempt_and_what_it_used(queue, reconcile, names, cause):
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", 2.0) for i in range(4))))
    job = launched(queue)
    *_, last = names
    spec = dict(EVENTS[last])
    for name in names[:-1]:
        send(reconcile, job, [name])
    result = reconcile.handle(event(job, spec.pop("status"), **spec))
    assert (result.action, result.cause) == (Action.SETTLED, cause)
    ran = 0.0 if last == "PULL_FAILED" else STOP - START        # nothing charged for a container that never ran
    assert (result.gpu_seconds, result.cost) == (pytest.approx(ran), pytest.approx(2.0 * ran / 3600))


def test_gqa_s_own_stop_is_the_cause_whatever_batch_says(queue, reconcile):
    job = launched(queue)
    send(reconcile, job, ["RUNNING"])
    queue.store.apply([Change(job.id, S.RUNNING, None, "", T0 + 20, {"kill_reason": "preempt"})])
    result = reconcile.handle(event(job, "FAILED", reason="gqa: preempt", code=143))
    assert (result.job.state, result.cause) == (S.RETRY_WAIT, "preempt")
    assert reconcile.handle(event(job, "FAILED", code=143)).cause is None      # the duplicate settles nothing
