"""record_start on DynamoDB: an attempt's start is one UpdateItem that reads
nothing, bumps the item's revision and appends to its history; a job item
whose history is full (history.MOST transitions, a move due) is refused, so
the start goes through the read-and-write path that moves the history."""

from __future__ import annotations

import random

import pytest

from gqa.adapters.aws import history
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.guarded import WRITE_TOKEN
from gqa.adapters.aws.tables import TableNames
from gqa.models.batch_events import BatchJobEvent
from gqa.models.job import JobState, Transition
from gqa.ports import Change
from gqa.services.reconcile import Action, ReconcileService
from tests.aws.deployed import moto_tables
from tests.aws.moto_support import session
from tests.aws.test_job_history import raw_item
from tests.contract.jobs import T0, new_job
from tests.services.fakes import CountingWaker

pytestmark = pytest.mark.aws
S = JobState
NAMES = TableNames.prefixed("gqa-history-")   # raw_item reads these tables
AT = T0 + 60


@pytest.fixture
def store():
    with moto_tables(NAMES):
        yield DynamoDBStore(session().client("dynamodb"), NAMES)


def calls_of(store: DynamoDBStore) -> list[str]:
    calls: list[str] = []
    store.client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    return calls


def starting(store: DynamoDBStore, transitions: int):
    """A job STARTING on attempt 1 (Batch job "batch-1") whose item holds `transitions` transitions:
    submitted, held and released by its team's budget over and over, then launched."""
    states = [S.QUEUED if (transitions - 2 - i) % 2 == 0 else S.HELD for i in range(transitions - 2)]
    past = (Transition(S.SUBMITTED, T0, "submitted"), *(Transition(s, T0, f"step {i}") for i, s in enumerate(states)))
    [job] = store.create([new_job(history=past)])
    [job] = store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", T0 + 1,
                                {"attempts": 1, "proc_token": "batch-1", "assigned": (0,), "exit_code": 3})])
    assert len(raw_item(job.id)["history"]) == transitions
    return job


def test_a_start_is_one_update_that_bumps_the_revision_and_appends(store):
    job = starting(store, history.MOST - 1)
    before = raw_item(job.id)
    calls = calls_of(store)

    started = store.record_start(job.id, 1, "batch-1", AT, "attempt 1 started")

    assert calls == ["UpdateItem"]
    after = raw_item(job.id)
    assert after["rev"] == before["rev"] + 1
    assert after["history"] == before["history"] + history.encode([Transition(S.RUNNING, AT, "attempt 1 started")])
    assert (after["state"], float(after["started_at"]), after["live"]) == ("RUNNING", AT, "live")
    assert "exit_code" not in after
    # every other attribute as it was (the write's token, guarded.py, added)
    assert WRITE_TOKEN in after
    assert {k: v for k, v in after.items() if k not in ("rev", "history", "state", "started_at", "reason",
                                                        "changed", WRITE_TOKEN)} == \
        {k: v for k, v in before.items() if k not in ("rev", "history", "state", "started_at", "reason", "exit_code",
                                                      "changed")}
    assert after["changed"] >= before["changed"]   # the changes index's time of the last write
    assert started == store.get(job.id)
    # the item written is known as stored: the settlement that follows writes without reading it
    calls.clear()
    store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "exit code 0", AT + 100, {"ended_at": AT + 100})])
    assert calls == ["TransactWriteItems"]


def test_a_long_reason_is_cut_as_every_write_cuts_it(store):
    job = starting(store, 3)
    reason = "attempt 1 started " + "x" * 2 * history.MAX_REASON_BYTES

    store.record_start(job.id, 1, "batch-1", AT, reason)

    item = raw_item(job.id)
    assert item["reason"] == item["history"][-1]["reason"] == history.cut(reason)


def test_a_full_history_is_refused_and_the_service_moves_it_with_the_start(store):
    job = starting(store, history.MOST)
    before = raw_item(job.id)

    assert store.record_start(job.id, 1, "batch-1", AT, "attempt 1 started") is None
    assert raw_item(job.id) == before

    waker = CountingWaker()
    result = ReconcileService(store, random.Random(0), waker).handle(
        BatchJobEvent("batch-1", job.id, 1, "RUNNING", None, None, None, AT, started_at=AT))

    assert (result.action, result.job.state, waker.wakes) == (Action.RUNNING, S.RUNNING, 0)
    item = raw_item(job.id)
    assert len(item["history"]) == history.KEEP and item[history.MOVED] == history.MOST + 1 - history.KEEP
    whole = store.get(job.id)
    assert len(whole.history) == history.MOST + 1 and whole.history[-1] == Transition(S.RUNNING, AT,
                                                                                      "attempt 1 started")
