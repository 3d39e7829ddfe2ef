"""infra/events.py: what invokes each function, as the template says: the
queues' event sources with partial batch responses, the Batch rule of the
deployment's job queues, the trigger buckets' rules, the schedules, and the
dead letters of what EventBridge and Lambda could not handle. Built with
test_functions.service (the same two stacks, synthesized once a run)."""

from __future__ import annotations

import json

import pytest

from tests.infra.test_functions import BUCKETS, Service, service

cdk = pytest.importorskip("aws_cdk")

from gqa.adapters.aws import resources as r  # noqa: E402


@pytest.fixture(scope="module")
def built() -> Service:
    return service()


@pytest.fixture(scope="module")
def without_buckets() -> Service:
    return service(buckets=(), retain_data=True)


def of_type(built: Service, kind: str) -> dict[str, dict]:
    return {i: res for i, res in built.resources.items() if res["Type"] == kind}


def mappings(built: Service) -> dict[str, list[dict]]:
    """Event source mappings by consuming function name."""
    by_logical = {built.logical(fn): name for name, fn in built.functions.by_name.items()}
    out: dict[str, list[dict]] = {}
    for res in of_type(built, "AWS::Lambda::EventSourceMapping").values():
        out.setdefault(by_logical[res["Properties"]["FunctionName"]["Ref"]], []).append(res["Properties"])
    return out


def queue_of(built: Service, mapping: dict) -> str:
    """The data stack's logical id of the queue a mapping reads."""
    source = json.dumps(mapping["EventSourceArn"])
    found = [i for i, res in built.data_resources.items() if res["Type"] == "AWS::SQS::Queue" and i in source]
    assert len(found) == 1, source
    return found[0]


def rules(built: Service) -> list[dict]:
    return [res["Properties"] for res in of_type(built, "AWS::Events::Rule").values()]


def target_of(built: Service, rule: dict) -> str:
    (target,) = rule["Targets"]
    by_logical = {built.logical(fn): name for name, fn in built.functions.by_name.items()}
    return by_logical[target["Arn"]["Fn::GetAtt"][0]]


# -- the queues ----------------------------------------------------------------------------------
def test_each_queue_feeds_its_function_with_partial_batch_responses(built):
    q = built.queues
    expected = {"admit": {built.logical(queue) for queue in q.intake.values()},
                "dispatch": {built.logical(q.wakeup)}, "trigger": {built.logical(q.trigger_timer)}}
    found = mappings(built)
    assert {name: {queue_of(built, m) for m in found[name]} for name in found} == expected
    for each in found.values():
        for mapping in each:
            assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
            assert mapping["BatchSize"] <= 10 or mapping.get("MaximumBatchingWindowInSeconds", 0) > 0


def test_wakeups_are_limited_by_the_event_source_never_by_throttling(built):
    (wakeup,) = mappings(built)["dispatch"]
    assert wakeup["ScalingConfig"] == {"MaximumConcurrency": 2}
    assert "ReservedConcurrentExecutions" not in built.function("dispatch")
    assert all("ScalingConfig" not in m for name in ("admit", "trigger") for m in mappings(built)[name])


def test_each_queue_hides_a_message_six_times_its_consumers_timeout(built):
    """The templates' own numbers: SQS's advice, so a slow batch is not delivered twice."""
    timeouts = {built.logical(fn): built.function(name)["Timeout"] for name, fn in built.functions.by_name.items()}
    checked = 0
    for mapping in of_type(built, "AWS::Lambda::EventSourceMapping").values():
        queue = built.data_resources[queue_of(built, mapping["Properties"])]["Properties"]
        timeout = timeouts[mapping["Properties"]["FunctionName"]["Ref"]]
        window = mapping["Properties"].get("MaximumBatchingWindowInSeconds", 0)
        assert queue["VisibilityTimeout"] >= r.VISIBILITY_PER_TIMEOUT * timeout + window
        checked += 1
    assert checked == 5


# -- Batch job state changes -------------------------------------------------------------------
def test_batch_state_changes_of_the_deployments_queues_go_to_reconcile(built):
    from lambdas.reconcile import DETAIL_TYPE

    (rule,) = [rule for rule in rules(built) if rule.get("EventPattern", {}).get("source") == ["aws.batch"]]
    assert rule["EventPattern"] == {
        "source": ["aws.batch"], "detail-type": [DETAIL_TYPE],
        "detail": {"jobQueue": [built.stack.resolve(arn) for arn in built.batch.job_queue_arns]}}
    assert target_of(built, rule) == "reconcile"
    (target,) = rule["Targets"]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [built.logical(built.wiring.failures), "Arn"]}}
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}


@pytest.mark.parametrize("name", ["reconcile", "trigger"])
def test_failed_async_invocations_land_in_the_functions_dead_letters(built, name):
    dead = built.wiring.dead_letters[name]
    (config,) = [res["Properties"] for res in of_type(built, "AWS::Lambda::EventInvokeConfig").values()
                 if res["Properties"]["FunctionName"] == {"Ref": built.logical(built.functions.by_name[name])}]
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [built.logical(dead), "Arn"]}
    assert config["MaximumRetryAttempts"] == 2
    assert built.wiring.failures is built.wiring.dead_letters["reconcile"]


@pytest.mark.parametrize("name", ["reconcile", "trigger"])
def test_dead_letters_are_encrypted_tls_only_and_open_to_their_rules_alone(built, name):
    dead = built.logical(built.wiring.dead_letters[name])
    props = built.resources[dead]["Properties"]
    assert props["QueueName"] == f"gqa-dev-{name}-failures"
    assert props["SqsManagedSseEnabled"] is True
    assert props["MessageRetentionPeriod"] == 14 * 86400
    (policy,) = [res["Properties"]["PolicyDocument"]["Statement"] for res in of_type(built, "AWS::SQS::QueuePolicy")
                 .values() if {"Ref": dead} in res["Properties"]["Queues"]]
    denies = [s for s in policy if s["Effect"] == "Deny"]
    assert denies and all(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)
    for allow in (s for s in policy if s["Effect"] == "Allow"):
        assert allow["Principal"] == {"Service": "events.amazonaws.com"} and allow["Action"] == "sqs:SendMessage"
        assert "aws:SourceArn" in allow["Condition"]["ArnEquals"]


# -- new objects in the trigger buckets ----------------------------------------------------------
@pytest.mark.parametrize("bucket", BUCKETS)
def test_each_trigger_bucket_sends_its_new_objects_to_trigger(built, bucket):
    from lambdas.trigger import OBJECT_CREATED

    (rule,) = [rule for rule in rules(built)
               if rule.get("EventPattern", {}).get("detail", {}).get("bucket", {}).get("name") == [bucket]]
    assert rule["EventPattern"] == {"source": ["aws.s3"], "detail-type": [OBJECT_CREATED],
                                    "detail": {"bucket": {"name": [bucket]}}}
    assert target_of(built, rule) == "trigger"
    (target,) = rule["Targets"]
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": [built.logical(built.wiring.dead_letters["trigger"]),
                                                                "Arn"]}
    # the existing bucket gains EventBridge notifications, its own notifications kept (Managed: false)
    (notifications,) = [res["Properties"] for res in of_type(built, "Custom::S3BucketNotifications").values()
                        if res["Properties"]["BucketName"] == bucket]
    assert notifications["NotificationConfiguration"] == {"EventBridgeConfiguration": {}}
    assert notifications["Managed"] is False


def test_no_trigger_buckets_no_rule_no_notifications(without_buckets):
    assert not [rule for rule in rules(without_buckets) if rule.get("EventPattern", {}).get("source") == ["aws.s3"]]
    assert not of_type(without_buckets, "Custom::S3BucketNotifications")
    assert set(without_buckets.wiring.dead_letters) == {"reconcile"}


# -- the ticks -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, expression", [("dispatch", "rate(1 minute)"), ("budget", "rate(5 minutes)")])
def test_schedules(built, name, expression):
    (rule,) = [rule for rule in rules(built) if rule.get("ScheduleExpression") == expression]
    assert target_of(built, rule) == name
    assert rule["State"] == "ENABLED"


def test_only_the_two_ticks_are_scheduled(built):
    assert sorted(target_of(built, rule) for rule in rules(built) if "ScheduleExpression" in rule) == \
        ["budget", "dispatch"]
