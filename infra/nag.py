"""cdk-nag's AwsSolutions rules on every synth: a finding fails `cdk synth`
(and Template.from_stack in the tests) unless it is acknowledged on the
construct it concerns, with the reason, through the functions below.

Granular rules (IAM4, IAM5) name each finding by what it is about, e.g.
`Resource::arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:job/*`,
with tokens written as cdk-nag writes them (nag_name)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct, IValidation

PACK = "AwsSolutions"


def check(app: cdk.App) -> None:
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))


def acknowledge(scope: IConstruct, rule: str, reason: str, *, applies_to: Iterable[str] = ()) -> None:
    """Accept `rule` (e.g. "IAM5") on `scope` and what it holds; with
    `applies_to`, only those findings of a granular rule (e.g. "Resource::*")."""
    ids = [f"{PACK}-{rule}[{finding}]" for finding in applies_to] or [f"{PACK}-{rule}"]
    cdk.Validations.of(scope).acknowledge(*(cdk.Acknowledgment(id=f"{PACK}::{i}", reason=reason) for i in ids))


def acknowledge_arns(role: iam.IRole, arns: Iterable[str], reason: str) -> None:
    """IAM5 on those of the ARNs (of the role's own stack) that hold a wildcard."""
    stack = cdk.Stack.of(role)
    names = [nag_name(stack.resolve(arn)) for arn in arns]
    wild = tuple(f"Resource::{name}" for name in names if "*" in name)
    if wild:
        acknowledge(role, "IAM5", reason, applies_to=wild)


def acknowledge_wildcards(role: iam.IRole, suffix: str, reason: str) -> None:
    """IAM5 on the role's policy resources that hold a wildcard and end with
    `suffix` (e.g. "/checkpoints/*"). They are named once the app's references
    are settled: a bucket of another stack is an import there, of this stack a
    GetAtt, and no name written at construction could be both."""
    role.node.add_validation(_WildcardAcknowledgement(role, suffix, reason,
                                                      lambda: role.node.try_find_child("DefaultPolicy")))


def acknowledge_policy_wildcards(policy: iam.ManagedPolicy, suffix: str, reason: str) -> None:
    """acknowledge_wildcards for a managed policy's own statements."""
    policy.node.add_validation(_WildcardAcknowledgement(policy, suffix, reason, lambda: policy))


@jsii.implements(IValidation)
class _WildcardAcknowledgement:
    # validations run after references are settled and before cdk-nag reads acknowledgements
    def __init__(self, scope: IConstruct, suffix: str, reason: str, find_policy: Any) -> None:
        self.role, self.suffix, self.reason, self.find_policy = scope, suffix, reason, find_policy
        self.done = False    # each synthesis validates again; once is enough

    def validate(self) -> list[str]:
        policy = self.find_policy()
        if policy is None or self.done:
            return []
        self.done = True
        document = cdk.Stack.of(self.role).resolve(policy.document)
        named = {nag_name(resource) for statement in document.get("Statement", [])
                 if statement.get("Effect") == "Allow" for resource in _listed(statement.get("Resource"))}
        found = tuple(sorted(f"Resource::{r}" for r in named if "*" in r and r.endswith(self.suffix)))
        if found:
            acknowledge(self.role, "IAM5", self.reason, applies_to=found)
        return []


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def nag_name(value: Any) -> str:
    """A resolved CloudFormation value as cdk-nag writes it in a finding's name:
    <LogicalId.Attr> for GetAtt, <Ref> for Ref, joins joined."""
    if isinstance(value, str):
        return value.replace("${", "<").replace("}", ">")
    if isinstance(value, dict) and len(value) == 1:
        (key, inner), = value.items()
        if key == "Fn::Join":
            return inner[0].join(nag_name(item) for item in inner[1])
        if key in ("Fn::Sub", "Fn::ImportValue"):
            return nag_name(inner)
        if key == "Fn::GetAtt":
            return f"<{nag_name(inner[0])}.{nag_name(inner[1])}>"
        if key == "Ref":
            return f"<{nag_name(inner)}>"
    return json.dumps(value, separators=(",", ":"))
