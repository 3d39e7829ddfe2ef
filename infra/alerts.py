"""The alerts topic: budget, pending and idle alerts (the budget function),
approval requests (the admit function) and the CloudWatch alarms all go to
one SNS topic. Messages carry the attributes `kind` and `team`
(gqa/adapters/aws/sns_notifier.py), so each subscription takes what it wants
with a filter policy rather than a topic per audience.

Encrypted with a customer managed key that rotates: CloudWatch alarms cannot
publish to a topic under the AWS managed SNS key (its policy cannot be
changed to let CloudWatch use it), so this key's policy lets CloudWatch
encrypt with it. Publishing needs TLS (a topic policy refuses plain HTTP).

Subscriptions: every address in alerts.emails gets every message (alarms
carry no attributes, so a filter would drop them); every address in
alerts.approval_emails gets only approval requests. Each address confirms
its subscription from the e-mail SNS sends it."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from gqa.models.deployment import Deployment
from gqa.services.approvals import APPROVAL

# what publishing to the encrypted topic takes of its key: SNS asks KMS for a data key to encrypt
# the message with (GenerateDataKey), and to decrypt one (Decrypt)
KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")


class Alerts(Construct):
    """`topic` (<prefix>alerts) and `key`, the key it is encrypted with;
    grant_publish() for the functions that send to it (admit, budget)."""

    def __init__(self, scope: Construct, id: str, *, config: Deployment) -> None:
        super().__init__(scope, id)
        self.key = kms.Key(
            self, "Key", alias=f"alias/{config.prefix}alerts", enable_key_rotation=True,
            description=f"gqa {config.name}: encrypts the alerts topic",
            removal_policy=cdk.RemovalPolicy.RETAIN if config.retain_data else cdk.RemovalPolicy.DESTROY)
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish", principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=list(KEY_ACTIONS), resources=["*"]))
        self.topic = sns.Topic(self, "Topic", topic_name=f"{config.prefix}alerts",
                               display_name=f"gqa {config.name} alerts", master_key=self.key, enforce_ssl=True)
        # each subscription's construct id is its address: reordering the lists replaces none
        everything = set(config.alerts.emails)
        for email in config.alerts.emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        only_approvals = {"kind": sns.SubscriptionFilter.string_filter(allowlist=[APPROVAL])}
        for email in config.alerts.approval_emails:
            if email not in everything:   # it already gets every message, approvals included
                self.topic.add_subscription(subscriptions.EmailSubscription(email, filter_policy=only_approvals))

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """sns:Publish on the topic and the two key actions it takes, named
        exactly (Topic.grant_publish grants kms:GenerateDataKey*)."""
        iam.Grant.add_to_principal(grantee=grantee, actions=["sns:Publish"], resource_arns=[self.topic.topic_arn])
        self.key.grant(grantee, *KEY_ACTIONS)
