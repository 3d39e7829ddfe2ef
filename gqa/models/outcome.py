"""What an ended attempt means for the job: the lifecycle's exit rules, pure.

Interruptions (a requeue, a lost process, a timeout with on_timeout:
requeue, a reclaimed instance, an infrastructure failure, an attempt the
backend lost track of) never count as errors; application errors (an
out-of-memory kill among them) are retried only as the spec allows, with
capped exponential backoff and full jitter.

A job submitted with --no-requeue (spec `requeue: false`) is never sent back
to run again by an interruption that cut a run short: `NOT_REQUEUED` lists
them, and each ends the job FAILED with its reason and "; --no-requeue", as
Slurm does. What a person asked for still requeues it (`gqa requeue`, a
team's budget stop); a capacity failure, where nothing ran, is still
retried; a timeout follows limits.on_timeout.

A job may end itself as Slurm's tools do from inside (SELF_REQUEUE,
SELF_CANCEL): a requeue is an interruption like `gqa requeue`'s, a cancel
ends it CANCELLED. What gqa itself was carrying out (a user's cancel, a
limit) still wins."""

import signal as _signal
from dataclasses import dataclass
from enum import StrEnum

from .job import JobRecord, JobState, Request
from .units import format_duration

TIMEOUT, GPU_HOURS, CANCEL, REQUEUE, SHUTDOWN, PREEMPT = (
    "timeout", "gpu_hours", "cancel", "requeue", "shutdown", "preempt")
GiB = 1024 ** 3
VANISHED = "vanished"   # its process ended unrecorded while the local daemon was down
SELF_REQUEUE_PERIOD = 60.0   # seconds: a job that requeues itself starts at most once in this long


class ExitKind(StrEnum):
    """Why an attempt ended, as far as the compute backend can tell. Only APP
    leaves the verdict to the exit code; the others say the code is beside the point."""

    APP = "app"              # the job's own process ended: its exit code decides
    RECLAIMED = "reclaimed"  # its instance was taken away (spot reclaim, host terminated)
    CAPACITY = "capacity"    # the infrastructure failed before the container ran
    OOM = "oom"              # killed for using more memory than it was given
    TIMEOUT = "timeout"      # the backend's own attempt time limit was hit (Batch's attemptDurationSeconds)
    LOST = "lost"            # the backend no longer knows the attempt: how and when it ended is unknown
    STEP = "step"            # the script ended 0 but an srun step failed: the step's code decides, `detail` says which
    # the job asked from inside (a local attempt's request file): whatever its code, it ends as asked
    SELF_REQUEUE = "self_requeue"   # `scontrol requeue $SLURM_JOB_ID`: back to the queue, as a requeue
    SELF_CANCEL = "self_cancel"     # `scancel $SLURM_JOB_ID`: CANCELLED, never to run again


# the interruptions --no-requeue turns into a failure, and what each says
NOT_REQUEUED: dict[str, str] = {
    PREEMPT: "preempted",
    SHUTDOWN: "queue daemon stopped",
    ExitKind.RECLAIMED: "its instance was reclaimed",
    ExitKind.LOST: "the compute backend lost track of it",
    VANISHED: "its process was lost while the queue daemon was down",
    # scontrol refuses it for such a job; a request file written by other means is not obeyed
    ExitKind.SELF_REQUEUE: "it asked to be requeued (scontrol requeue)",
}


def attempt_deadline(job: JobRecord) -> tuple[float, str] | None:
    """When the running attempt must be stopped, and why: its wall time, or
    the job's GPU-hour budget (counted over all attempts), whichever is first."""
    if job.started_at is None:
        return None
    options = []
    if job.attempt_wall_time:
        options.append((job.started_at + job.attempt_wall_time, TIMEOUT))
    budget = gpu_hour_budget(job)
    if budget and job.gpus:   # a CPU-only job uses no GPU-hours
        left = max(0.0, budget * 3600 - job.gpu_seconds)
        options.append((job.started_at + left / job.gpus, GPU_HOURS))
    return min(options) if options else None


def gpu_hour_budget(job: JobRecord) -> float | None:
    """The job's max_gpu_hours over all its attempts, None without one."""
    # the column copied out of the spec at submission: a record with the scheduling columns only has it too
    return job.max_gpu_hours if job.max_gpu_hours is not None or not job.spec_json else job.spec.limits.max_gpu_hours


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


def decide(job: JobRecord, *, code: int | None, sig: int | None, now: float, draw: float,
           kind: ExitKind = ExitKind.APP, detail: str = "", memory: int | None = None,
           spot: bool = False, ended_at: float | None = None) -> Outcome:
    """`code`/`sig`: how the process ended (both None: it vanished unrecorded);
    `kind`: what the backend says ended it, and `detail` in its words;
    `memory`: the bytes the container was given, when the backend says;
    `spot`: the attempt was placed on spot capacity;
    `ended_at`: when the process ended, where the backend knows (not when its end was noticed);
    `draw` in [0, 1) is the jitter."""
    # every end but a capacity failure breaks a run of them
    base = {"exit_code": code, "signal": sig, "pid": None, "ended_at": now, "request": None, "kill_reason": None,
            "assigned": (), "capacity_failures": 0}
    interrupted = dict(base, interruptions=job.interruptions + 1, not_before=now, ended_at=None)
    # a request gqa had not carried out yet (no kill_reason: nothing was signalled) did not end an attempt
    # that reports its own end, e.g. a cancel asked while the daemon was down, after the job had finished;
    # nor did a stop sent after the attempt had ended (its end noticed late: a busy or paused daemon)
    ended_itself = (job.kill_reason is None or _ended_before_stop(job, ended_at)) and (
        code is not None or sig is not None)
    if not ended_itself:
        # what gqa itself asked for wins over how the backend carried it out
        told = _told_as_signal(code, sig) if kind == ExitKind.APP else {}   # not the OOM killer's
        asked = _stopped_by_us(job, dict(base, **told), dict(interrupted, **told), finished=code == 0 and sig is None)
        if asked is not None:
            return asked
    ended = _as_it_ended(job, code, sig, now, draw, kind, detail, memory, spot, base, interrupted)
    if ended_itself and job.request == Request.CANCEL and not ended.to.terminal:
        # it would run again (a retry, a requeue): the cancel still holds
        return Outcome(JobState.CANCELLED, f"cancelled by user (its attempt had ended: {ended.reason})", base)
    return ended


def _as_it_ended(job: JobRecord, code: int | None, sig: int | None, now: float, draw: float, kind: ExitKind,
                 detail: str, memory: int | None, spot: bool, base: dict, interrupted: dict) -> Outcome:
    """decide() for an attempt that ended without gqa stopping it."""
    if kind == ExitKind.CAPACITY:
        given_up = _capacity_exhausted(job, detail, base, now, draw, spot)
        if given_up is not None:
            return given_up
    if kind in (ExitKind.RECLAIMED, ExitKind.CAPACITY, ExitKind.LOST):
        return _not_requeued(job, kind, base, detail) or _infrastructure(job, kind, detail, base, now, draw)
    if kind == ExitKind.OOM:
        return _error(job, _out_of_memory(job, memory), base, now, draw,
                      advice="ask for more with resources.memory")
    if kind == ExitKind.TIMEOUT:
        deadline = attempt_deadline(job)
        return _limit_reached(job, deadline[1] if deadline else TIMEOUT, base, interrupted)
    if kind == ExitKind.SELF_CANCEL:
        return Outcome(JobState.CANCELLED, f"cancelled itself ({detail or 'scancel'})", base)
    if kind == ExitKind.SELF_REQUEUE:   # an exit 0 before its stop arrived still requeues, as under Slurm
        return _not_requeued(job, kind, base) or _self_requeued(job, detail, now, interrupted)
    if code is None and sig is None:
        if detail:   # the backend says why, just not with a code: the job's own failure
            return _error(job, f"ended without an exit code ({detail})", base, now, draw)
        return _not_requeued(job, VANISHED, base) or Outcome(
            JobState.RETRY_WAIT, "its process was lost while the queue daemon was down; resumes from its last "
            "checkpoint", interrupted)
    if code == 0 and sig is None:
        return Outcome(JobState.SUCCEEDED, "exit code 0", base)
    if kind == ExitKind.STEP and detail:
        return _error(job, detail, base, now, draw)
    return _error(job, describe_exit(code, sig), base, now, draw)


# How far a recorded end may lag the moment the process ended: the local end is its exit
# file's modification time, which the kernel stamps from a clock that advances a tick
# (up to 10 ms) at a time, while the deadline is read from the fine clock. An end within
# this of the deadline may be the stop's own, so the limit decides it.
END_TIME_SLACK = 0.1


def _ended_before_stop(job: JobRecord, ended_at: float | None) -> bool:
    """Did the attempt end before gqa stopped it for a limit? gqa stops none before its
    deadline, so an attempt that ended by then ended by itself, however late that was seen."""
    if ended_at is None or job.kill_reason not in (TIMEOUT, GPU_HOURS):
        return False
    deadline = attempt_deadline(job)
    return deadline is not None and ended_at <= deadline[0] - END_TIME_SLACK


def _self_requeued(job: JobRecord, detail: str, now: float, interrupted: dict) -> Outcome:
    """Back to the queue as the job asked, at most once a SELF_REQUEUE_PERIOD: a script that requeues
    itself at once (a trap on EXIT, a check that always fails) would restart ten times a second, a
    launch and a settlement each, where Slurm holds a requeued job back two minutes (cred_expire)."""
    ran = max(0.0, now - (job.started_at if job.started_at is not None else now))
    wait = max(0.0, SELF_REQUEUE_PERIOD - ran)
    why = f"requeued itself ({detail or 'scontrol requeue'})"
    if wait >= 1.0:
        why += (f" after {format_duration(ran)}; starts again in {format_duration(wait)} at the earliest: a job "
                f"that requeues itself starts at most once every {format_duration(SELF_REQUEUE_PERIOD)}")
    return Outcome(JobState.RETRY_WAIT, f"{why}; resumes from its last checkpoint",
                   dict(interrupted, not_before=now + wait) if wait >= 1.0 else interrupted)


def _told_as_signal(code: int | None, sig: int | None) -> dict:
    """An attempt gqa stopped whose shell exited 143 or 137 died of the SIGTERM or SIGKILL gqa sent
    (a shell reports a child the signal ended as 128 + N): recorded as that signal, as Slurm
    records a stopped batch script (ExitCode 0:15), so its exit reads SIGTERM, not 143."""
    if sig is None and code in (128 + _signal.SIGTERM, 128 + _signal.SIGKILL):
        return {"exit_code": None, "signal": code - 128}
    return {}


def _stopped_by_us(job: JobRecord, base: dict, interrupted: dict, *, finished: bool = False) -> Outcome | None:
    """The attempt ended because gqa stopped it (a user's request, preemption, a limit).
    A job that exits 0 while being asked to make way (requeue, preemption, the
    daemon's stop, its wall time under on_timeout: requeue) finished: sending it
    back would run it twice. A job that wants to resume later exits 143
    (gqa.runtime's preempt.exit()). Stopped at its wall time under on_timeout:
    stop, it timed out whatever its code, as under Slurm: nothing runs again."""
    if job.request == Request.CANCEL or job.kill_reason == CANCEL:
        return Outcome(JobState.CANCELLED, "cancelled by user", base)
    making_way = job.request == Request.REQUEUE or job.kill_reason in (REQUEUE, PREEMPT, SHUTDOWN) or (
        job.kill_reason == TIMEOUT and bool(job.spec_json) and job.spec.limits.on_timeout == "requeue")
    if finished and making_way:
        return Outcome(JobState.SUCCEEDED, "exit code 0 (it finished while being asked to stop)", base)
    if job.request == Request.REQUEUE or job.kill_reason == REQUEUE:
        return Outcome(JobState.RETRY_WAIT, "requeued by user; resumes from its last checkpoint", interrupted)
    if job.kill_reason == PREEMPT:
        return _not_requeued(job, PREEMPT, base) or Outcome(
            JobState.RETRY_WAIT, "preempted for a job of a higher tier, or of its own tier under time slicing; "
            "resumes from its last checkpoint", interrupted)
    if job.kill_reason == SHUTDOWN:
        return _not_requeued(job, SHUTDOWN, base) or Outcome(
            JobState.RETRY_WAIT, "queue daemon stopped; resumes from its last checkpoint", interrupted)
    if job.kill_reason in (GPU_HOURS, TIMEOUT):
        return _limit_reached(job, job.kill_reason, base, interrupted)
    return None


def _not_requeued(job: JobRecord, cause: str, base: dict, detail: str = "") -> Outcome | None:
    """FAILED for an interruption NOT_REQUEUED lists, when the job asked for --no-requeue; else None."""
    if cause not in NOT_REQUEUED or not job.spec_json or job.spec.requeue:
        return None
    why = f" ({detail})" if detail else ""
    return Outcome(JobState.FAILED, f"{NOT_REQUEUED[cause]}{why}; --no-requeue", base)


def _limit_reached(job: JobRecord, which: str, base: dict, interrupted: dict) -> Outcome:
    """The wall-time rule (stop or requeue, as limits.on_timeout says) or the GPU-hour budget (stop)."""
    limits = job.spec.limits
    if which == GPU_HOURS:
        return Outcome(JobState.TIMED_OUT, f"used its budget of {limits.max_gpu_hours:g} GPU-hours", base)
    # without a wall time of its own, the limit was the backend's (e.g. a job definition's timeout)
    limit = f"its wall time of {format_duration(limits.wall_time)}" if limits.wall_time else \
        "the time limit its compute backend set"
    if job.time_limit:
        limit = f"the wall time of {format_duration(job.time_limit)} backfill granted it (--time-min)"
    if limits.on_timeout == "requeue":
        return Outcome(JobState.RETRY_WAIT, f"reached {limit}; requeued to resume from its last checkpoint",
                       interrupted)
    return Outcome(JobState.TIMED_OUT, f"exceeded {limit}", base)


def _infrastructure(job: JobRecord, kind: ExitKind, detail: str, base: dict, now: float, draw: float) -> Outcome:
    """Not the job's fault: back off (the capacity may take a while to return)
    and resume from the last checkpoint, without spending an error retry. The
    more often the job was interrupted, the longer it waits, up to max_backoff."""
    n = job.interruptions + 1
    retries = job.spec.retries
    delay = backoff_delay(n, retries.backoff, retries.max_backoff, draw)
    fields = dict(base, interruptions=n, not_before=now + delay, ended_at=None)
    if kind == ExitKind.RECLAIMED:
        fields["reclaims"] = job.reclaims + 1   # too many for its run, and the pass tries on demand first
        what = "its instance was reclaimed"
    elif kind == ExitKind.LOST:
        what = "the compute backend lost track of it"
    else:
        fields["capacity_failures"] = job.capacity_failures + 1
        what = "the infrastructure failed before it ran"
    why = f" ({detail})" if detail else ""
    return Outcome(JobState.RETRY_WAIT, f"{what}{why}; not counted as an error, resumes from its last "
                   f"checkpoint in {format_duration(delay)}", fields)


def _capacity_exhausted(job: JobRecord, detail: str, base: dict, now: float, draw: float,
                        spot: bool) -> Outcome | None:
    """The cap on capacity failures in a row (retries.on_capacity): past it, a
    job that was on spot falls back to on demand (a fresh run of failures
    starts there); any other job ends FAILED. None while under the cap."""
    failures = job.capacity_failures + 1
    if failures <= job.spec.retries.on_capacity:
        return None
    where = f"{job.gpus} x {(job.gpu_type or 'any GPU').replace(',', ' or ')}{' spot' if spot else ''}"
    since = _streak_start(job, failures)
    over = f" over {format_duration(now - since)}" if since is not None and now > since else ""
    why = f" (last: {detail})" if detail else ""
    what = f"no capacity for {where} after {failures} attempts{over}{why}"
    if spot and job.spot:
        outcome = _infrastructure(job, ExitKind.CAPACITY, "", base, now, draw)
        fields = dict(outcome.fields, spot=False, capacity_failures=0)
        return Outcome(JobState.RETRY_WAIT, f"{what}; falls back to on demand in "
                       f"{format_duration(fields['not_before'] - now)}", fields)
    return Outcome(JobState.FAILED, what, dict(base, capacity_failures=failures))


def _streak_start(job: JobRecord, attempts: int) -> float | None:
    """When the first of the last `attempts` launches was decided (None without that much history)."""
    starts = [t.at for t in job.history if t.state == JobState.STARTING]
    return starts[-attempts] if len(starts) >= attempts else None


def _error(job: JobRecord, what: str, base: dict, now: float, draw: float, *, advice: str = "") -> Outcome:
    """The job's own failure: retried as retries.on_error allows, then FAILED."""
    retries = job.spec.retries
    allowed = retries.on_error
    tail = f"; {advice}" if advice else ""
    if job.error_retries < allowed:
        n = job.error_retries + 1
        delay = backoff_delay(n, retries.backoff, retries.max_backoff, draw)
        fields = dict(base, error_retries=n, not_before=now + delay, ended_at=None)
        # when it is back is told where it is shown, as of then ("back in the queue in 3s"): the reason
        # stays true however late it is read
        return Outcome(JobState.RETRY_WAIT,
                       f"{what}; retry {n} of {allowed} after a {format_duration(delay)} backoff{tail}", fields)
    suffix = f" after {allowed} retries" if allowed else ""
    return Outcome(JobState.FAILED, what + suffix + tail, base)


def _out_of_memory(job: JobRecord, memory: int | None) -> str:
    given = memory or job.memory
    if not given:
        return "ran out of memory: the container used more than the memory it was given"
    return f"ran out of memory: the container used more than its {round(given / GiB, 1):g} GiB"


def backoff_delay(retry_number: int, base: float, cap: float, draw: float) -> float:
    """Delay before retry `retry_number` (1 = first retry): capped exponential with full
    jitter, `draw` in [0, 1) (the caller's random draw, so this stays pure)."""
    ceiling = min(cap, base * (2 ** max(0, retry_number - 1)))
    return ceiling * draw


def describe_exit(code: int | None, sig: int | None) -> str:
    if sig is not None:
        text = f"killed by {signal_name(sig)}"
        if sig == _signal.SIGKILL:
            text += " (not sent by gqa: most often the kernel's out-of-memory killer)"
        return text
    if code is not None and code > 128 and code - 128 in _signal.valid_signals():
        return f"exit code {code} ({signal_name(code - 128)})"
    return f"exit code {code}"
