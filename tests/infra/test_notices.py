"""The notices topic: its own topic (the alerts topic's unfiltered
subscribers would get every job's notices), under the alerts topic's
rotating key, TLS only, named in the stack's outputs for subscriptions
filtered on `user`."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match

from infra.alerts import Alerts
from infra.notices import Notices
from tests.infra.support import deployment, nagged_app, template

pytestmark = [pytest.mark.infra, pytest.mark.slow]


@pytest.fixture(scope="module")
def built():
    app = nagged_app()
    stack = cdk.Stack(app, "NoticesTest")
    alerts = Alerts(stack, "Alerts", config=deployment())
    notices = Notices(stack, "Notices", config=deployment(), key=alerts.key)
    return template(stack), stack.resolve(notices.topic.topic_arn)


def test_a_topic_of_its_own_under_the_alerts_key(built):
    made, _ = built
    [(key_id, _)] = made.find_resources("AWS::KMS::Key").items()
    made.has_resource_properties("AWS::SNS::Topic", {
        "TopicName": "gqa-dev-notices", "KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}})
    assert len(made.find_resources("AWS::SNS::Topic")) == 2   # the alerts topic and this one


def test_publishing_needs_tls(built):
    made, arn = built
    made.has_resource_properties("AWS::SNS::TopicPolicy", {
        "Topics": [arn], "PolicyDocument": {"Statement": Match.array_with([
            Match.object_like({"Effect": "Deny", "Action": "sns:Publish",
                               "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})


def test_the_stack_names_it_for_subscriptions(built):
    made, arn = built
    made.has_output("NoticesTopic", {"Value": arn})
