"""The BurstTimer port on SQS: a burst's first object sends one message to
the trigger-timer queue (resources.py), delayed by the trigger's debounce
window; the trigger function receives it when the window ends and closes the
burst. SQS delays a message by 15 minutes at most, which is why a window is
at most that long. A message may come twice or for a burst never opened
(its open lost a race): closing is guarded on the burst's id, so neither does
anything twice."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...models.errors import SpecError
from .errors import Retrying

BODY_VERSION = 1
MAX_DELAY = 900   # SQS's DelaySeconds ceiling


class SqsBurstTimer:
    def __init__(self, client: Any, queue_url: str, **retry: Any):
        self.client, self.queue_url = client, queue_url
        self.call = Retrying.for_service(client, "SQS", **retry)

    def schedule(self, trigger_id: str, burst_id: str, delay: int) -> None:
        self.call("SendMessage", QueueUrl=self.queue_url, MessageBody=dump_timer(trigger_id, burst_id),
                  DelaySeconds=max(0, min(MAX_DELAY, int(delay))))


def dump_timer(trigger_id: str, burst_id: str) -> str:
    return json.dumps({"v": BODY_VERSION, "trigger_id": trigger_id, "burst_id": burst_id}, separators=(",", ":"))


def timer_from_record(record: Mapping[str, Any]) -> tuple[str, str]:
    """(trigger id, burst id) from one record of an SQS event; SpecError if it is not a timer message."""
    try:
        raw = json.loads(record.get("body") or "")
    except (TypeError, ValueError):
        raise _malformed("not JSON") from None
    if not isinstance(raw, dict) or raw.get("v") != BODY_VERSION:
        raise _malformed("not a version 1 timer message")
    trigger_id, burst_id = raw.get("trigger_id"), raw.get("burst_id")
    if not (isinstance(trigger_id, str) and trigger_id and isinstance(burst_id, str) and burst_id):
        raise _malformed("trigger_id and burst_id must be non-empty strings")
    return trigger_id, burst_id


def _malformed(why: str) -> SpecError:
    return SpecError(f"malformed timer message: {why}", source="trigger-timer message")
