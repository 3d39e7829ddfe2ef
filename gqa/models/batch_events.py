"""What an AWS Batch job state change means, pure: the event as gqa reads it,
and how an ended Batch job's reasons map to an exit kind.

This is the one place where gqa reads text to decide: the reasons are the
event's data (AWS documents them and its own retry strategies match on their
prefixes, e.g. `onStatusReason: "Host EC2*"`), not an SDK's error message.
Only stable prefixes are matched; the rest of a reason is kept, unread, as
the detail people see."""

from __future__ import annotations

from dataclasses import dataclass

from .outcome import ExitKind

RUNNING, SUCCEEDED, FAILED = "RUNNING", "SUCCEEDED", "FAILED"
ENDED = frozenset({SUCCEEDED, FAILED})

# statusReason of a job whose instance went away: "Host EC2 (instance i-0abc) terminated."
# (a spot reclaim, or an on-demand host lost); Fargate Spot says it outright
RECLAIMED_REASONS = ("Host EC2", "Your Spot Task was interrupted")
# statusReason when attemptDurationSeconds ran out
TIMEOUT_REASONS = ("Job attempt duration exceeded timeout",)
# container reason of an out-of-memory kill: "OutOfMemoryError: Container killed due to memory usage"
OOM_REASONS = ("OutOfMemoryError",)
# the container never ran for reasons of the host or the platform, not the job:
# image pull, task networking/secrets/log setup, the container runtime, Batch's "Task failed to start".
# CannotStartContainerError is left out on purpose: most often the job's command
# does not exist in the image, which no retry mends (it counts as an error instead)
CAPACITY_REASONS = ("CannotPullContainerError", "ResourceInitializationError", "CannotInspectContainerError",
                    "CannotCreateVolumeError", "DockerTimeoutError", "ContainerRuntimeTimeoutError",
                    "ContainerRuntimeError", "InternalError", "Task failed to start")

# A job queue's job state time limit actions (infra/compute.py) cancel a job that
# stayed RUNNABLE at the head of the queue, for a reason Batch inferred, longer than
# the action's time. The reason is Batch's own code, not free text: an action fires
# only on jobs RUNNABLE for that reason, and the cancelled job ends FAILED with
# statusReason "Canceled by JobStateTimeLimit action due to reason: <code>".
TIME_LIMIT_CANCELLED = "Canceled by JobStateTimeLimit action due to reason: "
# no instance could be had (spot or on-demand capacity): the wait is the deployment's
# compute.capacity_wait, and gqa retries the job, or moves a spot job to on demand
CAPACITY_WAIT_REASON = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
# the job fits no instance type of the pool, or exceeds the pool's vCPUs: no wait mends
# that, so the queue cancels such a job soon and the job's own error says why
MISFIT_REASONS = ("MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT", "MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE")


@dataclass(frozen=True)
class BatchJobEvent:
    """One "Batch Job State Change" for an attempt gqa launched. Times are
    epoch seconds: `time` is when the change happened (Batch's stoppedAt for
    an ended job, startedAt for a running one), `started_at` when the
    container started, if it did; `memory` is the bytes the container was given."""

    batch_job_id: str
    job_id: str
    attempt: int
    status: str
    status_reason: str | None
    exit_code: int | None
    container_reason: str | None
    time: float
    started_at: float | None = None
    memory: int | None = None

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def code(self) -> int | None:
        """The exit code the exit rules see: a SUCCEEDED job exited 0 even if the event leaves it out."""
        return 0 if self.status == SUCCEEDED and self.exit_code is None else self.exit_code

    @property
    def ran(self) -> bool:
        """Did the container start (so the attempt ran, and its GPUs were held)?"""
        return self.status == SUCCEEDED or self.started_at is not None or self.exit_code is not None


def classify(status: str, status_reason: str | None, exit_code: int | None,
             container_reason: str | None) -> tuple[ExitKind, str]:
    """The exit kind of an ended Batch job and the reason to show with it.
    APP leaves the verdict to the exit code (0 for a SUCCEEDED job)."""
    status_reason, container_reason = (status_reason or "").strip(), (container_reason or "").strip()
    if status == SUCCEEDED:
        return ExitKind.APP, ""
    if container_reason.startswith(OOM_REASONS):
        return ExitKind.OOM, container_reason
    if status_reason.startswith(RECLAIMED_REASONS):
        return ExitKind.RECLAIMED, status_reason
    if status_reason.startswith(TIMEOUT_REASONS):
        return ExitKind.TIMEOUT, status_reason
    if exit_code is None and status_reason.startswith(TIME_LIMIT_CANCELLED + CAPACITY_WAIT_REASON):
        return ExitKind.CAPACITY, status_reason
    # the container's own reason is the more precise: "Task failed to start" over a
    # CannotStartContainerError is the job's command, not the platform
    reason = container_reason or status_reason
    if exit_code is None and reason.startswith(CAPACITY_REASONS):   # with an exit code it ran: the code decides
        return ExitKind.CAPACITY, reason
    return ExitKind.APP, reason
