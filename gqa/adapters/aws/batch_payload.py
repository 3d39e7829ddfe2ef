"""AWS Batch's limit on a SubmitJob request: 30 KiB of job payload (the
service quotas page: "Maximum job payload size (for SubmitJob API
operations)"). A job's command, environment and tags travel in it, so a
spec whose own parts leave too little room would be accepted by the API
(256 KiB) and fail only when the dispatcher launches it. The API checks the
spec here first, with the figures.
"""

from __future__ import annotations

import json
from typing import Any

from ...models.code import launch_command

JOB_PAYLOAD_LIMIT = 30 * 1024
# what gqa adds to every request besides the spec's parts: job name, queue and definition,
# GQA_* variables (ids, the checkpoint and code URIs, the resume point), resources, timeout, gqa's
# tags, and a trigger's inline keys (up to 4 KiB)
GQA_ALLOWANCE = 8 * 1024


def request_bytes(request: dict[str, Any]) -> int:
    """A SubmitJob request's size as its JSON body carries it."""
    return len(json.dumps(request, separators=(",", ":")).encode())


def spec_bytes(spec: Any) -> int:
    """The room a spec's own parts take in every attempt's request (with code, the
    command is behind the fetcher, which names the spec's workdir)."""
    return request_bytes({"command": launch_command(spec),
                          "environment": [{"name": k, "value": v} for k, v in spec.env.items()],
                          "tags": dict(spec.tags) if getattr(spec, "tags", None) else {}})


def payload_problem(spec: Any) -> str | None:
    """Why Batch would refuse this spec's jobs, or None."""
    used = spec_bytes(spec)
    room = JOB_PAYLOAD_LIMIT - GQA_ALLOWANCE
    if used <= room:
        return None
    return (f"the job's command, environment and tags take {used / 1024:.1f} KiB; AWS Batch accepts "
            f"{JOB_PAYLOAD_LIMIT // 1024} KiB per job, {GQA_ALLOWANCE // 1024} KiB of which gqa's own settings "
            f"need: pass large values in a file the job reads (e.g. on S3) instead")
