"""The alerts topic: encrypted with a rotating key CloudWatch may use, TLS
only, every message to alerts.emails and only approval requests to
alerts.approval_emails; publishers get the topic and the key's two actions."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match

from infra.alerts import KEY_ACTIONS, Alerts
from tests.infra.support import deployment, nagged_app, stand_in_function, template

EMAILS = {"emails": ["ops@example.com", "lead@example.com"],
          "approval_emails": ["approvers@example.com", "ops@example.com"]}   # ops gets everything already


def build(**changes):
    app = nagged_app()
    stack = cdk.Stack(app, "AlertsTest")
    alerts = Alerts(stack, "Alerts", config=deployment(**changes))
    alerts.grant_publish(stand_in_function(stack, "Budget"))
    return template(stack)


@pytest.fixture(scope="module")
def built():
    return build(alerts=EMAILS)


def test_the_topic_is_named_for_the_deployment_and_encrypted_with_a_rotating_key(built):
    [(key_id, _)] = built.find_resources("AWS::KMS::Key", {"Properties": {"EnableKeyRotation": True}}).items()
    built.has_resource_properties("AWS::SNS::Topic", {
        "TopicName": "gqa-dev-alerts", "KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}})


def test_cloudwatch_alarms_may_use_the_key(built):
    built.has_resource_properties("AWS::KMS::Key", {"KeyPolicy": {"Statement": Match.array_with([
        Match.object_like({"Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"},
                           "Action": list(KEY_ACTIONS)})])}})


@pytest.mark.parametrize("retain, policy", [(True, "Retain"), (False, "Delete")])
def test_the_key_is_kept_with_the_data(retain, policy):
    built = build(retain_data=retain)
    built.has_resource("AWS::KMS::Key", {"DeletionPolicy": policy, "UpdateReplacePolicy": policy})


def test_publishing_needs_tls(built):
    built.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Effect": "Deny", "Principal": "*", "Action": "sns:Publish",
                           "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})


def test_each_address_gets_what_its_list_says_once(built):
    subscriptions = {s["Properties"]["Endpoint"]: s["Properties"].get("FilterPolicy")
                     for s in built.find_resources("AWS::SNS::Subscription").values()}
    assert subscriptions == {"ops@example.com": None, "lead@example.com": None,
                             "approvers@example.com": {"kind": ["approval"]}}
    assert all(s["Properties"]["Protocol"] == "email" for s in built.find_resources("AWS::SNS::Subscription").values())


def test_no_addresses_no_subscriptions():
    assert build(alerts={}).find_resources("AWS::SNS::Subscription") == {}


def test_a_publisher_gets_the_topic_and_exactly_the_key_actions_it_needs(built):
    [(topic_id, _)] = built.find_resources("AWS::SNS::Topic").items()
    [(key_id, _)] = built.find_resources("AWS::KMS::Key").items()
    built.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": [
        {"Effect": "Allow", "Action": "sns:Publish", "Resource": {"Ref": topic_id}},
        {"Effect": "Allow", "Action": list(KEY_ACTIONS), "Resource": {"Fn::GetAtt": [key_id, "Arn"]}}]}})
