"""cdk-nag's AwsSolutions rules on every synth: a finding fails `cdk synth`
(and Template.from_stack in the tests) unless it is acknowledged on the
construct it concerns, with the reason, through acknowledge() below."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

PACK = "AwsSolutions"


def check(app: cdk.App) -> None:
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))


def acknowledge(scope: IConstruct, rule: str, reason: str, *, applies_to: tuple[str, ...] = ()) -> None:
    """Accept `rule` (e.g. "IAM5") on `scope` and what it holds; with
    `applies_to`, only those findings of a granular rule (e.g.
    "Resource::arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:job/*")."""
    ids = [f"{PACK}-{rule}[{finding}]" for finding in applies_to] or [f"{PACK}-{rule}"]
    cdk.Validations.of(scope).acknowledge(*(cdk.Acknowledgment(id=f"{PACK}::{i}", reason=reason) for i in ids))
