"""The six Lambda functions of lambdas/, each with its own role granted only
what its code calls (README.md, "What each function calls, for its IAM
policy", is the specification), its own log group, JSON logs, and exactly
the settings lambdas/environment.py says it reads, from one source.

The event sources and schedules that invoke them are events.py's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from gqa.adapters.aws import resources as r
from gqa.models.deployment import Deployment
from gqa.models.trigger import MANIFEST_ROOT

from .checkpoints import Checkpoints
from .lambda_asset import ARCHITECTURE, RUNTIME, function_code
from .nag import acknowledge, acknowledge_arns, acknowledge_wildcards
from .queues import Queues
from .tables import Tables

METRICS_NAMESPACE = "gqa"                  # the namespace every handler's make_metrics names
API_TIMEOUT = 29                           # API Gateway's integration timeout: a later answer reaches no one


class BatchResources(Protocol):
    """The GPU pools' Batch resources the functions use."""

    @property
    def job_queue_arns(self) -> list[str]: ...

    @property
    def job_definition_arns(self) -> list[str]: ...

    @property
    def log_group_name(self) -> str: ...     # where the jobs' output goes (awslogs-group)


@dataclass(frozen=True)
class FunctionSpec:
    name: str               # the function is <prefix><name>, its Powertools service gqa-<name>
    handler: str
    timeout: int            # seconds; the queues' visibility timeouts are derived from the consumers'
    memory: int             # MB; CPU comes with it, and a cold start imports pydantic and boto3
    reads: tuple[str, ...]  # the settings it reads besides the table names (lambdas/environment.py)
    description: str


TABLE_SETTINGS = ("GQA_JOBS_TABLE", "GQA_SETTINGS_TABLE", "GQA_LEDGER_TABLE")   # every function reads them
OPTIONAL_TOPIC = "GQA_NOTICES_TOPIC_ARN"   # set where a notices topic is given (the stacks always give one)
# GQA_GPU_METRICS_NAMESPACE (budget) is left unset: its default is the namespace the jobs report in.
SPECS: tuple[FunctionSpec, ...] = (
    FunctionSpec("api", "lambdas.api.handler", API_TIMEOUT, 1024,
                 ("GQA_INTAKE_URLS", "GQA_WAKEUP_QUEUE_URL", "GQA_POOLS", "GQA_LOG_GROUP", "GQA_ACCESS",
                  "GQA_TRIGGER_BUCKETS", "GQA_CHECKPOINT_BUCKET", "GQA_MANIFEST_BUCKET", "GQA_NOTICES_TOPIC_ARN",
                  "GQA_KEEP_HISTORY_DAYS"),
                 "gqa's REST API, the CLI's backend"),
    FunctionSpec("admit", "lambdas.admit.handler", r.ADMIT_TIMEOUT, 512,
                 ("GQA_INTAKE_URLS", "GQA_WAKEUP_QUEUE_URL", "GQA_ALERTS_TOPIC_ARN", "GQA_KEEP_HISTORY_DAYS"),
                 "admits the submissions on the intake queues as queued jobs"),
    FunctionSpec("dispatch", "lambdas.dispatch.handler", r.DISPATCH_TIMEOUT, 1024,
                 ("GQA_POOLS", "GQA_JOB_DEFINITION", "GQA_IMAGES", "GQA_CHECKPOINT_BUCKET", "GQA_CHECKPOINT_PREFIX",
                  "GQA_CHECKPOINT_GRACE", "GQA_NOTICES_TOPIC_ARN", "GQA_KEEP_HISTORY_DAYS", "GQA_WAKEUP_QUEUE_URL"),
                 "one scheduling pass: starts queued jobs on Batch, stops and requeues"),
    FunctionSpec("reconcile", "lambdas.reconcile.handler", 30, 512,
                 ("GQA_WAKEUP_QUEUE_URL", "GQA_NOTICES_TOPIC_ARN", "GQA_KEEP_HISTORY_DAYS"),
                 "applies Batch job state changes to gqa's jobs"),
    FunctionSpec("budget", "lambdas.budget.handler", 120, 512, ("GQA_ALERTS_TOPIC_ARN", "GQA_WAKEUP_QUEUE_URL"),
                 "watches spend against budgets, waiting jobs and idle GPUs"),
    FunctionSpec("trigger", "lambdas.trigger.handler", r.TRIGGER_TIMEOUT, 512,
                 ("GQA_INTAKE_URLS", "GQA_TRIGGER_TIMER_QUEUE_URL", "GQA_MANIFEST_BUCKET", "GQA_TRIGGER_BUCKETS",
                  "GQA_CHECKPOINT_BUCKET", "GQA_ACCESS"),
                 "turns objects landing in S3 into one job per burst"),
)


class Functions(Construct):
    """`by_name` and the attributes api, admit, dispatch, reconcile, budget, trigger."""

    def __init__(self, scope: Construct, id: str, *, config: Deployment, tables: Tables, queues: Queues,
                 checkpoints: Checkpoints, batch: BatchResources, alerts_topic: sns.ITopic,
                 notices_topic: sns.ITopic | None = None) -> None:
        super().__init__(scope, id)
        # every setting a function may read, from one place: each function takes the ones it reads
        settings = {
            **config.function_settings(),
            "GQA_JOBS_TABLE": tables.names.jobs, "GQA_SETTINGS_TABLE": tables.names.settings,
            "GQA_LEDGER_TABLE": tables.names.ledger,
            "GQA_INTAKE_URLS": queues.intake_urls_json(),
            "GQA_WAKEUP_QUEUE_URL": queues.wakeup.queue_url,
            "GQA_CHECKPOINT_BUCKET": checkpoints.bucket.bucket_name,
            "GQA_CHECKPOINT_PREFIX": checkpoints.prefix,
            "GQA_MANIFEST_BUCKET": checkpoints.bucket.bucket_name,
            "GQA_TRIGGER_TIMER_QUEUE_URL": queues.trigger_timer.queue_url,
            "GQA_ALERTS_TOPIC_ARN": alerts_topic.topic_arn,
            "GQA_LOG_GROUP": batch.log_group_name,
            **({"GQA_NOTICES_TOPIC_ARN": notices_topic.topic_arn} if notices_topic is not None else {}),
        }
        code = function_code()   # one asset shared by the six
        self.by_name: dict[str, aws_lambda.Function] = {
            spec.name: self._function(spec, config, code, {k: settings[k] for k in (*TABLE_SETTINGS, *spec.reads)
                                                           if k in settings or k != OPTIONAL_TOPIC})
            for spec in SPECS}
        self.api, self.admit, self.dispatch = self.by_name["api"], self.by_name["admit"], self.by_name["dispatch"]
        self.reconcile, self.budget, self.trigger = (self.by_name["reconcile"], self.by_name["budget"],
                                                     self.by_name["trigger"])
        for function in self.by_name.values():
            tables.grant_read_write(function)
        self._grant_calls(queues, checkpoints, batch, alerts_topic)
        if notices_topic is not None:   # job notices, after the moves these write
            for function in (self.api, self.reconcile, self.dispatch):
                _publish(function, notices_topic)

    def _function(self, spec: FunctionSpec, config: Deployment, code: aws_lambda.Code,
                  settings: dict[str, str]) -> aws_lambda.Function:
        """The function, its log group, and its role with nothing but writing to that log group."""
        title, function_name = spec.name.capitalize(), f"{config.prefix}{spec.name}"
        log_group = logs.LogGroup(
            self, f"{title}Logs", log_group_name=f"/aws/lambda/{function_name}",
            retention=logs.RetentionDays.ONE_YEAR if config.retain_data else logs.RetentionDays.ONE_MONTH,
            removal_policy=cdk.RemovalPolicy.RETAIN if config.retain_data else cdk.RemovalPolicy.DESTROY)
        role = iam.Role(self, f"{title}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"The {function_name} function: what its code calls, nothing more")
        log_group.grant_write(role)   # its own log group, not the basic execution policy's every one
        function = aws_lambda.Function(
            self, title, function_name=function_name, description=f"gqa ({config.name}): {spec.description}",
            code=code, handler=spec.handler, runtime=RUNTIME, architecture=ARCHITECTURE,
            timeout=cdk.Duration.seconds(spec.timeout), memory_size=spec.memory, role=role,
            log_group=log_group, logging_format=aws_lambda.LoggingFormat.JSON,
            application_log_level_v2=aws_lambda.ApplicationLogLevel.INFO,
            system_log_level_v2=aws_lambda.SystemLogLevel.WARN,
            environment={**settings, "POWERTOOLS_SERVICE_NAME": f"gqa-{spec.name}",
                         "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE})
        acknowledge(function, "L1", f"{function_name} runs Python 3.12, the version its dependencies are bundled "
                                    f"for and its code is tested on")
        return function

    def _grant_calls(self, queues: Queues, checkpoints: Checkpoints, batch: BatchResources,
                     topic: sns.ITopic) -> None:
        """What each function's code calls besides the tables: README.md's table, row by row."""
        stack = cdk.Stack.of(self)

        # api: submissions to the intake queues, wake-ups, and a job's logs (its Batch attempts, their streams)
        _send(self.api, [*queues.intake.values(), queues.wakeup])
        _batch_queries(self.api, "finds a job's Batch attempts for its logs")
        job_streams = stack.format_arn(service="logs", resource="log-group",
                                       resource_name=f"{batch.log_group_name}:log-stream:*",
                                       arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
        self.api.add_to_role_policy(iam.PolicyStatement(actions=["logs:GetLogEvents"], resources=[job_streams]))
        acknowledge_arns(_role(self.api), [job_streams], "the jobs' log streams are named by Batch at run time; "
                                                         "reading is limited to the jobs' log group")
        checkpoints.grant_code_lookup(self.api)     # a submission's code bundle is there (a listing, no read)
        checkpoints.grant_trigger_code_keeping(self.api)   # a trigger's copy of its job's bundle
        for prefix in (checkpoints.code_prefix, checkpoints.trigger_code_prefix):
            acknowledge_wildcards(_role(self.api), f"/{prefix}/*",
                                  "copies a trigger's code bundle, named by its SHA-256, from the code prefix to "
                                  "the trigger's own under the trigger code prefix, and deletes it with the trigger")

        # admit: a large array's rest handed on to its tier's intake queue, wake-ups, and approval
        # requests on the alerts topic
        _send(self.admit, [*queues.intake.values(), queues.wakeup])
        _publish(self.admit, topic)

        # dispatch: submit to the pools' queues with the deployment's job definitions, tag (SubmitJob's
        # tags and propagateTags) and stop jobs, find quiet ones; read checkpoints to resume from
        submit_to = [*batch.job_queue_arns, *batch.job_definition_arns]
        self.dispatch.add_to_role_policy(iam.PolicyStatement(actions=["batch:SubmitJob"], resources=submit_to))
        acknowledge_arns(_role(self.dispatch), submit_to, "SubmitJob names a job definition without its revision, "
                                                           "which changes with the image or settings: any revision "
                                                           "of the deployment's own definitions")
        batch_jobs = stack.format_arn(service="batch", resource="job", resource_name="*")
        self.dispatch.add_to_role_policy(iam.PolicyStatement(
            actions=["batch:TagResource", "batch:TerminateJob"], resources=[batch_jobs]))
        acknowledge_arns(_role(self.dispatch), [batch_jobs], "Batch assigns job ids at SubmitJob: tagging at "
                                                             "submission and terminating can name no job in advance")
        _batch_queries(self.dispatch, "asks Batch about attempts whose events were lost")
        # the definitions' tags (the stack's, cdk deploy --tags'), which a job's own must leave room for
        self.dispatch.add_to_role_policy(iam.PolicyStatement(actions=["batch:DescribeJobDefinitions"],
                                                             resources=["*"]))
        checkpoints.grant_read_prefix(self.dispatch, checkpoints.prefix)
        _send(self.dispatch, [queues.wakeup])   # a pass stopped by its time wakes the next
        acknowledge_wildcards(_role(self.dispatch), f"/{checkpoints.prefix}/*",
                              "reads any job's latest checkpoint, whose key starts with the job's id, only under "
                              "the checkpoint prefix")

        # reconcile: wake-ups when an attempt ends
        _send(self.reconcile, [queues.wakeup])

        # budget: alerts, the jobs' GPU utilisation, wake-ups
        _publish(self.budget, topic)
        self.budget.add_to_role_policy(iam.PolicyStatement(actions=["cloudwatch:GetMetricData"], resources=["*"]))
        acknowledge(_role(self.budget), "IAM5", "cloudwatch:GetMetricData supports no resource-level permissions; "
                                                "the budget function reads the jobs' GPUUtilization",
                    applies_to=("Resource::*",))
        _send(self.budget, [queues.wakeup])

        # trigger: the burst's submission and its timer, the manifest of a large burst
        _send(self.trigger, [*queues.intake.values(), queues.trigger_timer])
        checkpoints.grant_manifests(self.trigger)
        acknowledge_wildcards(_role(self.trigger), f"/{MANIFEST_ROOT}*",
                              "writes each burst's key list under its own new name, only under the manifest prefix")
        checkpoints.grant_trigger_code_use(self.trigger)   # a burst's code bundle, ready where its job fetches it
        for prefix in (checkpoints.code_prefix, checkpoints.trigger_code_prefix):
            acknowledge_wildcards(_role(self.trigger), f"/{prefix}/*",
                                  "copies a trigger's code bundle, named by its SHA-256, between the code prefix "
                                  "and the trigger's own copy, only under those two prefixes")


def _role(function: aws_lambda.Function) -> iam.IRole:
    """The role CDK made with the function (only an imported function has none)."""
    if function.role is None:
        raise ValueError(f"function {function.node.id} has no role")
    return function.role


def _send(function: aws_lambda.Function, queues: Iterable[sqs.IQueue]) -> None:
    """sqs:SendMessage alone (grant_send_messages adds GetQueueAttributes and GetQueueUrl, unused)."""
    function.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"],
                                                    resources=[q.queue_arn for q in queues]))


def _batch_queries(function: aws_lambda.Function, why: str) -> None:
    function.add_to_role_policy(iam.PolicyStatement(actions=["batch:DescribeJobs", "batch:ListJobs"],
                                                    resources=["*"]))
    acknowledge(_role(function), "IAM5", f"batch:DescribeJobs and batch:ListJobs support no resource-level "
                                         f"permissions; the {function.node.id.lower()} function {why}",
                applies_to=("Resource::*",))


def _publish(function: aws_lambda.Function, topic: sns.ITopic) -> None:
    """sns:Publish on the topic and, when it is encrypted, the two key actions publishing takes, named
    exactly (Topic.grant_publish would grant kms:GenerateDataKey*)."""
    function.add_to_role_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=[topic.topic_arn]))
    if topic.master_key is not None:
        topic.master_key.grant(function, "kms:GenerateDataKey", "kms:Decrypt")
