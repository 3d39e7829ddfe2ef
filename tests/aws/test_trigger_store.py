"""The DynamoDB TriggerStore's guards on moto: a write computed from a stale
read of the burst fails instead of overwriting; an event counts once; a burst
closes once, with every key counted before its close and none after; a kept
submission is never replaced."""

from __future__ import annotations

import os
from dataclasses import replace
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.tables import TableNames
from gqa.adapters.aws.triggers import DynamoDBTriggerStore
from gqa.models.burst import RECORD_KEY_BYTES, StepKind
from gqa.models.errors import Conflict, NotFound
from gqa.ports import Submission
from tests.aws.deployed import create_tables
from tests.aws.moto_support import session
from tests.builders import NOW, burst, trigger
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
NAMES = TableNames.prefixed("gqa-trig-store-")
LATER = NOW + 86400


@pytest.fixture
def store():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        made = DynamoDBTriggerStore(session().client("dynamodb"), NAMES)
        made.add(trigger())
        yield made


def opened(store, keys=("incoming/a.csv",)):
    first = burst(keys[:1])
    assert store.count(StepKind.OPEN, first, keys[0], f"t-{keys[0]}", LATER)
    for key in keys[1:]:
        assert store.count(StepKind.APPEND, store.open_burst("tr-0001"), key, f"t-{key}", LATER)
    return store.open_burst("tr-0001")


def test_a_trigger_round_trips_and_ids_are_unique(store):
    assert store.get("tr-0001") == trigger() and store.list() == [trigger()]
    with pytest.raises(Conflict, match="tr-0001 exists already"):
        store.add(trigger())
    with pytest.raises(NotFound):
        store.get("tr-ffff")


def test_only_one_open_wins(store):
    current = opened(store)
    with pytest.raises(Conflict):
        store.count(StepKind.OPEN, burst(["incoming/b.csv"], id="b2"), "incoming/b.csv", "t-b", LATER)
    assert store.open_burst("tr-0001") == current
    assert store.close("tr-0001", current.id, NOW + 120, LATER).burst.keys == ("incoming/a.csv",)


def test_an_event_counts_once_whatever_the_step(store):
    current = opened(store)
    assert not store.count(StepKind.APPEND, current, "incoming/a2.csv", "t-incoming/a.csv", LATER)
    assert store.open_burst("tr-0001") == current


@pytest.mark.parametrize("kind", [StepKind.APPEND, StepKind.OVERFLOW, StepKind.ABSORB])
def test_a_step_planned_on_a_burst_that_closed_fails(store, kind):
    current = opened(store)
    store.close("tr-0001", current.id, NOW + 120, LATER)
    with pytest.raises(Conflict):
        store.count(kind, current, "incoming/a.csv" if kind is StepKind.ABSORB else "incoming/z.csv", "t-z", LATER)


def test_the_cap_holds_however_many_objects_join(store):
    # every object joins the burst it read, none sees the others: the close lists what fits, in
    # arrival order, and counts the rest
    fitting = tuple(f"incoming/{n:02d}" + "x" * 989 for n in range(RECORD_KEY_BYTES // 1000))
    current = opened(store, fitting)
    assert store.count(StepKind.APPEND, current, "incoming/" + "y" * 991, "t-y", LATER)
    assert store.count(StepKind.APPEND, current, "incoming/short", "t-short", LATER)   # it still fits
    closed = store.close("tr-0001", current.id, NOW + 120, LATER).burst
    assert (closed.keys, closed.more) == (fitting + ("incoming/short",), 1)
    assert closed.count == len(fitting) + 2 and closed.key_bytes <= RECORD_KEY_BYTES


def test_an_overwritten_key_is_listed_once_at_its_first_place(store):
    current = opened(store, ("incoming/a.csv", "incoming/b.csv"))
    assert store.count(StepKind.APPEND, current, "incoming/a.csv", "t-a-again", LATER)
    assert store.close("tr-0001", current.id, NOW + 120, LATER).burst.keys == ("incoming/a.csv", "incoming/b.csv")


def test_a_burst_closes_once_and_later_asks_see_it_closed(store):
    current = opened(store, ("incoming/a.csv", "incoming/b.csv"))
    first = store.close("tr-0001", current.id, NOW + 120, LATER)
    again = store.close("tr-0001", current.id, NOW + 130, LATER)
    listed = replace(current, keys=("incoming/a.csv", "incoming/b.csv"), key_bytes=28)
    assert first.burst == listed and not first.submitted
    assert again.burst == listed and again.closed_at == NOW + 120    # the record of the first close
    assert store.open_burst("tr-0001") is None
    assert store.close("tr-0001", "never-opened", NOW, LATER) is None

    store.mark_submitted("tr-0001", current.id, ["7"])
    done = store.close("tr-0001", current.id, NOW + 140, LATER)
    assert done.submitted and done.jobs == ("7",)


def test_the_first_kept_submission_wins(store):
    current = opened(store)
    store.close("tr-0001", current.id, NOW + 120, LATER)
    first = Submission(spec_json="{}", owner="alice", tier=1, idempotency_key="jobs-7", job_ids=("7",), seq=7)
    second = Submission(spec_json="{}", owner="alice", tier=1, idempotency_key="jobs-8", job_ids=("8",), seq=8)
    assert store.hold_submission("tr-0001", current.id, first) == first
    assert store.hold_submission("tr-0001", current.id, second) == first
    assert store.held_submission("tr-0001", current.id) == first
    with pytest.raises(NotFound):
        store.hold_submission("tr-0001", "never-closed", first)


def test_removing_a_trigger_drops_its_open_burst(store):
    opened(store)
    store.remove("tr-0001")
    assert store.open_burst("tr-0001") is None and store.list() == []
    with pytest.raises(NotFound, match="no trigger tr-0001"):
        store.remove("tr-0001")
