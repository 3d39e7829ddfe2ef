"""The JobStore contract for many jobs at once: resolve without history, and
apply_each, which applies the changes that still hold and skips the others."""

from dataclasses import replace

import pytest

from gqa.models.errors import InvalidTransition
from gqa.models.job import Request
from gqa.ports import Change
from tests.contract.jobs import S, T0, new_job


@pytest.fixture
def array(store):
    store.create([new_job(array_index=i, submit_env={"HOME": "/home/alice"}) for i in range(5)])
    return store


def test_resolve_without_history_is_resolve_less_the_history(array):
    whole = array.resolve("1")
    lean = array.resolve("1", history=False)
    assert lean == [replace(job, history=()) for job in whole]
    assert whole[0].history and lean[0].submit_env == {"HOME": "/home/alice"}
    lean[0].submit_env["HOME"] = "/elsewhere"        # each record has its own copy
    assert array.resolve("1_1", history=False)[0].submit_env == {"HOME": "/home/alice"}


def test_apply_each_applies_what_holds_and_skips_what_moved(array, open_store):
    other = open_store()
    other.apply([Change("1_1", S.QUEUED, S.STARTING, "assigned", T0, {"assigned": (0,)})])   # moved meanwhile

    applied = array.apply_each([
        Change("1_0", S.QUEUED, S.CANCELLED, "cancelled by user", T0 + 1, {"ended_at": T0 + 1, "not_before": None}),
        Change("1_1", S.QUEUED, S.CANCELLED, "cancelled by user", T0 + 1, {"ended_at": T0 + 1}),
        Change("1_2", S.QUEUED, None, "", T0 + 1, {"request": Request.CANCEL}),
        Change("9_9", S.QUEUED, S.CANCELLED, "cancelled by user", T0 + 1),                       # no such job
    ])

    assert applied == [True, False, True, False]
    cancelled, moved, asked = (other.get(i) for i in ("1_0", "1_1", "1_2"))
    assert (cancelled.state, cancelled.reason, cancelled.ended_at) == (S.CANCELLED, "cancelled by user", T0 + 1)
    assert [(t.state, t.at, t.reason) for t in cancelled.history[-2:]] == \
        [(S.QUEUED, T0, "admitted"), (S.CANCELLED, T0 + 1, "cancelled by user")]
    assert (moved.state, moved.ended_at) == (S.STARTING, None)
    assert (asked.state, asked.request, len(asked.history)) == (S.QUEUED, Request.CANCEL, 2)


def test_apply_each_refuses_a_move_the_lifecycle_does_not_allow(array):
    with pytest.raises(InvalidTransition):
        array.apply_each([Change("1_0", S.QUEUED, S.SUCCEEDED, "no", T0)])
    assert array.get("1_0").state == S.QUEUED
