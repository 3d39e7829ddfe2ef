"""A "Batch Job State Change" event's `detail`, or a job of a DescribeJobs
answer (the same shape), read as gqa's BatchJobEvent: which gqa job and
attempt it is about, what Batch says happened, when, and with how much memory.

The gqa ids are read, most trusted first, from the container environment
BatchCompute sets (GQA_JOB_ID, GQA_ATTEMPT), then its tags (gqa:job-id,
gqa:attempt; events may leave tags out), then the job name
(gqa-<id>-<attempt>-<name>). A Batch job with none of them is not gqa's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...models.batch_events import RUNNING, BatchJobEvent

MiB = 1024 * 1024
_NAME_IDS = re.compile(r"^gqa-([0-9]+(?:_[0-9]+)?)-([0-9]+)(?:-|$)")   # what job_name() starts with


@dataclass(frozen=True)
class BatchJob:
    """What DescribeJobs says about one attempt."""

    job_id: str
    status: str
    status_reason: str | None      # e.g. "Host EC2 (instance i-0abc) terminated." for a spot reclaim
    exit_code: int | None          # None when the container never ran (or has not ended)
    container_reason: str | None   # e.g. "OutOfMemoryError: Container killed due to memory usage"


class MalformedEvent(ValueError):
    """The detail lacks what every Batch job state change carries (a retry cannot mend it)."""


def event_from(detail: Mapping[str, Any], *, received: float) -> BatchJobEvent | None:
    """The event, or None when the Batch job is not one gqa launched. `received`
    (epoch seconds) stands in for Batch's own times when the detail has none."""
    if not isinstance(detail, Mapping) or not isinstance(detail.get("jobId"), str) or \
            not isinstance(detail.get("status"), str):
        raise MalformedEvent("a Batch job state change needs detail.jobId and detail.status")
    ids = gqa_ids(detail)
    if ids is None:
        return None
    try:
        job = batch_job_from(detail)
    except (TypeError, ValueError, AttributeError) as exc:
        raise MalformedEvent(f"unreadable Batch job detail: {exc}") from None
    attempt = _last_attempt(detail)
    started = _seconds(detail.get("startedAt")) or _seconds(attempt.get("startedAt"))
    stopped = _seconds(detail.get("stoppedAt")) or _seconds(attempt.get("stoppedAt"))
    if job.status in ("SUCCEEDED", "FAILED"):
        at = stopped or received
    elif job.status == RUNNING:
        at = started or received
    else:
        at = received
    return BatchJobEvent(
        batch_job_id=job.job_id, job_id=ids[0], attempt=ids[1], status=job.status,
        status_reason=job.status_reason or attempt.get("statusReason"), exit_code=job.exit_code,
        container_reason=job.container_reason, time=at, started_at=started, memory=_memory(detail))


def gqa_ids(detail: Mapping[str, Any]) -> tuple[str, int] | None:
    """(gqa job id, attempt) of the Batch job, or None if gqa did not launch it."""
    container = _mapping(detail.get("container"))
    env = {e.get("name"): e.get("value") for e in container.get("environment") or [] if isinstance(e, Mapping)}
    tags = _mapping(detail.get("tags"))
    for job_id, attempt in ((env.get("GQA_JOB_ID"), env.get("GQA_ATTEMPT")),
                            (tags.get("gqa:job-id"), tags.get("gqa:attempt"))):
        if job_id and isinstance(attempt, str) and attempt.isdigit():
            return str(job_id), int(attempt)
    name = detail.get("jobName")
    return parse_job_name(name) if isinstance(name, str) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _last_attempt(detail: Mapping[str, Any]) -> Mapping[str, Any]:
    attempts = detail.get("attempts") or []
    return attempts[-1] if attempts and isinstance(attempts[-1], Mapping) else {}


def _seconds(millis: Any) -> float | None:
    """Batch's times are epoch milliseconds."""
    return float(millis) / 1000 if isinstance(millis, (int, float)) and not isinstance(millis, bool) else None


def _memory(detail: Mapping[str, Any]) -> int | None:
    """The container's memory in bytes: its MEMORY requirement (MiB), else the legacy `memory` field."""
    container = _mapping(detail.get("container"))
    for requirement in container.get("resourceRequirements") or []:
        if isinstance(requirement, Mapping) and requirement.get("type") == "MEMORY":
            try:
                return int(requirement["value"]) * MiB
            except (KeyError, TypeError, ValueError):
                return None
    memory = container.get("memory")
    return int(memory) * MiB if isinstance(memory, int) and not isinstance(memory, bool) else None


def batch_job_from(raw: Mapping[str, Any]) -> BatchJob:
    """A job of a DescribeJobs answer, or the `detail` of a "Batch Job State
    Change" event (the same fields), as a BatchJob."""
    attempts = raw.get("attempts") or []
    container = (attempts[-1].get("container") if attempts else None) or raw.get("container") or {}
    code = container.get("exitCode")
    return BatchJob(raw["jobId"], raw["status"], raw.get("statusReason"),
                    int(code) if code is not None else None, container.get("reason"))


def parse_job_name(name: str) -> tuple[str, int] | None:
    """(job id, attempt) from a name job_name() made; None for any other name."""
    match = _NAME_IDS.match(name)
    return (match[1], int(match[2])) if match else None
