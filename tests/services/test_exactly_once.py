"""Exactly once, by construction: a launch is recorded before its attempt may
run, an exit record is dropped only after its result is committed, and a
job whose launch was never recorded goes back to the queue (or ends, if its
cancel was asked) without ever running twice."""

import pytest

from gqa.models.errors import BackendUnavailable
from gqa.models.job import JobState, Request
from gqa.ports import Change, Exit
from tests.services.conftest import T0

S = JobState


class FailingApply:
    """Wraps the store: apply() raises once a change moves a job to `to`."""

    def __init__(self, store, to: JobState):
        self.store, self.to, self.armed = store, to, True

    def __getattr__(self, name):
        return getattr(self.store, name)

    def apply(self, changes):
        if self.armed and any(c.to == self.to for c in changes):
            raise BackendUnavailable("the disk holding gqa.db is full")
        return self.store.apply(changes)


def test_every_attempt_is_released_only_after_its_launch_is_recorded(queue):
    seen = []

    def release(job_ids):
        seen.extend((i, queue.get(i).state, queue.get(i).pid) for i in job_ids)

    queue.compute.release = release
    first, second = queue.submit_one(), queue.submit_one()

    queue.supervisor.dispatch()

    assert seen == [(first.id, S.RUNNING, 1001), (second.id, S.RUNNING, 1002)]
    assert queue.compute.abandoned == []


def test_a_launch_record_that_fails_abandons_every_attempt_and_the_next_tick_requeues_them(queue):
    jobs = [queue.submit_one() for _ in range(3)]
    failing = FailingApply(queue.store, S.RUNNING)
    queue.supervisor.store = failing

    with pytest.raises(BackendUnavailable):
        queue.supervisor.dispatch()

    assert queue.compute.abandoned == [j.id for j in jobs] and queue.compute.released == []
    assert {queue.get(j.id).state for j in jobs} == {S.STARTING}
    failing.armed = False   # the disk has room again
    queue.supervisor.tick()
    for job in jobs:
        stored = queue.get(job.id)
        assert S.RETRY_WAIT in [t.state for t in stored.history]
        assert stored.interruptions == 0 and stored.error_retries == 0
    assert len(queue.compute.launches) == 6   # each launched again, once
    assert {queue.get(j.id).state for j in jobs} == {S.RUNNING}


def test_a_cancel_asked_while_a_job_was_starting_ends_it_before_it_starts_again(queue):
    job = queue.submit_one()
    queue.store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", T0, {"assigned": (0,)})])
    queue.control.cancel([job.id])          # the daemon is down: only the request is recorded
    assert queue.get(job.id).request == Request.CANCEL

    queue.restart().recover()
    queue.supervisor.tick()

    assert queue.get(job.id).state == S.CANCELLED
    assert queue.compute.launches == []


def test_a_cancel_asked_while_the_daemon_was_down_stops_the_job_before_the_pass(queue):
    running = queue.start(resources={"gpus": 4})
    waiting = queue.submit_one(resources={"gpus": 4})
    queue.control.cancel([running.id])
    queue.compute.alive_ids.add(running.id)

    queue.restart().recover()
    queue.supervisor.tick()

    assert [t[0] for t in queue.compute.terminated] == [running.id]
    assert queue.get(waiting.id).state == S.QUEUED   # its GPUs are not free until the cancelled one ends


def test_the_exit_record_goes_only_once_the_result_is_committed(queue):
    job = queue.start()
    failing = FailingApply(queue.store, S.SUCCEEDED)
    queue.supervisor.store = failing

    with pytest.raises(BackendUnavailable):
        queue.exit(job.id, 0)
    assert queue.compute.forgotten == []
    assert queue.get(job.id).state == S.RUNNING

    failing.armed = False
    queue.exit(job.id, 0)
    assert queue.compute.forgotten == [job.id]
    assert queue.get(job.id).state == S.SUCCEEDED


def test_a_job_ends_when_its_process_ended_not_when_it_was_noticed(queue):
    job = queue.start(resources={"gpus": 2})
    queue.clock.advance(16)   # the daemon was paused: it notices 16 s after the start

    queue.supervisor.on_exits([Exit(job.id, 1, 0, None, ended_at=T0 + 6)])

    done = queue.get(job.id)
    assert (done.state, done.ended_at, done.gpu_seconds) == (S.SUCCEEDED, T0 + 6, 12.0)


@pytest.mark.parametrize("ended_at, expected", [(T0 - 50, T0), (T0 + 999, T0 + 16)])
def test_an_end_time_outside_the_attempt_is_clamped_to_it(queue, ended_at, expected):
    job = queue.start()
    queue.clock.advance(16)

    queue.supervisor.on_exits([Exit(job.id, 1, 0, None, ended_at=ended_at)])

    assert queue.get(job.id).ended_at == expected


def test_a_requeued_job_carries_no_kill_reason_into_its_next_attempt(queue):
    job = queue.start()
    queue.control.requeue([job.id])
    queue.supervisor.tick()                     # SIGTERM: kill_reason set
    assert queue.get(job.id).kill_reason is not None
    queue.exit(job.id, 143)

    again = queue.get(job.id)
    assert (again.kill_reason, again.request) == (None, None)
    queue.supervisor.tick()
    queue.exit(job.id, 0)
    assert queue.get(job.id).state == S.SUCCEEDED   # not discarded as a stale requeue


def test_tick_runs_requests_before_wall_time_and_the_pass(queue):
    calls = []
    sup = queue.supervisor
    for name in ("requeue_unlaunched", "promote_retries", "carry_out_requests", "enforce_wall_time", "dispatch"):
        original = getattr(sup, name)
        setattr(sup, name, lambda *a, _n=name, _o=original, **k: (calls.append(_n), _o(*a, **k))[1])

    sup.tick()

    assert calls == ["requeue_unlaunched", "promote_retries", "carry_out_requests", "enforce_wall_time", "dispatch"]


# -- a backend that holds launches back (a local executor): launch first, then claim and record at once ----

@pytest.fixture
def held(queue):
    queue.compute.holds_launches = True
    return queue


def test_held_launches_are_claimed_and_recorded_in_one_write_after_they_start(held):
    states_at_launch = []
    launch = held.compute.launch
    held.compute.launch = lambda job, gpus, attempt: (states_at_launch.append(held.get(job.id).state),
                                                      launch(job, gpus, attempt))[1]
    first, second = held.submit_one(), held.submit_one()

    started = held.supervisor.dispatch()

    assert states_at_launch == [S.QUEUED, S.QUEUED]          # nothing written before the processes exist
    assert [j.id for j in started] == [first.id, second.id]
    for job in (first, second):
        stored = held.get(job.id)
        assert [t.state for t in stored.history][-2:] == [S.STARTING, S.RUNNING]
        assert (stored.state, stored.assigned != (), stored.pid is not None) == (S.RUNNING, True, True)
    assert held.compute.released == [first.id, second.id]


def test_a_held_launch_whose_record_fails_leaves_the_job_queued_and_its_process_abandoned(held):
    job = held.submit_one()
    held.supervisor.store = FailingApply(held.store, S.STARTING)

    with pytest.raises(BackendUnavailable):
        held.supervisor.dispatch()

    assert held.get(job.id).state == S.QUEUED and held.get(job.id).assigned == ()
    assert held.compute.abandoned == [job.id] and held.compute.released == []


def test_a_job_cancelled_while_its_held_launch_starts_is_abandoned_not_run(held):
    job, other = held.submit_one(), held.submit_one()
    launch = held.compute.launch

    def cancel_first(j, gpus, attempt):
        launched = launch(j, gpus, attempt)
        if j.id == job.id:
            held.control.cancel([job.id])     # another process cancels it straight in the database
        return launched

    held.compute.launch = cancel_first

    started = held.supervisor.dispatch()

    assert [j.id for j in started] == [other.id]
    assert held.get(job.id).state == S.CANCELLED
    assert held.compute.abandoned == [job.id] and held.compute.released == [other.id]
