"""Approval requests: a submission admitted to wait for an approver is told
to the approvers once, as one message (an array of 10,000 tasks is one
message, not 10,000), with who asks for what, the threshold it is over, and
the commands that decide it.

Once: admission is create-if-absent, so a redelivered submission finds its
jobs written. The store returns a job it wrote as it was given and one that
existed as it is stored (written by an earlier delivery, at an earlier
moment), so only the jobs this admission wrote are announced. A delivery
that wrote the jobs and failed before announcing them is not announced again;
the budget watch's alert on jobs waiting too long still names them.

That alert (`overdue_approvals`) goes to the approvers too, as the request
did: a submission still waiting for an approver past the policy's
`alert_pending_after` is told of once, as one message, under the pending
alert's key of the job (of the array, by its group).

Pure: records in, the message out; SubmitService and the budget watch send them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..models.job import JobRecord, JobState
from ..models.units import format_duration
from ..scheduling.alerts import Alert, pending_key
from ..scheduling.budget import INF, gpu_hours_cap, money, price_for
from ..scheduling.snapshot import Gpu

APPROVAL = "approval"   # the `kind` subscribers filter on (budget, pending and idle are the budget watch's)


@dataclass(frozen=True)
class ApprovalRequest:
    subject: str
    message: str
    team: str


def newly_awaiting(given: list[JobRecord], stored: list[JobRecord]) -> list[JobRecord]:
    """The jobs waiting for approval that this admission wrote: the store
    returned them as given, where a job an earlier delivery wrote comes back
    as stored then."""
    return [s for g, s in zip(given, stored) if s.state == JobState.PENDING_APPROVAL and s == g]


def approval_request(jobs: list[JobRecord], inventory: tuple[Gpu, ...]) -> ApprovalRequest | None:
    """The message asking the approvers about these jobs (one submission's);
    None when there are none. Every task of an array or sweep asks for the
    same resources, so the first one's numbers stand for each."""
    if not jobs:
        return None
    job = jobs[0]
    group = job.group or job.id
    hours = gpu_hours_cap(job.gpus, job.wall_time, job.max_gpu_hours)
    price = price_for(job.gpu_type, inventory)
    single = len(jobs) == 1 and job.array_index is None
    what = f"job {group} ({job.name})" if single else f"array {group} ({job.name}, {len(jobs)} jobs)"
    subject = f"gqa: {what} from {job.owner} waits for approval"
    lines = [
        f"{job.owner} (team {job.team}) submitted {what}; it waits for an approver.",
        "",
        f"{'It' if single else 'Each job'} asks for {_gpus(job)} {_wall(job)}: {_hours(hours)}, "
        f"{_cost(hours, price)}.",
    ]
    if len(jobs) > 1:
        lines.append(f"All {len(jobs)}: {_hours(hours * len(jobs))}, {_cost(hours * len(jobs), price)}.")
    why = job.reason.removeprefix("needs approval: ")
    lines += [
        f"Over the approval threshold: {why}.",
        "",
        f"Approve:  gqa approve {group}",
        f"Deny:     gqa deny {group} --reason \"...\"",
    ]
    return ApprovalRequest(subject, "\n".join(lines), job.team)


def overdue_approvals(jobs: Iterable[JobRecord], now: float, after: float | None) -> list[Alert]:
    """The submissions among `jobs` that have waited for an approver `after` seconds or longer
    (None: no such alerts), oldest first: one alert each (an array's tasks are one), kind
    "approval", so the approvers hear of it as they heard of the request. A job's wait for
    approval began at its submission: nothing returns a job to it."""
    if after is None:
        return []
    groups: dict[str, list[JobRecord]] = {}
    for job in jobs:
        if job.state == JobState.PENDING_APPROVAL:
            groups.setdefault(job.group or job.id, []).append(job)
    since = {group: min(j.submitted_at for j in members) for group, members in groups.items()}
    out = []
    for group in sorted((g for g in groups if now - since[g] >= after), key=since.__getitem__):
        members = groups[group]
        job = members[0]
        single = len(members) == 1 and job.array_index is None
        what = f"job {group} ({job.name})" if single else f"array {group} ({job.name}, {len(members)} jobs)"
        waited = format_duration(now - since[group])
        why = job.reason.removeprefix("needs approval: ")
        message = "\n".join([
            f"{job.owner} (team {job.team}) submitted {what} {waited} ago; it still waits for an approver, "
            f"longer than {format_duration(after)}.",
            f"Over the approval threshold: {why}.",
            "",
            f"Approve:  gqa approve {group}",
            f"Deny:     gqa deny {group} --reason \"...\"",
        ])
        out.append(Alert(pending_key(group), APPROVAL, f"gqa: {what} from {job.owner} has waited {waited} for "
                                                       f"approval", message, team=job.team, job_id=group))
    return out


def _gpus(job: JobRecord) -> str:
    kind = job.gpu_type.replace(",", " or ") if job.gpu_type else "any type"
    return f"{job.gpus} x {kind} GPU{'s' if job.gpus != 1 else ''} ({'spot' if job.spot else 'on demand'})"


def _wall(job: JobRecord) -> str:
    return f"for up to {format_duration(job.wall_time)}" if job.wall_time else "with no wall-time limit"


def _hours(hours: float) -> str:
    return "unbounded GPU-hours" if hours == INF else f"up to {hours:,.1f} GPU-hours"


def _cost(hours: float, price: float) -> str:
    if not price:
        return "no price configured"
    cost = "no bound on cost" if hours == INF else f"up to {money(hours * price)}"
    return f"{cost} at {money(price)} per GPU-hour"
