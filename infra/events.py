"""What invokes the functions: the queues (with partial batch responses), the
Batch job state changes of the deployment's job queues, the trigger buckets'
new objects, and the schedules of the dispatcher's and the budget watch's
ticks.

An EventBridge event that cannot be handled is not lost: the rule target's
dead-letter queue takes what EventBridge could not deliver, and the
function's asynchronous failure destination what Lambda's retries could not
handle. `dead_letters` holds those queues (each needs an alarm)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from gqa.models.deployment import Deployment

from .functions import BatchResources, Functions
from .nag import acknowledge
from .queues import Queues

BATCH_JOB_STATE_CHANGE = "Batch Job State Change"   # lambdas/reconcile.py's DETAIL_TYPE
OBJECT_CREATED = "Object Created"                   # lambdas/trigger.py's OBJECT_CREATED
DISPATCH_EVERY = cdk.Duration.minutes(1)   # a pass repairs what no wake-up reports (lost events, wall times)
BUDGET_EVERY = cdk.Duration.minutes(5)
WAKEUPS_AT_ONCE = 2          # the least an SQS event source's maximum concurrency can be
DEAD_LETTERS_KEPT = cdk.Duration.days(14)   # SQS's longest retention: time to look and replay
ASYNC_RETRIES = 2            # Lambda's retries of a failed asynchronous invocation (its most)
ASYNC_MAX_AGE = cdk.Duration.hours(6)


class EventWiring(Construct):
    """`dead_letters` by function name (reconcile, and trigger when buckets are configured);
    `failures` is reconcile's, the Batch events that were not applied."""

    def __init__(self, scope: Construct, id: str, *, config: Deployment, queues: Queues, functions: Functions,
                 batch: BatchResources) -> None:
        super().__init__(scope, id)
        self.config = config
        self.dead_letters: dict[str, sqs.Queue] = {}

        # Admission: a submission is a record; the answer names the records that failed, so only those
        # come back. No batching window: a user waits for their jobs to be admitted.
        for rank in sorted(queues.intake):
            functions.admit.add_event_source(sources.SqsEventSource(
                queues.intake[rank], batch_size=10, report_batch_item_failures=True))
        # Wake-ups: one pass serves a whole batch of them. No batching window: SQS's advice is a visibility
        # timeout of six times the function's plus the window, and the queue has exactly six times (and a
        # wake-up is worth most at once). The event source's maximum concurrency, not the function's
        # reserved concurrency, limits the passes: a throttled invocation would count as a receive and
        # could dead-letter the wake-up.
        functions.dispatch.add_event_source(sources.SqsEventSource(
            queues.wakeup, batch_size=10, max_concurrency=WAKEUPS_AT_ONCE, report_batch_item_failures=True))
        # Burst timers: each record closes one burst and submits its job.
        functions.trigger.add_event_source(sources.SqsEventSource(
            queues.trigger_timer, batch_size=10, report_batch_item_failures=True))

        # Batch job state changes of this deployment's job queues only
        self.failures = self._dead_letter("reconcile", functions.reconcile)
        events.Rule(
            self, "BatchJobStateChange", rule_name=f"{config.prefix}batch-job-state",
            description="Batch job state changes of gqa's job queues, to the reconcile function",
            event_pattern=events.EventPattern(source=["aws.batch"], detail_type=[BATCH_JOB_STATE_CHANGE],
                                              detail={"jobQueue": list(batch.job_queue_arns)}),
            targets=[self._target(functions.reconcile, self.failures)])

        # New objects in the trigger buckets (none configured: no rule, no notification)
        if config.triggers.buckets:
            trigger_failures = self._dead_letter("trigger", functions.trigger)
            for name in config.triggers.bucket_names:
                # an existing bucket: a custom resource adds EventBridge to its notifications, keeping the
                # ones it has (and leaves EventBridge on when the stack goes: others may rely on it)
                s3.Bucket.from_bucket_name(self, f"Bucket-{name}", name).enable_event_bridge_notification()
                events.Rule(
                    self, f"ObjectCreated-{name}", description=f"objects created in {name}, to the trigger function",
                    event_pattern=events.EventPattern(source=["aws.s3"], detail_type=[OBJECT_CREATED],
                                                      detail={"bucket": {"name": [name]}}),
                    targets=[self._target(functions.trigger, trigger_failures)])
            self._acknowledge_notifications_handler()

        # The ticks: a late tick is worth nothing once the next one is due
        for name, function, every in (("dispatch", functions.dispatch, DISPATCH_EVERY),
                                      ("budget", functions.budget, BUDGET_EVERY)):
            events.Rule(self, f"{name.capitalize()}Schedule", rule_name=f"{config.prefix}{name}-tick",
                        description=f"the {name} function's tick", schedule=events.Schedule.rate(every),
                        targets=[targets.LambdaFunction(function, max_event_age=every, retry_attempts=2)])

    def _dead_letter(self, name: str, function: aws_lambda.Function) -> sqs.Queue:
        """The queue where the function's undelivered and unhandled events end, and the function's
        asynchronous invocations sent there after Lambda's retries."""
        queue = sqs.Queue(self, f"{name.capitalize()}Failures", queue_name=f"{self.config.prefix}{name}-failures",
                          retention_period=DEAD_LETTERS_KEPT, encryption=sqs.QueueEncryption.SQS_MANAGED,
                          enforce_ssl=True)
        acknowledge(queue, "SQS3", f"{self.config.prefix}{name}-failures is itself a dead-letter queue: of the "
                                   f"{name} function's EventBridge target and async invocations")
        function.configure_async_invoke(on_failure=destinations.SqsDestination(queue),
                                        retry_attempts=ASYNC_RETRIES, max_event_age=ASYNC_MAX_AGE)
        self.dead_letters[name] = queue
        return queue

    @staticmethod
    def _target(function: aws_lambda.Function, dead_letter: sqs.Queue) -> targets.LambdaFunction:
        # EventBridge retries a delivery Lambda refused (throttling) for up to a day, then dead-letters it
        return targets.LambdaFunction(function, dead_letter_queue=dead_letter, retry_attempts=185,
                                      max_event_age=cdk.Duration.hours(24))

    def _acknowledge_notifications_handler(self) -> None:
        """The handler CDK adds, once per stack, for the custom resource that edits bucket notifications."""
        handler = cdk.Stack.of(self).node.try_find_child("BucketNotificationsHandler050a0587b7544547bf325f094a3db834")
        if handler is None:
            return
        acknowledge(handler, "IAM4", "CDK's bucket notifications handler, a deploy-time custom resource, writes its "
                                     "own logs with the basic execution policy; its S3 permissions are scoped to "
                                     "the trigger buckets",
                    applies_to=("Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",))
