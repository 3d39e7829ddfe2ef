"""The JobStore contract for a job with a long history (a requeue loop, a
spot job reclaimed again and again): get() and resolve() give every
transition in order, whatever a backend keeps where; list() and apply()
give at least the recent ones, newest last, which is all the services look
back on."""

import pytest

from gqa.ports import Change
from tests.contract.jobs import S, T0, put

LOOP = (S.STARTING, S.RUNNING, S.RETRY_WAIT, S.QUEUED)
TRANSITIONS = 150    # past what a DynamoDB job item keeps (history.MOST), several moves over
RECENT = 20          # what every read gives at least (history.KEEP on DynamoDB)


def requeue_loop(store, job, n: int, first: int):
    """The job through `n` more transitions of the loop, a write each, as the passes would make them."""
    for k in range(first, first + n):
        to = LOOP[(LOOP.index(job.state) + 1) % len(LOOP)]
        [job] = store.apply([Change(job.id, job.state, to, f"step {k}", T0 + k)])
    return job


@pytest.fixture
def looped(store):
    job = put(store, S.QUEUED)
    return requeue_loop(store, job, TRANSITIONS - 2, 2)


def test_get_and_resolve_give_every_transition_in_order(store, looped, open_store):
    other = open_store()   # another process's view: nothing from what this one wrote
    whole = other.get(looped.id)
    assert [h.state for h in whole.history[:2]] == [S.SUBMITTED, S.QUEUED]
    assert [h.reason for h in whole.history[2:]] == [f"step {k}" for k in range(2, TRANSITIONS)]
    assert [h.at for h in whole.history[2:]] == [T0 + k for k in range(2, TRANSITIONS)]
    assert other.resolve(looped.id) == [whole] == other.resolve(looped.group)
    assert other.resolve(looped.id, history=False)[0].history == ()


def test_list_and_apply_give_the_recent_transitions_newest_last(store, looped, open_store):
    whole = open_store().get(looped.id)
    [listed] = store.list(history=True)
    [applied] = store.apply([Change(looped.id, looped.state, None, "", T0 + TRANSITIONS, {"request": None})])
    for job in (listed, applied):
        assert len(job.history) >= RECENT
        assert job.history == whole.history[-len(job.history):]


def test_the_history_goes_on_after_a_move_from_any_store(store, looped, open_store):
    other = open_store()
    job = requeue_loop(other, other.get(looped.id), 3, TRANSITIONS)
    job = requeue_loop(store, job, 3, TRANSITIONS + 3)
    assert [h.reason for h in open_store().get(job.id).history[2:]] == [
        f"step {k}" for k in range(2, TRANSITIONS + 6)]
