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


def _steps(*steps):
    return tuple(Transition(state, at, reason) for state, at, reason in steps)


@pytest.mark.parametrize("state, steps, fields, now, waited", [
    # queued then ran: GPUs or quota until the start
    (S.SUCCEEDED, [(S.QUEUED, 100, "admitted"), (S.RUNNING, 130, ""), (S.SUCCEEDED, 200, "")], {}, 900,
     (("GPUs or quota", 30.0),)),
    # approval, then the budget held it, then queued: each span under its own reason
    (S.SUCCEEDED, [(S.PENDING_APPROVAL, 100, "needs approval"), (S.QUEUED, 160, "approved by bo"),
                   (S.HELD, 170, "team vision spent $10.00 of $10.00 this month (100%)"),
                   (S.QUEUED, 470, "the budget allows it again"), (S.RUNNING, 480, ""), (S.SUCCEEDED, 500, "")],
     {}, 900, (("awaiting approval", 60.0), ("held by its team's budget", 300.0), ("GPUs or quota", 20.0))),
    # held by its owner, still waiting: counted to now
    (S.HELD, [(S.HELD, 100, "held by its owner (--hold)")], {}, 400, (("held by its owner", 300.0),)),
    # a --begin time, then a dependency; a retry's backoff after a first attempt
    (S.SUCCEEDED, [(S.QUEUED, 100, ""), (S.RUNNING, 250, ""), (S.RETRY_WAIT, 260, ""), (S.QUEUED, 290, ""),
                   (S.RUNNING, 300, ""), (S.SUCCEEDED, 400, "")], {"begin": 200.0, "dependency": "afterok:7"}, 900,
     (("its --begin time", 100.0), ("a dependency, GPUs or quota", 60.0), ("backoff before a retry", 30.0))),
    # cancelled while queued: the wait ends with it, not at now
    (S.CANCELLED, [(S.QUEUED, 100, ""), (S.CANCELLED, 130, "")], {}, 900, (("GPUs or quota", 30.0),)),
])
def test_waited_splits_the_wait_by_why(state, steps, fields, now, waited):
    job = make_record(state=state, submitted_at=100.0, history=_steps(*steps), **fields)
    assert summarise(job, now).waited == waited



def _reasons():
    from gqa.scheduling.budget import TeamSpend, spent_text
    from gqa.scheduling.dependencies import gate
    from gqa.services.control import HELD_BY_USER
    from gqa.services.submit import HELD_AT_SUBMISSION
    from tests.builders import pending, snapshot

    return {"gqa hold": HELD_BY_USER, "--hold": HELD_AT_SUBMISSION,
            "the pass": gate(snapshot(pending=[pending("7", user_hold=True)])).waiting["7"],
            "the budget": spent_text(TeamSpend("vision", settled=1012.0, running=0.0, budget=1000.0))}


@pytest.mark.parametrize("writer, person", [("gqa hold", True), ("--hold", True), ("the pass", True),
                                            ("the budget", False)])
def test_a_hold_by_a_person_is_told_from_the_budgets_by_what_each_writer_writes(writer, person):
    from gqa.models.job import held_by_person
    assert held_by_person(_reasons()[writer]) is person


def test_each_attempts_run_is_kept_for_reports():
    job = make_record(state=S.SUCCEEDED, submitted_at=100.0, history=_history(
        (S.QUEUED, 100), (S.RUNNING, 110), (S.RETRY_WAIT, 120), (S.QUEUED, 150), (S.RUNNING, 160), (S.SUCCEEDED, 200)))
    assert summarise(job, 900).runs == ((110, 120), (160, 200))
    running = make_record(state=S.RUNNING, history=_history((S.QUEUED, 0), (S.RUNNING, 5)))
    assert summarise(running, 25).runs == ((5, 25),)
