"""The REST API: IAM authorisation on every method, a throttled stage with
access logs, and managed policies that match lambdas/api's routes."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match

from infra.api import ADMIN_ROUTES, APPROVER_ROUTES, RESEARCHER_ROUTES, STAGE, Api
from infra.outputs import outputs
from tests.infra.support import deployment, nagged_app, stand_in_function, template



@pytest.fixture(scope="module")
def built():
    from infra.checkpoints import Checkpoints

    app = nagged_app()
    data = cdk.Stack(app, "Data")      # the bucket is the data stack's, as in a deployment
    checkpoints = Checkpoints(data, "Checkpoints", config=deployment())
    stack = cdk.Stack(app, "ApiTest")
    api = Api(stack, "Api", config=deployment(), function=stand_in_function(stack, "Fn"), checkpoints=checkpoints)
    outputs(stack, api)
    return template(stack)


def _statements(built, name):
    policies = built.find_resources("AWS::IAM::ManagedPolicy", {"Properties": {"ManagedPolicyName": name}})
    (policy,) = policies.values()
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_every_method_needs_iam(built):
    methods = built.find_resources("AWS::ApiGateway::Method")
    assert len(methods) >= 2   # ANY on / and on {proxy+}
    for method in methods.values():
        assert method["Properties"]["AuthorizationType"] == "AWS_IAM"


def test_the_stage_is_throttled_and_logged(built):
    built.has_resource_properties("AWS::ApiGateway::Stage", {
        "StageName": STAGE,
        "AccessLogSetting": Match.object_like({"DestinationArn": Match.any_value()}),
        "MethodSettings": Match.array_with([Match.object_like({"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100,
                                                               "LoggingLevel": "ERROR"})]),
    })


def test_the_account_wide_logging_role_outlives_the_stack(built):
    """API Gateway's CloudWatch role is one setting per account and region, which every API
    there logs through: destroying one deployment (dev beside prod) must not delete it."""
    (account,) = built.find_resources("AWS::ApiGateway::Account").values()
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    role = built.find_resources("AWS::IAM::Role")[role_id]
    assert (role["DeletionPolicy"], role["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert (account["DeletionPolicy"], account["UpdateReplacePolicy"]) == ("Retain", "Retain")


def _routes(built, name):
    (statement,) = [s for s in _statements(built, name) if s["Action"] == "execute-api:Invoke"]
    assert statement["Action"] == "execute-api:Invoke" and statement["Effect"] == "Allow"
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    out = set()
    for arn in resources:
        tail = arn["Fn::Join"][1][-1]   # ".../<stage>/<method>/<path>"
        _, stage, method, path = tail.split("/", 3)
        assert stage == STAGE
        out.add((method, path))
    return out


@pytest.mark.parametrize("name, routes", [
    ("gqa-dev-researchers", set(RESEARCHER_ROUTES)),
    ("gqa-dev-approvers", set(RESEARCHER_ROUTES) | set(APPROVER_ROUTES)),
    ("gqa-dev-admins", set(ADMIN_ROUTES)),
])
def test_each_policy_allows_its_routes_only(built, name, routes):
    assert _routes(built, name) == routes


@pytest.mark.parametrize("name", ["gqa-dev-researchers", "gqa-dev-approvers", "gqa-dev-admins"])
def test_each_policy_may_store_code_bundles_and_nothing_else_in_the_bucket(built, name):
    s3 = [s for s in _statements(built, name) if s["Action"] != "execute-api:Invoke"]
    assert sorted(s["Action"] for s in s3) == ["s3:ListBucket", "s3:PutObject"]
    for statement in s3:
        text = json.dumps(statement["Resource"])
        assert "ImportValue" in text and "Checkpoints" in text      # the data stack's checkpoint bucket
        if statement["Action"] == "s3:PutObject":
            assert statement["Resource"]["Fn::Join"][1][-1] == "/code/*"
            assert "Condition" not in statement
        else:   # listing only under the prefix: enough to tell a missing bundle from a denied one
            assert statement["Condition"] == {"StringLike": {"s3:prefix": ["code/*"]}}


@pytest.mark.parametrize("verb", ["cancel", "requeue", "hold", "release", "update"])
def test_researchers_may_call_every_route_owners_act_on_their_jobs_by(built, verb):
    from gqa.services.access import OWNED, Action

    assert OWNED[Action(verb)] == "job"      # the access rule lets owners do it to their own jobs
    assert ("POST", f"jobs/*/{verb}") in _routes(built, "gqa-dev-researchers")


def test_researchers_cannot_approve_or_change_quotas():
    for method, path in RESEARCHER_ROUTES:
        assert "approve" not in path and "deny" not in path
        assert method != "PUT"   # PUT /quota/teams/{team}, PUT /quota/policy are admins'


def test_outputs_give_what_gqa_config_set_needs(built):
    outs = built.find_outputs("*")
    assert {"Endpoint", "Region", "ConfigureCli", "ResearcherPolicy", "ApproverPolicy", "AdminPolicy"} <= set(outs)
    command = "".join(p if isinstance(p, str) else "<>" for p in outs["ConfigureCli"]["Value"]["Fn::Join"][1])
    assert command.startswith("gqa config set backend aws && gqa config set region <>")
    assert "gqa config set endpoint https://<>.execute-api.<>.<>/" + STAGE in command
