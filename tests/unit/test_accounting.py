"""JobSummary: one job as history and reports count it, from its record and the time now."""

import pytest

from gqa.models.accounting import summarise
from gqa.models.job import JobState, Transition
from tests.builders import job_record as make_record

S = JobState


def _history(*steps):
    return tuple(Transition(state, at, "") for state, at in steps)


@pytest.mark.parametrize("state, steps, now, first, wait, elapsed", [
    # never ran, still waiting: the wait runs to now
    (S.QUEUED, [(S.QUEUED, 100)], 160, None, 60, 0),
    # ran once and finished
    (S.SUCCEEDED, [(S.QUEUED, 100), (S.STARTING, 130), (S.RUNNING, 131), (S.SUCCEEDED, 191)], 500, 131, 31, 60),
    # two attempts: both counted, the wait ends at the first start
    (S.SUCCEEDED, [(S.QUEUED, 100), (S.RUNNING, 110), (S.RETRY_WAIT, 120), (S.QUEUED, 150), (S.RUNNING, 160),
                   (S.SUCCEEDED, 200)], 900, 110, 10, 50),
    # running now: counted to now
    (S.RUNNING, [(S.QUEUED, 100), (S.RUNNING, 105)], 125, 105, 5, 20),
    # cancelled while waiting: never ran, no wait to count
    (S.CANCELLED, [(S.QUEUED, 100), (S.CANCELLED, 130)], 900, None, None, 0),
])
def test_wait_and_elapsed_from_transitions(state, steps, now, first, wait, elapsed):
    job = make_record(state=state, submitted_at=100.0, history=_history(*steps))
    summary = summarise(job, now)
    assert (summary.first_start, summary.wait, summary.elapsed) == (first, wait, elapsed)


def test_without_transitions_the_last_attempt_counts():
    job = make_record(state=S.SUCCEEDED, submitted_at=100.0, started_at=150.0, ended_at=450.0, history=())
    summary = summarise(job, 1000)
    assert (summary.first_start, summary.wait, summary.elapsed, summary.ended_at) == (150.0, 50.0, 300.0, 450.0)


def test_gpu_hours_count_the_running_attempt_and_cost_is_settled_only():
    job = make_record(state=S.RUNNING, gpus=2, gpu_seconds=3600.0, cost=4.5, started_at=0.0,
                      history=_history((S.RUNNING, 0.0)))
    summary = summarise(job, 1800)
    assert summary.gpu_hours == pytest.approx(1 + 2 * 0.5)
    assert summary.cost == 4.5


@pytest.mark.parametrize("code, sig, text", [(None, None, "-"), (0, None, "0"), (3, None, "3"),
                                             (None, 9, "SIGKILL"), (137, 9, "SIGKILL"), (None, 99, "signal 99")])
def test_exit_text(code, sig, text):
    assert summarise(make_record(exit_code=code, signal=sig), 0).exit_text == text
