"""A scheduling pass's reads on DynamoDB cost what changed, not what waits:
the container's view of the live jobs (views.QueueView) is read whole at a
cold start and every RESYNC_EVERY, otherwise only what the changes index
holds changed since the previous pass (less CHANGE_MARGIN), or only the
jobs the wake-ups name, from the table itself, whatever the index's lag."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws import items as it
from gqa.adapters.aws import views, wakeups
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.tables import CHANGE_SHARD, CHANGED, PASS_ATTRIBUTES, TableNames
from gqa.models.job import JobState
from gqa.ports import Change
from tests.aws.deployed import create_tables
from tests.aws.lagging_index import lag
from tests.aws.moto_support import session
from tests.aws.test_dynamodb_store import record_calls
from tests.contract.conftest import FAKE_AWS
from tests.contract.jobs import T0, put
from tests.services.fakes import FakeClock

pytestmark = pytest.mark.aws
S = JobState
NAMES = TableNames.prefixed("gqa-view-")


@pytest.fixture
def clock():
    """Both clocks the view goes by: views.monotonic (resyncs) and the writes' `changed` stamps."""
    fake = FakeClock(1_000_000.0)
    with mock.patch.object(views, "monotonic", fake.now), mock.patch.object(it, "wall_clock", fake.now):
        yield fake


@pytest.fixture
def tables(clock):
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        yield lambda: DynamoDBStore(session().client("dynamodb"), NAMES)


def pending_ids(store: DynamoDBStore, changed=None) -> list[str]:
    with store.pass_reads(changed):
        return [p.id for p in store.scheduling_view()[0]]


def test_a_warm_pass_reads_only_what_changed_since_the_previous_one(tables, clock):
    writer, dispatcher = tables(), tables()
    queued = [put(writer, S.QUEUED).id for _ in range(30)]
    clock.advance(2 * views.CHANGE_MARGIN)
    answered: list[int] = []
    dispatcher.client.meta.events.register(
        "after-call.dynamodb.Query", lambda parsed, **_: answered.append(parsed.get("Count", 0)))

    assert pending_ids(dispatcher) == queued          # a cold start: the whole index, a Query a shard
    assert sum(answered) == 30
    answered.clear()
    clock.advance(2 * views.CHANGE_MARGIN)          # past the margin, before the next whole read
    writer.apply([Change(queued[0], S.QUEUED, S.HELD, "held", T0)])
    new = put(writer, S.QUEUED).id
    clock.advance(1)

    assert pending_ids(dispatcher) == queued + [new]  # tier, then submission: the held job still waits
    assert sum(answered) == 2                          # the two jobs written since, not the thirty
    with dispatcher.pass_reads():
        [held] = [p for p in dispatcher.scheduling_view()[0] if p.id == queued[0]]
    assert held.held


def test_a_warm_pass_makes_records_only_of_the_jobs_that_changed(tables, clock):
    """The records the scheduler reads are made once per job version: a job that did not change
    since the pass before is the very record that pass planned from, and the pass's own writes
    show at once."""
    writer, dispatcher = tables(), tables()
    queued = [put(writer, S.QUEUED).id for _ in range(4)]
    running = put(writer, S.RUNNING).id

    def view(changed=None):
        with dispatcher.pass_reads(changed):
            pending, active = dispatcher.scheduling_view()
            return {p.id: p for p in pending}, {r.id: r for r in active}

    first, first_running = view()
    writer.apply([Change(queued[1], S.QUEUED, S.HELD, "held", T0)])
    second, second_running = view({queued[1]})
    assert list(second) == queued
    assert second[queued[1]].held and not first[queued[1]].held                    # made again
    assert all(second[i] is first[i] for i in queued if i != queued[1])            # the same records
    assert second_running[running] is first_running[running]
    with dispatcher.pass_reads(set()):
        before = dispatcher.scheduling_view()[0]
        dispatcher.apply([Change(queued[0], S.QUEUED, S.STARTING, "assigned", T0, {"assigned": (0,)})])
        after, active = dispatcher.scheduling_view()
    assert [p.id for p in before] == queued and [p.id for p in after] == queued[1:]
    assert {r.id for r in active} == {running, queued[0]}
    assert all(a is b for a, b in zip(after, before[1:]))


def test_a_pass_reads_a_projection_and_the_whole_items_only_of_the_jobs_it_changes(tables, clock):
    writer, dispatcher = tables(), tables()
    ids = [put(writer, S.QUEUED).id for _ in range(3)]
    calls = record_calls(dispatcher)
    with dispatcher.pass_reads():
        dispatcher.scheduling_view()
        # the view holds the projection: no spec, no history
        assert all(set(item) <= {"grp", "id", CHANGE_SHARD, CHANGED, *PASS_ATTRIBUTES}
                   for item in dispatcher._queue.jobs.values())
        [claimed] = dispatcher.apply([Change(ids[1], S.QUEUED, S.STARTING, "assigned", T0, {"assigned": (0,)})])
    assert [name for name, _ in calls].count("BatchGetItem") == 1   # the claimed job's whole item, once
    [read] = [request for name, request in calls if name == "BatchGetItem"]
    assert [k["id"]["S"] for k in read["RequestItems"][NAMES.jobs]["Keys"]] == [ids[1]]
    assert claimed.spec_json and len(claimed.history) == 3            # the whole job, history and all
    assert writer.get(ids[1]) == claimed


def test_a_wakeup_that_names_its_jobs_finds_them_however_far_the_index_lags(tables, clock):
    writer, dispatcher = tables(), tables()
    old = put(writer, S.QUEUED).id
    pending_ids(dispatcher)                            # the container's first pass: warm from now on
    lagging = lag(dispatcher, 5, writer.client)
    new = put(writer, S.QUEUED).id
    running = put(writer, S.RUNNING).id

    # a wake-up that names nothing reads the index: the lagging index has neither yet
    assert pending_ids(dispatcher) == [old]
    # one that names them reads them from the table
    assert pending_ids(dispatcher, {new, running}) == [old, new]
    with dispatcher.pass_reads(set()):
        assert [r.id for r in dispatcher.scheduling_view()[1]] == [running]
    # a job that left the live states leaves the view when named, though the index still has it
    writer.apply([Change(old, S.QUEUED, S.CANCELLED, "cancelled", T0)])
    assert lagging.hidden() and pending_ids(dispatcher, {old}) == [new]


def test_an_index_that_caught_up_is_read_from_the_watermark_less_the_margin(tables, clock):
    writer, dispatcher = tables(), tables()
    pending_ids(dispatcher)
    lagging = lag(dispatcher, 1, writer.client)
    late = put(writer, S.QUEUED).id
    assert pending_ids(dispatcher) == []               # the index has not caught up: not there yet
    clock.advance(views.CHANGE_MARGIN / 2)
    lagging.caught_up()
    # written before the previous pass's watermark, but within the margin: this pass finds it
    assert pending_ids(dispatcher) == [late]


def test_a_departure_no_wakeup_named_leaves_the_view_at_the_next_whole_read(tables, clock):
    writer, dispatcher = tables(), tables()
    job = put(writer, S.QUEUED).id
    assert pending_ids(dispatcher) == [job]
    writer.apply([Change(job, S.QUEUED, S.CANCELLED, "cancelled", T0)])
    clock.advance(1)
    assert pending_ids(dispatcher) == [job]           # it left the index: a read of what changed cannot see it go
    clock.advance(views.RESYNC_EVERY)
    assert pending_ids(dispatcher) == []              # the periodic whole read drops it


def test_jobs_written_before_the_changes_index_get_its_keys_at_a_cold_start(tables, clock):
    writer = tables()
    ids = [put(writer, S.QUEUED).id for _ in range(2)]
    done = put(writer, S.SUCCEEDED).id
    client = session().client("dynamodb")
    for job_id in ids:   # as an earlier version wrote them: no change keys
        client.update_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(job_id)),
                           UpdateExpression="REMOVE #s, #c", ExpressionAttributeNames={"#s": CHANGE_SHARD,
                                                                                      "#c": CHANGED})
    dispatcher = tables()
    assert pending_ids(dispatcher) == []

    assert tables().add_change_keys() == 2             # the live ones; the finished one stays off the index
    assert tables().add_change_keys() == 0
    assert pending_ids(tables()) == ids
    assert CHANGE_SHARD not in it.load(client.get_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(done)))["Item"])


def test_a_wakeup_that_carries_its_jobs_as_written_costs_the_pass_no_read(tables, clock):
    writer, dispatcher = tables(), tables()
    running = put(writer, S.RUNNING).id
    queued = put(writer, S.QUEUED).id
    pending_ids(dispatcher)
    lag(dispatcher, 10, writer.client)
    writer.apply([Change(running, S.RUNNING, S.SUCCEEDED, "exit code 0", T0)])
    calls = record_calls(dispatcher)

    with dispatcher.pass_reads(wakeups.named([{"body": wakeups.body([running], writer.wakeup_items([running]))}])):
        pending, active = dispatcher.scheduling_view()

    assert ([p.id for p in pending], active) == ([queued], [])    # it ended: its GPUs are free
    assert calls == []


def test_jobs_an_earlier_version_writes_during_an_upgrade_get_the_keys_at_the_next_whole_read(tables, clock):
    dispatcher, client = tables(), session().client("dynamodb")
    dispatcher.add_change_keys(again_for=900)
    assert pending_ids(dispatcher) == []
    late = put(tables(), S.QUEUED).id               # written by an earlier version's admission: no keys
    client.update_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(late)), UpdateExpression="REMOVE #s, #c",
                       ExpressionAttributeNames={"#s": CHANGE_SHARD, "#c": CHANGED})
    clock.advance(views.RESYNC_EVERY)
    assert pending_ids(dispatcher) == [late]        # the whole read gave it its keys first
    clock.advance(900)
    other = put(tables(), S.QUEUED).id
    client.update_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(other)), UpdateExpression="REMOVE #s, #c",
                       ExpressionAttributeNames={"#s": CHANGE_SHARD, "#c": CHANGED})
    clock.advance(views.RESYNC_EVERY)
    assert pending_ids(dispatcher) == [late]        # past the upgrade's window: no read of the live index
