"""Notifications on SNS (moto) and EMF metrics (stdout)."""

from __future__ import annotations

import io
import json
import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws import metrics
from gqa.adapters.aws.metrics import EmfMetrics, make_metrics
from gqa.adapters.aws.sns_notifier import MESSAGE_LIMIT, SnsNotifier, fit_message, fit_subject
from gqa.models.errors import BackendUnavailable, NotFound
from tests.aws.moto_support import capture, refuse, session
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws


@pytest.fixture
def sns():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        client = session().client("sns")
        topic = client.create_topic(Name="gqa-alerts")["TopicArn"]
        yield client, topic


def test_notify_publishes_with_kind_and_team_for_filter_policies(sns):
    client, topic = sns
    sqs = session().client("sqs")
    queue = sqs.create_queue(QueueName="approvers")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    client.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn,
                     Attributes={"FilterPolicy": json.dumps({"kind": ["approval"]}), "RawMessageDelivery": "true"})
    published = capture(client, "Publish")
    notifier = SnsNotifier(client, topic)

    notifier.notify("Job 12 needs approval", "64 GPUs for 3 days", kind="approval", team="vision")
    notifier.notify("Budget at 80%", "nlp spent 800 of 1000", kind="budget")

    assert published[0]["MessageAttributes"] == {"kind": {"DataType": "String", "StringValue": "approval"},
                                                 "team": {"DataType": "String", "StringValue": "vision"}}
    assert published[0]["Subject"] == "Job 12 needs approval"
    assert "team" not in published[1]["MessageAttributes"]
    delivered = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0)["Messages"]
    assert [m["Body"] for m in delivered] == ["64 GPUs for 3 days"]   # the filter let only the approval through


def test_long_subjects_are_cut_and_flattened():
    long = "Job 12345 (a-very-long-name) failed: " + "x" * 200
    assert len(fit_subject(long)) < 100 and fit_subject(long).endswith("...")
    assert fit_subject("line one\nline two\t\u2603") == "line one line two"
    assert fit_subject("x" * 99) == "x" * 99


def test_huge_messages_are_cut_on_a_character_boundary():
    text = "\u00e9" * MESSAGE_LIMIT
    cut = fit_message(text)
    assert len(cut.encode()) <= MESSAGE_LIMIT and cut.endswith("[...]")
    assert fit_message("short") == "short"


def test_a_missing_topic_is_not_found(sns):
    client, topic = sns
    client.delete_topic(TopicArn=topic)
    with pytest.raises(NotFound):
        SnsNotifier(client, topic).notify("s", "m", kind="alert")


def test_sns_throttling_is_retried_then_unavailable(sns):
    client, topic = sns
    sleeps: list[float] = []
    notifier = SnsNotifier(client, topic, attempts=3, sleep=sleeps.append)
    refuse(client, "Publish", "Throttling", times=2)
    notifier.notify("s", "m", kind="alert")
    assert len(sleeps) == 2
    refuse(client, "Publish", "Throttling", times=10)
    with pytest.raises(BackendUnavailable):
        notifier.notify("s", "m", kind="alert")


# -- metrics ----------------------------------------------------------------------------------------

def test_emf_documents_carry_the_metric_definitions_and_values():
    out = io.StringIO()
    emf = EmfMetrics("gqa", "dispatch", out=out, clock=lambda: 1_700_000_000.5)
    emf.add_dimension("team", "vision")
    emf.add_metric("JobsStarted", "Count", 2)
    emf.add_metric("QueueWait", "Seconds", 12.5)
    emf.add_metric("QueueWait", "Seconds", 30)
    emf.add_metadata("job_id", "12")

    emf.flush_metrics()
    emf.flush_metrics()                      # nothing new: nothing printed
    emf.add_metric("JobsStarted", "Count", 1)
    emf.flush_metrics()

    line, after = out.getvalue().splitlines()
    doc = json.loads(line)
    assert json.loads(after)["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]  # added ones cleared
    assert doc["_aws"] == {"Timestamp": 1_700_000_000_500, "CloudWatchMetrics": [{
        "Namespace": "gqa", "Dimensions": [["service", "team"]],
        "Metrics": [{"Name": "JobsStarted", "Unit": "Count"}, {"Name": "QueueWait", "Unit": "Seconds"}]}]}
    assert (doc["service"], doc["team"], doc["job_id"]) == ("dispatch", "vision", "12")
    assert (doc["JobsStarted"], doc["QueueWait"]) == (2.0, [12.5, 30.0])


def test_emf_flushes_itself_at_the_hundred_metric_limit():
    out = io.StringIO()
    emf = EmfMetrics("gqa", "x", out=out)
    for i in range(metrics.MAX_METRICS + 1):
        emf.add_metric(f"m{i}", "Count", 1)
    emf.flush_metrics()
    assert [len(json.loads(line)["_aws"]["CloudWatchMetrics"][0]["Metrics"])
            for line in out.getvalue().splitlines()] == [100, 1]


def test_make_metrics_falls_back_to_the_stdlib_printer_without_powertools(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "aws_lambda_powertools", None)
    assert isinstance(make_metrics("gqa", "admit"), EmfMetrics)
