"""The budget Lambda handler, called directly with a scheduled EventBridge
event, on moto DynamoDB (tables from the synthesized data stack), SNS (the
alerts topic, read through an SQS queue subscribed to it) and CloudWatch
(the jobs' GPUUtilization datapoints put as the EMF lines would make them)."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.budget_ledger import DynamoDBBudgetRecords
from gqa.adapters.aws.cloudwatch_utilization import CloudWatchGpuUtilization
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.tables import TableNames
from gqa.models.errors import BackendUnavailable
from gqa.models.job import JobRecord, JobState, Request
from gqa.ports import Change, Inventory
from gqa.scheduling import Gpu, TeamPolicy
from gqa.scheduling.budget import period_of
from gqa.services.submit import SubmitService
from tests.aws.deployed import create_tables
from tests.aws.moto_support import FakeClock, LambdaContext, session
from tests.builders import spec
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
S = JobState
HOUR = 3600.0
NAMES = TableNames.prefixed("gqa-budget-")
NOW = float(int(time.time()))     # CloudWatch datapoints are placed in real time
PRICE = 10.0                      # per GPU-hour
CONTEXT = LambdaContext(function_name="gqa-budget")
SCHEDULE = {"version": "0", "id": "tick-7", "detail-type": "Scheduled Event", "source": "aws.events",
            "account": "123456789012", "time": "2024-01-01T00:00:00Z", "region": "us-east-1",
            "resources": ["arn:aws:events:us-east-1:123456789012:rule/gqa-budget-tick"], "detail": {}}


class Aws:
    def __init__(self, module):
        self.module = module
        self.store = DynamoDBStore(session().client("dynamodb"), NAMES)
        self.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(4))))
        self.clock = FakeClock(NOW)
        self.sqs = session().client("sqs")
        self.inbox = os.environ["INBOX_URL"]

    def tick(self) -> dict:
        self.module.container().service.clock = self.clock    # the tick's "now", shared with the jobs' times
        return self.module.handler(dict(SCHEDULE), CONTEXT)

    def running(self, team: str, gpu: int, ran: float, **overrides) -> JobRecord:
        """A job of `team` running on `gpu` for `ran` seconds."""
        [job] = SubmitService(self.store, FakeClock(NOW - ran - 60)).submit(spec(team=team, **overrides))
        started = NOW - ran
        *_, job = self.store.apply([
            Change(job.id, S.QUEUED, S.STARTING, f"assigned GPUs {gpu}", started, {"assigned": (gpu,)}),
            Change(job.id, S.STARTING, S.RUNNING, "attempt 1 started", started,
                   {"attempts": 1, "started_at": started, "proc_token": f"batch-{job.id}-1"})])
        return job

    def queued(self, team: str, **overrides) -> JobRecord:
        [job] = SubmitService(self.store, FakeClock(NOW)).submit(spec(team=team, **overrides))
        return job

    def alerts(self) -> list[dict]:
        """The notifications delivered to the subscribed queue so far, read once."""
        out = []
        while True:
            got = self.sqs.receive_message(QueueUrl=self.inbox, MaxNumberOfMessages=10,
                                           MessageAttributeNames=["All"]).get("Messages", [])
            if not got:
                return out
            for m in got:
                envelope = json.loads(m["Body"])
                out.append({"subject": envelope.get("Subject"), "message": envelope["Message"],
                            **{k: v["Value"] for k, v in envelope.get("MessageAttributes", {}).items()}})
                self.sqs.delete_message(QueueUrl=self.inbox, ReceiptHandle=m["ReceiptHandle"])


@pytest.fixture
def aws():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        sns, sqs = session().client("sns"), session().client("sqs")
        topic = sns.create_topic(Name="gqa-alerts")["TopicArn"]
        inbox = sqs.create_queue(QueueName="alerts-inbox")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
        env = {"GQA_JOBS_TABLE": NAMES.jobs, "GQA_SETTINGS_TABLE": NAMES.settings, "GQA_LEDGER_TABLE": NAMES.ledger,
               "GQA_ALERTS_TOPIC_ARN": topic, "INBOX_URL": inbox, "POWERTOOLS_SERVICE_NAME": "gqa-budget"}
        with mock.patch.dict(os.environ, env):
            from lambdas import budget
            budget.container.cache_clear()       # a fresh "container" per test: its clients are moto's
            yield Aws(budget)
            budget.container.cache_clear()


def test_two_ticks_in_a_row_send_each_alert_once(aws):
    aws.store.set_team("vision", TeamPolicy(budget=100.0))
    aws.running("vision", 0, 8.5 * HOUR, limits={"wall_time": "10h"})      # $85 of $100
    first = aws.tick()
    second = aws.tick()
    assert first["alerts"] == [f"budget#{period_of(NOW)}#vision#80"] and second["alerts"] == []
    [alert] = aws.alerts()
    assert alert["subject"] == f"gqa: team vision at 85% of its {period_of(NOW)} budget"
    assert alert["message"].startswith("team vision spent $85.00 of $100.00 this month (85%)")
    assert (alert["kind"], alert["team"]) == ("budget", "vision")


def test_live_spend_is_recorded_in_the_ledger_table(aws):
    aws.running("vision", 0, 2 * HOUR)
    aws.tick()
    aws.clock.t += HOUR
    aws.tick()
    live = DynamoDBBudgetRecords(session().client("dynamodb"), NAMES).live_spend(period_of(NOW))
    assert live["vision"].amount == pytest.approx(30.0) and live["vision"].as_of == NOW + HOUR


def test_a_team_at_its_budget_is_held_with_the_numbers_and_released_when_it_is_raised(aws):
    aws.store.set_team("vision", TeamPolicy(budget=100.0))
    aws.running("vision", 0, 10.12 * HOUR, limits={"wall_time": "12h"})    # $101.20
    waiting = aws.queued("vision", limits={"wall_time": "1h"})
    assert aws.tick()["held"] == [waiting.id]
    held = aws.store.get(waiting.id)
    assert held.state == S.HELD and held.reason == "team vision spent $101.20 of $100.00 this month (101%)"
    assert "Its queue is held" in aws.alerts()[0]["message"]

    aws.store.set_team("vision", TeamPolicy(budget=1000.0))
    assert aws.tick()["released"] == [waiting.id]
    assert aws.store.get(waiting.id).state == S.QUEUED


def test_stop_at_budget_requeues_the_teams_running_jobs(aws):
    aws.store.set_team("vision", TeamPolicy(budget=100.0, stop_at_budget=True))
    first = aws.running("vision", 0, 6 * HOUR, limits={"wall_time": "12h"})
    second = aws.running("vision", 1, 5 * HOUR, limits={"wall_time": "12h"})   # $110 together
    other = aws.running("nlp", 2, 5 * HOUR)
    assert sorted(aws.tick()["stopped"]) == sorted([first.id, second.id])
    assert {j.id for j in aws.store.with_requests()} == {first.id, second.id}   # the dispatcher's next pass stops them
    assert aws.store.get(first.id).request == Request.REQUEUE and aws.store.get(other.id).request is None
    assert aws.tick()["stopped"] == []


def test_idle_gpus_from_cloudwatch_alert_once(aws):
    idle = aws.running("nlp", 0, HOUR)
    busy = aws.running("nlp", 1, HOUR)
    cloudwatch = session().client("cloudwatch")
    for minutes in range(1, 30, 5):
        at = datetime.fromtimestamp(NOW - minutes * 60, timezone.utc)
        cloudwatch.put_metric_data(Namespace="gqa", MetricData=[
            {"MetricName": "GPUUtilization", "Dimensions": [{"Name": "JobId", "Value": job.id}], "Timestamp": at,
             "Value": value, "Unit": "Percent"} for job, value in ((idle, 1.0 + minutes / 100), (busy, 90.0))])
    assert aws.tick()["alerts"] == [f"idle#{idle.id}#1"]
    assert aws.tick()["alerts"] == []
    [alert] = aws.alerts()
    assert alert["kind"] == "idle" and f"job {idle.id} (train, team nlp, attempt 1) holds 1 GPU averaging" \
        in alert["message"]


def test_utilisation_is_averaged_over_the_window_and_absent_without_data(aws):
    job = aws.running("nlp", 0, HOUR)
    cloudwatch = session().client("cloudwatch")
    for minutes, value in ((5, 10.0), (15, 20.0), (45, 99.0)):     # the last is outside a 30-minute window
        cloudwatch.put_metric_data(Namespace="gqa", MetricData=[{
            "MetricName": "GPUUtilization", "Dimensions": [{"Name": "JobId", "Value": job.id}],
            "Timestamp": datetime.fromtimestamp(NOW - minutes * 60, timezone.utc), "Value": value}])
    used = CloudWatchGpuUtilization(cloudwatch).recent([job.id, "404"], 1800, NOW)
    assert used == {job.id: pytest.approx(15.0)}


def test_an_undeliverable_alert_fails_the_invocation_so_it_is_retried(aws):
    aws.store.set_team("vision", TeamPolicy(budget=100.0))
    aws.running("vision", 0, 6 * HOUR, limits={"wall_time": "12h"})   # a budget bounds jobs by their wall time
    session().client("sns").delete_topic(TopicArn=os.environ["GQA_ALERTS_TOPIC_ARN"])
    with pytest.raises(BackendUnavailable):
        aws.tick()
    assert DynamoDBBudgetRecords(session().client("dynamodb"), NAMES).sent(
        [f"budget#{period_of(NOW)}#vision#50"], NOW) == set()          # released: the retry sends it
