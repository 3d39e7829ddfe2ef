"""The AWS tests' moto tables and queues, made from the synthesized data
stack (tests/aws/deployed.py), are what the adapters' definitions say: a
change to the stack that the adapters do not expect, or to a definition that
does not reach the stack, fails here."""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.resources import MAX_MESSAGE_BYTES, QUEUES, Queue
from gqa.adapters.aws.tables import TABLES, Index, Table, TableNames
from tests.aws import deployed
from tests.aws.deployed import create_queues, create_tables
from tests.aws.moto_support import session
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
PREFIX = "gqa-moto-"


@pytest.fixture
def aws():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        yield session()


def schema(partition, sort) -> list[dict[str, str]]:
    return [{"AttributeName": partition.name, "KeyType": "HASH"},
            *([{"AttributeName": sort.name, "KeyType": "RANGE"}] if sort else [])]


def projection(index: Index) -> dict:
    return {"ProjectionType": index.projection, **({"NonKeyAttributes": list(index.include)} if index.include else {})}


def key_types(table: Table) -> dict[str, str]:
    keys = (table.partition, table.sort, *(k for i in table.indexes for k in (i.partition, i.sort)))
    return {k.name: k.type for k in keys if k is not None}


# -- tables --------------------------------------------------------------------------------------

def test_the_template_has_the_adapters_tables_and_no_other():
    assert sorted(t.role for t in deployed.table_definitions()) == sorted(t.logical for t in TABLES)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.logical)
def test_each_moto_table_has_the_adapters_keys_indexes_and_ttl(aws, table):
    names = TableNames.prefixed(PREFIX)
    dynamodb = aws.client("dynamodb")
    create_tables(dynamodb, names)

    described = dynamodb.describe_table(TableName=names.of(table))["Table"]
    assert described["KeySchema"] == schema(table.partition, table.sort)
    assert {a["AttributeName"]: a["AttributeType"] for a in described["AttributeDefinitions"]} == key_types(table)
    assert {i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in described.get("GlobalSecondaryIndexes", [])} \
        == {i.name: (i.schema(), projection(i)) for i in table.indexes}
    assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ttl = dynamodb.describe_time_to_live(TableName=names.of(table))["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl.get("AttributeName")) == \
        (("ENABLED", table.ttl) if table.ttl else ("DISABLED", None))


# -- queues --------------------------------------------------------------------------------------

def test_the_template_has_the_adapters_queues_each_with_a_dead_letter_queue():
    definitions = {q.logical_id: q for q in deployed.queue_definitions()}
    served = {definitions[q.dead_letter].role: q.role for q in definitions.values() if q.dead_letter}
    assert served == {f"{q.logical}-dlq": q.logical for q in QUEUES}
    assert len(definitions) == 2 * len(QUEUES)


@pytest.mark.parametrize("queue", QUEUES, ids=lambda q: q.logical)
def test_each_moto_queue_has_the_adapters_visibility_retention_and_redrive(aws, queue: Queue):
    sqs = aws.client("sqs")
    urls = create_queues(sqs, prefix=PREFIX)

    def attributes(name: str) -> dict[str, str]:
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]

    main, dead = attributes(queue.name(PREFIX)), attributes(queue.dead_letter_name(PREFIX))
    assert int(main["VisibilityTimeout"]) == queue.visibility_timeout
    assert int(main["MessageRetentionPeriod"]) == queue.retention
    assert json.loads(main["RedrivePolicy"]) == {"deadLetterTargetArn": dead["QueueArn"],
                                                 "maxReceiveCount": queue.max_receive_count}
    assert int(dead["MessageRetentionPeriod"]) == queue.dead_letter_retention
    assert "RedrivePolicy" not in dead
    assert int(main["MaximumMessageSize"]) == int(dead["MaximumMessageSize"]) == MAX_MESSAGE_BYTES
    assert urls.dead_letters[queue.logical] == sqs.get_queue_url(QueueName=queue.dead_letter_name(PREFIX))["QueueUrl"]


# -- the translation refuses what it does not know -------------------------------------------------

@pytest.mark.parametrize("kind, extra, definitions", [
    ("AWS::DynamoDB::Table", {"StreamSpecification": {"StreamViewType": "NEW_IMAGE"}}, "table_definitions"),
    ("AWS::SQS::Queue", {"KmsMasterKeyId": "alias/aws/sqs"}, "queue_definitions"),
], ids=["table", "queue"])
def test_a_property_the_translation_does_not_carry_over_fails_by_name(monkeypatch, kind, extra, definitions):
    synthesized = json.loads(json.dumps(deployed.data_template()))
    first = next(r for r in synthesized["template"]["Resources"].values() if r["Type"] == kind)
    first["Properties"].update(extra)
    monkeypatch.setattr(deployed, "data_template", lambda: synthesized)

    with pytest.raises(ValueError, match=f"{next(iter(extra))} not carried over to moto"):
        getattr(deployed, definitions).__wrapped__()
