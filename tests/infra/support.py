"""Builders for the infrastructure tests: deployments made from the shipped
example with changes, stacks checked by cdk-nag as `cdk synth` checks them,
and templates read with aws_cdk.assertions."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "deployment.yaml"

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def example_values() -> dict[str, Any]:
    """The shipped example's values, to change per test."""
    return copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))


def deployment(**changes: Any):
    """The example deployment with top-level fields replaced, e.g. deployment(name="prod", retain_data=True)."""
    from gqa.models.deployment import validate_deployment

    return validate_deployment({**example_values(), **changes})


def nagged_app():
    """An App that runs cdk-nag's AwsSolutions checks at synth, as the real app does."""
    import aws_cdk as cdk

    from infra.nag import check

    app = cdk.App(context=_CONTEXT)
    check(app)
    return app


def template(stack):
    """The stack's template; raises RuntimeError (ValidationFailed) on any
    unacknowledged cdk-nag finding or invalid property."""
    from aws_cdk.assertions import Template

    return Template.from_stack(stack)


def app_templates(values: dict[str, Any]):
    """Every stack of the app a deployment's values build: {stack name: Template}."""
    from aws_cdk.assertions import Template

    from infra import build_app

    app = build_app({**_CONTEXT, "gqa:config": values})
    return {stack.stack_name: Template.from_stack(stack) for stack in app.node.children
            if hasattr(stack, "stack_name")}


# the context cdk.json gives the app, less the config file (each test passes its values)
_CONTEXT: dict[str, Any] = {}


def _load_context() -> None:
    import json

    context = json.loads((ROOT / "cdk.json").read_text()).get("context", {})
    _CONTEXT.update({k: v for k, v in context.items() if not k.startswith("gqa:")})


_load_context()


def stand_in_function(scope, id: str):
    """A small inline function standing in for one of ours where a test
    builds one construct alone (the real ones need the built asset)."""
    from aws_cdk import aws_lambda as lambda_

    from infra.nag import acknowledge

    fn = lambda_.Function(scope, id, runtime=lambda_.Runtime.PYTHON_3_13, handler="index.handler",
                          code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"))
    acknowledge(fn, "IAM4", "test stand-in", applies_to=(
        "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",))
    acknowledge(fn, "L1", "test stand-in")
    return fn


def resolved_json(template_json: dict, value):
    """A custom resource's JSON-string property (Fn::Join of text and tokens) as data, tokens shown as
    {"Ref": ...} text."""
    import json

    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        value = sep.join(p if isinstance(p, str) else json.dumps(p).replace('"', "'") for p in parts)
    return json.loads(value)


# the longest forms of what CloudFormation fills in: the longest region name, a 63-character bucket name
LONGEST_REGION, ACCOUNT = "ap-southeast-3", "123456789012"
PSEUDO = {"AWS::Region": LONGEST_REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws",
          "AWS::URLSuffix": "amazonaws.com"}


def resolved_environment(templates: dict[str, dict], stack: str, variables: dict) -> dict[str, str]:
    """A function's environment as Lambda is given it: references to the stacks' resources
    resolved to their names, URLs and ARNs at their longest."""
    return {k: _resolved(templates, stack, v) for k, v in variables.items()}


def _resolved(templates: dict[str, dict], stack: str, value) -> str:
    if isinstance(value, str):
        return value
    (kind, arg), = value.items()
    if kind == "Fn::Join":
        return arg[0].join(_resolved(templates, stack, part) for part in arg[1])
    if kind == "Ref":
        return PSEUDO.get(arg) or _attribute(templates, stack, arg, None)
    if kind == "Fn::GetAtt":
        return _attribute(templates, stack, arg[0], arg[1])
    if kind == "Fn::ImportValue":
        for name, template in templates.items():
            for output in template.get("Outputs", {}).values():
                if output.get("Export", {}).get("Name") == arg:
                    return _resolved(templates, name, output["Value"])
    raise AssertionError(f"cannot resolve {value}")


def _attribute(templates: dict[str, dict], stack: str, logical_id: str, attribute: str | None) -> str:
    resource = templates[stack]["Resources"][logical_id]
    kind, props = resource["Type"], resource.get("Properties", {})
    if kind == "AWS::SQS::Queue":
        name = props["QueueName"]
        return {None: f"https://sqs.{LONGEST_REGION}.amazonaws.com/{ACCOUNT}/{name}", "QueueName": name,
                "Arn": f"arn:aws:sqs:{LONGEST_REGION}:{ACCOUNT}:{name}"}[attribute]
    if kind == "AWS::S3::Bucket":
        name = props.get("BucketName") if isinstance(props.get("BucketName"), str) else "b" * 63
        return name if attribute is None else f"arn:aws:s3:::{name}"
    if kind == "AWS::SNS::Topic":
        return f"arn:aws:sns:{LONGEST_REGION}:{ACCOUNT}:{props['TopicName']}"
    if kind == "AWS::Logs::LogGroup" and attribute is None:
        return props["LogGroupName"]
    if kind == "AWS::DynamoDB::Table" and attribute is None:
        return props["TableName"]
    raise AssertionError(f"cannot resolve {logical_id}.{attribute} ({kind})")
