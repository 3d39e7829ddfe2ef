"""What an ended attempt means for the job: the lifecycle's exit rules, pure.

Interruptions (a requeue, a lost process, a timeout with on_timeout:
requeue) never count as errors; application errors are retried only as the
spec allows, with capped exponential backoff and full jitter."""

import signal as _signal
from dataclasses import dataclass

from ..scheduling.retry import backoff_delay
from .job import JobRecord, JobState, Request
from .units import format_duration

TIMEOUT, GPU_HOURS, CANCEL, REQUEUE, SHUTDOWN, PREEMPT = (
    "timeout", "gpu_hours", "cancel", "requeue", "shutdown", "preempt")


def attempt_deadline(job: JobRecord) -> tuple[float, str] | None:
    """When the running attempt must be stopped, and why: its wall time, or
    the job's GPU-hour budget (counted over all attempts), whichever is first."""
    if job.started_at is None:
        return None
    options = []
    if job.wall_time:
        options.append((job.started_at + job.wall_time, TIMEOUT))
    budget = job.spec.limits.max_gpu_hours
    if budget:
        left = max(0.0, budget * 3600 - job.gpu_seconds)
        options.append((job.started_at + left / job.gpus, GPU_HOURS))
    return min(options) if options else None


@dataclass(frozen=True)
class Outcome:
    to: JobState
    reason: str
    fields: dict


def signal_name(number: int) -> str:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def decide(job: JobRecord, *, code: int | None, sig: int | None, now: float, draw: float) -> Outcome:
    """`code`/`sig`: how the process ended (both None: it vanished unrecorded);
    `draw` in [0, 1) is the jitter."""
    spec = job.spec
    base = {"exit_code": code, "signal": sig, "pid": None, "ended_at": now, "request": None, "kill_reason": None,
            "assigned": ()}
    interrupted = dict(base, interruptions=job.interruptions + 1, not_before=now, ended_at=None)
    if job.request == Request.CANCEL or job.kill_reason == CANCEL:
        return Outcome(JobState.CANCELLED, "cancelled by user", base)
    if job.request == Request.REQUEUE or job.kill_reason == REQUEUE:
        return Outcome(JobState.RETRY_WAIT, "requeued by user; resumes from its last checkpoint", interrupted)
    if job.kill_reason == PREEMPT:
        return Outcome(JobState.RETRY_WAIT, "preempted for a higher-priority job; resumes from its last "
                       "checkpoint, keeping its place", interrupted)
    if job.kill_reason == SHUTDOWN:
        return Outcome(JobState.RETRY_WAIT, "queue daemon stopped; resumes from its last checkpoint", interrupted)
    if job.kill_reason == GPU_HOURS:
        return Outcome(JobState.TIMED_OUT, f"used its budget of {spec.limits.max_gpu_hours:g} GPU-hours", base)
    if job.kill_reason == TIMEOUT:
        limit = format_duration(spec.limits.wall_time)
        if spec.limits.on_timeout == "requeue":
            return Outcome(JobState.RETRY_WAIT, f"reached its wall time of {limit}; requeued to resume "
                           "from its last checkpoint", interrupted)
        return Outcome(JobState.TIMED_OUT, f"exceeded its wall time of {limit}", base)
    if code is None and sig is None:
        return Outcome(JobState.RETRY_WAIT, "its process was lost while the queue daemon was down; "
                       "resumes from its last checkpoint", interrupted)
    if code == 0 and sig is None:
        return Outcome(JobState.SUCCEEDED, "exit code 0", base)
    what = describe_exit(code, sig)
    allowed = spec.retries.on_error
    if job.error_retries < allowed:
        n = job.error_retries + 1
        delay = backoff_delay(n, spec.retries.backoff, spec.retries.max_backoff, draw)
        fields = dict(base, error_retries=n, not_before=now + delay, ended_at=None)
        return Outcome(JobState.RETRY_WAIT, f"{what}; retry {n} of {allowed} in {format_duration(delay)}", fields)
    suffix = f" after {allowed} retries" if allowed else ""
    return Outcome(JobState.FAILED, what + suffix, base)


def describe_exit(code: int | None, sig: int | None) -> str:
    if sig is not None:
        text = f"killed by {signal_name(sig)}"
        if sig == _signal.SIGKILL:
            text += " (not sent by gqa: most often the kernel's out-of-memory killer)"
        return text
    if code is not None and code > 128 and code - 128 in _signal.valid_signals():
        return f"exit code {code} ({signal_name(code - 128)})"
    return f"exit code {code}"
