"""ControlService.hold and release: pending jobs held by their owner until
released, whole arrays at once, guarded on the state read, idempotent."""

import pytest

from gqa.models.errors import InvalidTransition
from gqa.models.job import JobState, Transition
from gqa.ports import Change
from gqa.services import control
from gqa.services.control import ControlService
from tests.services.conftest import T0
from tests.services.test_control import StaleReads, setup

S = JobState


def _budget_held(queue):
    """A job the budget holds: HELD, not by a user."""
    job = queue.submit_one()
    [job] = queue.store.apply([Change(job.id, S.QUEUED, S.HELD, "team default is over its budget", T0)])
    return job


def test_holding_a_queued_job_holds_it_by_its_owner(queue):
    job = queue.submit_one()
    queue.clock.advance(5)

    [result] = queue.control.hold([job.id], caller="alice")

    stored = queue.get(job.id)
    assert (result.action, result.job.state, result.job.user_hold) == ("held", S.HELD, True)
    assert (stored.state, stored.user_hold, stored.reason) == (S.HELD, True, "held by alice")
    assert stored.history[-1] == Transition(S.HELD, T0 + 5, "held by alice")
    assert queue.waker.named[-1] == [job.id]


def test_holding_twice_changes_nothing_the_second_time(queue):
    job = queue.submit_one()
    queue.control.hold([job.id])
    before = queue.get(job.id)

    [again] = queue.control.hold([job.id])

    assert (again.action, again.detail) == ("unchanged", "already held")
    assert queue.get(job.id) == before
    assert before.reason == "held by user"


def test_a_job_the_budget_holds_is_held_by_its_owner_too(queue):
    job = _budget_held(queue)

    [result] = queue.control.hold([job.id])

    stored = queue.get(job.id)
    assert (result.action, result.detail) == ("held", "its team's budget holds it too")
    assert (stored.state, stored.user_hold, stored.reason) == (S.HELD, True, "team default is over its budget")
    assert len(stored.history) == len(job.history)          # no move: it was HELD already


@pytest.mark.parametrize("state, words", [
    (S.RUNNING, "job 1 is running; only a pending job can be held (gqa cancel 1 stops it, gqa requeue 1 sends"),
    (S.STARTING, "job 1 is starting; only a pending job can be held"),
    (S.RETRY_WAIT, "job 1 is retrying; only a queued or held job can be held"),
    (S.SUCCEEDED, "job 1 already completed; only a pending job can be held"),
    (S.CANCELLED, "job 1 already cancelled"),
])
def test_a_job_named_on_its_own_that_is_not_pending_cannot_be_held(queue, state, words):
    job = setup(queue, state)
    other = queue.submit_one()
    before = [queue.get(job.id), queue.get(other.id)]

    with pytest.raises(InvalidTransition, match=words.replace("(", r"\(").replace(")", r"\)")):
        queue.control.hold([other.id, job.id])

    assert [queue.get(job.id), queue.get(other.id)] == before     # checked before anything changed


def test_a_job_awaiting_approval_cannot_be_held(queue):
    from gqa.scheduling import Policy

    queue.store.set_policy(Policy(approval_gpus=1))
    job = queue.submit_one(resources={"gpus": 2})
    assert job.state == S.PENDING_APPROVAL
    with pytest.raises(InvalidTransition, match="job 1 is awaiting approval; only a queued or held job"):
        queue.control.hold([job.id])
    assert queue.state(job.id) == S.PENDING_APPROVAL


def test_holding_an_array_holds_its_pending_tasks_in_chunks(make_queue, monkeypatch):
    monkeypatch.setattr(control, "CHUNK", 2)
    queue = make_queue(2)
    queue.submit(array="0-5")
    queue.supervisor.dispatch()                            # 1_0 and 1_1 start
    queue.exit("1_1", 0)
    queue.store.apply([Change("1_2", S.QUEUED, S.HELD, "team default is over its budget", T0)])

    results = queue.control.hold(["1"])

    assert [(r.job.id, r.action, r.detail) for r in results] == [
        ("1_0", "unchanged", "not pending (running)"),
        ("1_1", "unchanged", "not pending (completed)"),
        ("1_2", "held", "its team's budget holds it too"),
        ("1_3", "held", ""), ("1_4", "held", ""), ("1_5", "held", ""),
    ]
    assert [(queue.state(f"1_{i}"), queue.get(f"1_{i}").user_hold) for i in range(6)] == \
        [(S.RUNNING, False), (S.SUCCEEDED, False)] + [(S.HELD, True)] * 4


def test_a_hold_that_races_a_dispatch_reads_again_and_leaves_the_running_job(queue):
    job = queue.submit_one()
    seen = queue.store.resolve(job.id)        # read while QUEUED
    queue.supervisor.dispatch()               # then it starts

    [result] = ControlService(StaleReads(queue.store, seen), queue.clock).hold([job.id])

    assert (result.action, result.detail) == ("unchanged", "not pending (running)")
    stored = queue.get(job.id)
    assert (stored.state, stored.user_hold) == (S.RUNNING, False)


# -- release -----------------------------------------------------------------------------------------

def test_releasing_a_held_job_queues_it_again_in_its_old_place(queue):
    job = queue.submit_one()
    queue.control.hold([job.id])
    queue.clock.advance(60)

    [result] = queue.control.release([job.id], caller="alice")

    stored = queue.get(job.id)
    assert (result.action, result.job.state) == ("released", S.QUEUED)
    assert (stored.state, stored.user_hold, stored.reason) == (S.QUEUED, False, "released by alice")
    assert stored.history[-1] == Transition(S.QUEUED, T0 + 60, "released by alice")
    assert (stored.seq, stored.submitted_at) == (job.seq, job.submitted_at)    # its place: seq and age
    [again] = queue.control.release([job.id])
    assert (again.action, again.detail) == ("unchanged", "not held (pending)")
    assert queue.get(job.id) == stored


def test_a_job_only_the_budget_holds_is_not_released_by_a_user(queue):
    job = _budget_held(queue)
    before = queue.get(job.id)

    [result] = queue.control.release([job.id])

    assert result.action == "unchanged" and "held by its team's budget, not by a user" in result.detail
    assert queue.get(job.id) == before


def test_a_held_job_waits_and_starts_once_released(queue):
    job = queue.submit_one()
    queue.control.hold([job.id])

    assert queue.supervisor.dispatch() == []
    assert queue.state(job.id) == S.HELD

    queue.control.release([job.id])
    assert [j.id for j in queue.supervisor.dispatch()] == [job.id]
    assert queue.state(job.id) == S.RUNNING


def test_releasing_an_array_releases_its_held_tasks_only(make_queue):
    queue = make_queue(1)
    queue.submit(array="0-2")
    queue.supervisor.dispatch()                            # 1_0 starts
    queue.control.hold(["1"])

    results = queue.control.release(["1"])

    assert [(r.job.id, r.action) for r in results] == [("1_0", "unchanged"), ("1_1", "released"),
                                                       ("1_2", "released")]
    assert [queue.state(f"1_{i}") for i in range(3)] == [S.RUNNING, S.QUEUED, S.QUEUED]
