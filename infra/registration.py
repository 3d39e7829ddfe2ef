"""Deploy-time settings: the pools (the inventory), the queue policy and the
teams' quotas are written into the settings table by the deploy itself, so a
fresh stack accepts its first submission before any dispatch pass has run.

Each item is built by the store's own functions (dynamodb_store's
*_setting/setting_update), from the same configuration the functions' settings
come from, and written by one UpdateItem custom resource per item: the whole
item, as a PutItem would, and its revision moved on as every write of a
setting moves it (DynamoDBSettings), so a `gqa quota` change read before the
deploy is refused by its guard and applied again on top. A custom
resource runs when its properties change: a deploy that changes a team's
quota or members in the file writes them; one that changes nothing leaves
what admins set with `gqa quota` in between. A team removed from the file
keeps its stored policy and members until an admin changes them."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from gqa.adapters.aws.batch_compute import inventory_of
from gqa.adapters.aws.dynamodb_store import inventory_setting, policy_setting, setting_update, team_setting
from gqa.adapters.aws.resources import pools_from_json
from gqa.models.deployment import Deployment
from gqa.services.deployment import queue_policy, team_policies

from .tables import Tables


def settings_updates(config: Deployment) -> dict[str, dict]:
    """sort key -> the UpdateItem arguments (DynamoDB JSON, less the table) a deploy
    writes the settings item with. A team's item carries its members: who may
    submit for it (services.access.team_for)."""
    members = {team.name: team.members for team in config.teams}
    named = [inventory_setting(inventory_of(pools_from_json(config.pools_json()))),
             policy_setting(queue_policy(config)),
             *(team_setting(team, policy, members[team]) for team, policy in team_policies(config).items())]
    return {name: setting_update(name, attributes) for name, attributes in named}


class SettingsRegistration(Construct):
    def __init__(self, scope: Construct, id: str, *, config: Deployment, tables: Tables) -> None:
        super().__init__(scope, id)
        table = tables.settings
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        # one role for every write (an AwsCustomResource given a policy adds an IAM policy of its own,
        # which a hundred teams would multiply): UpdateItem on the settings table, its own logs
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"gqa {config.name}: writes the deployment's settings at deploy time")
        role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:UpdateItem"], resources=[table.table_arn]))
        log_group.grant_write(role)
        self.writes: dict[str, cr.AwsCustomResource] = {}
        for name, update in settings_updates(config).items():
            call = cr.AwsSdkCall(service="DynamoDB", action="updateItem",
                                 parameters={"TableName": table.table_name, **update},
                                 physical_resource_id=cr.PhysicalResourceId.of(f"{config.prefix}setting-{name}"))
            # ids from the setting's name: adding a team adds a resource, it never renumbers others
            self.writes[name] = cr.AwsCustomResource(
                self, "Put-" + name.replace("#", "-"), on_create=call, on_update=call,
                role=role, install_latest_aws_sdk=False, log_group=log_group,
                resource_type="Custom::GqaSetting")
