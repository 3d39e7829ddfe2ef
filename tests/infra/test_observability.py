"""The dashboard and alarms: every alarm notifies the alerts topic, with
missing data treated as chosen; every metric the dashboard and alarms read
names the exact dimensions its emitter writes (a metric is its name plus ALL
its dimensions: one dimension off and the graph is empty)."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest

from gqa.adapters.aws import resources as r
from gqa.services.telemetry import RETRY_KINDS
from infra.alerts import Alerts
from infra.observability import Observability
from infra.queues import Queues
from tests.infra.support import deployment, example_values, nagged_app, resolved_json, stand_in_function, template

FUNCTIONS = ("api", "admit", "dispatch", "reconcile", "budget", "trigger")
OUTCOMES = ("JobsSucceeded", "JobsFailed", "JobsTimedOut", "OutOfMemory", "SpotReclaims", "CapacityFailures")


def config():
    """The example with a custom pool name, and one team without a budget."""
    values = example_values()
    values["pools"][1]["name"] = "a10g-reserved"
    values["teams"].append({"name": "research", "share": 1})
    return deployment(**{k: values[k] for k in ("pools", "teams")})


@pytest.fixture(scope="module")
def built():
    app = nagged_app()
    stack = cdk.Stack(app, "ObservabilityTest")
    settings = config()
    queues = Queues(stack, "Queues", config=settings)
    alerts = Alerts(stack, "Alerts", config=settings)
    functions = {name: stand_in_function(stack, name.capitalize()) for name in FUNCTIONS}
    observability = Observability(stack, "Observability", config=settings, queues=queues, functions=functions,
                                  dead_letters=list(queues.dead_letters.values()), topic=alerts.topic)
    assert len(observability.alarms) == len(template(stack).find_resources("AWS::CloudWatch::Alarm"))
    return template(stack)


def alarms(built) -> dict[str, dict]:
    return {a["Properties"]["AlarmName"]: a["Properties"]
            for a in built.find_resources("AWS::CloudWatch::Alarm").values()}


def logical_id(built, kind: str, **properties) -> str:
    [(found, _)] = built.find_resources(kind, {"Properties": properties}).items()
    return found


def stats(alarm: dict) -> dict[str, tuple[str, str, dict, str, int]]:
    """A metric-math alarm's metrics by id: (namespace, name, dimensions, stat, period)."""
    out = {}
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            stat = query["MetricStat"]
            metric = stat["Metric"]
            out[query["Id"]] = (metric["Namespace"], metric["MetricName"],
                                {d["Name"]: d["Value"] for d in metric["Dimensions"]}, stat["Stat"], stat["Period"])
    return out


def expressions(alarm: dict) -> list[str]:
    return [q["Expression"] for q in alarm["Metrics"] if "Expression" in q]


# -- every alarm -----------------------------------------------------------------------------------
def test_every_alarm_notifies_the_topic_and_says_how_it_treats_missing_data(built):
    topic = {"Ref": logical_id(built, "AWS::SNS::Topic")}
    found = alarms(built)
    assert len(found) == len(r.QUEUES) + 1 + 1 + 2 * 2 + 1 + 2 * len(FUNCTIONS)
    for name, alarm in found.items():
        assert name.startswith("gqa-dev-")
        assert alarm["AlarmActions"] == [topic], name
        assert alarm["TreatMissingData"] in ("notBreaching", "ignore"), name
        assert "Missing data: " in alarm["AlarmDescription"], name


# -- one per dead-letter queue ----------------------------------------------------------------------
@pytest.mark.parametrize("queue", r.QUEUES, ids=lambda q: q.logical)
def test_every_dead_letter_queue_alarms_on_its_first_message(built, queue):
    alarm = alarms(built)[f"gqa-dev-{queue.logical}-dlq-not-empty"]
    dead = logical_id(built, "AWS::SQS::Queue", QueueName=queue.dead_letter_name("gqa-dev-"))
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == \
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum")
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dead, "QueueName"]}}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["EvaluationPeriods"]) == \
        (0, "GreaterThanThreshold", 1)
    assert alarm["OKActions"] == alarm["AlarmActions"]       # drained: say so
    assert alarm["TreatMissingData"] == "notBreaching"


# -- the queue's own alarms -------------------------------------------------------------------------
def test_a_job_pending_over_four_hours_alarms(built):
    alarm = alarms(built)["gqa-dev-pending-too-long"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("gqa", "OldestPendingAge", "Maximum")
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "gqa-budget"}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (4 * 3600, "GreaterThanThreshold")


def test_the_failure_rate_is_failed_over_ended_in_an_hour_with_a_minimum(built):
    alarm = alarms(built)["gqa-dev-failure-rate"]
    assert "IF(failed + succeeded >= 10, 100 * failed / (failed + succeeded), 0)" in expressions(alarm)
    got = {(name, dims["service"], period) for _, name, dims, stat, period in stats(alarm).values()
           if stat == "Sum" and set(dims) == {"service"}}
    assert got == {(name, service, 3600) for name in ("JobsFailed", "JobsSucceeded")
                   for service in ("gqa-reconcile", "gqa-dispatch")}
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["EvaluationPeriods"]) == \
        (20, "GreaterThanThreshold", 1)


@pytest.mark.parametrize("team, percent", [("nlp", 80), ("nlp", 100), ("vision", 80), ("vision", 100)])
def test_each_team_with_a_budget_alarms_at_80_and_100_percent(built, team, percent):
    alarm = alarms(built)[f"gqa-dev-budget-{team}-{percent}"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("gqa", "BudgetUsed", "Maximum")
    assert sorted(alarm["Dimensions"], key=lambda d: d["Name"]) == [
        {"Name": "service", "Value": "gqa-budget"}, {"Name": "team", "Value": team}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (percent, "GreaterThanOrEqualToThreshold")


def test_a_team_without_a_budget_has_no_budget_alarm(built):
    assert not [name for name in alarms(built) if "research" in name]


def test_free_gpus_while_jobs_wait_for_30_minutes_alarms(built):
    alarm = alarms(built)["gqa-dev-idle-gpus"]
    assert expressions(alarm) == ["MIN([FILL(free, REPEAT), FILL(queued, REPEAT)])"]
    assert stats(alarm) == {"free": ("gqa", "FreeGpus", {"service": "gqa-dispatch"}, "Minimum", 300),
                            "queued": ("gqa", "PendingJobs", {"service": "gqa-budget"}, "Minimum", 300)}
    assert (alarm["Threshold"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (0, 6, 6)


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_function_alarms_on_errors_and_throttles(built, function, metric):
    alarm = alarms(built)[f"gqa-dev-{function}-{metric.lower()}"]
    [fn] = [k for k in built.find_resources("AWS::Lambda::Function") if k.startswith(function.capitalize())]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/Lambda", metric, "Sum")
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": fn}}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")


# -- the dashboard ----------------------------------------------------------------------------------
def dashboard_metrics(built) -> set[tuple[str, str, frozenset, str]]:
    """Every metric the dashboard graphs: (namespace, name, dimensions, stat)."""
    [dashboard] = built.find_resources("AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"] == "gqa-dev-queue"
    body = resolved_json(built.to_json(), dashboard["Properties"]["DashboardBody"])
    found = set()
    for widget in body["widgets"]:
        for line in widget.get("properties", {}).get("metrics", []):
            if isinstance(line[0], dict):      # an expression
                continue
            options = line[-1] if isinstance(line[-1], dict) else {}
            fields = line[:-1] if options else line
            namespace, name, pairs = fields[0], fields[1], fields[2:]
            found.add((namespace, name, frozenset(zip(pairs[::2], pairs[1::2])), options.get("stat", "Average")))
    return found


def gqa(name: str, function: str, stat: str = "Maximum", **dims: str):
    return ("gqa", name, frozenset({"service": f"gqa-{function}", **dims}.items()), stat)


REQUIRED = [
    gqa("PendingJobs", "budget"), gqa("HeldJobs", "budget"), gqa("OldestPendingAge", "budget"),
    gqa("QueueWait", "dispatch", "p50"), gqa("QueueWait", "dispatch", "p95"),
    gqa("HeldGpus", "dispatch", "Average", pool="a10g-spot"),
    gqa("HeldGpus", "dispatch", "Average", pool="a10g-ondemand"),   # the name gqa emits, whatever the pool is called
    gqa("FreeGpus", "dispatch", "Average", pool="a10g-spot"),
    *(gqa("TeamSpend", "budget", team=t) for t in ("nlp", "vision", "research")),
    *(gqa("BudgetUsed", "budget", team=t) for t in ("nlp", "vision")),
    *(gqa(name, function, "Sum") for name in OUTCOMES for function in ("reconcile", "dispatch")),
    *(gqa("Retries", function, "Sum", kind=kind) for kind in RETRY_KINDS for function in ("reconcile", "dispatch")),
]


@pytest.mark.parametrize("metric", REQUIRED, ids=lambda m: f"{m[1]}-{'-'.join(v for _, v in sorted(m[2]))}-{m[3]}")
def test_the_dashboard_graphs_each_metric_with_its_emitters_dimensions(built, metric):
    assert metric in dashboard_metrics(built)


def test_the_dashboard_graphs_no_gqa_metric_with_another_dimension_set(built):
    allowed = {"service", "team", "kind", "pool"}
    for namespace, name, dims, _ in dashboard_metrics(built):
        if namespace == "gqa":
            assert dict(dims)["service"].startswith("gqa-") and set(dict(dims)) <= allowed, name


@pytest.mark.parametrize("tier", ["high", "normal", "low"])
def test_the_dashboard_graphs_each_intake_queue(built, tier):
    queue = logical_id(built, "AWS::SQS::Queue", QueueName=f"gqa-dev-intake-{tier}")
    token = json.dumps({"Fn::GetAtt": [queue, "QueueName"]}).replace('"', "'")
    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible", frozenset({("QueueName", token)}), "Maximum") in \
        dashboard_metrics(built)


@pytest.mark.parametrize("metric, stat", [("Errors", "Sum"), ("Throttles", "Sum"), ("Duration", "p95")])
def test_the_dashboard_graphs_every_functions_errors_throttles_and_duration(built, metric, stat):
    graphed = {dict(dims)["FunctionName"] for ns, name, dims, s in dashboard_metrics(built)
               if (ns, name, s) == ("AWS/Lambda", metric, stat)}
    functions = {json.dumps({"Ref": k}).replace('"', "'") for k in built.find_resources("AWS::Lambda::Function")}
    assert graphed == functions and len(functions) == len(FUNCTIONS)


def test_pools_are_labelled_with_the_deployments_names(built):
    [dashboard] = built.find_resources("AWS::CloudWatch::Dashboard").values()
    body = resolved_json(built.to_json(), dashboard["Properties"]["DashboardBody"])
    [widget] = [w for w in body["widgets"] if w["properties"].get("title") == "Running GPUs, by pool"]
    assert [line[-1]["label"] for line in widget["properties"]["metrics"]] == ["a10g-spot", "a10g-reserved"]
