"""Approval requests: a submission admitted to wait for an approver is one
message to the approvers (kind "approval", its team), with the numbers and
the commands, sent once however often the submission is delivered."""

from __future__ import annotations

import pytest

from gqa.models.errors import BackendUnavailable
from gqa.models.job import JobState
from gqa.ports import Inventory
from gqa.scheduling import Gpu, Policy
from gqa.services.approvals import APPROVAL, approval_request, newly_awaiting
from gqa.services.submit import SubmitService
from tests.builders import job_record, spec
from tests.services.fakes import RecordingIntake, RecordingNotifier

S = JobState
PRICED = (Gpu(0, "a10g", 1.5, spot=True), Gpu(1, "a10g", 2.0), Gpu(2, "a10g", 2.0), Gpu(3, "h100", 8.0))
WAITING = "needs approval: asks for 2 GPUs (approval needed over 1)"


def waiting(**overrides):
    fields = dict(state=S.PENDING_APPROVAL, reason=WAITING, owner="bob", team="vision", name="llm",
                  spec={"resources": {"gpus": 2, "gpu_type": "a10g"}, "limits": {"wall_time": "10h"}})
    fields.update(overrides)
    return job_record(**fields)


@pytest.mark.parametrize("jobs, subject, lines", [
    ([waiting()], "gqa: job 1 (llm) from bob waits for approval", [
        "bob (team vision) submitted job 1 (llm); it waits for an approver.",
        "It asks for 2 x a10g GPUs (on demand) for up to 10h00m: up to 20.0 GPU-hours, "
        "up to $40.00 at $2.00 per GPU-hour.",
        "Over the approval threshold: asks for 2 GPUs (approval needed over 1).",
        "Approve:  gqa approve 1",
        'Deny:     gqa deny 1 --reason "..."']),
    ([waiting(id=f"7_{i}", group="7", array_index=i) for i in range(3)],
     "gqa: array 7 (llm, 3 jobs) from bob waits for approval", [
        "bob (team vision) submitted array 7 (llm, 3 jobs); it waits for an approver.",
        "Each job asks for 2 x a10g GPUs (on demand) for up to 10h00m: up to 20.0 GPU-hours, "
        "up to $40.00 at $2.00 per GPU-hour.",
        "All 3: up to 60.0 GPU-hours, up to $120.00 at $2.00 per GPU-hour.",
        "Approve:  gqa approve 7",
        'Deny:     gqa deny 7 --reason "..."']),
    ([waiting(spec={"resources": {"gpus": 1}, "spot": True}, gpus=1, gpu_type=None,
              reason="needs approval: unbounded GPU-hours (no wall time or max_gpu_hours) (approval needed over 5)")],
     "gqa: job 1 (llm) from bob waits for approval", [
        "It asks for 1 x any type GPU (spot) with no wall-time limit: unbounded GPU-hours, "
        "no bound on cost at $8.00 per GPU-hour.",
        "Over the approval threshold: unbounded GPU-hours (no wall time or max_gpu_hours) (approval needed over 5)."]),
    ([waiting(spec={"resources": {"gpus": 2, "gpu_type": "h100,a10g"}, "limits": {"max_gpu_hours": 3}},
              max_gpu_hours=3.0)],
     "gqa: job 1 (llm) from bob waits for approval", [
        "It asks for 2 x h100 or a10g GPUs (on demand) with no wall-time limit: up to 3.0 GPU-hours, "
        "up to $24.00 at $8.00 per GPU-hour."]),
])
def test_the_request_says_who_asks_for_what_over_which_threshold_and_how_to_decide(jobs, subject, lines):
    request = approval_request(jobs, PRICED)
    assert request.subject == subject and request.team == "vision"
    text = request.message.splitlines()
    assert [line for line in lines if line not in text] == []


def test_without_prices_the_request_says_so():
    request = approval_request([waiting()], (Gpu(0, "a10g"),))
    assert "up to 20.0 GPU-hours, no price configured." in request.message


def test_no_jobs_no_request():
    assert approval_request([], PRICED) is None


def test_only_jobs_written_as_given_and_waiting_are_new():
    given = [waiting(id="1_0", array_index=0), waiting(id="1_1", array_index=1), job_record(id="1_2")]
    earlier = waiting(id="1_1", array_index=1, submitted_at=-60.0)     # a previous delivery's write
    assert newly_awaiting(given, [given[0], earlier, given[2]]) == [given[0]]


# -- through SubmitService, on the real SQLite store --------------------------------------------------
@pytest.fixture
def approvals(queue):
    queue.store.set_inventory(Inventory(gpus=PRICED))
    queue.store.set_policy(Policy(approval_gpus=1))
    notifier = RecordingNotifier()
    return SubmitService(queue.store, queue.clock, queue.waker, notifier=notifier), notifier


def accepted(queue, service, **overrides):
    intake = RecordingIntake()
    service.accept(spec(team="vision", **overrides), owner="bob", intake=intake)
    [submission] = intake.sent
    return submission


def test_an_admission_waiting_for_approval_is_one_message_per_submission(queue, approvals):
    service, notifier = approvals
    submission = accepted(queue, service, resources={"gpus": 2, "gpu_type": "a10g"}, array="0-99")
    jobs = service.admit(submission)
    assert {j.state for j in jobs} == {S.PENDING_APPROVAL} and len(jobs) == 100
    [(subject, message, kind, team)] = notifier.sent
    assert (kind, team) == (APPROVAL, "vision")
    assert subject == "gqa: array 1 (train, 100 jobs) from bob waits for approval"
    assert "gqa approve 1\n" in message and "asks for 2 GPUs (approval needed over 1)" in message


def test_a_redelivered_submission_asks_no_second_time(queue, approvals):
    service, notifier = approvals
    submission = accepted(queue, service, resources={"gpus": 2})
    service.admit(submission)
    queue.clock.advance(30)                     # SQS delivers it again, later
    [job] = service.admit(submission)
    assert job.state == S.PENDING_APPROVAL
    assert len(notifier.sent) == 1


class DyingStore:
    """Writes the first two jobs of a submission, then fails, as a function killed half-way."""

    def __init__(self, store):
        self.store = store

    def create(self, jobs):
        self.store.create(jobs[:2])
        raise BackendUnavailable("the function timed out")

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_redelivery_that_writes_the_rest_of_an_array_asks_for_those(queue, approvals):
    service, notifier = approvals
    submission = accepted(queue, service, resources={"gpus": 2}, array="0-3")
    with pytest.raises(BackendUnavailable):
        SubmitService(DyingStore(queue.store), queue.clock, notifier=notifier).admit(submission)
    assert notifier.sent == []
    queue.clock.advance(30)
    assert len(service.admit(submission)) == 4
    [(subject, _, _, _)] = notifier.sent
    assert subject == "gqa: array 1 (train, 2 jobs) from bob waits for approval"


@pytest.mark.parametrize("resources, policy", [
    ({"gpus": 1}, Policy(approval_gpus=1)),         # under the threshold: queued
    ({"gpus": 2}, Policy(max_gpus_per_job=1)),      # over a hard limit by now: rejected
])
def test_a_submission_not_waiting_for_approval_sends_nothing(queue, approvals, resources, policy):
    service, notifier = approvals
    submission = accepted(queue, service, resources=resources)
    queue.store.set_policy(policy)
    [job] = service.admit(submission)
    assert job.state in (S.QUEUED, S.REJECTED)
    assert notifier.sent == []


def test_a_local_submission_waiting_for_approval_asks_too(queue, approvals):
    service, notifier = approvals
    service.submit(spec(team="vision", resources={"gpus": 2}))
    assert [(kind, team) for _, _, kind, team in notifier.sent] == [(APPROVAL, "vision")]


def test_a_notifier_that_fails_leaves_the_jobs_admitted(queue, approvals):
    service, notifier = approvals
    notifier.fail = 1
    submission = accepted(queue, service, resources={"gpus": 2})
    [job] = service.admit(submission)
    assert queue.get(job.id).state == S.PENDING_APPROVAL and notifier.sent == []
