"""RetryingClient: a library's calls refused for rate are tried again; every
other error reaches it as the SDK raised it (moto DynamoDB)."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from gqa.adapters.aws.retrying_client import RetryingClient
from tests.aws.moto_support import refuse, session
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
ITEM = {"pk": {"S": "admission"}, "sk": {"S": "k1"}}


@pytest.fixture
def client():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        dynamodb = session().client("dynamodb")
        dynamodb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                              AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                    {"AttributeName": "sk", "AttributeType": "S"}],
                              KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                         {"AttributeName": "sk", "KeyType": "RANGE"}])
        yield dynamodb


def patient(client, sleeps: list[float]) -> RetryingClient:
    return RetryingClient(client, attempts=3, sleep=sleeps.append)


@pytest.mark.parametrize("code", ["ThrottlingException", "ProvisionedThroughputExceededException"])
def test_a_call_refused_for_rate_is_tried_again(client, code):
    sleeps: list[float] = []
    refused = refuse(client, "PutItem", code, times=2)
    patient(client, sleeps).put_item(TableName="t", Item=ITEM)
    assert refused == ["PutItem"] * 2 and len(sleeps) == 2
    assert client.get_item(TableName="t", Key=ITEM)["Item"] == ITEM


def test_past_its_tries_the_last_refusal_is_raised_as_the_sdk_raised_it(client):
    sleeps: list[float] = []
    refuse(client, "PutItem", "ThrottlingException", times=3)
    with pytest.raises(ClientError) as raised:
        patient(client, sleeps).put_item(TableName="t", Item=ITEM)
    assert raised.value.response["Error"]["Code"] == "ThrottlingException" and len(sleeps) == 2


def test_any_other_error_is_raised_at_once_and_the_client_s_own_parts_pass_through(client):
    sleeps: list[float] = []
    wrapped = patient(client, sleeps)
    wrapped.put_item(TableName="t", Item=ITEM)
    with pytest.raises(wrapped.exceptions.ConditionalCheckFailedException):   # what Powertools catches
        wrapped.put_item(TableName="t", Item=ITEM, ConditionExpression="attribute_not_exists(pk)")
    assert sleeps == []
    assert wrapped.meta is client.meta
