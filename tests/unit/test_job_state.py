"""gqa.models.job: the lifecycle, its user-facing names, and id ordering."""

import re

import pytest

from tests.builders import job_record
from gqa.models.errors import InvalidTransition
from gqa.models.job import (
    ALLOWED,
    PENDING,
    TERMINAL,
    JobState,
    Transition,
    UserStatus,
    check_transition,
    id_order,
    transition,
    user_status,
)

S = JobState
ALLOWED_PAIRS = [(a, b) for a, targets in ALLOWED.items() for b in sorted(targets)]


@pytest.mark.parametrize("current, to", ALLOWED_PAIRS, ids=[f"{a}->{b}" for a, b in ALLOWED_PAIRS])
def test_allowed_transition_is_recorded(current, to):
    before = job_record(state=current, history=(Transition(current, 1.0, "earlier"),))
    after = transition(before, to, 2.0, "because", attempts=3)
    assert after.state == to
    assert after.reason == "because"
    assert after.attempts == 3
    assert after.history == (Transition(current, 1.0, "earlier"), Transition(to, 2.0, "because"))
    assert before.state == current            # records are immutable


@pytest.mark.parametrize("current, to, message", [
    (S.QUEUED, S.RUNNING, "cannot move a QUEUED job to RUNNING"),
    (S.QUEUED, S.SUCCEEDED, "cannot move a QUEUED job to SUCCEEDED"),
    (S.SUBMITTED, S.RUNNING, "cannot move a SUBMITTED job to RUNNING"),
    (S.SUBMITTED, S.STARTING, "cannot move a SUBMITTED job to STARTING"),
    (S.RUNNING, S.QUEUED, "cannot move a RUNNING job to QUEUED"),
    (S.RUNNING, S.STARTING, "cannot move a RUNNING job to STARTING"),
    (S.RUNNING, S.RUNNING, "cannot move a RUNNING job to RUNNING"),
    (S.HELD, S.STARTING, "cannot move a HELD job to STARTING"),
    (S.PENDING_APPROVAL, S.STARTING, "cannot move a PENDING_APPROVAL job to STARTING"),
    (S.RETRY_WAIT, S.RUNNING, "cannot move a RETRY_WAIT job to RUNNING"),
    (S.STARTING, S.QUEUED, "cannot move a STARTING job to QUEUED"),
    (S.SUCCEEDED, S.QUEUED, "job already ended (SUCCEEDED); cannot move to QUEUED"),
    (S.FAILED, S.RETRY_WAIT, "job already ended (FAILED)"),
    (S.CANCELLED, S.CANCELLED, "job already ended (CANCELLED)"),
    (S.REJECTED, S.QUEUED, "job already ended (REJECTED)"),
    (S.TIMED_OUT, S.RETRY_WAIT, "job already ended (TIMED_OUT)"),
])
def test_illegal_transition(current, to, message):
    job = job_record(state=current)
    with pytest.raises(InvalidTransition, match=re.escape(message)):
        transition(job, to, 2.0, "nope")


@pytest.mark.parametrize("current", sorted(TERMINAL))
def test_terminal_states_go_nowhere(current):
    assert current.terminal
    assert not current.active
    assert ALLOWED[current] == frozenset()
    for to in JobState:
        with pytest.raises(InvalidTransition):
            check_transition(current, to)


@pytest.mark.parametrize("current", sorted(set(JobState) - TERMINAL))
def test_every_live_state_can_be_cancelled(current):
    assert not current.terminal
    check_transition(current, S.CANCELLED)


def test_state_sets_partition_the_lifecycle():
    active = {s for s in JobState if s.active}
    assert active == {S.STARTING, S.RUNNING}
    assert PENDING | TERMINAL | active == set(JobState)
    assert not (PENDING & TERMINAL) and not (PENDING & active) and not (TERMINAL & active)
    assert set(ALLOWED) == set(JobState)


@pytest.mark.parametrize("state, status", [
    (S.SUBMITTED, UserStatus.PENDING),
    (S.QUEUED, UserStatus.PENDING),
    (S.PENDING_APPROVAL, UserStatus.AWAITING_APPROVAL),
    (S.HELD, UserStatus.HELD),
    (S.STARTING, UserStatus.STARTING),
    (S.RUNNING, UserStatus.RUNNING),
    (S.RETRY_WAIT, UserStatus.RETRYING),
    (S.SUCCEEDED, UserStatus.COMPLETED),
    (S.FAILED, UserStatus.FAILED),
    (S.TIMED_OUT, UserStatus.TIMED_OUT),
    (S.CANCELLED, UserStatus.CANCELLED),
    (S.REJECTED, UserStatus.REJECTED),
])
def test_user_status(state, status):
    assert user_status(state) == status
    assert job_record(state=state).status == status


def test_user_status_covers_every_state():
    assert {user_status(s) for s in JobState} == set(UserStatus)


def test_first_start_is_the_first_running_transition():
    job = job_record(history=(Transition(S.QUEUED, 1.0, ""), Transition(S.RUNNING, 5.0, ""),
                              Transition(S.RETRY_WAIT, 9.0, ""), Transition(S.RUNNING, 12.0, "")))
    assert job.first_start == 5.0
    assert job_record().first_start is None


@pytest.mark.parametrize("ids, ordered", [
    (["10", "9"], ["9", "10"]),
    (["10_10", "10_2", "10", "9"], ["9", "10", "10_2", "10_10"]),
    (["2_1", "11", "2", "1_100"], ["1_100", "2", "2_1", "11"]),
])
def test_id_order(ids, ordered):
    assert sorted(ids, key=id_order) == ordered
