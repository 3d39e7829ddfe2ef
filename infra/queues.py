"""The SQS queues, built from gqa/adapters/aws/resources.py (names, redrive,
visibility timeouts derived from the consuming function's timeout): the
three tier intake queues, the dispatcher's wake-up queue and the trigger
timer queue, each with its dead-letter queue. SQS-managed encryption, TLS
only (a queue policy refuses plain HTTP)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from gqa.adapters.aws import resources as r
from gqa.models.deployment import Deployment
from gqa.models.spec import Priority

TIER_OF_RANK = {p.rank: p.value for p in Priority}   # 0 -> "high", the keys of GQA_INTAKE_URLS


class Queues(Construct):
    """`intake` by tier rank, `wakeup`, `trigger_timer`; `dead_letters` by the
    logical name of the queue each one serves."""

    def __init__(self, scope: Construct, id: str, *, config: Deployment) -> None:
        super().__init__(scope, id)
        prefix = config.prefix
        self.dead_letters: dict[str, sqs.Queue] = {}
        built: dict[str, sqs.Queue] = {}
        for queue in r.QUEUES:
            dead = sqs.Queue(
                self, f"{queue.logical}-dlq", queue_name=queue.dead_letter_name(prefix),
                retention_period=cdk.Duration.seconds(queue.dead_letter_retention),
                max_message_size_bytes=r.MAX_MESSAGE_BYTES,
                encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True)
            self.dead_letters[queue.logical] = dead
            built[queue.logical] = sqs.Queue(
                self, queue.logical, queue_name=queue.name(prefix),
                visibility_timeout=cdk.Duration.seconds(queue.visibility_timeout),
                retention_period=cdk.Duration.seconds(queue.retention),
                max_message_size_bytes=r.MAX_MESSAGE_BYTES,
                receive_message_wait_time=cdk.Duration.seconds(20),
                encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
                dead_letter_queue=sqs.DeadLetterQueue(queue=dead, max_receive_count=queue.max_receive_count))
        self.intake = {rank: built[q.logical] for rank, q in r.INTAKE.items()}
        self.wakeup = built[r.WAKEUP.logical]
        self.trigger_timer = built[r.TRIGGER_TIMER.logical]

    @property
    def all(self) -> tuple[sqs.Queue, ...]:
        return (*self.intake.values(), self.wakeup, self.trigger_timer)

    def intake_urls_json(self) -> str:
        """GQA_INTAKE_URLS: {"high": url, "normal": url, "low": url}, resolved at deploy time."""
        return cdk.Stack.of(self).to_json_string({TIER_OF_RANK[rank]: q.queue_url for rank, q in self.intake.items()})
