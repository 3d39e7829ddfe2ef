"""lean_moto.lean_dynamodb answers transactions as moto does, keeping copies of
only the items a transaction names: a cancelled one leaves every item as it
was, a committed one writes them all, and moto's instance list stays empty."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models.dynamo_type import Item

from tests.aws.lean_moto import lean_dynamodb
from tests.aws.moto_support import session


@pytest.fixture
def dynamodb():
    with mock_aws(), lean_dynamodb():
        client = session().client("dynamodb")
        client.create_table(TableName="pairs", BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                       {"AttributeName": "sk", "KeyType": "RANGE"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}])
        client.create_table(TableName="singles", BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}])
        client.put_item(TableName="pairs", Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "n": {"N": "1"}})
        client.put_item(TableName="pairs", Item={"pk": {"S": "a"}, "sk": {"S": "2"}, "n": {"N": "2"}})
        client.put_item(TableName="singles", Item={"id": {"S": "x"}, "n": {"N": "5"}})
        yield client


def everything(client) -> dict[str, list[dict]]:
    return {table: sorted(client.scan(TableName=table)["Items"], key=repr) for table in ("pairs", "singles")}


def writes(last_condition_holds: bool) -> list[dict]:
    return [
        {"Put": {"TableName": "pairs", "Item": {"pk": {"S": "a"}, "sk": {"S": "3"}, "n": {"N": "3"}}}},
        {"Update": {"TableName": "pairs", "Key": {"pk": {"S": "a"}, "sk": {"S": "1"}},
                    "UpdateExpression": "ADD n :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}},
        {"Delete": {"TableName": "pairs", "Key": {"pk": {"S": "a"}, "sk": {"S": "2"}}}},
        {"Put": {"TableName": "singles", "Item": {"id": {"S": "y"}, "n": {"N": "7"}}}},
        {"Update": {"TableName": "singles", "Key": {"id": {"S": "x"}}, "UpdateExpression": "SET n = :n",
                    "ExpressionAttributeValues": {":n": {"N": "6"}}}},
        {"ConditionCheck": {"TableName": "singles", "Key": {"id": {"S": "z"}},   # z is not there
                            "ConditionExpression": "attribute_not_exists(id)" if last_condition_holds
                            else "attribute_exists(id)"}},
    ]


def test_a_cancelled_transaction_leaves_every_item_as_it_was(dynamodb):
    before = everything(dynamodb)
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(TransactItems=writes(last_condition_holds=False))
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in refused.value.response["CancellationReasons"]] == ["None"] * 5 + [
        "ConditionalCheckFailed"]
    assert everything(dynamodb) == before


def test_a_committed_transaction_writes_them_all(dynamodb):
    dynamodb.transact_write_items(TransactItems=writes(last_condition_holds=True))
    assert everything(dynamodb) == {
        "pairs": sorted([{"pk": {"S": "a"}, "sk": {"S": "1"}, "n": {"N": "2"}},
                         {"pk": {"S": "a"}, "sk": {"S": "3"}, "n": {"N": "3"}}], key=repr),
        "singles": sorted([{"id": {"S": "x"}, "n": {"N": "6"}}, {"id": {"S": "y"}, "n": {"N": "7"}}], key=repr)}


def test_a_refused_request_leaves_nothing_half_written(dynamodb):
    before = everything(dynamodb)
    twice = writes(last_condition_holds=True)[:2] + [
        {"Update": {"TableName": "pairs", "Key": {"pk": {"S": "a"}, "sk": {"S": "1"}},
                    "UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {":n": {"N": "9"}}}}]
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(TransactItems=twice)   # one item twice: DynamoDB refuses the request
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert everything(dynamodb) == before


def test_items_are_not_kept_in_motos_instance_list(dynamodb):
    for _ in range(3):
        dynamodb.transact_write_items(TransactItems=writes(last_condition_holds=True)[:2])
        dynamodb.get_item(TableName="singles", Key={"id": {"S": "x"}})
    assert len(Item.instances_tracked) == 0
