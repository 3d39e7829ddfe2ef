"""Launches whose answer was never recorded: the rules of services/repair.py
(pure), Supervisor.repair_launches and uncertain launches over the SQLite
store with fake compute, and events that record a launch the dispatcher did not."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gqa.models.batch_events import BatchJobEvent
from gqa.models.errors import BackendUnavailable, LaunchUncertain
from gqa.models.job import JobRecord, JobState, Transition
from gqa.models.outcome import ExitKind
from gqa.ports import Change, Exit, FoundLaunch, Launched
from gqa.services.reconcile import Action, ReconcileService
from gqa.services.repair import LAUNCH_GRACE, repair, unrecorded_launch
from tests.builders import job_record
from tests.services.conftest import T0

S = JobState
RECLAIM = "Host EC2 (instance i-0abc) terminated."


def claimed(ago: float, **fields) -> JobRecord:
    history = (Transition(S.QUEUED, T0 - 5000, "queued"), Transition(S.STARTING, T0 - ago, "assigned GPUs 0"))
    return job_record(**{"state": S.STARTING, "assigned": (0,), "history": history, **fields})


@pytest.mark.parametrize("job, look", [
    (claimed(LAUNCH_GRACE + 1), True),
    (claimed(LAUNCH_GRACE), True),
    (claimed(LAUNCH_GRACE - 1), False),                     # a pass may still be launching it
    (claimed(LAUNCH_GRACE + 1, proc_token="b-1"), False),   # its launch is recorded
    (claimed(LAUNCH_GRACE + 1, state=S.RUNNING), False),
    (job_record(state=S.STARTING), True),                   # no history to tell: ask
], ids=["past-grace", "at-grace", "within-grace", "recorded", "running", "no-history"])
def test_when_to_ask_the_backend(job, look):
    assert unrecorded_launch(job, T0) is look


def found(*, ended: Exit | None = None, started: float | None = T0 - 800, ended_at: float | None = None):
    return FoundLaunch(Launched(0, "b-77"), submitted_at=T0 - 890, started_at=started, ended=ended,
                       ended_at=ended_at)


def test_an_attempt_the_backend_never_received_goes_back_to_the_queue_keeping_its_number():
    [change] = repair(claimed(1000, attempts=2), None, now=T0, draw=0.5, inventory=None)
    assert (change.expect, change.to, change.fields) == (S.STARTING, S.RETRY_WAIT, {"assigned": (), "not_before": T0})
    assert change.reason == ("attempt 3 was never received by the compute backend (the pass launching it "
                             "stopped first); back in the queue")


def test_an_attempt_the_backend_started_is_recorded_running_from_its_start():
    [change] = repair(claimed(1000, attempts=1), found(), now=T0, draw=0.5, inventory=None)
    assert (change.expect, change.to, change.at) == (S.STARTING, S.RUNNING, T0 - 800)
    assert change.fields == {"attempts": 2, "pid": 0, "proc_token": "b-77", "started_at": T0 - 800,
                             "exit_code": None, "signal": None}
    assert change.reason.startswith("attempt 2 started (found on the compute backend as b-77")


def test_an_attempt_still_queued_on_the_backend_is_recorded_as_launched_and_stays_starting():
    [change] = repair(claimed(1000, attempts=1), found(started=None), now=T0, draw=0.5, inventory=None)
    assert (change.expect, change.to) == (S.STARTING, None)
    assert {k: change.fields[k] for k in ("attempts", "pid", "proc_token")} == {"attempts": 2, "pid": 0,
                                                                               "proc_token": "b-77"}
    assert "started_at" not in change.fields          # no wall time, no charge until it starts
    assert change.fields["reason"].startswith("attempt 2 launched as b-77 (found on the compute backend")


@pytest.mark.parametrize("ended, to", [
    (Exit("1", 1, 0, None), S.SUCCEEDED),
    (Exit("1", 1, None, None, ExitKind.RECLAIMED, RECLAIM), S.RETRY_WAIT),
    (Exit("1", 1, 3, None), S.FAILED),
])
def test_an_attempt_that_already_ended_is_settled_by_the_exit_rules(ended, to):
    record, settled = repair(claimed(1000), found(ended=ended, ended_at=T0 - 200), now=T0, draw=0.5, inventory=None)
    assert record.to == S.RUNNING
    assert (settled.expect, settled.to, settled.at) == (S.RUNNING, to, T0 - 200)
    assert settled.usage == pytest.approx(600.0)         # 1 GPU from its start to its stop


CAPACITY = "Canceled by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"


def test_an_attempt_that_ended_without_starting_is_settled_from_starting_uncharged():
    ended = Exit("1", 1, None, None, ExitKind.CAPACITY, CAPACITY)
    launch, settled = repair(claimed(1000), found(started=None, ended=ended, ended_at=T0 - 100), now=T0, draw=0.5,
                             inventory=None)
    assert (launch.to, launch.fields["proc_token"]) == (None, "b-77")
    assert (settled.expect, settled.to, settled.at, settled.usage, settled.cost) == \
        (S.STARTING, S.RETRY_WAIT, T0 - 100, 0.0, 0.0)
    assert settled.reason.startswith("the infrastructure failed before it ran")


# -- the supervisor ------------------------------------------------------------------------------------

@dataclass
class FakeLookup:
    """What Batch holds, by (job id, attempt); every question is recorded."""

    holds: dict[tuple[str, int], FoundLaunch] = field(default_factory=dict)
    asked: list[tuple[str, int]] = field(default_factory=list)
    down: bool = False

    def find(self, job: JobRecord, attempt: int) -> FoundLaunch | None:
        self.asked.append((job.id, attempt))
        if self.down:
            raise BackendUnavailable("Batch is throttling")
        return self.holds.get((job.id, attempt))


def with_lookup(queue) -> FakeLookup:
    lookup = FakeLookup()
    queue.supervisor.launches = lookup
    return lookup


def claim(queue, **spec) -> JobRecord:
    """A job claimed by a pass that died before it launched or recorded anything."""
    job = queue.submit_one(**spec)
    [job] = queue.store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", queue.clock.now(),
                                      {"assigned": (0,)})])
    return job


def test_repair_requeues_what_batch_never_received_and_records_what_it_holds(queue):
    lookup = with_lookup(queue)
    lost, held, young = claim(queue), claim(queue), None
    queue.clock.advance(LAUNCH_GRACE + 1)
    young = claim(queue)
    lookup.holds[(held.id, 1)] = found()

    assert queue.supervisor.repair_launches() == {"recorded": 1, "requeued": 1}

    assert sorted(lookup.asked) == [(lost.id, 1), (held.id, 1)]         # the young claim is not asked about
    assert queue.state(lost.id) == S.QUEUED                              # promoted at once
    assert (queue.get(lost.id).attempts, queue.get(lost.id).assigned) == (0, ())
    recorded = queue.get(held.id)
    assert (recorded.state, recorded.proc_token, recorded.attempts) == (S.RUNNING, "b-77", 1)
    assert recorded.started_at == T0 - 800                               # Batch's start, not the repair's
    assert queue.state(young.id) == S.STARTING
    assert queue.compute.launches == []
    # the requeued job is launched again under the attempt number that never existed
    queue.supervisor.dispatch()
    assert [(launch.job_id, launch.attempt) for launch in queue.compute.launches] == [(lost.id, 1)]


def test_repair_without_a_lookup_does_nothing_and_a_lookup_outage_propagates(queue):
    job = claim(queue)
    queue.clock.advance(LAUNCH_GRACE + 1)
    assert queue.supervisor.repair_launches() == {"recorded": 0, "requeued": 0}
    lookup = with_lookup(queue)
    lookup.down = True
    with pytest.raises(BackendUnavailable):
        queue.supervisor.repair_launches()
    assert queue.state(job.id) == S.STARTING                 # nothing decided without an answer


@pytest.mark.parametrize("error, lookup, stays", [
    (LaunchUncertain("Batch answered 500"), True, True),     # may hold it: wait for the repair
    (RuntimeError("bug after the call"), True, True),        # an unexpected error may follow a launch, too
    (BackendUnavailable("Batch kept throttling"), True, False),   # refused: surely holds nothing
    (LaunchUncertain("Batch answered 500"), False, False),   # nothing can ask later: requeue, as before
])
def test_an_uncertain_launch_stays_starting_until_batch_is_asked(queue, error, lookup, stays):
    if lookup:
        with_lookup(queue)
    job = queue.submit_one()
    queue.compute.fail[job.id] = error

    assert queue.supervisor.dispatch() == []

    stored = queue.get(job.id)
    assert stored.state == (S.STARTING if stays else S.RETRY_WAIT)
    assert stored.proc_token is None and stored.attempts == 0
    del queue.compute.fail[job.id]
    queue.clock.advance(60)
    queue.supervisor.promote_retries()
    queue.supervisor.dispatch()
    assert len(queue.compute.launches) == (0 if stays else 1)      # never launched again while uncertain


# -- reconcile: an event records the launch the dispatcher did not ---------------------------------------

def batch_event(job: JobRecord, status: str, **fields) -> BatchJobEvent:
    values = dict(batch_job_id="b-9", job_id=job.id, attempt=1, status=status, status_reason=None,
                  exit_code=0 if status == "SUCCEEDED" else None, container_reason=None, time=T0 + 100,
                  started_at=T0 + 10)
    values.update(fields)
    return BatchJobEvent(**values)


@pytest.mark.parametrize("status, state", [("RUNNING", S.RUNNING), ("SUCCEEDED", S.SUCCEEDED)])
def test_an_event_of_the_attempt_being_launched_records_it(queue, status, state):
    job = claim(queue)
    result = ReconcileService(queue.store, queue.rng).handle(batch_event(job, status))
    stored = queue.get(job.id)
    assert result.action in (Action.RUNNING, Action.SETTLED)
    assert (stored.state, stored.attempts, stored.proc_token) == (state, 1, "b-9")


@pytest.mark.parametrize("fields", [{"attempt": 2}, {"status": "RUNNABLE"}], ids=["other-attempt", "queued-on-batch"])
def test_other_events_of_a_claimed_job_change_nothing(queue, fields):
    job = claim(queue)
    result = ReconcileService(queue.store, queue.rng).handle(batch_event(job, fields.pop("status", "RUNNING"),
                                                                         **fields))
    assert result.action == Action.IGNORED
    assert queue.get(job.id) == job


def test_the_dispatchers_late_record_after_an_event_recorded_the_launch_is_skipped(queue):
    job = queue.submit_one()
    reconcile = ReconcileService(queue.store, queue.rng)

    def launch_then_event(record, gpus, attempt):
        # Batch ran and finished the job before the pass got to record its answer
        reconcile.handle(batch_event(record, "SUCCEEDED", batch_job_id="token-1001"))
        return Launched(1001, "token-1001")
    queue.compute.launch = launch_then_event

    assert queue.supervisor.dispatch() == []
    stored = queue.get(job.id)
    assert (stored.state, stored.attempts, stored.proc_token) == (S.SUCCEEDED, 1, "token-1001")
    assert [t.state for t in stored.history].count(S.SUCCEEDED) == 1


def test_a_new_claim_forgets_the_previous_attempts_launch(queue):
    """A reclaimed job's next claim must not look launched: else neither its
    events nor the repair would ever record attempt 2."""
    lookup = with_lookup(queue)
    job = queue.start()
    queue.store.apply([Change(job.id, S.RUNNING, S.RETRY_WAIT, "reclaimed", queue.clock.now(),
                              {"assigned": (), "not_before": queue.clock.now(), "pid": None})])
    queue.supervisor.promote_retries()
    queue.compute.fail[job.id] = LaunchUncertain("Batch answered 500")

    queue.supervisor.dispatch()

    claimed = queue.get(job.id)
    assert (claimed.state, claimed.attempts, claimed.proc_token, claimed.pid) == (S.STARTING, 1, None, None)
    queue.clock.advance(LAUNCH_GRACE)
    lookup.holds[(job.id, 2)] = found()
    assert queue.supervisor.repair_launches() == {"recorded": 1, "requeued": 0}
    assert (queue.get(job.id).attempts, queue.get(job.id).proc_token) == (2, "b-77")


def test_a_stop_decided_while_the_launch_was_unknown_reaches_the_attempt_once_it_is_found(queue):
    """A cancel carried out while the job was claimed but its launch unrecorded
    had no Batch job to stop; the repair that finds the attempt stops it."""
    lookup = with_lookup(queue)
    job = claim(queue)
    tokens: list[str | None] = []
    queue.compute.terminate = lambda j, grace: tokens.append(j.proc_token)
    queue.control.cancel([job.id])
    queue.supervisor.carry_out_requests()
    assert tokens == [None]                                  # nothing recorded to stop yet
    queue.clock.advance(LAUNCH_GRACE)
    lookup.holds[(job.id, 1)] = found(started=None)

    assert queue.supervisor.repair_launches() == {"recorded": 1, "requeued": 0}

    assert tokens == [None, "b-77"]
    stopped = queue.get(job.id)
    assert (stopped.state, stopped.proc_token, stopped.kill_reason) == (S.STARTING, "b-77", "cancel")
