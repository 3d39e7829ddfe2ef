"""--no-requeue (spec `requeue: false`): the interruptions that would send a
job back to run again end it FAILED instead; what a person asks for, a
capacity failure (nothing ran) and limits.on_timeout are unchanged."""

import signal

import pytest

from gqa.models.job import JobState, Request
from gqa.models.outcome import PREEMPT, REQUEUE, SHUTDOWN, TIMEOUT, ExitKind, decide
from tests.builders import job_record

NOW = 5000.0
S = JobState


def job(*, requeue: bool, on_timeout: str = "stop", **fields):
    spec = {"requeue": requeue, "limits": {"wall_time": "1h", "on_timeout": on_timeout},
            "retries": {"on_capacity": 3}}
    return job_record(spec=spec, state=S.RUNNING, pid=4242, assigned=(0,), attempts=1, started_at=NOW - 60,
                      **fields)


# (what ended it, as decide() is told) -> with --no-requeue: (state, reason); with requeue: the state
CASES = [
    pytest.param(dict(fields={"kill_reason": PREEMPT}, sig=signal.SIGTERM),
                 (S.FAILED, "preempted; --no-requeue"), S.RETRY_WAIT, id="preemption"),
    pytest.param(dict(fields={"kill_reason": SHUTDOWN}, code=143),
                 (S.FAILED, "queue daemon stopped; --no-requeue"), S.RETRY_WAIT, id="daemon stop"),
    pytest.param(dict(kind=ExitKind.RECLAIMED, detail="Host EC2 (instance i-1) terminated."),
                 (S.FAILED, "its instance was reclaimed (Host EC2 (instance i-1) terminated.); --no-requeue"),
                 S.RETRY_WAIT, id="spot reclaim"),
    pytest.param(dict(kind=ExitKind.LOST),
                 (S.FAILED, "the compute backend lost track of it; --no-requeue"), S.RETRY_WAIT, id="lost by Batch"),
    pytest.param(dict(),
                 (S.FAILED, "its process was lost while the queue daemon was down; --no-requeue"), S.RETRY_WAIT,
                 id="process lost while the daemon was down"),
    # what is not an automatic requeue of a run
    pytest.param(dict(fields={"request": Request.REQUEUE, "kill_reason": REQUEUE}, sig=signal.SIGTERM),
                 (S.RETRY_WAIT, "requeued by user"), S.RETRY_WAIT, id="a user's requeue still works"),
    pytest.param(dict(fields={"kill_reason": REQUEUE}, code=143),
                 (S.RETRY_WAIT, "requeued by user"), S.RETRY_WAIT, id="a requeue being carried out"),
    pytest.param(dict(kind=ExitKind.CAPACITY, detail="no instance"),
                 (S.RETRY_WAIT, "the infrastructure failed before it ran"), S.RETRY_WAIT,
                 id="capacity: nothing ran, retried"),
    pytest.param(dict(fields={"kill_reason": PREEMPT}, code=0),
                 (S.SUCCEEDED, "exit code 0 (it finished while being asked to stop)"), S.SUCCEEDED,
                 id="finished while preempted"),
    pytest.param(dict(fields={"kill_reason": TIMEOUT}, sig=signal.SIGTERM, on_timeout="requeue"),
                 (S.RETRY_WAIT, "reached its wall time of 1h00m"), S.RETRY_WAIT, id="on_timeout requeue is kept"),
]


def _decide(case: dict, *, requeue: bool):
    record = job(requeue=requeue, on_timeout=case.get("on_timeout", "stop"), **case.get("fields", {}))
    return decide(record, code=case.get("code"), sig=case.get("sig"), now=NOW, draw=0.5,
                  kind=case.get("kind", ExitKind.APP), detail=case.get("detail", ""))


@pytest.mark.parametrize("case, no_requeue, with_requeue", CASES)
def test_no_requeue_turns_automatic_requeues_into_failures(case, no_requeue, with_requeue):
    outcome = _decide(case, requeue=False)
    assert (outcome.to, outcome.reason[: len(no_requeue[1])]) == no_requeue
    assert _decide(case, requeue=True).to == with_requeue


def test_a_failed_no_requeue_job_ends_and_keeps_no_interruption():
    outcome = _decide(dict(fields={"kill_reason": PREEMPT}, sig=signal.SIGTERM), requeue=False)
    assert outcome.fields["ended_at"] == NOW
    assert "interruptions" not in outcome.fields and "not_before" not in outcome.fields
    assert outcome.fields["kill_reason"] is None and outcome.fields["assigned"] == ()
