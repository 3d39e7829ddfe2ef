"""ControlService: cancel and requeue, at once or through a request."""

import pytest

from gqa.models.errors import InvalidTransition, NotPermitted
from gqa.models.job import JobState, Request
from gqa.ports import Change
from gqa.services.access import Action, Principal, Role, authorize
from gqa.services.control import ControlService
from tests.services.conftest import T0

S = JobState


# -- getting a job into a state, the way the queue would --------------------------------

def _queued(queue):
    return queue.submit_one()


def _starting(queue):
    job = queue.submit_one()
    [job] = queue.store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", T0, {"assigned": (0,)})])
    return job


def _running(queue):
    return queue.start()


def _retry_wait(queue):
    job = queue.start(retries={"on_error": 1})
    queue.exit(job.id, 1)
    return queue.get(job.id)


def _ended(code):
    def make(queue):
        job = queue.start()
        queue.exit(job.id, code)
        return queue.get(job.id)
    return make


def _cancelled(queue):
    job = queue.submit_one()
    queue.control.cancel([job.id])
    return queue.get(job.id)


SETUP = {S.QUEUED: _queued, S.STARTING: _starting, S.RUNNING: _running, S.RETRY_WAIT: _retry_wait,
         S.SUCCEEDED: _ended(0), S.FAILED: _ended(1), S.CANCELLED: _cancelled}


def setup(queue, state):
    job = SETUP[state](queue)
    assert job.state == state
    return job


# -- cancel --------------------------------------------------------------------------------

@pytest.mark.parametrize("state", [S.QUEUED, S.RETRY_WAIT])
def test_cancelling_a_waiting_job_cancels_it_at_once(queue, state):
    job = setup(queue, state)
    queue.clock.advance(20)

    [result] = queue.control.cancel([job.id])

    stored = queue.get(job.id)
    assert (result.action, result.job.state) == ("cancelled", S.CANCELLED)
    assert (stored.state, stored.reason, stored.ended_at, stored.not_before) == \
        (S.CANCELLED, "cancelled by user", T0 + 20, None)
    assert result.job == stored
    assert queue.compute.terminated == []


@pytest.mark.parametrize("state", [S.STARTING, S.RUNNING])
def test_cancelling_a_job_holding_gpus_asks_the_supervisor(queue, state):
    job = setup(queue, state)

    [result] = queue.control.cancel([job.id])
    [again] = queue.control.cancel([job.id])

    stored = queue.get(job.id)
    assert (result.action, result.detail) == ("cancelling", "stopping its processes")
    assert (again.action, again.detail) == ("cancelling", "already being cancelled")
    assert (stored.state, stored.request) == (state, Request.CANCEL)
    assert [j.id for j in queue.store.with_requests()] == [job.id]


@pytest.mark.parametrize("state, detail", [
    (S.SUCCEEDED, "already completed"),
    (S.FAILED, "already failed"),
    (S.CANCELLED, "already cancelled"),
])
def test_cancelling_an_ended_job_changes_nothing(queue, state, detail):
    job = setup(queue, state)
    before = queue.get(job.id)

    [result] = queue.control.cancel([job.id])

    assert (result.action, result.detail) == ("unchanged", detail)
    assert queue.get(job.id) == before


def test_cancelling_a_group_cancels_every_task(make_queue):
    queue = make_queue(2)
    queue.submit(array="0-2")
    queue.supervisor.dispatch()

    results = queue.control.cancel(["1"])

    assert [(r.job.id, r.action) for r in results] == [("1_0", "cancelling"), ("1_1", "cancelling"),
                                                       ("1_2", "cancelled")]
    assert [queue.state(i) for i in ("1_0", "1_1", "1_2")] == [S.RUNNING, S.RUNNING, S.CANCELLED]
    assert queue.waker.wakes == 2   # the submission, then the cancel


class StaleReads:
    """A store whose resolve() answers from an earlier read."""

    def __init__(self, store, seen):
        self.store, self.seen = store, seen

    def resolve(self, ref):
        return self.seen

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_cancel_that_races_a_dispatch_rereads_and_asks_the_supervisor(queue):
    job = queue.submit_one()
    seen = queue.store.resolve(job.id)        # read while QUEUED
    queue.supervisor.dispatch()               # then it starts

    [result] = ControlService(StaleReads(queue.store, seen), queue.clock).cancel([job.id])

    assert result.action == "cancelling"
    assert (queue.state(job.id), queue.get(job.id).request) == (S.RUNNING, Request.CANCEL)


# -- requeue --------------------------------------------------------------------------------

def test_requeueing_a_running_job_asks_the_supervisor(queue):
    job = setup(queue, S.RUNNING)

    [result] = queue.control.requeue([job.id])

    assert result.action == "requeueing"
    assert (queue.state(job.id), queue.get(job.id).request) == (S.RUNNING, Request.REQUEUE)


@pytest.mark.parametrize("state", [S.QUEUED, S.RETRY_WAIT])
def test_requeueing_a_waiting_job_changes_nothing(queue, state):
    job = setup(queue, state)
    before = queue.get(job.id)

    [result] = queue.control.requeue([job.id])

    assert result.action == "unchanged"
    assert queue.get(job.id) == before


@pytest.mark.parametrize("state", [S.STARTING, S.SUCCEEDED, S.FAILED, S.CANCELLED])
def test_only_a_running_job_can_be_requeued(queue, state):
    job = setup(queue, state)
    before = queue.get(job.id)

    with pytest.raises(InvalidTransition):
        queue.control.requeue([job.id])

    assert queue.get(job.id) == before


# -- ownership ----------------------------------------------------------------------------------

@pytest.mark.parametrize("verb", ["cancel", "requeue"])
@pytest.mark.parametrize("caller, admin, allowed", [
    ("bob", False, False),
    ("alice", False, True),
    ("bob", True, True),
])
def test_only_the_owner_or_an_admin_may_act(queue, verb, caller, admin, allowed):
    """The rule is gqa.services.access's, checked on the jobs the service then changes."""
    job = queue.start(owner="alice")
    before = queue.get(job.id)
    who = Principal(owner=caller, arn=f"arn:aws:iam::1:user/{caller}", roles=frozenset({Role.ADMIN} if admin else ()))
    action = Action.CANCEL if verb == "cancel" else Action.REQUEUE

    if allowed:
        authorize(who, action, queue.store.resolve(job.id))
        [result] = getattr(queue.control, verb)([job.id])
        assert result.action in ("cancelling", "requeueing")
        assert queue.get(job.id).request is not None
    else:
        with pytest.raises(NotPermitted, match="belongs to alice; bob may not"):
            authorize(who, action, queue.store.resolve(job.id))
        assert queue.get(job.id) == before
