"""Job records for the store contract, put into a store only through the
JobStore port: `create` a submission, then walk guarded `apply` steps to the
state a test needs, as the services would."""

from __future__ import annotations

from typing import Any

from gqa.models.job import JobRecord, JobState, Transition
from gqa.ports import Change, JobStore
from tests.builders import job_record

S = JobState
T0 = 1_000.0

# the lifecycle steps from QUEUED to each state
PATHS: dict[JobState, tuple[JobState, ...]] = {
    S.QUEUED: (),
    S.HELD: (S.HELD,),
    S.CANCELLED: (S.CANCELLED,),
    S.STARTING: (S.STARTING,),
    S.RUNNING: (S.STARTING, S.RUNNING),
    S.RETRY_WAIT: (S.STARTING, S.RUNNING, S.RETRY_WAIT),
    S.SUCCEEDED: (S.STARTING, S.RUNNING, S.SUCCEEDED),
    S.FAILED: (S.STARTING, S.RUNNING, S.FAILED),
}


def new_job(**fields: Any) -> JobRecord:
    """A record as a submission hands it to create(): no id, no group, QUEUED."""
    submitted = fields.pop("submitted_at", T0)
    fields.setdefault("history", (Transition(S.SUBMITTED, submitted, "submitted"),
                                  Transition(S.QUEUED, submitted, "admitted")))
    fields.setdefault("reason", "admitted")
    return job_record(id="", group="", submitted_at=submitted, **fields)


def put(store: JobStore, state: JobState, *, at: float = T0, fields: dict | None = None,
        **record: Any) -> JobRecord:
    """One new job moved to `state`; `fields` are written with the last step."""
    [job] = store.create([new_job(**record)])
    steps = PATHS[state]
    if not steps and fields:
        [job] = store.apply([Change(job.id, job.state, None, "", at, fields)])
    for n, step in enumerate(steps, start=1):
        last = n == len(steps)
        [job] = store.apply([Change(job.id, job.state, step, f"moved to {step}", at, fields if last else None)])
    return job
