"""The capacity-unit counter bills as DynamoDB documents it: 4 KB a read
unit (half for eventually consistent and index reads), 1 KB a write unit,
transactions double, and an index write per index the item is on."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws import items as it
from gqa.adapters.aws.tables import CHANGES_INDEX, LIVE_INDEX, PASS_INDEX, TableNames
from tests.aws.capacity_units import CapacityUnits, item_bytes
from tests.aws.deployed import create_tables
from tests.aws.moto_support import session
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
NAMES = TableNames.prefixed("gqa-units-")


@pytest.fixture
def client():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        client = session().client("dynamodb")
        create_tables(client, NAMES)
        yield client


def job(job_id: str, padding: int, live: bool = True) -> dict:
    item = {"grp": job_id, "id": job_id, "seq": 1, "state": "QUEUED", "team": "t", "spec_json": "x" * padding}
    if live:
        item.update({"live": "live", "chg": "0", "changed": 5})
    return it.dump(item)


def test_item_sizes_follow_dynamodbs_rules():
    assert item_bytes({"ab": {"S": "xyz"}}) == 5
    assert item_bytes({"n": {"N": "12345"}}) == 1 + 4
    assert item_bytes({"l": {"L": [{"S": "a"}, {"S": "bc"}]}}) == 1 + 3 + 2 + 3


def test_reads_are_billed_by_size_consistency_and_projection(client):
    units = CapacityUnits(NAMES).install(client)
    client.put_item(TableName=NAMES.jobs, Item=job("1", 5000))
    # a 5 KB item: 5 write units, plus the live index (ALL) 5 more, by_state and by_team likewise,
    # and the changes and pass indexes their small projections: 1 each
    assert units.writes[NAMES.jobs] == 5
    assert units.writes[f"{NAMES.jobs}/{LIVE_INDEX}"] == 5 and units.writes[f"{NAMES.jobs}/{CHANGES_INDEX}"] == 1
    assert units.writes[f"{NAMES.jobs}/{PASS_INDEX}"] == 1
    client.get_item(TableName=NAMES.jobs, Key=it.dump({"grp": "1", "id": "1"}), ConsistentRead=True)
    assert units.reads[NAMES.jobs] == 2                     # 5 KB, strongly consistent: two 4 KB units
    client.get_item(TableName=NAMES.jobs, Key=it.dump({"grp": "1", "id": "1"}))
    assert units.reads[NAMES.jobs] == 3                     # eventually consistent: half
    client.query(TableName=NAMES.jobs, IndexName=LIVE_INDEX, KeyConditionExpression="#l = :l",
                 ExpressionAttributeNames={"#l": "live"}, ExpressionAttributeValues={":l": {"S": "live"}})
    client.query(TableName=NAMES.jobs, IndexName=CHANGES_INDEX, KeyConditionExpression="#c = :c",
                 ExpressionAttributeNames={"#c": "chg"}, ExpressionAttributeValues={":c": {"S": "0"}})
    assert units.reads[f"{NAMES.jobs}/{LIVE_INDEX}"] == 1    # the whole item: 2 units, halved
    assert units.reads[f"{NAMES.jobs}/{CHANGES_INDEX}"] == 0.5   # the projection, under 4 KB, halved


def test_a_transactions_writes_count_double(client):
    units = CapacityUnits(NAMES).install(client)
    client.transact_write_items(TransactItems=[{"Put": {"TableName": NAMES.jobs, "Item": job("2", 100, live=False)}}])
    assert units.writes[NAMES.jobs] == 2
    # off the sparse indexes; on by_state and by_team (one write each, not doubled)
    assert f"{NAMES.jobs}/{LIVE_INDEX}" not in units.writes
    assert units.writes[f"{NAMES.jobs}/by_state"] == 1
