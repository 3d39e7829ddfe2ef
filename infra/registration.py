"""Deploy-time settings: the pools (the inventory), the queue policy and the
teams' quotas are written into the settings table by the deploy itself, so a
fresh stack accepts its first submission before any dispatch pass has run.

Each item is built by the store's own functions (dynamodb_store's
*_setting/setting_item), from the same configuration the functions' settings
come from, and written by one PutItem custom resource per item. A custom
resource runs when its properties change: a deploy that changes a team's
quota in the file writes it; one that changes nothing leaves what admins set
with `gqa quota` in between. A team removed from the file keeps its stored
policy until an admin changes it."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from gqa.adapters.aws.batch_compute import inventory_of
from gqa.adapters.aws.dynamodb_store import inventory_setting, policy_setting, setting_item, team_setting
from gqa.adapters.aws.resources import pools_from_json
from gqa.models.deployment import Deployment
from gqa.services.deployment import queue_policy, team_policies

from .nag import acknowledge
from .tables import Tables


def settings_items(config: Deployment) -> dict[str, dict]:
    """sort key -> the settings item (DynamoDB JSON) a deploy writes."""
    named = [inventory_setting(inventory_of(pools_from_json(config.pools_json()))),
             policy_setting(queue_policy(config)),
             *(team_setting(team, policy) for team, policy in team_policies(config).items())]
    return {name: setting_item(name, attributes) for name, attributes in named}


class SettingsRegistration(Construct):
    def __init__(self, scope: Construct, id: str, *, config: Deployment, tables: Tables) -> None:
        super().__init__(scope, id)
        table = tables.settings
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        policy = cr.AwsCustomResourcePolicy.from_statements(
            [iam.PolicyStatement(actions=["dynamodb:PutItem"], resources=[table.table_arn])])
        self.writes: dict[str, cr.AwsCustomResource] = {}
        for name, item in settings_items(config).items():
            call = cr.AwsSdkCall(service="DynamoDB", action="putItem",
                                 parameters={"TableName": table.table_name, "Item": item},
                                 physical_resource_id=cr.PhysicalResourceId.of(f"{config.prefix}setting-{name}"))
            # ids from the setting's name: adding a team adds a resource, it never renumbers others
            self.writes[name] = cr.AwsCustomResource(
                self, "Put-" + name.replace("#", "-"), on_create=call, on_update=call,
                policy=policy, install_latest_aws_sdk=False, log_group=log_group,
                resource_type="Custom::GqaSetting")
        provider = cdk.Stack.of(self).node.try_find_child(
            "AWS" + cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace("-", ""))
        if provider is not None:   # the stack's one SDK-call function, shared by every AwsCustomResource
            acknowledge(provider, "IAM4", "the custom resource function CDK provides takes the AWS managed "
                                          "AWSLambdaBasicExecutionRole for its own logs; its calls are limited "
                                          "to PutItem on the settings table by the policy above",
                        applies_to=("Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                                    "AWSLambdaBasicExecutionRole",))
