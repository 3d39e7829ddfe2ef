"""The SQS queues and the Batch pools: names, dead-letter redrive, visibility
timeouts, GPU ceilings. The adapters read them from here, the CDK stack builds
its resources from here, and the tests create their moto resources from the
synthesized template, so the three cannot drift apart (as tables.py does for
DynamoDB). Plain data: importing it needs no boto3.

Queues:

- intake-high, intake-normal, intake-low   one per priority tier, so a long
      low-priority sweep never delays a high-priority admission. Consumed by
      the admit function. Standard queues by default; FIFO on request (then
      every name ends in `.fifo`, the dead-letter queues too, as SQS requires).
- wakeup   "run a scheduling pass soon", consumed by the dispatch function.
      Always a standard queue: a wake-up is a hint, and a duplicate costs one
      extra pass, never a wrong decision.
- trigger-timer   "close this burst", consumed by the trigger function, each
      message delayed by its trigger's debounce window. Always a standard
      queue: FIFO queues cannot delay one message.

Every queue has its own dead-letter queue: a message that failed
`max_receive_count` deliveries moves there, where an alarm sees it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

DAY = 86400
# A message body's ceiling. SQS takes more today, but ten bodies this size stay
# well inside the 6 MB payload of the Lambda invocation that carries a batch.
MAX_MESSAGE_BYTES = 256 * 1024
# AWS's advice for a queue feeding Lambda: visibility at least six times the
# function timeout, so a message is not handed out again while a slow, retried
# invocation still holds it.
VISIBILITY_PER_TIMEOUT = 6


@dataclass(frozen=True)
class Queue:
    logical: str
    consumer_timeout: int          # seconds: the timeout of the Lambda function that reads it
    max_receive_count: int         # deliveries before a message moves to the dead-letter queue
    retention: int = 4 * DAY
    dead_letter_retention: int = 14 * DAY   # SQS's maximum: time to find out what went wrong
    fifo_capable: bool = True      # False: always standard, whatever the deployment asks

    @property
    def visibility_timeout(self) -> int:
        return VISIBILITY_PER_TIMEOUT * self.consumer_timeout

    def is_fifo(self, fifo: bool) -> bool:
        return fifo and self.fifo_capable

    def name(self, prefix: str = "gqa-", fifo: bool = False) -> str:
        return f"{prefix}{self.logical}" + (".fifo" if self.is_fifo(fifo) else "")

    def dead_letter_name(self, prefix: str = "gqa-", fifo: bool = False) -> str:
        return f"{prefix}{self.logical}-dlq" + (".fifo" if self.is_fifo(fifo) else "")


ADMIT_TIMEOUT = 30        # seconds: validate, check quotas, write the job
DISPATCH_TIMEOUT = 60     # seconds: one scheduling pass and the SubmitJob calls it decides

# tier (Priority.rank: 0 high, 1 normal, 2 low) -> its intake queue
INTAKE: dict[int, Queue] = {
    0: Queue("intake-high", ADMIT_TIMEOUT, max_receive_count=5),
    1: Queue("intake-normal", ADMIT_TIMEOUT, max_receive_count=5),
    2: Queue("intake-low", ADMIT_TIMEOUT, max_receive_count=5),
}
WAKEUP = Queue("wakeup", DISPATCH_TIMEOUT, max_receive_count=3, retention=DAY, fifo_capable=False)
TRIGGER_TIMEOUT = 30      # seconds: close a burst, write its manifest, send its submission
TRIGGER_TIMER = Queue("trigger-timer", TRIGGER_TIMEOUT, max_receive_count=5, fifo_capable=False)
QUEUES: tuple[Queue, ...] = (*INTAKE.values(), WAKEUP, TRIGGER_TIMER)


@dataclass(frozen=True)
class QueueUrls:
    """Where the deployed queues are (what SqsIntake takes)."""

    intake: dict[int, str]
    wakeup: str
    dead_letters: dict[str, str] = field(default_factory=dict)   # logical name -> its DLQ's URL
    trigger_timer: str = ""


# -- Batch pools ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pool:
    """A GPU type bought one way (spot or on demand), up to a ceiling: one Batch
    compute environment and the job queue in front of it. The scheduler sees
    `max_gpus` virtual slots; Batch places the containers on instances."""

    gpu_type: str                  # the spec's resources.gpu_type, e.g. a10g
    spot: bool
    max_gpus: int                  # GPUs the compute environment may hold at once
    price: float                   # per GPU-hour, for budgets and approvals
    job_queue: str = ""            # default: gqa-<name>
    instance_types: tuple[str, ...] = ()   # for the stack, e.g. ("g5.xlarge", "g5.12xlarge")
    instance_gpus: int | None = None       # GPUs on its largest instance: a container never spans two

    @property
    def name(self) -> str:
        return f"{self.gpu_type}-{'spot' if self.spot else 'ondemand'}"

    @property
    def queue_name(self) -> str:
        return self.job_queue or f"gqa-{self.name}"


def pools_from_json(text: str) -> tuple[Pool, ...]:
    """Pools from a JSON list of Pool's fields (how a deployment hands them to
    the dispatch function, e.g. `[{"gpu_type": "a10g", "spot": true,
    "max_gpus": 8, "price": 0.5}]`). ValueError names what is wrong, so a bad
    setting fails the cold start loudly instead of scheduling over no GPUs."""
    raw = json.loads(text)
    if not isinstance(raw, list) or not raw or not all(isinstance(p, dict) for p in raw):
        raise ValueError("the pools must be a non-empty JSON list of objects")
    try:
        return tuple(Pool(**{**p, "instance_types": tuple(p.get("instance_types", ()))}) for p in raw)
    except TypeError as exc:   # an unknown or missing field
        raise ValueError(f"invalid pool: {exc}") from None
