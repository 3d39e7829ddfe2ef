"""Supervisor: dispatch, exits, requests, wall time, retries, restart, shutdown."""

import signal

import pytest

from gqa.models.job import JobState, Request
from gqa.ports import Change, Exit
from gqa.scheduling import plan
from gqa.services.snapshot import read_snapshot
from gqa.services.supervisor import Supervisor
from tests.services.conftest import GRACE, T0
from tests.services.fakes import Launch

S = JobState
OOM = "killed by SIGKILL (not sent by gqa: most often the kernel's out-of-memory killer)"


def states(job):
    return [t.state for t in job.history]


def reasons(job):
    return {t.state: t.reason for t in job.history}


# -- dispatch ------------------------------------------------------------------------

def test_dispatch_launches_attempt_one_on_the_gpus_the_plan_chose(queue):
    queue.submit_one(resources={"gpus": 2})
    queue.submit_one()
    waiting = queue.submit_one(resources={"gpus": 2})   # one GPU left: it waits
    chosen = plan(read_snapshot(queue.store, queue.clock.now())).starts

    started = queue.supervisor.dispatch()

    assert queue.compute.launches == [Launch(s.job_id, s.gpus, 1) for s in chosen]
    assert queue.compute.launches == [Launch("1", (0, 1), 1), Launch("2", (2,), 1)]
    assert [j.id for j in started] == ["1", "2"]
    for job, pid in zip(started, (1001, 1002)):
        stored = queue.get(job.id)
        assert stored == job
        assert (stored.state, stored.pid, stored.proc_token, stored.attempts, stored.started_at) == \
            (S.RUNNING, pid, f"token-{pid}", 1, T0)
        assert states(stored)[-2:] == [S.STARTING, S.RUNNING]
        assert stored.reason == "attempt 1 started"
    assert queue.get("1").assigned == (0, 1) and queue.get("2").assigned == (2,)
    assert queue.state(waiting.id) == S.QUEUED


def test_passes_keep_their_index_and_start_what_a_pass_over_the_queue_alone_starts(make_queue):
    """The daemon's store reads its rows afresh at every pass: an unchanged job is known by its
    equal record, so the index is built once and then brought along by what changed (the jobs
    fail, so no run-time sample moves the team's estimates, which would re-estimate the queue)."""
    queue = make_queue(4)
    for n in range(40):
        queue.submit_one(resources={"gpus": 1 + n % 2}, limits={"wall_time": f"{1 + n % 5}h"})
    first = [j.id for j in queue.supervisor.dispatch()]
    assert first and queue.supervisor.kept.built == 1
    for job_id in first:
        queue.clock.advance(60)
        queue.exit(job_id, 1)
        chosen = plan(read_snapshot(queue.store, queue.clock.now())).starts   # a pass over the queue alone
        started = queue.supervisor.dispatch()
        assert [(j.id, j.assigned) for j in started] == [(s.job_id, s.gpus) for s in chosen]
    assert queue.supervisor.kept.built == 1


@pytest.mark.parametrize("drift", [0.0, None])
def test_successes_rebuild_the_index_only_once_their_teams_ratio_moved_past_the_drift(make_queue, monkeypatch, drift):
    """Every success is a run-time sample, and nearly every one moves its team's median a hair: with
    no drift each pass after one re-estimates the queue and builds its index afresh."""
    import gqa.services.snapshot as snapshot

    if drift is not None:
        monkeypatch.setattr(snapshot, "RATIO_DRIFT", drift)
    queue = make_queue(1)
    for _ in range(60):
        queue.submit_one(limits={"wall_time": "1h"})
    [job] = queue.supervisor.dispatch()
    for n in range(40):   # runs of 28-32% of their hour, one at a time
        queue.clock.advance(3600 * (0.28 + 0.01 * (n * 3 % 5)))
        queue.exit(job.id, 0)
        chosen = plan(read_snapshot(queue.store, queue.clock.now())).starts   # one team: the ratio orders nothing
        [job] = queue.supervisor.dispatch()
        assert [(job.id, job.assigned)] == [(s.job_id, s.gpus) for s in chosen]
    if drift is None:
        assert queue.supervisor.kept.built <= 3   # the first pass, the first ratio, one move at most
    else:
        assert queue.supervisor.kept.built > 5   # 9: the median moved with most successes


@pytest.mark.parametrize("floored", [True, False])
def test_a_team_whose_runs_use_a_sliver_of_their_limits_keeps_its_index_as_its_ratio_moves_below_the_floor(
        make_queue, monkeypatch, floored):
    """Runs of 3 to 60 minutes on 5-day limits: the median share moves with most successes, but
    under RANK_FLOOR (5%) every share estimates alike, so none of those moves re-estimates the queue."""
    import gqa.services.snapshot as snapshot

    if not floored:   # the drift counted on the ratios as they come: the moves below the floor count
        monkeypatch.setattr(snapshot, "_stands", lambda was, ratio, band: abs(ratio - was) <= 0.1 * was)
    queue = make_queue(1)
    for _ in range(60):
        queue.submit_one(limits={"wall_time": "5d"})
    [job] = queue.supervisor.dispatch()
    for n in range(40):
        queue.clock.advance(60 * (3 + n * 7 % 58))
        queue.exit(job.id, 0)
        chosen = plan(read_snapshot(queue.store, queue.clock.now())).starts
        [job] = queue.supervisor.dispatch()
        assert [(job.id, job.assigned)] == [(s.job_id, s.gpus) for s in chosen]
    if floored:
        assert queue.supervisor.kept.built <= 2, queue.supervisor.kept.built   # the first pass and the first ratio
    else:
        assert queue.supervisor.kept.built > 5, queue.supervisor.kept.built


@pytest.mark.parametrize("banded", [True, False])
def test_a_median_flipping_between_two_samples_keeps_the_index_once_the_samples_are_enough(
        make_queue, monkeypatch, banded):
    """Runs alternating 18 and 24 minutes of their hour: the median flips between 0.3, 0.35 and 0.4
    as the count turns odd and even, past the drift each time, but from BAND_FROM samples on the
    band of the median holds both, so the ratio in use stands."""
    from gqa.scheduling import eta

    enough = eta.BAND_FROM
    if not banded:
        monkeypatch.setattr(eta, "BAND_FROM", 10**9)
    queue = make_queue(1)
    for _ in range(80):
        queue.submit_one(limits={"wall_time": "1h"})
    [job] = queue.supervisor.dispatch()
    for n in range(60):
        queue.clock.advance(60 * (18 if n % 2 else 24))
        queue.exit(job.id, 0)
        if n == enough:
            built = queue.supervisor.kept.built   # the samples are enough for a band from here on
        chosen = plan(read_snapshot(queue.store, queue.clock.now())).starts
        [job] = queue.supervisor.dispatch()
        assert [(job.id, job.assigned)] == [(s.job_id, s.gpus) for s in chosen]
    later = queue.supervisor.kept.built - built
    assert later == 0 if banded else later > 10, later


def test_dispatch_with_nothing_to_start_launches_nothing(queue):
    queue.start(resources={"gpus": 4})
    queue.submit_one()

    assert queue.supervisor.dispatch() == []
    assert len(queue.compute.launches) == 1


def test_a_launch_that_fails_fails_the_job_and_frees_its_gpus(make_queue):
    queue = make_queue(2)
    broken = queue.submit_one(resources={"gpus": 2})
    queue.compute.fail[broken.id] = "working directory /nowhere does not exist"

    assert queue.supervisor.dispatch() == []

    job = queue.get(broken.id)
    assert (job.state, job.reason) == (S.FAILED, "could not start: working directory /nowhere does not exist")
    assert (job.attempts, job.assigned, job.ended_at, job.pid) == (1, (), T0, None)
    nxt = queue.submit_one(resources={"gpus": 2})
    assert [j.id for j in queue.supervisor.dispatch()] == [nxt.id]
    assert queue.compute.launches == [Launch(nxt.id, (0, 1), 1)]


def test_one_failed_launch_does_not_stop_the_others(queue):
    first, second = queue.submit_one(), queue.submit_one()
    queue.compute.fail[first.id] = "permission denied: train.py"

    started = queue.supervisor.dispatch()

    assert [j.id for j in started] == [second.id]
    assert (queue.state(first.id), queue.state(second.id)) == (S.FAILED, S.RUNNING)


# -- exits ------------------------------------------------------------------------------

@pytest.mark.parametrize("retries, code, sig, state, reason", [
    ({}, 0, None, S.SUCCEEDED, "exit code 0"),
    ({}, 1, None, S.FAILED, "exit code 1"),
    ({}, 137, None, S.FAILED, "exit code 137 (SIGKILL)"),
    ({}, None, signal.SIGKILL, S.FAILED, OOM),
    ({}, None, signal.SIGSEGV, S.FAILED, "killed by SIGSEGV"),
    ({"on_error": 2}, 0, None, S.SUCCEEDED, "exit code 0"),
    ({"on_error": 2}, 1, None, S.RETRY_WAIT, "exit code 1; retry 1 of 2 after a 5s backoff"),   # 10s x 0.5
    ({"on_error": 2, "backoff": "1m"}, 3, None, S.RETRY_WAIT, "exit code 3; retry 1 of 2 after a 30s backoff"),
])
def test_an_exit_settles_the_job(queue, retries, code, sig, state, reason):
    job = queue.start(retries=retries)
    queue.clock.advance(100)

    [settled] = queue.exit(job.id, code, sig)

    stored = queue.get(job.id)
    assert settled == stored
    assert (stored.state, stored.reason) == (state, reason)
    assert (stored.exit_code, stored.signal, stored.pid, stored.assigned) == (code, sig, None, ())
    assert queue.compute.cleaned == [job.id]


def test_an_exit_charges_the_gpu_time_to_the_team(queue):
    job = queue.start(team="vision", resources={"gpus": 2})
    queue.clock.advance(100)

    queue.exit(job.id, 0)

    assert queue.get(job.id).gpu_seconds == 200.0
    assert queue.get(job.id).ended_at == T0 + 100
    half_life = queue.store.policy().half_life
    assert queue.store.usage(queue.clock.now(), half_life) == {"vision": pytest.approx(200.0)}


def test_an_error_is_retried_after_its_backoff_then_fails(queue):
    job = queue.start(retries={"on_error": 1})
    queue.clock.advance(60)
    queue.exit(job.id, 1)
    waiting = queue.get(job.id)
    assert (waiting.state, waiting.error_retries, waiting.not_before) == (S.RETRY_WAIT, 1, T0 + 65)

    queue.clock.advance(4)
    queue.supervisor.promote_retries()
    assert queue.state(job.id) == S.RETRY_WAIT
    queue.clock.advance(1)
    queue.supervisor.promote_retries()
    assert (queue.state(job.id), queue.get(job.id).reason) == (S.QUEUED, "back in the queue")

    queue.supervisor.dispatch()
    assert queue.compute.launches[-1] == Launch(job.id, (0,), 2)
    queue.exit(job.id, 1)
    assert (queue.state(job.id), queue.get(job.id).reason) == (S.FAILED, "exit code 1 after 1 retries")
    assert queue.get(job.id).gpu_seconds == 60.0


@pytest.mark.parametrize("report", [
    Exit("1", 0, 0, None),
    Exit("1", 2, 0, None),
    Exit("99", 1, 0, None),
], ids=["earlier-attempt", "later-attempt", "unknown-job"])
def test_an_exit_for_another_attempt_is_ignored(queue, report):
    job = queue.start()
    before = queue.get(job.id)
    queue.clock.advance(100)

    assert queue.supervisor.on_exits([report]) == []

    assert queue.get(job.id) == before
    assert queue.compute.cleaned == []
    # only the still-running attempt counts: nothing was settled and charged
    assert queue.store.usage(queue.clock.now(), 3600) == {"default": pytest.approx(100.0)}


def test_an_exit_reported_twice_is_settled_once(queue):
    job = queue.start()
    queue.clock.advance(10)
    queue.exit(job.id, 0)
    settled = queue.get(job.id)

    assert queue.supervisor.on_exits([Exit(job.id, 1, 1, None)]) == []
    assert queue.get(job.id) == settled


def test_exits_are_settled_together(queue):
    a, b = queue.start(), queue.start()

    out = queue.supervisor.on_exits([Exit(a.id, 1, 0, None), Exit(b.id, 1, 2, None)])

    assert [(j.id, j.state) for j in out] == [(a.id, S.SUCCEEDED), (b.id, S.FAILED)]


# -- requests --------------------------------------------------------------------------------

def test_a_cancel_request_terminates_once_and_the_exit_cancels(queue):
    job = queue.start()
    [result] = queue.control.cancel([job.id])
    assert result.action == "cancelling"

    queue.supervisor.carry_out_requests()
    queue.supervisor.carry_out_requests()

    assert queue.compute.terminated == [(job.id, GRACE)]
    assert queue.get(job.id).kill_reason == "cancel"
    queue.clock.advance(30)
    queue.exit(job.id, None, signal.SIGTERM)
    done = queue.get(job.id)
    assert (done.state, done.reason, done.request, done.kill_reason) == (S.CANCELLED, "cancelled by user", None, None)
    assert done.gpu_seconds == 30.0


@pytest.mark.parametrize("ask", ["cancel", "requeue"])
def test_a_request_finds_an_attempt_that_has_ended_and_leaves_its_end_as_it_was(queue, ask):
    """Its process ended before the request was carried out (a busy or paused daemon has not
    collected the end yet): nothing is signalled, and the end it reports is its own."""
    job = queue.start()
    getattr(queue.control, ask)([job.id])
    queue.compute.ended_ids = {job.id}

    queue.supervisor.tick()

    assert queue.compute.terminated == []
    assert queue.get(job.id).kill_reason is None
    queue.exit(job.id, 0)
    assert (queue.state(job.id), queue.get(job.id).reason) == (S.SUCCEEDED, "exit code 0")


def test_a_requeued_job_keeps_its_place(make_queue):
    queue = make_queue(1)
    job = queue.start()
    queue.clock.advance(10)
    later = queue.submit_one()
    [result] = queue.control.requeue([job.id])
    assert (result.action, queue.get(job.id).request) == ("requeueing", Request.REQUEUE)

    queue.supervisor.carry_out_requests()
    queue.supervisor.carry_out_requests()
    assert queue.compute.terminated == [(job.id, GRACE)]
    queue.exit(job.id, 143)

    back = queue.get(job.id)
    assert back.state == S.QUEUED
    assert states(back)[-3:] == [S.RUNNING, S.RETRY_WAIT, S.QUEUED]
    assert reasons(back)[S.RETRY_WAIT] == "requeued by user; resumes from its last checkpoint"
    assert (back.submitted_at, back.interruptions, back.error_retries) == (T0, 1, 0)
    assert (back.request, back.kill_reason) == (None, None)
    queue.supervisor.dispatch()
    assert queue.compute.launches[-1] == Launch(job.id, (0,), 2)
    assert queue.state(later.id) == S.QUEUED


@pytest.mark.parametrize("checkpoint, grace", [({}, GRACE), ({"grace": "30s"}, 30.0), ({"grace": "2m"}, 120.0)])
def test_terminate_gives_the_grace_the_spec_asks_for(queue, checkpoint, grace):
    job = queue.start(checkpoint=checkpoint)
    queue.control.cancel([job.id])

    queue.supervisor.carry_out_requests()

    assert queue.compute.terminated == [(job.id, grace)]


# -- wall time --------------------------------------------------------------------------------

@pytest.mark.parametrize("on_timeout, state, reason", [
    ("stop", S.TIMED_OUT, "exceeded its wall time of 10m00s"),
    ("requeue", S.QUEUED, "back in the queue"),
])
def test_wall_time_is_enforced(queue, on_timeout, state, reason):
    job = queue.start(limits={"wall_time": "10m", "on_timeout": on_timeout})
    bystander = queue.start()

    queue.clock.advance(599)
    queue.supervisor.enforce_wall_time()
    assert queue.compute.terminated == []
    queue.clock.advance(1)
    queue.supervisor.enforce_wall_time()
    queue.supervisor.enforce_wall_time()
    assert queue.compute.terminated == [(job.id, GRACE)]
    assert queue.get(job.id).kill_reason == "timeout"

    queue.exit(job.id, None, signal.SIGTERM)

    done = queue.get(job.id)
    assert (done.state, done.reason) == (state, reason)
    assert done.gpu_seconds == 600.0
    assert queue.state(bystander.id) == S.RUNNING


def test_an_attempt_that_ended_within_its_wall_time_is_not_stopped_when_its_end_is_seen_late(queue):
    """It ended 0 within its wall time; the tick that runs past its deadline finds its end not
    collected yet: nothing is signalled, no wake is due for it, and it succeeded (it is never run
    again, as on_timeout: requeue would have had it)."""
    job = queue.start(limits={"wall_time": "10m", "on_timeout": "requeue"})
    queue.compute.ended_ids = {job.id}
    queue.clock.advance(900)

    queue.supervisor.tick()

    assert queue.compute.terminated == []
    assert queue.get(job.id).kill_reason is None
    assert queue.supervisor.next_deadline() is None
    queue.exit(job.id, 0)
    assert (queue.state(job.id), queue.get(job.id).attempts) == (S.SUCCEEDED, 1)


def test_a_timeout_with_requeue_is_an_interruption(queue):
    job = queue.start(limits={"wall_time": "10m", "on_timeout": "requeue"}, retries={"on_error": 0})
    queue.clock.advance(600)
    queue.supervisor.enforce_wall_time()
    queue.exit(job.id, 143)

    back = queue.get(job.id)
    assert reasons(back)[S.RETRY_WAIT] == "reached its wall time of 10m00s; requeued to resume from its last checkpoint"
    assert (back.interruptions, back.error_retries, back.submitted_at) == (1, 0, T0)


@pytest.mark.parametrize("grace_used, state, reason", [
    (60, S.TIMED_OUT, "used its budget of 0.25 GPU-hours (reached its wall time of 10m00s; requeued"),
    (5, S.QUEUED, "back in the queue"),          # GPU time left: requeued as asked
])
def test_a_requeue_with_the_budget_spent_ends_the_job_instead(queue, grace_used, state, reason):
    """wall_time 10m, on_timeout requeue, max_gpu_hours 0.25 on 1 GPU (900 s), 250 s used before: the
    wall time stops the attempt first, and one that ends past the budget in its grace is not sent back
    to start and be stopped at once (and run its grace past the budget again)."""
    job = queue.start(limits={"wall_time": "10m", "on_timeout": "requeue", "max_gpu_hours": 0.25})
    queue.store.apply([Change(job.id, S.RUNNING, None, "", queue.clock.now(), {"gpu_seconds": 250.0})])
    queue.clock.advance(600)
    queue.supervisor.enforce_wall_time()
    assert queue.get(job.id).kill_reason == "timeout"
    queue.clock.advance(grace_used)
    queue.exit(job.id, None, signal.SIGTERM)

    done = queue.get(job.id)
    assert done.state == state
    assert (done.reason if state != S.QUEUED else reasons(done)[S.QUEUED]).startswith(reason)
    assert done.gpu_seconds == 250.0 + 600 + grace_used


# -- retries and deadlines ------------------------------------------------------------------------

def test_promote_retries_moves_only_due_jobs(queue):
    soon = queue.start(retries={"on_error": 1})                      # retried in 5s
    later = queue.start(retries={"on_error": 1, "backoff": "1m"})    # retried in 30s
    queue.supervisor.on_exits([Exit(soon.id, 1, 1, None), Exit(later.id, 1, 1, None)])

    queue.clock.advance(5)
    queue.supervisor.promote_retries()

    assert (queue.state(soon.id), queue.state(later.id)) == (S.QUEUED, S.RETRY_WAIT)
    queue.clock.advance(25)
    queue.supervisor.promote_retries()
    assert queue.state(later.id) == S.QUEUED


class CancelAfterRead:
    """A store where a user cancels `job_id` right after the supervisor reads the due retries."""

    def __init__(self, queue, job_id):
        self.queue, self.job_id = queue, job_id

    def due_retries(self, now):
        due = self.queue.store.due_retries(now)
        self.queue.control.cancel([self.job_id])
        return due

    def __getattr__(self, name):
        return getattr(self.queue.store, name)


def test_promote_retries_skips_a_job_cancelled_since_it_was_read(queue):
    cancelled = queue.start(retries={"on_error": 1})
    other = queue.start(retries={"on_error": 1})
    queue.supervisor.on_exits([Exit(cancelled.id, 1, 1, None), Exit(other.id, 1, 1, None)])
    queue.clock.advance(5)
    supervisor = Supervisor(CancelAfterRead(queue, cancelled.id), queue.compute, queue.clock, queue.rng)

    supervisor.promote_retries()

    assert (queue.state(cancelled.id), queue.state(other.id)) == (S.CANCELLED, S.QUEUED)


def test_next_deadline_is_the_earliest_retry_or_wall_time_end(queue):
    sup = queue.supervisor
    assert sup.next_deadline() is None

    queue.start()                                                    # no wall time: no deadline
    assert sup.next_deadline() is None
    queue.start(limits={"wall_time": "10m"})
    assert sup.next_deadline() == T0 + 600

    queue.clock.advance(100)
    short = queue.start(limits={"wall_time": "1m"})
    assert sup.next_deadline() == T0 + 160

    retried = queue.start(retries={"on_error": 1})
    queue.exit(retried.id, 1)
    assert sup.next_deadline() == T0 + 105

    queue.clock.advance(5)
    sup.promote_retries()
    assert sup.next_deadline() == T0 + 160

    queue.clock.advance(60)
    sup.enforce_wall_time()                                           # being stopped: no longer a deadline
    assert queue.get(short.id).kill_reason == "timeout"
    assert sup.next_deadline() == T0 + 600


# -- restart -------------------------------------------------------------------------------------

def test_recover_adopts_settles_and_requeues(make_queue):
    queue = make_queue(8)
    # a job on its second attempt after one application error
    vanished = queue.start(retries={"on_error": 2})
    queue.exit(vanished.id, 1)
    queue.clock.advance(5)
    queue.supervisor.promote_retries()
    queue.supervisor.dispatch()
    assert queue.get(vanished.id).attempts == 2
    alive = queue.start()
    succeeded = queue.start()
    failed = queue.start()
    # decided and claimed, but the daemon died before launching it
    claimed = queue.submit_one()
    queue.store.apply([Change(claimed.id, S.QUEUED, S.STARTING, "assigned GPUs 7", queue.clock.now(),
                              {"assigned": (7,)})])
    before_alive = queue.get(alive.id)
    launches = len(queue.compute.launches)

    queue.restart()
    queue.compute.alive_ids = {alive.id}
    queue.compute.exits = {succeeded.id: Exit(succeeded.id, 1, 0, None), failed.id: Exit(failed.id, 1, 2, None)}
    queue.clock.advance(50)
    counts = queue.supervisor.recover()

    assert counts == {"adopted": 1, "finished": 2, "requeued": 2}
    assert queue.get(alive.id) == before_alive
    assert (queue.state(succeeded.id), queue.state(failed.id)) == (S.SUCCEEDED, S.FAILED)
    assert queue.get(failed.id).reason == "exit code 2"
    lost = queue.get(vanished.id)
    assert lost.state == S.QUEUED
    assert reasons(lost)[S.RETRY_WAIT] == ("its process was lost while the queue daemon was down; "
                                           "resumes from its last checkpoint")
    assert (lost.interruptions, lost.error_retries, lost.attempts) == (1, 1, 2)
    unlaunched = queue.get(claimed.id)
    assert (unlaunched.state, unlaunched.assigned, unlaunched.pid) == (S.QUEUED, (), None)
    assert reasons(unlaunched)[S.RETRY_WAIT] == "queue daemon restarted before the job started"
    assert len(queue.compute.launches) == launches
    assert queue.compute.terminated == []
    assert sorted(queue.compute.cleaned) == sorted([vanished.id, succeeded.id, failed.id, vanished.id])


def test_recover_finishes_stopping_a_job_it_was_cancelling(queue):
    job = queue.start()
    queue.control.cancel([job.id])
    queue.supervisor.carry_out_requests()
    queue.compute.terminated.clear()

    queue.restart()
    queue.compute.alive_ids = {job.id}
    assert queue.supervisor.recover() == {"adopted": 1, "finished": 0, "requeued": 0}

    assert queue.compute.terminated == [(job.id, GRACE)]
    queue.exit(job.id, None, signal.SIGTERM)
    assert queue.state(job.id) == S.CANCELLED


def test_a_cancel_asked_while_the_daemon_was_down_after_the_job_ended_leaves_its_end_as_it_was(make_queue):
    """The job finished (and another failed with retries left) while the daemon was down; a cancel
    asked afterwards found them RUNNING. Nothing was signalled: the finished one succeeded, and its
    afterok dependant still runs; the failed one is not retried against its owner's cancel."""
    queue = make_queue(8)
    done, failing = queue.start(), queue.start(retries={"on_error": 2})
    after = queue.submit_one(after=f"afterok:{done.id}")
    queue.restart()
    queue.compute.exits = {done.id: Exit(done.id, 1, 0, None), failing.id: Exit(failing.id, 1, 1, None)}
    queue.control.cancel([done.id, failing.id])         # the daemon is down: nothing carries it out
    queue.supervisor.recover()

    assert (queue.state(done.id), queue.get(done.id).reason) == (S.SUCCEEDED, "exit code 0")
    assert queue.state(failing.id) == S.CANCELLED
    assert queue.get(failing.id).reason.startswith("cancelled by user (its attempt had ended: exit code 1")
    assert queue.compute.terminated == []
    assert after.id in [s.id for s in queue.supervisor.dispatch()]


# -- shutdown ------------------------------------------------------------------------------------

def test_shutdown_sends_running_jobs_back_to_the_queue(queue):
    a, b = queue.start(), queue.start()

    stopped = queue.supervisor.shutdown(keep_jobs=False)

    assert [j.id for j in stopped] == [a.id, b.id]
    assert queue.compute.terminated == [(a.id, GRACE), (b.id, GRACE)]
    queue.clock.advance(3)
    queue.supervisor.on_exits([Exit(a.id, 1, 143, None), Exit(b.id, 1, None, signal.SIGTERM)])
    for job_id in (a.id, b.id):
        back = queue.get(job_id)
        assert (back.state, back.interruptions, back.error_retries) == (S.QUEUED, 1, 0)
        assert reasons(back)[S.RETRY_WAIT] == "queue daemon stopped; resumes from its last checkpoint"


def test_shutdown_keeping_jobs_leaves_them_running(queue):
    a = queue.start()

    assert [j.id for j in queue.supervisor.shutdown(keep_jobs=True)] == [a.id]

    assert queue.compute.terminated == []
    assert (queue.state(a.id), queue.get(a.id).kill_reason) == (S.RUNNING, None)


def test_a_high_job_preempts_a_low_one_which_keeps_its_place(make_queue):
    from dataclasses import replace as _replace

    queue = make_queue(1)
    queue.store.set_policy(_replace(queue.store.policy(), preempt_tiers=(2,)))
    low = queue.start(priority="low")
    queue.clock.advance(5)
    high = queue.submit_one(priority="high")
    assert queue.supervisor.dispatch() == []
    assert queue.get(low.id).kill_reason == "preempt"
    queue.clock.advance(1)
    queue.exit(low.id, 143)
    back = queue.get(low.id)
    assert back.state.value == "QUEUED" and back.submitted_at == low.submitted_at
    assert back.interruptions == 1 and back.error_retries == 0
    assert "preempted for a job of a higher tier" in " ".join(t.reason for t in back.history)
    [started] = queue.supervisor.dispatch()
    assert started.id == high.id


def test_time_slicing_stops_a_job_that_had_its_slice_for_one_of_its_tier_that_had_none(make_queue):
    """Through the real store: the service a job had is what its record's GPU-seconds say, and the
    job stopped for slicing comes back behind the one that stopped it."""
    from dataclasses import replace as _replace

    queue = make_queue(1)
    queue.store.set_policy(_replace(queue.store.policy(), slice_tiers=(1,), slice_after=600.0, slice_min_run=60.0))
    long = queue.start()
    queue.clock.advance(300)
    short = queue.submit_one()
    assert queue.supervisor.dispatch() == [] and queue.get(long.id).kill_reason is None   # not yet its slice
    queue.clock.advance(400)
    assert queue.supervisor.dispatch() == []
    assert queue.get(long.id).kill_reason == "preempt"
    queue.exit(long.id, 143)
    back = queue.get(long.id)
    assert back.state.value == "QUEUED" and back.gpu_seconds == pytest.approx(700.0)
    [started] = queue.supervisor.dispatch()
    assert started.id == short.id
    queue.clock.advance(30)
    assert queue.supervisor.dispatch() == [] and queue.get(short.id).kill_reason is None   # it has had no slice


def test_the_loop_wakes_when_slicing_lets_a_waiting_job_stop_a_running_one(make_queue):
    """Nothing else happens: the daemon must still wake when the running job has had its slice, if
    stopping it would make room for a waiting job."""
    from dataclasses import replace as _replace

    queue = make_queue(3)
    queue.store.set_policy(_replace(queue.store.policy(), slice_tiers=(1,), slice_after=600.0, slice_min_run=60.0))
    queue.start(priority="high", limits={"wall_time": "2d"})   # a tier not sliced
    running = queue.start(limits={"wall_time": "1d"})
    started = queue.clock.now()
    queue.clock.advance(100)
    assert queue.supervisor.next_deadline() == started + 86_400   # nothing waits: only its wall time
    queue.submit_one(resources={"gpus": 3})   # one GPU free, one to stop, one high: never enough
    assert queue.supervisor.next_deadline() == started + 86_400
    queue.submit_one(resources={"gpus": 2})   # one free and one to stop are enough
    assert queue.supervisor.next_deadline() == started + 600   # 600 GPU-seconds on 1 GPU
    queue.store.set_policy(_replace(queue.store.policy(), slice_tiers=()))
    assert queue.supervisor.next_deadline() == started + 86_400
    assert queue.get(running.id).kill_reason is None


def test_over_budget_jobs_are_held_and_released_when_the_budget_allows(make_queue):
    from dataclasses import replace as _replace

    from gqa.ports import Inventory
    from gqa.scheduling import Gpu, TeamPolicy

    queue = make_queue(2)
    queue.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g", 3.0), Gpu(1, "a10g", 3.0))))  # $3 per GPU-hour
    queue.store.set_team("vision", TeamPolicy(budget=10.0))
    first = queue.start(team="vision", limits={"wall_time": "2h"})        # may cost $6
    second = queue.submit_one(team="vision", limits={"wall_time": "1h"})  # $3 more: $9 fits
    third = queue.submit_one(team="vision", limits={"wall_time": "1h"})   # $12 does not
    started = queue.supervisor.dispatch()
    assert [j.id for j in started] == [second.id]
    held = queue.get(third.id)
    assert held.state.value == "HELD" and held.status.value == "held"
    assert "= $12.00, over $10.00 this period" in held.reason
    queue.store.set_team("vision", _replace(queue.store.teams()["vision"], budget=100.0))
    queue.supervisor.dispatch()  # releases it
    assert queue.get(third.id).state.value == "QUEUED"
    queue.clock.advance(3600)
    queue.exit(first.id, 0)
    assert queue.store.spend("1970-01")["vision"] == pytest.approx(3.0)


def test_a_job_the_raised_budget_releases_starts_in_the_same_dispatch(make_queue):
    """The pass that releases a held job is followed by one that starts it: released and left
    QUEUED, it waited with its GPUs free until something else woke the loop (10-60 s)."""
    from dataclasses import replace as _replace

    from gqa.ports import Inventory
    from gqa.scheduling import Gpu, TeamPolicy

    queue = make_queue(2)
    queue.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g", 3.0), Gpu(1, "a10g", 3.0))))  # $3 per GPU-hour
    queue.store.set_team("vision", TeamPolicy(budget=1.0))
    job = queue.submit_one(team="vision", limits={"wall_time": "1h"})     # may cost $3: over $1
    assert queue.supervisor.dispatch() == [] and queue.state(job.id) == S.HELD
    queue.store.set_team("vision", _replace(queue.store.teams()["vision"], budget=100.0))
    assert [j.id for j in queue.supervisor.dispatch()] == [job.id]
    assert queue.state(job.id) == S.RUNNING


def test_a_backend_failure_at_launch_sends_the_job_back_not_to_failed(make_queue):
    from gqa.models.errors import BackendUnavailable

    queue = make_queue(1)
    job = queue.submit_one()
    queue.compute.fail[job.id] = BackendUnavailable("throttled")
    assert queue.supervisor.dispatch() == []
    back = queue.get(job.id)
    assert back.state.value == "RETRY_WAIT" and back.error_retries == 0 and back.assigned == ()
    assert "the compute backend did not start it (BackendUnavailable: throttled)" in back.reason
    del queue.compute.fail[job.id]
    queue.clock.advance(60)
    queue.supervisor.promote_retries()
    [started] = queue.supervisor.dispatch()
    assert started.id == job.id and started.attempts == 1


def _refuse_each_pass(queue, job_id: str, times: int) -> list[float]:
    """Dispatch, and after each refusal wait out the job's delay: the delays, in order."""
    delays = []
    for _ in range(times):
        queue.supervisor.promote_retries()
        assert queue.supervisor.dispatch() == []
        back = queue.get(job_id)
        if back.state.value != "RETRY_WAIT":
            break
        delays.append(back.not_before - queue.clock.now())
        queue.clock.advance(delays[-1])
    return delays


def test_refusals_in_a_row_wait_longer_each_time_and_an_outage_never_fails_the_job(make_queue):
    from gqa.models.errors import BackendUnavailable
    from gqa.services.supervisor import RELAUNCH_MAX

    queue = make_queue(1)
    job = queue.submit_one(retries={"on_capacity": 2})
    queue.compute.fail[job.id] = BackendUnavailable("throttled")
    delays = _refuse_each_pass(queue, job.id, 12)
    assert len(delays) == 12                                            # a passing outage: never FAILED
    assert all(later > earlier for earlier, later in zip(delays[:5], delays[1:6]))   # doubling (jitter < 2x)
    assert max(delays) <= 2 * RELAUNCH_MAX
    back = queue.get(job.id)
    assert back.error_retries == 0 and back.capacity_failures == 12


def test_a_refusal_of_gqas_own_rights_ends_the_job_with_the_reason_not_a_loop(make_queue):
    """A checkpoint pointer S3 denies (no s3:ListBucket) is refused the same way on every try."""
    from gqa.models.errors import Misconfigured

    queue = make_queue(1)
    job = queue.submit_one(retries={"on_capacity": 2})
    queue.compute.fail[job.id] = Misconfigured("cannot read s3://ckpt/checkpoints/1/latest: access denied")
    delays = _refuse_each_pass(queue, job.id, 10)
    assert len(delays) == 2                                             # on_capacity refusals, then the end
    failed = queue.get(job.id)
    assert failed.state.value == "FAILED" and failed.assigned == ()
    assert "access denied" in failed.reason and "3 times in a row" in failed.reason


@pytest.mark.parametrize("backfill_by, mid_starts", [("limits", True), ("predictions", False)])
def test_dispatch_backfills_by_the_queue_s_choice_of_limits_or_predictions(queue, backfill_by, mid_starts):
    """Team vision's past job used a tenth of its 10-hour limit, so its running "r" (asks 10 hours)
    is expected to end in an hour. "head" needs all 4 GPUs; "mid", of team nlp with no history, asks
    9 hours. By limits mid ends before head's reservation (r's limit) and starts on the 2 free GPUs;
    by predictions head is reserved for r's expected end, which mid would run past."""
    from gqa.services.quota import QuotaService

    QuotaService(queue.store).set_policy(backfill_by=backfill_by)
    past = queue.start(team="vision", resources={"gpus": 1}, limits={"wall_time": "10h"})
    queue.clock.advance(3_600)
    queue.exit(past.id, 0)
    r = queue.start(team="vision", resources={"gpus": 2}, limits={"wall_time": "10h"})
    queue.clock.advance(60)
    head = queue.submit_one(team="vision", resources={"gpus": 4}, limits={"wall_time": "1h"})
    mid = queue.submit_one(team="nlp", resources={"gpus": 2}, limits={"wall_time": "9h"})

    started = [j.id for j in queue.supervisor.dispatch()]

    assert started == ([mid.id] if mid_starts else [])
    result = plan(read_snapshot(queue.store, queue.clock.now()))
    expected_end = r.started_at + 3_600 if backfill_by == "predictions" else r.started_at + 36_000
    assert result.reserved == {head.id: expected_end}
    assert queue.store.policy().backfill_by == backfill_by
