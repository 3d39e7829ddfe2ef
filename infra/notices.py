"""The notices topic: job notices (a job began, ended, failed, was requeued)
from the reconcile and dispatch functions (gqa/adapters/aws/sns_notices.py).
Apart from the alerts topic, whose unfiltered subscribers (alerts.emails)
would otherwise get every job's notices.

Each message carries the attributes `user`, `event`, `team` and `key`, so a
person subscribes once with a filter policy on `user` (README's
"Notifications": `aws sns subscribe ... --attributes FilterPolicy=...`).
Encrypted with the alerts topic's rotating key; publishing needs TLS. The
stack's output NoticesTopic names it for those subscriptions."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from gqa.models.deployment import Deployment


class Notices(Construct):
    """`topic` (<prefix>notices), under `key`."""

    def __init__(self, scope: Construct, id: str, *, config: Deployment, key: kms.IKey) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(self, "Topic", topic_name=f"{config.prefix}notices",
                               display_name=f"gqa {config.name} job notices", master_key=key, enforce_ssl=True)
        cdk.CfnOutput(cdk.Stack.of(self), "NoticesTopic", value=self.topic.topic_arn,
                      description="job notices: aws sns subscribe --topic-arn <this> ... with a filter on user")
