"""What AWS refuses and moto does not, met where gqa would meet it: the
limits layer itself (aws_limits.py), and the API's answers to a spec Batch
could never take and to an array too large to answer record by record."""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from gqa.adapters.aws.batch_payload import GQA_ALLOWANCE, JOB_PAYLOAD_LIMIT, payload_problem
from tests.aws.aws_limits import LAMBDA_ANSWER_BYTES, LIMITS, gateway_answer, lambda_answer
from tests.aws.moto_support import session
from tests.aws.test_api_handler import CONTEXT, api  # noqa: F401  (the api fixture)
from tests.aws.api_gateway import rest_event, user_arn
from tests.builders import spec
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws


def test_batch_refuses_a_job_payload_over_30_kib():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        with pytest.raises(ClientError) as refused:
            session().client("batch").submit_job(
                jobName="big", jobQueue="q", jobDefinition="d",
                containerOverrides={"environment": [{"name": "BIG", "value": "x" * JOB_PAYLOAD_LIMIT}]})
    assert refused.value.response["Error"]["Code"] == "ClientException"
    assert "payload size" in refused.value.response["Error"]["Message"]


@pytest.mark.parametrize("value_bytes, refused", [
    (1_000, False),
    (JOB_PAYLOAD_LIMIT - GQA_ALLOWANCE - 200, False),
    (JOB_PAYLOAD_LIMIT - GQA_ALLOWANCE + 10, True),
    (100_000, True),
])
def test_a_specs_own_parts_must_leave_gqa_its_room(value_bytes, refused):
    problem = payload_problem(spec(env={"DATA": "x" * value_bytes}))
    assert (problem is not None) is refused
    if refused:
        assert "KiB; AWS Batch accepts 30 KiB per job" in problem


@pytest.mark.parametrize("pass_as", ["args", "env"])
@pytest.mark.parametrize("value_bytes, refused", [
    (JOB_PAYLOAD_LIMIT - GQA_ALLOWANCE - 600, False),
    (JOB_PAYLOAD_LIMIT - GQA_ALLOWANCE + 10, True),
])
def test_a_sweeps_largest_task_must_leave_gqa_its_room(pass_as, value_bytes, refused):
    """A sweep's values travel in its tasks' requests (flags or variables, and a tag): the spec
    alone is small, its largest task is what Batch would take or refuse."""
    swept = spec(sweep={"grid": {"config": ["x" * value_bytes, "y"], "seed": [1, 2]}, "pass_as": pass_as})
    problem = payload_problem(swept)
    assert (problem is not None) is refused
    if refused:
        assert problem.startswith("the largest task's command, environment and tags take")


def test_the_api_refuses_a_spec_batch_could_not_take_before_reserving_anything(api):  # noqa: F811
    before = api.tables()
    status, answer = api("POST", "/jobs", body={"spec": {"command": ["python", "train.py"],
                                                         "env": {"CONFIG": "x" * 26_000}}})
    assert status == 400 and answer["error"] == "SpecError"
    assert "AWS Batch accepts 30 KiB per job" in answer["message"] and "25." in answer["message"]
    assert api.tables() == before and api.messages() == []        # no ids reserved, nothing queued


def test_an_array_of_8000_tasks_is_answered_within_lambdas_6_mb(api):  # noqa: F811
    event = rest_event("POST", "/jobs", arn=user_arn("alice"),
                       body={"spec": {"command": ["python", "sweep.py"], "array": "0-7999",
                                      "limits": {"wall_time": "1h"}}})
    raw = api.module.handler(event, CONTEXT)
    answer = lambda_answer(raw)
    assert answer["statusCode"] == 202, answer
    assert len(json.dumps(raw).encode()) < 4096                  # the range, not the ids nor the records
    data = json.loads(answer["body"])
    assert (data["count"], data["last_id"]) == (8000, f"{data['group']}_7999")


def test_an_answer_over_6_mb_is_the_502_api_gateway_gives():
    answer = lambda_answer({"statusCode": 200, "body": "x" * (LAMBDA_ANSWER_BYTES + 1)})
    assert answer["statusCode"] == 502


def test_an_answer_after_29_s_is_the_504_api_gateway_gives():
    ticks = iter([0.0, 29.5, 100.0, 128.9])
    late = gateway_answer(lambda: {"statusCode": 202, "body": "{}"}, timer=lambda: next(ticks))
    in_time = gateway_answer(lambda: {"statusCode": 202, "body": "{}"}, timer=lambda: next(ticks))
    assert (late["statusCode"], in_time["statusCode"]) == (504, 202)


def test_writes_are_counted_per_partition_as_dynamodb_meters_them():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        client = session().client("dynamodb")
        client.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                       {"AttributeName": "sk", "KeyType": "RANGE"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}])
        LIMITS.reset()
        for i in range(3):
            client.put_item(TableName="t", Item={"pk": {"S": "hot"}, "sk": {"S": str(i)}, "v": {"S": "x" * 1500}})
        client.put_item(TableName="t", Item={"pk": {"S": "cold"}, "sk": {"S": "0"}})
        client.transact_write_items(TransactItems=[
            {"Put": {"TableName": "t", "Item": {"pk": {"S": "hot"}, "sk": {"S": "t"}}}}])
        assert LIMITS.write_units[("t", json.dumps({"S": "hot"}))] == 3 * 2 + 2   # 1.5 KB: 2 units; a transaction: 2
        assert LIMITS.hottest("t") == 8 and LIMITS.write_units[("t", json.dumps({"S": "cold"}))] == 1


def test_a_put_also_costs_units_on_each_index_partition_its_item_lands_on():
    """The jobs table's indexes project whole items: a task's put costs its
    units on its group's partition and on by_state, by_team and live's."""
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        from tests.aws.deployed import create_tables
        from gqa.adapters.aws.tables import TableNames

        names = TableNames.prefixed("gqa-limits-")
        client = session().client("dynamodb")
        create_tables(client, names)
        LIMITS.reset()
        item = {"grp": {"S": "7"}, "id": {"S": "7_0"}, "seq": {"N": "1"}, "state": {"S": "QUEUED"},
                "team": {"S": "nlp"}, "live": {"S": "live"}, "spec_json": {"S": "x" * 1500}}
        client.transact_write_items(TransactItems=[{"Put": {"TableName": names.jobs, "Item": item}}])
        ended = {k: v for k, v in item.items() if k != "live"} | {"id": {"S": "7_1"}, "state": {"S": "SUCCEEDED"}}
        client.put_item(TableName=names.jobs, Item=ended)
        units = LIMITS.write_units
        assert units[(names.jobs, json.dumps({"S": "7"}))] == 4 + 2        # 1.6 KB: 2 units, doubled in a transaction
        assert units[(f"{names.jobs}/by_state", json.dumps({"S": "QUEUED"}))] == 4
        assert units[(f"{names.jobs}/by_state", json.dumps({"S": "SUCCEEDED"}))] == 2
        assert units[(f"{names.jobs}/by_team", json.dumps({"S": "nlp"}))] == 6
        assert units[(f"{names.jobs}/live", json.dumps({"S": "live"}))] == 4   # the second is off the sparse index
        assert LIMITS.hottest_with_indexes(names.jobs)[0] == 6


def test_dynamodb_refuses_a_transaction_over_4_mb_of_items_counted_in_utf8():
    """Fourteen items of 100,000 "界" are 1.4 million characters but 4.2 MB: refused as DynamoDB does."""
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        client = session().client("dynamodb")
        client.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])

        def puts(n: int) -> list[dict]:
            return [{"Put": {"TableName": "t", "Item": {"pk": {"S": str(i)}, "v": {"S": "界" * 100_000}}}}
                    for i in range(n)]
        client.transact_write_items(TransactItems=puts(12))          # 3.6 MB
        with pytest.raises(ClientError) as refused:
            client.transact_write_items(TransactItems=puts(14))
        assert refused.value.response["Error"]["Code"] == "ValidationException"


def test_sqs_refuses_a_message_over_256_kib():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        sqs = session().client("sqs")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="x" * (256 * 1024 - 100))
        with pytest.raises(ClientError) as refused:
            sqs.send_message(QueueUrl=url, MessageBody="x" * (256 * 1024 + 1))
        assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
        with pytest.raises(ClientError):
            sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "ok"},
                                                          {"Id": "2", "MessageBody": "x" * (257 * 1024)}])
