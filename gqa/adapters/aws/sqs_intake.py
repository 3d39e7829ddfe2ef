"""Intake on SQS: one queue per priority tier, and a wake-up queue for the
dispatcher (queue definitions in resources.py).

A submission travels as a small JSON document, with the job ids and the first
seq the API reserved for it (admission writes the jobs under exactly those,
so a redelivery finds them and writes nothing); an array's ids travel as its
group and runs of indices, so even the largest array fits a message. The idempotency key rides both
in the body (the admit function needs nothing else) and as a message attribute
(visible to a consumer or an operator without parsing the body). On a FIFO
queue the key's digest is also the MessageDeduplicationId, so a client that
resends within SQS's five-minute window is dropped by SQS itself; admission must still be
harmless to repeat (it is: the ids are reserved), since standard queues deliver
at least once and FIFO deduplicates only within that window. A large array's
continuation (services/chunked.py) is the same body with `start`, the first
task it writes: no larger than the submission's own message.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from ...models.errors import NotFound, Rejected, SpecError
from ...models.expand import MAX_TASKS, index_runs
from ...models.spec import Priority
from ...ports import Submission
from .errors import Retrying
from .resources import MAX_MESSAGE_BYTES

BODY_VERSION = 1
KEY_ATTRIBUTE = "idempotency_key"
TIER_ATTRIBUTE = "tier"
TIERS = frozenset(p.rank for p in Priority)
# SQS's rule for group and deduplication ids: up to 128 of these characters
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")
_SQS_ID = re.compile(r"^[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}$")


class SqsIntake:
    def __init__(self, client: Any, queue_urls: Mapping[int, str], wakeup_url: str, *, attempts: int = 5,
                 **retry: Any):
        self.client = client
        self.queue_urls = dict(queue_urls)
        self.wakeup_url = wakeup_url
        self.call = Retrying.for_service(client, "SQS", attempts=attempts, **retry)

    def send(self, submission: Submission) -> None:
        url = self.queue_urls.get(submission.tier)
        if url is None:
            raise NotFound(f"no intake queue for tier {submission.tier}")
        body = dump_submission(submission)
        attributes = {KEY_ATTRIBUTE: {"DataType": "String", "StringValue": submission.idempotency_key},
                      TIER_ATTRIBUTE: {"DataType": "Number", "StringValue": str(submission.tier)}}
        size = message_bytes(body, attributes)
        if size > MAX_MESSAGE_BYTES:
            raise Rejected(f"the submission is {size / 1024:.1f} KiB; the queue takes at most "
                           f"{MAX_MESSAGE_BYTES // 1024} KiB (a large environment or an inline script?)")
        kwargs: dict[str, Any] = {"QueueUrl": url, "MessageBody": body, "MessageAttributes": attributes}
        if is_fifo(url):
            # one group per owner: a user's submissions are admitted in the order sent,
            # while different users' are admitted in parallel; a continuation (services/chunked.py)
            # is deduplicated as its own message, not as the submission's first
            kwargs["MessageGroupId"] = sqs_id(submission.owner)
            kwargs["MessageDeduplicationId"] = digest(submission.idempotency_key + (
                f"#{submission.start}" if submission.start else ""))
        self.call("SendMessage", **kwargs)

    def wake_dispatcher(self) -> None:
        kwargs: dict[str, Any] = {"QueueUrl": self.wakeup_url, "MessageBody": json.dumps({"wake": True})}
        if is_fifo(self.wakeup_url):
            # never deduplicated: a wake-up dropped as a duplicate could leave a new job waiting
            kwargs.update(MessageGroupId="dispatch", MessageDeduplicationId=uuid.uuid4().hex)
        self.call("SendMessage", **kwargs)


def message_bytes(body: str, attributes: Mapping[str, Mapping[str, str]]) -> int:
    """What SQS counts against its 256 KiB: the body and each attribute's name, type and value."""
    return len(body.encode()) + sum(len(name.encode()) + len(a["DataType"].encode()) + len(a["StringValue"].encode())
                                    for name, a in attributes.items())


def is_fifo(url: str) -> bool:
    """A FIFO queue's name, and so the end of its URL, is `.fifo` (no API call needed)."""
    return url.rstrip("/").endswith(".fifo")


def digest(text: str) -> str:
    """A valid deduplication id for any key: 64 hex digits."""
    return hashlib.sha256(text.encode()).hexdigest()


def sqs_id(text: str) -> str:
    return text if _SQS_ID.match(text) else digest(text)


# -- the message body ------------------------------------------------------------------------------

def dump_submission(submission: Submission) -> str:
    # ASCII-only JSON: SQS refuses some Unicode code points in a body; escaped, any text travels
    return json.dumps({"v": BODY_VERSION, "spec_json": submission.spec_json, "owner": submission.owner,
                       "tier": submission.tier, "idempotency_key": submission.idempotency_key,
                       "environment": submission.environment, "job_ids": pack_ids(submission.job_ids),
                       "seq": submission.seq, **({"start": submission.start} if submission.start else {})},
                      separators=(",", ":"))


def parse_submission(body: str) -> Submission:
    """A received message body back into a Submission; SpecError if it is not one."""
    try:
        raw = json.loads(body)
    except (TypeError, ValueError):
        raise _malformed("not JSON") from None
    if not isinstance(raw, dict):
        raise _malformed("not a JSON object")
    if raw.get("v") != BODY_VERSION:
        raise _malformed(f"unknown version {raw.get('v')!r}")
    spec_json, owner, key = (_nonempty_text(raw, k) for k in ("spec_json", "owner", "idempotency_key"))
    tier = raw.get("tier")
    if isinstance(tier, bool) or not isinstance(tier, int) or tier not in TIERS:
        raise _malformed(f"tier must be one of {sorted(TIERS)}, got {tier!r}")
    environment = raw.get("environment")
    if environment is not None and not (
            isinstance(environment, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in environment.items())):
        raise _malformed("environment must be an object of strings")
    job_ids = unpack_ids(raw.get("job_ids", []))
    seq = raw.get("seq")
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 1):
        raise _malformed(f"seq must be a positive integer, got {seq!r}")
    start = raw.get("start", 0)
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < max(1, len(job_ids)):
        raise _malformed(f"start must be the index of one of its {len(job_ids)} jobs, got {start!r}")
    return Submission(spec_json=spec_json, owner=owner, tier=tier, idempotency_key=key, environment=environment,
                      job_ids=tuple(job_ids), seq=seq, start=start)


def _nonempty_text(raw: dict[str, Any], name: str) -> str:
    value = raw.get(name)
    if not isinstance(value, str) or not value:
        raise _malformed(f"{name} must be a non-empty string")
    return value


def pack_ids(job_ids: tuple[str, ...]) -> list[str] | dict[str, Any]:
    """The ids as the body carries them. An array's tasks ("12_0", "12_1", ...)
    travel as their group and runs of indices, [first, last, step], so even
    the largest array fits a message; anything else as the list itself."""
    groups = {i.split("_")[0] for i in job_ids}
    if len(job_ids) < 2 or len(groups) != 1 or not all("_" in i for i in job_ids):
        return list(job_ids)
    return {"group": groups.pop(), "runs": index_runs([int(i.split("_")[1]) for i in job_ids])}


def unpack_ids(raw: Any) -> tuple[str, ...]:
    """pack_ids's answer back into the ids; SpecError if it is not one."""
    if isinstance(raw, list):
        if not all(isinstance(i, str) and _JOB_ID.match(i) for i in raw):
            raise _malformed("job_ids must be a list of job ids")
        return tuple(raw)
    if not isinstance(raw, dict) or set(raw) != {"group", "runs"}:
        raise _malformed("job_ids must be a list of job ids or a group and its runs")
    group, runs = raw["group"], raw["runs"]
    if not (isinstance(group, str) and group.isdigit() and isinstance(runs, list) and all(
            isinstance(r, list) and len(r) == 3 and all(isinstance(n, int) and not isinstance(n, bool) for n in r)
            and 0 <= r[0] <= r[1] and r[2] >= 1 for r in runs)):
        raise _malformed("job_ids runs must be [first, last, step] with 0 <= first <= last and step >= 1")
    if sum((last - first) // step + 1 for first, last, step in runs) > MAX_TASKS:
        raise _malformed(f"job_ids name more than {MAX_TASKS} tasks")
    return tuple(f"{group}_{i}" for first, last, step in runs for i in range(first, last + 1, step))


def submission_from_record(record: Mapping[str, Any]) -> Submission:
    """A Submission from one record of an SQS event as Lambda delivers it
    (`{"messageId", "body", "messageAttributes", ...}`)."""
    body = record.get("body")
    if not isinstance(body, str):
        raise _malformed("the record has no body")
    return parse_submission(body)


def _malformed(why: str) -> SpecError:
    return SpecError(f"malformed submission: {why}", source="intake message")
