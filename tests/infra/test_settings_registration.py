"""The deploy writes the pools, the queue policy and the teams' quotas into
the settings table, so a fresh stack accepts its first submission. The test
takes each item out of the synthesized custom resource, puts it into a moto
table as the deploy's PutItem would, and reads it back through the store."""

from __future__ import annotations

import json
from contextlib import contextmanager

import aws_cdk as cdk
import boto3
import pytest
from moto import mock_aws

from gqa.adapters.aws.batch_compute import inventory_of
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.resources import pools_from_json
from gqa.adapters.aws.tables import TableNames
from gqa.scheduling.snapshot import TeamPolicy
from gqa.services.deployment import queue_policy, team_policies
from infra.registration import SettingsRegistration
from infra.tables import Tables
from tests.aws.deployed import create_tables
from tests.infra.support import deployment, nagged_app, template

NAMES = TableNames.prefixed("gqa-reg-")


def _synthesized_items(config) -> list[dict]:
    app = nagged_app()
    stack = cdk.Stack(app, "SettingsTest")
    SettingsRegistration(stack, "Settings", config=config, tables=Tables(stack, "Tables", config=config))
    resources = template(stack).find_resources("Custom::GqaSetting")
    items = []
    for resource in resources.values():
        create, update = resource["Properties"]["Create"], resource["Properties"]["Update"]
        assert create == update   # a changed file's values are written on update too
        call = json.loads(_text(create))
        assert (call["service"], call["action"]) == ("DynamoDB", "putItem")
        items.append(call["parameters"]["Item"])
    return items


def _text(value) -> str:
    """The call's JSON with the table's name token replaced by the test's table."""
    if isinstance(value, dict):   # Fn::Join of text and the table's Ref
        sep, parts = value["Fn::Join"]
        return sep.join(p if isinstance(p, str) else NAMES.settings for p in parts)
    return value


@contextmanager
def deployed(items):
    """A moto settings table holding what the deploy's PutItem calls write, read through the store."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(client, NAMES)
        for item in items:
            client.put_item(TableName=NAMES.settings, Item=item)
        yield DynamoDBStore(client, NAMES)


@pytest.fixture(scope="module")
def config():
    return deployment()


@pytest.fixture(scope="module")
def items(config):
    return _synthesized_items(config)


def test_one_write_per_setting(items, config):
    keys = sorted(item["sk"]["S"] for item in items)
    assert keys == sorted(["inventory", "policy", *(f"team#{t.name}" for t in config.teams)])


def test_the_store_reads_back_what_the_file_says(items, config):
    with deployed(items) as store:
        assert store.inventory() == inventory_of(pools_from_json(config.pools_json()))
        assert store.policy() == queue_policy(config)
        assert store.teams() == team_policies(config)
        assert len(store.inventory().gpus) == sum(p.max_gpus for p in config.pools)


def test_the_teams_members_are_written_with_their_items_and_read_back(items, config):
    """Membership reaches the api function through the store, not its 4 KB environment."""
    assert any(t.members for t in config.teams)
    with deployed(items) as store:
        assert store.team_members() == {t.name: tuple(t.members) for t in config.teams if t.members}
        store.set_team(config.teams[0].name, TeamPolicy(share=5.0))      # `gqa quota set` between deploys
        assert store.team_members()[config.teams[0].name] == tuple(config.teams[0].members)
    assert "members" not in config.access_json()


def test_a_change_of_members_rewrites_that_team_alone(config):
    values = config.model_dump(mode="json", exclude_none=True)
    values["teams"][1]["members"] = [*values["teams"][1]["members"], "dana"]
    before = {i["sk"]["S"]: i for i in _synthesized_items(config)}
    after = {i["sk"]["S"]: i for i in _synthesized_items(deployment(teams=values["teams"]))}
    changed = f"team#{values['teams'][1]['name']}"
    assert {k for k in after if after[k] != before[k]} == {changed}
    assert after[changed]["members"]["L"][-1] == {"S": "dana"}


def test_a_team_added_to_the_file_adds_one_write_and_changes_no_other(config):
    values = config.model_dump(mode="json", exclude_none=True)
    values["teams"] = [*values["teams"], {"name": "speech", "share": 1, "max_gpus": 4}]
    before = {i["sk"]["S"]: i for i in _synthesized_items(config)}
    after = {i["sk"]["S"]: i for i in _synthesized_items(deployment(teams=values["teams"]))}
    assert set(after) - set(before) == {"team#speech"}
    assert {k: v for k, v in after.items() if k != "team#speech"} == before
