"""AWS Batch's limit on a SubmitJob request: 30 KiB of job payload (the
service quotas page: "Maximum job payload size (for SubmitJob API
operations)"). A job's command, environment and tags travel in it, so a
spec whose own parts leave too little room would be accepted by the API
(256 KiB) and fail only when the dispatcher launches it. The API checks the
spec here first, with the figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ...models.code import launch_command
from ...models.expand import largest_task

JOB_PAYLOAD_LIMIT = 30 * 1024
# a job's tags and its job definition's together (propagated to the ECS task): Batch accepts a
# SubmitJob past it and then fails the job (SubmitJob's propagateTags)
MAX_TAGS = 50
GQA_TAGS = 5       # gqa:team, gqa:job-id, gqa:owner, gqa:attempt, gqa:pool
# AWS's tag rules: these characters, keys up to 128, values up to 256, no aws: prefix
_TAG_TEXT = re.compile(r"^[\w\s.:/=+\-@]*$")
# what gqa adds to every request besides the spec's parts: job name, queue and definition,
# GQA_* variables (ids, the checkpoint and code URIs, the resume point), resources, timeout, gqa's
# tags, and a trigger's inline keys (up to 4 KiB)
GQA_ALLOWANCE = 8 * 1024


def request_bytes(request: dict[str, Any]) -> int:
    """A SubmitJob request's size as its JSON body carries it."""
    return len(json.dumps(request, separators=(",", ":")).encode())


def kept_tags(tags: Mapping[str, str], most: int) -> dict[str, str]:
    """The spec's tags a request carries: at most `most`, in order, leaving out any AWS would
    refuse (which would fail the whole launch) and any in gqa's or AWS's own namespace."""
    out: dict[str, str] = {}
    for key, value in tags.items():
        if len(out) >= most:
            break
        if (0 < len(key) <= 128 and len(value) <= 256 and _TAG_TEXT.match(key) and _TAG_TEXT.match(value)
                and not key.lower().startswith(("aws:", "gqa:"))):
            out[key] = value
    return out


def spec_bytes(spec: Any) -> int:
    """The room a spec's own parts take in every attempt's request (with code, the
    command is behind the fetcher, which names the spec's workdir); a sweep's, its
    largest task's, which carries its values as flags or variables and tags."""
    spec = largest_task(spec)
    return request_bytes({"command": launch_command(spec),
                          "environment": [{"name": k, "value": v} for k, v in spec.env.items()],
                          "tags": kept_tags(getattr(spec, "tags", None) or {}, MAX_TAGS - GQA_TAGS)})


def payload_problem(spec: Any) -> str | None:
    """Why Batch would refuse this spec's jobs, or None."""
    used = spec_bytes(spec)
    room = JOB_PAYLOAD_LIMIT - GQA_ALLOWANCE
    if used <= room:
        return None
    whose = "the largest task's" if getattr(spec, "sweep", None) is not None else "the job's"
    return (f"{whose} command, environment and tags take {used / 1024:.1f} KiB; AWS Batch accepts "
            f"{JOB_PAYLOAD_LIMIT // 1024} KiB per job, {GQA_ALLOWANCE // 1024} KiB of which gqa's own settings "
            f"need: pass large values in a file the job reads (e.g. on S3) instead")
