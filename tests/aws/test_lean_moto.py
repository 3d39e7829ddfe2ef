"""lean_moto.lean_dynamodb answers transactions as moto does, keeping copies of
only the items a transaction names: a cancelled one leaves every item as it
was, a committed one writes them all, and moto's instance list stays empty.
lean_moto.lean_everywhere (installed for the whole run by tests/conftest.py)
writes the same answer text as moto's own serialiser, for every kind of
attribute value, nested or not, and builds the same items, refusing exactly
those moto refuses as over its size limit."""

from __future__ import annotations

import base64
from typing import Any
from unittest import mock

import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core import serialize as moto_serialize
from moto.core.responses import get_service_model
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from tests.aws import lean_moto
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


# -- attribute values written as moto writes them --------------------------------------------------

_text = st.text(max_size=8)
_number = st.integers(-10**6, 10**6).map(str)
_blob = st.binary(max_size=8)
_scalar = st.one_of(
    st.builds(lambda v: {"S": v}, _text), st.builds(lambda v: {"N": v}, _number),
    st.builds(lambda v: {"B": v}, _blob), st.builds(lambda v: {"B": base64.b64encode(v).decode()}, _blob),
    st.builds(lambda v: {"SS": v}, st.lists(_text, min_size=1, max_size=3)),
    st.builds(lambda v: {"NS": v}, st.lists(_number, min_size=1, max_size=3)),
    st.builds(lambda v: {"BS": v}, st.lists(_blob, min_size=1, max_size=3)),
    st.just({"NULL": True}), st.builds(lambda v: {"BOOL": v}, st.booleans()))
_value = st.recursive(_scalar, lambda inner: st.one_of(
    st.builds(lambda v: {"M": v}, st.dictionaries(_text, inner, max_size=3)),
    st.builds(lambda v: {"L": v}, st.lists(inner, max_size=3))), max_leaves=12)
# moto hands its serialiser plain dicts, and (nested in a map or list) its own DynamoType objects
_held = st.one_of(_value, _value.map(lambda v: DynamoType(v).to_json()))
_item = st.dictionaries(st.text(min_size=1, max_size=6), _held, max_size=5)


def _answer(operation: str, result: Any) -> Any:
    from moto.core.serialize import JSONSerializer, XFormedAttributePicker

    model = get_service_model("dynamodb").operation_model(operation)
    try:
        return JSONSerializer(operation_model=model, pretty_print=False,
                              value_picker=XFormedAttributePicker()).serialize(result)
    except Exception as refused:   # what moto cannot write (a map holding a key named "B"), it fails the same
        return repr(refused)


@settings(max_examples=80, deadline=None)
@given(items=st.lists(_item, max_size=4), last=st.one_of(st.none(), _item))
def test_attribute_values_are_written_as_moto_writes_them(items, last):
    lean_moto.lean_everywhere()
    queried = {"Items": items, "Count": len(items), "ScannedCount": len(items)}
    if last is not None:
        queried["LastEvaluatedKey"] = last
    answers = [("Query", queried), ("GetItem", {"Item": items[0]} if items else {}),
               ("BatchGetItem", {"Responses": {"t": items}, "UnprocessedKeys": {}})]
    for operation, result in answers:
        lean = _answer(operation, result)
        with mock.patch.object(moto_serialize.BaseJSONSerializer, "_serialize_type_structure",
                               lean_moto._original_structure):
            assert _answer(operation, result) == lean


def _built(init: Any, attrs: dict[str, Any]) -> Any:
    item = Item.__new__(Item)
    try:
        init(item, DynamoType({"S": "h"}), None, attrs)
    except ItemSizeTooLarge:
        return "refused"
    return list(item.attrs.items()), type(item.attrs), item.hash_key, item.range_key


@settings(max_examples=80, deadline=None)
@given(attrs=st.dictionaries(st.text(min_size=1, max_size=4), st.one_of(
    _value, st.integers(0, 140_000).map(lambda n: {"S": "x" * n}),
    st.integers(0, 140_000).map(lambda n: {"L": [{"S": "é" * (n // 2)}, {"N": "1"}]})), max_size=6))
def test_items_are_built_and_refused_as_moto_builds_and_refuses_them(attrs):
    lean_moto.lean_everywhere()
    assert _built(Item.__init__, attrs) == _built(lean_moto._original_item_init, attrs)


def test_an_item_one_byte_over_motos_limit_is_refused_and_one_at_it_is_written(dynamodb):
    lean_moto.lean_everywhere()
    # the key "id" and "x" (2 + 1 bytes), and "big" (3 bytes): the rest of the limit is the value's
    at = lean_moto.ITEM_LIMIT - len("id") - len("x") - len("big")
    dynamodb.put_item(TableName="singles", Item={"id": {"S": "x"}, "big": {"S": "b" * at}})
    with pytest.raises(ClientError) as refused:
        dynamodb.put_item(TableName="singles", Item={"id": {"S": "x"}, "big": {"S": "b" * (at + 1)}})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "size" in refused.value.response["Error"]["Message"].lower()
