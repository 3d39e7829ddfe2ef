"""Which jobs a history holds (HistoryQuery.holds, the rule both stores read
by), how `--state` names them, and what a job between attempts counts: a job
that has run and not finished belongs to every window from its start on, as
sacct lists a requeued job; one not started yet only to a report's query."""

import pytest

from gqa.adapters import history_token
from gqa.http import wire
from gqa.models.accounting import summarise
from gqa.models.errors import SpecError
from gqa.models.job import JobState, Transition
from gqa.ports import BETWEEN_ATTEMPTS, HistoryQuery, has_run
from gqa.services.history import check_query, states_of
from tests.builders import job_record

S = JobState
WINDOW = dict(since=1_000.0, until=2_000.0)


def job(state, *, started=None, ended=None, submitted=500.0):
    return job_record(state=state, started_at=started, ended_at=ended, submitted_at=submitted)


@pytest.mark.parametrize("record, query, held", [
    # finished: by its end, the window's end exclusive
    (job(S.SUCCEEDED, started=900.0, ended=1_500.0), {}, True),
    (job(S.FAILED, started=800.0, ended=900.0), {}, False),
    (job(S.CANCELLED, ended=2_000.0), {}, False),
    # running: every window from its start on
    (job(S.RUNNING, started=100.0), {}, True),
    (job(S.RUNNING, started=2_000.0), {}, False),
    (job(S.RUNNING, started=2_500.0), {"until": None}, True),
    # between attempts (its last attempt's start kept): as a running one, whatever it waits in
    (job(S.RETRY_WAIT, started=900.0), {}, True),
    (job(S.QUEUED, started=900.0), {}, True),
    (job(S.HELD, started=900.0), {}, True),
    (job(S.STARTING, started=900.0), {}, True),
    (job(S.QUEUED, started=2_100.0), {}, False),
    # not started yet: in a report's query only, submitted before the window's end
    (job(S.QUEUED), {}, False),
    (job(S.RETRY_WAIT), {}, False),                    # a refused launch: it never ran
    (job(S.QUEUED), {"waiting": True}, True),
    (job(S.PENDING_APPROVAL), {"waiting": True}, True),
    (job(S.QUEUED, submitted=2_000.0), {"waiting": True}, False),
    # the states narrow it
    (job(S.QUEUED, started=900.0), {"states": BETWEEN_ATTEMPTS}, True),
    (job(S.RUNNING, started=900.0), {"states": BETWEEN_ATTEMPTS}, False),
    (job(S.RETRY_WAIT, started=900.0), {"states": frozenset({S.RUNNING})}, False),
    (job(S.QUEUED), {"waiting": True, "states": frozenset({S.HELD})}, False),
])
def test_the_window_holds(record, query, held):
    assert HistoryQuery(**{**WINDOW, **query}).holds(record) is held


@pytest.mark.parametrize("record, ran", [
    (job(S.QUEUED), False), (job(S.QUEUED, started=5.0), True), (job(S.RETRY_WAIT, started=5.0), True),
    (job(S.RUNNING), True),          # a record without its start: running is running
])
def test_has_run(record, ran):
    assert has_run(record) is ran


@pytest.mark.parametrize("words, states", [
    (["requeued"], BETWEEN_ATTEMPTS),
    (["running,requeued"], BETWEEN_ATTEMPTS | {S.RUNNING}),
    (["Timed-Out", "completed"], {S.TIMED_OUT, S.SUCCEEDED}),
    ([], None),
])
def test_state_words(words, states):
    assert states_of(words) == (None if states is None else frozenset(states))


@pytest.mark.parametrize("word, message", [
    ("retrying", "a job that has run and waits to run again shows pending, held, starting, retrying; "
                 "--state requeued lists them all"),
    ("queued", "unknown state 'queued': use completed, failed, timed out, cancelled, rejected, running, requeued"),
])
def test_state_words_refused(word, message):
    with pytest.raises(SpecError, match=message):
        states_of([word])


def test_a_state_no_started_job_is_in_lists_nothing_unless_waiting_is_asked():
    awaiting = frozenset({S.PENDING_APPROVAL})
    with pytest.raises(SpecError, match="a PENDING_APPROVAL job has not run yet: `gqa queue` shows"):
        check_query(HistoryQuery(since=0.0, states=awaiting))
    assert check_query(HistoryQuery(since=0.0, states=awaiting, waiting=True)).states == awaiting
    assert check_query(HistoryQuery(since=0.0, states=BETWEEN_ATTEMPTS)).states == BETWEEN_ATTEMPTS


def test_a_requeued_job_counts_its_ended_attempts_and_shows_its_status():
    steps = ((S.QUEUED, 100.0), (S.STARTING, 110.0), (S.RUNNING, 120.0), (S.RETRY_WAIT, 720.0), (S.QUEUED, 730.0))
    requeued = job_record(state=S.QUEUED, gpus=2, submitted_at=100.0, started_at=120.0, gpu_seconds=1_200.0,
                          cost=0.5, history=tuple(Transition(s, at, "") for s, at in steps))
    row = summarise(requeued, now=1_000.0)
    assert (row.status.value, row.first_start, row.wait, row.elapsed) == ("pending", 120.0, 20.0, 600.0)
    assert (row.gpu_hours, row.cost, row.ended_at, row.finished) == (1_200.0 / 3600, 0.5, None, False)
    assert row.runs == ((120.0, 720.0),)


def test_the_page_token_after_a_job_not_finished_is_the_running_phases_as_before():
    """An unfinished job's token is the one a running job's always was: (start, key), 0 before a start."""
    between = history_token.after(job(S.RETRY_WAIT, started=900.0), 7)
    assert history_token.decode(between, int) == (history_token.RUNNING, 900.0, 7)
    assert history_token.decode(history_token.after(job(S.QUEUED), 8), int) == (history_token.RUNNING, 0.0, 8)
    # a token an earlier version wrote after a running job reads the same
    assert history_token.decode("WyJoaXN0b3J5IiwicnVubmluZyIsOTAwLjAsN10", int) == (history_token.RUNNING, 900.0, 7)


@pytest.mark.parametrize("waiting", [False, True])
def test_waiting_crosses_the_wire(waiting):
    params = wire.history_query_to_params(HistoryQuery(since=5.0, waiting=waiting), None)
    query, _ = wire.history_query_from_params(lambda name: None if params.get(name) is None else str(params[name]))
    assert query.waiting is waiting


def test_a_bad_waiting_parameter_is_refused():
    with pytest.raises(SpecError, match="waiting must be 1"):
        wire.history_query_from_params({"since": "5", "waiting": "yes"}.get)
