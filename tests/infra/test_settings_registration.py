"""The deploy writes the pools, the queue policy and the teams' quotas into
the settings table, so a fresh stack accepts its first submission. The test
takes each write out of the synthesized custom resource, makes it on a moto
table as the deploy's UpdateItem would, and reads it back through the store."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace

import aws_cdk as cdk
import boto3
import pytest
from moto import mock_aws

from gqa.adapters.aws.batch_compute import inventory_of
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.resources import pools_from_json
from gqa.adapters.aws.tables import TableNames
from gqa.models.errors import Conflict
from gqa.scheduling.snapshot import Policy, TeamPolicy
from gqa.services.deployment import queue_policy, team_policies
from gqa.services.quota import QuotaService
from infra.registration import SettingsRegistration
from infra.tables import Tables
from tests.aws.deployed import create_tables
from tests.infra.support import deployment, nagged_app, template

NAMES = TableNames.prefixed("gqa-reg-")


def _synthesized_writes(config) -> dict[str, dict]:
    """sort key -> the UpdateItem arguments of its custom resource, on the test's table."""
    app = nagged_app()
    stack = cdk.Stack(app, "SettingsTest")
    SettingsRegistration(stack, "Settings", config=config, tables=Tables(stack, "Tables", config=config))
    resources = template(stack).find_resources("Custom::GqaSetting")
    writes = {}
    for resource in resources.values():
        create, update = resource["Properties"]["Create"], resource["Properties"]["Update"]
        assert create == update   # a changed file's values are written on update too
        call = json.loads(_text(create))
        assert (call["service"], call["action"]) == ("DynamoDB", "updateItem")
        writes[call["parameters"]["Key"]["sk"]["S"]] = call["parameters"]
    return writes


def deploy(client, writes: dict[str, dict]) -> None:
    """What the deploy's custom resources do: each write, as synthesized."""
    for write in writes.values():
        client.update_item(**write)


def _text(value) -> str:
    """The call's JSON with the table's name token replaced by the test's table."""
    if isinstance(value, dict):   # Fn::Join of text and the table's Ref
        sep, parts = value["Fn::Join"]
        return sep.join(p if isinstance(p, str) else NAMES.settings for p in parts)
    return value


@contextmanager
def deployed(writes):
    """A moto settings table holding what the deploy's UpdateItem calls write, read through the store."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(client, NAMES)
        deploy(client, writes)
        yield DynamoDBStore(client, NAMES)


@pytest.fixture(scope="module")
def config():
    return deployment()


@pytest.fixture(scope="module")
def items(config):
    return _synthesized_writes(config)


def test_one_write_per_setting(items, config):
    assert sorted(items) == sorted(["inventory", "policy", *(f"team#{t.name}" for t in config.teams)])
    assert {write["TableName"] for write in items.values()} == {NAMES.settings}


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
    before = _synthesized_writes(config)
    after = _synthesized_writes(deployment(teams=values["teams"]))
    changed = values["teams"][1]["name"]
    assert {k for k in after if after[k] != before[k]} == {f"team#{changed}"}
    with deployed(after) as store:
        assert store.team_members()[changed][-1] == "dana"


def test_a_team_added_to_the_file_adds_one_write_and_changes_no_other(config):
    values = config.model_dump(mode="json", exclude_none=True)
    values["teams"] = [*values["teams"], {"name": "speech", "share": 1, "max_gpus": 4}]
    before = _synthesized_writes(config)
    after = _synthesized_writes(deployment(teams=values["teams"]))
    assert set(after) - set(before) == {"team#speech"}
    assert {k: v for k, v in after.items() if k != "team#speech"} == before


def test_a_deploy_between_a_quota_changes_read_and_write_is_kept_and_the_change_lands_on_it(items, config):
    """The deploy's write moves each item's revision on, as the store's own writes do: a `gqa quota`
    change that read the team or the policy before it is refused once and applied again on top."""
    team = config.teams[0].name
    values = config.model_dump(mode="json", exclude_none=True)
    values["teams"][0]["share"] = 7
    redeploy = _synthesized_writes(deployment(teams=values["teams"]))
    with deployed(items) as store:
        _, team_revision = store.current_team(team)
        _, policy_revision = store.current_policy()
        deploy(boto3.client("dynamodb", region_name="us-east-1"), redeploy)
        with pytest.raises(Conflict):
            store.set_team(team, TeamPolicy(max_gpus_per_user=2), revision=team_revision)
        with pytest.raises(Conflict):
            store.set_policy(Policy(half_life=60.0), revision=policy_revision)

        racing = QuotaService(DeployBetween(store, lambda: deploy(boto3.client("dynamodb", region_name="us-east-1"),
                                                                   _synthesized_writes(config))))
        racing.set(team, max_gpus_per_user=2)

        assert store.teams()[team] == replace(team_policies(config)[team], max_gpus_per_user=2)
        assert store.team_members()[team] == tuple(config.teams[0].members)


class DeployBetween:
    """A store whose first team write finds the deploy's writes made since its read."""

    def __init__(self, store, deploying):
        self.store, self.deploying = store, deploying

    def set_team(self, team, policy, *, revision=None):
        deploying, self.deploying = self.deploying, None
        if deploying is not None:
            deploying()
        return self.store.set_team(team, policy, revision=revision)

    def __getattr__(self, name):
        return getattr(self.store, name)
