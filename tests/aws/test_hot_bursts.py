"""Bursts under many objects at once, with DynamoDB's transaction conflicts
(transaction_conflicts.py): each object is its own item behind one of the
burst's gates (triggers.py), so no item is rewritten by every object, none is
lost, and a burst submits one job with every key."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws import items as it
from gqa.adapters.aws import triggers as store_module
from gqa.adapters.aws.tables import PK, SK, TableNames
from gqa.adapters.aws.triggers import DynamoDBTriggerStore
from gqa.models.burst import RECORD_KEYS, StepKind
from gqa.models.errors import Conflict
from gqa.models.trigger import S3Object
from gqa.ports import Submission
from gqa.services.triggers import TriggerService
from tests.aws.aws_limits import LIMITS
from tests.aws.deployed import create_tables
from tests.aws.moto_support import FakeClock, refuse, session
from tests.aws.transaction_conflicts import Conflicts, rollback_by_item
from tests.builders import NOW, job_record, trigger
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
NAMES = TableNames.prefixed("gqa-hot-bursts-")
LATER = NOW + 86400
WRITERS = 20


@pytest.fixture
def aws():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws(), rollback_by_item():
        create_tables(session().client("dynamodb"), NAMES)
        store = DynamoDBTriggerStore(session().client("dynamodb"), NAMES)
        store.add(trigger())
        yield store


class TriggersReadOnce(DynamoDBTriggerStore):
    """The store, but for its trigger list, read once: moto answers a Query by scanning the whole
    table, which here grows to thousands of items, and no trigger changes while the objects land."""

    listed = None

    def list(self):
        if self.listed is None:
            self.listed = super().list()
        return self.listed


class Timer:
    def __init__(self):
        self.scheduled: list[tuple[str, str, int]] = []

    def schedule(self, trigger_id: str, burst_id: str, delay: int) -> None:
        self.scheduled.append((trigger_id, burst_id, delay))


class Submitter:
    """SubmitService.accept's part: reserve an id, hand the submission to the intake given."""

    def __init__(self):
        self.accepted: list[dict[str, str]] = []

    def accept(self, spec, *, owner, environment=None, intake=None):
        self.accepted.append(dict(spec.env))
        job_id = str(len(self.accepted))
        intake.send(Submission(spec_json=spec.model_dump_json(), owner=owner, tier=1,
                               idempotency_key=f"jobs-{job_id}", job_ids=(job_id,), seq=int(job_id)))
        return [job_record(id=job_id)]


class Intake:
    def __init__(self):
        self.sent: list[Submission] = []

    def send(self, submission: Submission) -> None:
        self.sent.append(submission)

    def wake_dispatcher(self) -> None:
        pass


class NoTeams:
    """The job store's teams: none lists members, so the trigger's owner submits for the default team."""

    def team_members(self) -> dict[str, tuple[str, ...]]:
        return {}


class Manifests:
    def __init__(self):
        self.written: dict[str, str] = {}

    def write(self, name: str, text: str) -> str:
        self.written[name] = text
        return f"s3://gqa-checkpoints/{name}"


def events() -> list[S3Object]:
    """1,000 objects, 100 of them delivered twice and 100 written twice (a new sequencer)."""
    first = [S3Object("data", f"incoming/part-{n:04d}.csv", sequencer=f"{n:08X}") for n in range(1000)]
    again = first[::10]
    overwritten = [S3Object("data", o.key, sequencer=o.sequencer + "FF") for o in first[5::10]]
    return first + again + overwritten


def deliver(objects: list[S3Object], services: list[TriggerService]) -> list[BaseException]:
    """Deliver the events, spread over the writers, all at once."""
    start, failures = threading.Barrier(len(services)), []

    def run(service: TriggerService, share: list[S3Object]) -> None:
        start.wait()
        for obj in share:
            try:
                service.on_object(obj)
            except BaseException as exc:   # noqa: BLE001 - every failure is the test's finding
                failures.append(exc)

    threads = [threading.Thread(target=run, args=(service, objects[n::len(services)]))
               for n, service in enumerate(services)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


@pytest.mark.slow
def test_a_thousand_objects_from_twenty_writers_are_one_burst_and_one_job(aws):
    conflicts, timer, clock = Conflicts(), Timer(), FakeClock(NOW)
    services = [TriggerService(TriggersReadOnce(conflicts.client(session().client("dynamodb")), NAMES), clock,
                               timer=timer) for _ in range(WRITERS)]
    LIMITS.reset()

    failures = deliver(events(), services)

    assert failures == []                            # no event refused, no retry budget spent
    [(trigger_id, burst_id, _)] = {t for t in timer.scheduled if aws.open_burst("tr-0001").id == t[1]}
    submitter, intake, manifests = Submitter(), Intake(), Manifests()
    closer = TriggerService(aws, clock, submitter=submitter, intake=intake, manifests=manifests, members=NoTeams())
    closed = closer.close(trigger_id, burst_id)

    assert (closed.action, closed.count) == ("submitted", 1000)
    [env] = submitter.accepted                       # one job
    assert [s.job_ids for s in intake.sent] == [("1",)]
    assert env["GQA_TRIGGER_COUNT"] == "1000"
    listed = manifests.written[f"gqa-trigger-manifests/tr-0001/{burst_id}.txt"].splitlines()
    assert sorted(listed) == [f"incoming/part-{n:04d}.csv" for n in range(1000)]   # each key once
    assert closer.close(trigger_id, burst_id).action == "already submitted"

    # no item took every object: the busiest is an event-marker-free gate, hit by its keys' share
    busiest = conflicts.hottest(NAMES.settings)
    assert busiest < 1000 // store_module.GATES * 3
    # the burst's own partition: a gate check and a key write per object (2 units each, transactional)
    partition = json.dumps({"S": f"trigger-burst#tr-0001#{burst_id}"})
    assert LIMITS.write_units[(NAMES.settings, partition)] <= 4 * 1200 + 4 * store_module.GATES


def test_objects_after_the_seal_go_to_the_next_burst(aws):
    clock = FakeClock(NOW)
    service = TriggerService(aws, clock, timer=Timer(), ids=iter(["b1", "b2"]).__next__)
    service.on_object(S3Object("data", "incoming/a.csv", sequencer="1"))
    stale = aws.open_burst("tr-0001")
    aws.close("tr-0001", "b1", NOW + 120, LATER)

    late = S3Object("data", "incoming/b.csv", sequencer="2")
    with pytest.raises(Conflict, match="changed; read it again"):   # counted on the burst it read
        aws.count(StepKind.APPEND, stale, late.key, late.token, LATER)
    [counted] = service.on_object(late)                              # the refused count left no marker
    assert (counted.burst_id, counted.kind) == ("b2", StepKind.OPEN)
    assert aws.close("tr-0001", "b1", NOW + 130, LATER).burst.keys == ("incoming/a.csv",)
    assert aws.close("tr-0001", "b2", NOW + 130, LATER).burst.keys == ("incoming/b.csv",)


def test_a_close_that_died_after_sealing_is_finished_by_the_next(aws):
    first = burst_of(aws, ("incoming/a.csv", "incoming/b.csv"))
    refuse(aws.client, "UpdateItem", "InternalServerError", times=5)      # the key list is never written

    with pytest.raises(Exception, match="kept refusing UpdateItem"):
        aws.close("tr-0001", first.id, NOW + 120, LATER)
    assert aws.open_burst("tr-0001") is None                              # sealed: nothing joins it now

    again = aws.close("tr-0001", first.id, NOW + 130, LATER)
    assert again.burst.keys == ("incoming/a.csv", "incoming/b.csv") and again.closed_at == NOW + 120


def test_a_burst_opened_by_the_earlier_version_still_counts_and_closes(aws):
    # its keys in the open burst's item, no gates
    old = {PK: "trigger-burst", SK: "tr-0001", "burst": "old", "opened_at": NOW, "closes_at": NOW + 120,
           "keys": ["incoming/a.csv"], "key_bytes": 14, "more": 0}
    aws.client.put_item(TableName=NAMES.settings, Item=it.dump(it.plain(old)))
    current = aws.open_burst("tr-0001")
    assert current.keys == ("incoming/a.csv",)

    assert aws.count(StepKind.APPEND, current, "incoming/b.csv", "t-b", LATER)
    assert aws.count(StepKind.ABSORB, current, "incoming/a.csv", "t-a2", LATER)
    closed = aws.close("tr-0001", "old", NOW + 120, LATER)

    assert (closed.burst.keys, closed.burst.more) == (("incoming/a.csv", "incoming/b.csv"), 0)
    assert aws.open_burst("tr-0001") is None


def test_a_closed_record_of_the_earlier_version_is_read_as_it_is(aws):
    old = {PK: "trigger-closed", SK: "tr-0001#old", "burst": "old", "opened_at": NOW, "closes_at": NOW + 120,
           "keys": ["incoming/a.csv"], "key_bytes": 14, "more": 3, "closed_at": NOW + 120, "submitted": True,
           "jobs": ["7"]}
    aws.client.put_item(TableName=NAMES.settings, Item=it.dump(it.plain(old)))
    closed = aws.close("tr-0001", "old", NOW + 200, LATER)
    assert (closed.burst.keys, closed.burst.more, closed.jobs) == (("incoming/a.csv",), 3, ("7",))


def test_removing_a_trigger_removes_its_open_bursts_gates(aws):
    current = burst_of(aws, ("incoming/a.csv",))
    aws.remove("tr-0001")
    gates = aws.client.query(TableName=NAMES.settings, KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
                             ExpressionAttributeValues={":p": {"S": f"trigger-burst#tr-0001#{current.id}"},
                                                        ":g": {"S": "gate#"}})["Items"]
    assert gates == [] and aws.open_burst("tr-0001") is None


def test_gates_spread_keys_and_the_cap_stays_at_the_record_size():
    keys = [f"incoming/part-{n:05d}.csv" for n in range(3200)]
    per_gate = Counter(store_module._gate(k) for k in keys)
    assert len(per_gate) == store_module.GATES and max(per_gate.values()) < 2 * 3200 // store_module.GATES
    assert RECORD_KEYS == 1000


def burst_of(store: DynamoDBTriggerStore, keys: tuple[str, ...]):
    service = TriggerService(store, FakeClock(NOW), timer=Timer())
    for n, key in enumerate(keys):
        service.on_object(S3Object("data", key, sequencer=str(n)))
    return store.open_burst("tr-0001")
