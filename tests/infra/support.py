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
