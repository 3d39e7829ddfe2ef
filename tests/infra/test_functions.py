"""infra/functions.py: the six functions as their template says: runtime,
handler, timeouts, JSON logs, exactly the settings lambdas/environment.py
documents for each, and roles that grant what README.md's table says each
function calls and nothing more. The stacks mirror the app's: the tables,
queues and checkpoints in a data stack, the functions and their wiring in a
service stack (so every reference crosses stacks as in a deployment)."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from tests.infra import support

cdk = pytest.importorskip("aws_cdk")

from gqa.adapters.aws import resources as r  # noqa: E402

FUNCTIONS = ("api", "admit", "dispatch", "reconcile", "budget", "trigger")
BUCKETS = ("raw-data.example.com", "uploads-7")


@dataclass(frozen=True)
class JobResources:
    """The GPU pools' Batch resources as infra.compute.GpuPools gives them (functions.BatchResources)."""

    job_queue_arns: list[str]
    job_definition_arns: list[str]
    log_group_name: str


@dataclass(frozen=True)
class Service:
    config: Any
    data: Any
    stack: Any
    tables: Any
    queues: Any
    checkpoints: Any
    topic: Any
    batch: JobResources
    functions: Any
    wiring: Any
    template: Any          # aws_cdk.assertions.Template of the service stack
    resources: dict        # its Resources
    data_resources: dict   # the data stack's
    notices: Any = None    # the notices topic (under the alerts topic's key)

    def logical(self, construct) -> str:
        resource = construct.node.default_child
        return cdk.Stack.of(resource).get_logical_id(resource)

    def function(self, name: str) -> dict:
        return self.resources[self.logical(self.functions.by_name[name])]["Properties"]

    def statements(self, name: str) -> list[dict]:
        """Every statement of the policies attached to the function's role."""
        role = self.logical(self.functions.by_name[name].role)
        out = []
        for resource in self.resources.values():
            if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role} in resource["Properties"]["Roles"]:
                out.extend(resource["Properties"]["PolicyDocument"]["Statement"])
        return out


@functools.cache
def service(*, buckets: tuple[str, ...] = BUCKETS, retain_data: bool = False) -> Service:
    """Built once per set of arguments in a test run (test_events.py uses it too)."""
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_logs as logs
    from aws_cdk import aws_sns as sns

    from infra.checkpoints import Checkpoints
    from infra.events import EventWiring
    from infra.functions import Functions
    from infra.queues import Queues
    from infra.tables import Tables

    config = support.deployment(triggers={"buckets": list(buckets)}, retain_data=retain_data)
    app = support.nagged_app()
    data = cdk.Stack(app, "data")
    tables, queues = Tables(data, "Tables", config=config), Queues(data, "Queues", config=config)
    checkpoints = Checkpoints(data, "Checkpoints", config=config)
    stack = cdk.Stack(app, "service")
    key = kms.Key(stack, "AlertsKey", enable_key_rotation=True)
    topic = sns.Topic(stack, "Alerts", master_key=key, enforce_ssl=True)
    notices = sns.Topic(stack, "Notices", master_key=key, enforce_ssl=True)
    job_logs = logs.LogGroup(stack, "JobLogs", log_group_name=f"/aws/batch/{config.prefix}jobs",
                             retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY)
    batch = JobResources(
        job_queue_arns=[stack.format_arn(service="batch", resource="job-queue",
                                         resource_name=f"{config.prefix}{pool.pool_name}") for pool in config.pools],
        job_definition_arns=[stack.format_arn(service="batch", resource="job-definition", resource_name=f"{name}:*")
                             for name in config.job_definitions()],
        log_group_name=job_logs.log_group_name)
    functions = Functions(stack, "Functions", config=config, tables=tables, queues=queues, checkpoints=checkpoints,
                          batch=batch, alerts_topic=topic, notices_topic=notices)
    wiring = EventWiring(stack, "Events", config=config, queues=queues, functions=functions, batch=batch)
    template = support.template(stack)
    data_template = support.template(data)
    return Service(config, data, stack, tables, queues, checkpoints, topic, batch, functions, wiring, template,
                   template.to_json()["Resources"], data_template.to_json()["Resources"], notices)


@pytest.fixture(scope="module")
def built() -> Service:
    return service()


# -- the functions -----------------------------------------------------------------------------
SETTINGS = {   # name: (handler, timeout)
    "api": ("lambdas.api.handler", 29),
    "admit": ("lambdas.admit.handler", r.ADMIT_TIMEOUT),
    "dispatch": ("lambdas.dispatch.handler", r.DISPATCH_TIMEOUT),
    "reconcile": ("lambdas.reconcile.handler", 30),
    "budget": ("lambdas.budget.handler", 120),
    "trigger": ("lambdas.trigger.handler", r.TRIGGER_TIMEOUT),
}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_runtime_architecture_handler_timeout_and_json_logs(built, name):
    handler, timeout = SETTINGS[name]
    props = built.function(name)
    assert props["FunctionName"] == f"gqa-dev-{name}"
    assert (props["Runtime"], props["Architectures"], props["Handler"], props["Timeout"]) == \
        ("python3.12", ["arm64"], handler, timeout)
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    log_group = built.resources[props["LoggingConfig"]["LogGroup"]["Ref"]]
    assert log_group["Properties"]["LogGroupName"] == f"/aws/lambda/gqa-dev-{name}"
    assert log_group["Properties"]["RetentionInDays"] == 30
    assert log_group["DeletionPolicy"] == "Delete"
    assert 256 <= props["MemorySize"] <= 2048


def test_the_six_share_one_code_asset(built):
    assert len({json.dumps(built.function(name)["Code"], sort_keys=True) for name in FUNCTIONS}) == 1


def test_retained_data_keeps_the_logs_a_year():
    retained = service(buckets=(), retain_data=True)
    for name in FUNCTIONS:
        log_group = retained.resources[retained.function(name)["LoggingConfig"]["LogGroup"]["Ref"]]
        assert (log_group["DeletionPolicy"], log_group["Properties"]["RetentionInDays"]) == ("Retain", 365)


# -- their settings: exactly what lambdas/environment.py documents for each ----------------------
TABLES = {"GQA_JOBS_TABLE", "GQA_SETTINGS_TABLE", "GQA_LEDGER_TABLE"}
POWERTOOLS = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"}
READS = {
    "api": {"GQA_INTAKE_URLS", "GQA_WAKEUP_QUEUE_URL", "GQA_POOLS", "GQA_LOG_GROUP", "GQA_ACCESS",
            "GQA_TRIGGER_BUCKETS", "GQA_CHECKPOINT_BUCKET", "GQA_MANIFEST_BUCKET", "GQA_NOTICES_TOPIC_ARN",
            "GQA_KEEP_HISTORY_DAYS"},
    "admit": {"GQA_INTAKE_URLS", "GQA_WAKEUP_QUEUE_URL", "GQA_ALERTS_TOPIC_ARN", "GQA_KEEP_HISTORY_DAYS"},
    "dispatch": {"GQA_POOLS", "GQA_JOB_DEFINITION", "GQA_IMAGES", "GQA_CHECKPOINT_BUCKET", "GQA_CHECKPOINT_PREFIX",
                 "GQA_CHECKPOINT_GRACE", "GQA_NOTICES_TOPIC_ARN", "GQA_KEEP_HISTORY_DAYS", "GQA_WAKEUP_QUEUE_URL"},
    # every function that may end a job sets its item's TTL from the history's retention
    "reconcile": {"GQA_WAKEUP_QUEUE_URL", "GQA_NOTICES_TOPIC_ARN", "GQA_KEEP_HISTORY_DAYS"},
    "budget": {"GQA_ALERTS_TOPIC_ARN", "GQA_WAKEUP_QUEUE_URL"},
    "trigger": {"GQA_INTAKE_URLS", "GQA_TRIGGER_TIMER_QUEUE_URL", "GQA_MANIFEST_BUCKET", "GQA_TRIGGER_BUCKETS",
                "GQA_CHECKPOINT_BUCKET", "GQA_ACCESS"},
}
LEFT_AT_DEFAULT = {"GQA_GPU_METRICS_NAMESPACE"}   # budget's: the namespace the jobs report in


@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_function_gets_exactly_the_settings_it_reads(built, name):
    assert set(built.function(name)["Environment"]["Variables"]) == TABLES | POWERTOOLS | READS[name]


def test_every_setting_environment_py_documents_is_given_or_left_at_its_default():
    import lambdas.environment

    documented = set(re.findall(r"\bGQA_[A-Z_]+\b", lambdas.environment.__doc__))
    given = TABLES.union(*READS.values())
    assert documented == given | LEFT_AT_DEFAULT


@pytest.mark.parametrize("name", FUNCTIONS)
def test_powertools_service_is_the_handlers_own(built, name):
    import importlib

    module = importlib.import_module("lambdas.api.container" if name == "api" else f"lambdas.{name}")
    variables = built.function(name)["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == module.logger.service == f"gqa-{name}"
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "gqa"


def test_settings_come_from_the_deployment_and_the_stacks(built):
    import lambdas.environment

    settings = built.config.function_settings()
    dispatch = built.function("dispatch")["Environment"]["Variables"]
    for key in ("GQA_POOLS", "GQA_JOB_DEFINITION", "GQA_IMAGES", "GQA_CHECKPOINT_GRACE"):
        assert dispatch[key] == settings[key]
    assert dispatch["GQA_CHECKPOINT_PREFIX"] == built.checkpoints.prefix == lambdas.environment.CHECKPOINT_PREFIX
    api = built.function("api")["Environment"]["Variables"]
    assert (api["GQA_POOLS"], api["GQA_ACCESS"]) == (settings["GQA_POOLS"], settings["GQA_ACCESS"])
    # the trigger function judges a burst's owner under the same access settings as the api a caller
    assert built.function("trigger")["Environment"]["Variables"]["GQA_ACCESS"] == settings["GQA_ACCESS"]
    assert api["GQA_LOG_GROUP"] == {"Ref": built.logical(built.stack.node.find_child("JobLogs"))}
    names = built.tables.names
    assert {k: dispatch[k] for k in TABLES} == {"GQA_JOBS_TABLE": names.jobs, "GQA_SETTINGS_TABLE": names.settings,
                                                "GQA_LEDGER_TABLE": names.ledger}
    q = built.queues
    refers = {   # setting: the data stack's resources its value refers to
        ("api", "GQA_INTAKE_URLS"): {built.logical(queue) for queue in q.intake.values()},
        ("api", "GQA_WAKEUP_QUEUE_URL"): {built.logical(q.wakeup)},
        ("admit", "GQA_INTAKE_URLS"): {built.logical(queue) for queue in q.intake.values()},
        ("trigger", "GQA_TRIGGER_TIMER_QUEUE_URL"): {built.logical(q.trigger_timer)},
        ("dispatch", "GQA_CHECKPOINT_BUCKET"): {built.logical(built.checkpoints.bucket)},
        ("trigger", "GQA_MANIFEST_BUCKET"): {built.logical(built.checkpoints.bucket)},
        # where no trigger may watch: gqa's own bucket
        ("api", "GQA_CHECKPOINT_BUCKET"): {built.logical(built.checkpoints.bucket)},
        ("api", "GQA_MANIFEST_BUCKET"): {built.logical(built.checkpoints.bucket)},
        ("trigger", "GQA_CHECKPOINT_BUCKET"): {built.logical(built.checkpoints.bucket)},
    }
    for (name, key), logical_ids in refers.items():
        value = json.dumps(built.function(name)["Environment"]["Variables"][key])
        assert {i for i in _data_logical_ids(built) if i in value} == logical_ids, key
    # where triggers may watch: the buckets the stack sends the events of, to both ends
    for name in ("api", "trigger"):
        variables = built.function(name)["Environment"]["Variables"]
        assert variables["GQA_TRIGGER_BUCKETS"] == settings["GQA_TRIGGER_BUCKETS"]
        assert json.loads(variables["GQA_TRIGGER_BUCKETS"]) == list(BUCKETS)
    for name in ("admit", "budget"):
        topic = built.function(name)["Environment"]["Variables"]["GQA_ALERTS_TOPIC_ARN"]
        assert topic == {"Ref": built.logical(built.topic)}
    for name in ("reconcile", "dispatch", "api"):
        topic = built.function(name)["Environment"]["Variables"]["GQA_NOTICES_TOPIC_ARN"]
        assert topic == {"Ref": built.logical(built.notices)}


def _data_logical_ids(built: Service) -> set[str]:
    return {i for i, resource in built.data_resources.items()
            if resource["Type"] in ("AWS::SQS::Queue", "AWS::S3::Bucket", "AWS::DynamoDB::Table")}


# -- their roles: README.md's table is the specification ---------------------------------------
NO_RESOURCE_LEVEL = {"batch:DescribeJobs", "batch:ListJobs", "batch:DescribeJobDefinitions", "cloudwatch:GetMetricData"}
EVENT_SOURCE_ACTIONS = {"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl", "sqs:DeleteMessage",
                        "sqs:GetQueueAttributes"}
FAILURE_DESTINATION_ACTIONS = {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}


def readme_table() -> dict[str, tuple[str, str]]:
    """README.md's "What each function calls, for its IAM policy": {function: (DynamoDB, other)}."""
    text = (support.ROOT / "README.md").read_text()
    lines = text[text.index("What each function calls, for its IAM policy"):].splitlines()
    rows: dict[str, tuple[str, str]] = {}
    for line in lines[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] in ("function", "---"):
            continue
        rows[cells[0]] = (cells[1], cells[2])
    return rows


def documented_actions(other: str) -> set[str]:
    return set(re.findall(r"`([a-z0-9-]+:[A-Za-z0-9*]+)`", other))


def documented_send_targets(built: Service, other: str) -> set[str]:
    """The queues the table names in "`sqs:SendMessage` (intake, wake-up)", as logical ids."""
    named = re.search(r"`sqs:SendMessage` \(([^)]*)\)", other)
    if not named:
        return set()
    q = built.queues
    queues = {"intake": list(q.intake.values()), "wake-up": [q.wakeup], "its timer queue": [q.trigger_timer]}
    return {built.logical(queue) for word in named.group(1).split(", ") for queue in queues[word]}


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def _refers_to(resource, logical_ids) -> set[str]:
    text = json.dumps(resource)
    return {i for i in logical_ids if i in text}   # a logical id ends in a hash: no other holds it


def test_the_readme_table_covers_the_six():
    assert tuple(readme_table()) == FUNCTIONS


@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_role_grants_what_the_readme_says_its_function_calls(built, name):
    dynamodb, other = readme_table()[name]
    assert dynamodb == "read/write"
    tables = {built.logical(table) for table in built.tables.all}
    consumed = {built.logical(queue) for queue in _consumed_queues(built, name)}
    dead_letters = {built.logical(queue) for queue in built.wiring.dead_letters.values()}
    log_group_id = built.function(name)["LoggingConfig"]["LogGroup"]["Ref"]

    called: set[str] = set()
    dynamodb_tables: set[str] = set()
    received: set[str] = set()
    for statement in built.statements(name):
        actions, resources = set(_list(statement["Action"])), _list(statement["Resource"])
        assert statement["Effect"] == "Allow"
        assert "Condition" not in statement or actions == {"s3:ListBucket"}   # ListBucket: under the prefix
        if all(a.startswith("dynamodb:") for a in actions):
            assert {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"} <= actions \
                or actions == {"dynamodb:GetRecords", "dynamodb:GetShardIterator"}
            dynamodb_tables |= _refers_to(resources, tables)
            assert all(_refers_to(resource, tables) for resource in resources)
        elif actions == {"logs:CreateLogStream", "logs:PutLogEvents"}:
            assert resources == [{"Fn::GetAtt": [log_group_id, "Arn"]}]   # its own log group only
        elif actions <= EVENT_SOURCE_ACTIONS and _refers_to(resources, consumed):
            assert all(_refers_to(resource, consumed) for resource in resources)   # the queues it consumes only
            received |= _refers_to(resources, consumed)
        elif actions <= FAILURE_DESTINATION_ACTIONS and _refers_to(resources, dead_letters):
            assert name in ("reconcile", "trigger")                        # its async failure destination
        else:
            called |= actions
    assert dynamodb_tables == tables
    assert received == consumed
    assert called == documented_actions(other)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_messages_go_only_to_the_queues_the_readme_names(built, name):
    queues = {built.logical(queue) for queue in built.queues.all}
    sent = {i for s in built.statements(name) if s["Action"] == "sqs:SendMessage"
            for i in _refers_to(s["Resource"], queues)}
    assert sent == documented_send_targets(built, readme_table()[name][1])


def test_dispatch_submits_only_to_the_pools_with_the_deployments_job_definitions(built):
    stack = built.stack
    submits = [json.dumps(resource, sort_keys=True) for s in built.statements("dispatch")
               if s["Action"] == "batch:SubmitJob" for resource in _list(s["Resource"])]
    expected = [json.dumps(stack.resolve(arn), sort_keys=True)
                for arn in (*built.batch.job_queue_arns, *built.batch.job_definition_arns)]
    assert sorted(submits) == sorted(expected)
    jobs = [s["Resource"] for s in built.statements("dispatch") if "batch:TerminateJob" in _list(s["Action"])]
    assert jobs == [stack.resolve(stack.format_arn(service="batch", resource="job", resource_name="*"))]


def test_publishing_is_to_the_topic_and_its_key_only(built):
    # alerts from admit and budget; job notices from reconcile and dispatch, under the same key
    topics = {"admit": built.topic, "budget": built.topic, "reconcile": built.notices, "dispatch": built.notices,
              "api": built.notices}
    for name in FUNCTIONS:
        for statement in built.statements(name):
            actions = set(_list(statement["Action"]))
            if actions & {"sns:Publish"}:
                assert statement["Resource"] == {"Ref": built.logical(topics[name])}
            if any(a.startswith("kms:") for a in actions):
                assert actions == {"kms:GenerateDataKey", "kms:Decrypt"}
                assert statement["Resource"] == {"Fn::GetAtt": [built.logical(built.topic.master_key), "Arn"]}


def test_no_statement_allows_every_action(built):
    for resource in built.resources.values():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::Role"):
            text = json.dumps(resource["Properties"])
            assert not re.search(r'"Action": (\[[^\]]*)?"([a-z0-9-]+:)?\*"', text), text


def test_every_resource_wildcard_is_an_action_without_resource_level_permissions(built):
    for name in FUNCTIONS:
        for statement in built.statements(name):
            if "*" in _list(statement["Resource"]):
                assert statement["Resource"] == "*"
                assert set(_list(statement["Action"])) <= NO_RESOURCE_LEVEL, (name, statement)


def test_each_function_has_its_own_role_without_managed_policies(built):
    roles = {built.function(name)["Role"]["Fn::GetAtt"][0] for name in FUNCTIONS}
    assert len(roles) == len(FUNCTIONS)
    for role in roles:
        assert "ManagedPolicyArns" not in built.resources[role]["Properties"]


def _consumed_queues(built: Service, name: str) -> list:
    q = built.queues
    return {"admit": list(q.intake.values()), "dispatch": [q.wakeup], "trigger": [q.trigger_timer]}.get(name, [])
