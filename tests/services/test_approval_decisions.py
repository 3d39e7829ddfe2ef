"""ControlService.approve and deny: a job named on its own that is not
awaiting approval is refused, whether another approver decided it before it
was read or between the read and the write; an array's tasks decided
meanwhile are left as they are."""

import pytest

from gqa.models.errors import InvalidTransition
from gqa.models.job import JobState
from gqa.scheduling import Policy
from gqa.services.control import ControlService

S = JobState


class DecidedMeanwhile:
    """A store on which another approver decides `job_id` just before this call writes anything."""

    def __init__(self, queue, job_id: str, other: str):
        self.store, self.queue, self.job_id, self.other = queue.store, queue, job_id, other

    def apply(self, changes):
        if self.other:
            getattr(self.queue.control, self.other)([self.job_id], caller="bob")
            self.other = ""
        return self.store.apply(changes)

    def __getattr__(self, name):
        return getattr(self.store, name)


def _awaiting(queue, **overrides):
    queue.store.set_policy(Policy(approval_gpus=2))
    return queue.submit(resources={"gpus": 4}, **overrides)


def _decide(control: ControlService, action: str, refs: list[str]):
    return getattr(control, action)(refs, caller="carol")


@pytest.mark.parametrize("action", ["approve", "deny"])
@pytest.mark.parametrize("other, state, status", [
    ("approve", S.QUEUED, "pending"),
    ("deny", S.REJECTED, "rejected"),
])
def test_the_loser_of_two_approvers_is_refused_as_a_later_caller_is(queue, action, other, state, status):
    [job] = _awaiting(queue)
    racing = ControlService(DecidedMeanwhile(queue, job.id, other), queue.clock)
    refused = f"job {job.id} is {status}, not awaiting approval"

    with pytest.raises(InvalidTransition, match=refused):
        _decide(racing, action, [job.id])          # read while awaiting approval, written after bob's decision
    with pytest.raises(InvalidTransition, match=refused):
        _decide(queue.control, action, [job.id])   # read after it

    assert queue.state(job.id) == state and "by bob" in queue.get(job.id).reason


@pytest.mark.parametrize("action", ["approve", "deny"])
def test_a_task_decided_meanwhile_is_unchanged_when_the_array_is_named(queue, action):
    tasks = _awaiting(queue, array="0-2")
    racing = ControlService(DecidedMeanwhile(queue, tasks[1].id, "approve"), queue.clock)

    results = _decide(racing, action, ["1"])

    assert [(r.job.id, r.action) for r in results] == [
        ("1_0", "approved" if action == "approve" else "denied"),
        ("1_1", "unchanged"),
        ("1_2", "approved" if action == "approve" else "denied"),
    ]
    assert results[1].detail == "not awaiting approval (pending)"
    assert queue.state("1_1") == S.QUEUED
