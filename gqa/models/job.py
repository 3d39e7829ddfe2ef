"""The job record and its lifecycle: the states a job moves through, and
`ALLOWED`, which moves there are (docs/architecture.md walks through them).

Two vocabularies: `JobState` is the scheduler's, written only through
`transition()`; `UserStatus` is what people read, derived only by
`user_status()`."""

from dataclasses import dataclass, field
from functools import cached_property
from enum import StrEnum

from .errors import InvalidTransition
from .records import with_changes


class JobState(StrEnum):
    SUBMITTED = "SUBMITTED"
    QUEUED = "QUEUED"
    PENDING_APPROVAL = "PENDING_APPROVAL"
    HELD = "HELD"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    RETRY_WAIT = "RETRY_WAIT"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"
    REJECTED = "REJECTED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def active(self) -> bool:
        """Holding GPUs (or about to)."""
        return self in (JobState.STARTING, JobState.RUNNING)


S = JobState
TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.CANCELLED, S.REJECTED})
PENDING = frozenset({S.SUBMITTED, S.QUEUED, S.PENDING_APPROVAL, S.HELD, S.RETRY_WAIT})

ALLOWED: dict[JobState, frozenset[JobState]] = {
    S.SUBMITTED: frozenset({S.QUEUED, S.REJECTED, S.PENDING_APPROVAL, S.HELD, S.CANCELLED}),
    S.QUEUED: frozenset({S.STARTING, S.HELD, S.CANCELLED}),
    S.PENDING_APPROVAL: frozenset({S.QUEUED, S.REJECTED, S.CANCELLED}),
    S.HELD: frozenset({S.QUEUED, S.CANCELLED}),
    # STARTING -> RETRY_WAIT: the launch was interrupted (crash between decision and start)
    S.STARTING: frozenset({S.RUNNING, S.RETRY_WAIT, S.FAILED, S.CANCELLED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.RETRY_WAIT, S.CANCELLED}),
    S.RETRY_WAIT: frozenset({S.QUEUED, S.CANCELLED, S.FAILED}),
    **{t: frozenset() for t in TERMINAL},
}


def check_transition(current: JobState, to: JobState) -> None:
    if to not in ALLOWED[current]:
        if current.terminal:
            raise InvalidTransition(f"job already ended ({current}); cannot move to {to}")
        raise InvalidTransition(f"cannot move a {current} job to {to}")


class UserStatus(StrEnum):
    PENDING = "pending"
    AWAITING_APPROVAL = "awaiting approval"
    HELD = "held"
    STARTING = "starting"
    RUNNING = "running"
    RETRYING = "retrying"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed out"
    CANCELLED = "cancelled"
    REJECTED = "rejected"


_USER_STATUS = {
    S.SUBMITTED: UserStatus.PENDING, S.QUEUED: UserStatus.PENDING,
    S.PENDING_APPROVAL: UserStatus.AWAITING_APPROVAL, S.HELD: UserStatus.HELD,
    S.STARTING: UserStatus.STARTING, S.RUNNING: UserStatus.RUNNING,
    S.RETRY_WAIT: UserStatus.RETRYING, S.SUCCEEDED: UserStatus.COMPLETED,
    S.FAILED: UserStatus.FAILED, S.TIMED_OUT: UserStatus.TIMED_OUT,
    S.CANCELLED: UserStatus.CANCELLED, S.REJECTED: UserStatus.REJECTED,
}


def user_status(state: JobState) -> UserStatus:
    return _USER_STATUS[state]


class Request(StrEnum):
    """What a user asked of a running job; the supervisor carries it out."""

    CANCEL = "cancel"
    REQUEUE = "requeue"


@dataclass(frozen=True)
class Transition:
    state: JobState
    at: float
    reason: str


# A hold by a person (gqa hold, --hold) and a hold by the team's budget are
# both HELD; their transitions tell them apart by this opening of the reason,
# written by held_by() and read by held_by_person() only.
HELD_BY_PERSON = "held by "


def held_by(who: str, detail: str = "") -> str:
    """The reason of a hold by a person: `held by alice`, `held by its owner: ...`."""
    return f"{HELD_BY_PERSON}{who}{detail}"


def held_by_person(reason: str) -> bool:
    return reason.startswith(HELD_BY_PERSON)


@dataclass(frozen=True)
class JobRecord:
    """One job. Scheduling columns are copied out of the spec so the queue can
    be ordered without parsing every spec."""

    id: str
    group: str
    name: str
    team: str
    owner: str
    tier: int
    gpus: int
    gpu_type: str | None
    cpus: int | None
    memory: int | None
    wall_time: int | None
    submitted_at: float
    spec_json: str
    state: JobState = JobState.SUBMITTED
    seq: int = 0
    array_index: int | None = None
    group_limit: int | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    # the submitter's environment, the base of the job's (as Slurm's --export=ALL)
    submit_env: dict[str, str] | None = None
    attempts: int = 0            # launches so far; GQA_ATTEMPT of the next is attempts + 1
    error_retries: int = 0       # application errors retried so far
    interruptions: int = 0       # requeues, restarts, timeouts-with-requeue, reclaims: never errors
    reclaims: int = 0            # attempts whose instance was reclaimed: too many for its run, on demand first
    spot: bool = False           # may use spot: the spec says, cleared when capacity failures move it to on demand
    not_before: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    assigned: tuple[int, ...] = ()
    pid: int | None = None
    proc_token: str | None = None   # identifies the process beyond its pid (start time)
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    request: Request | None = None
    kill_reason: str | None = None  # why we signalled it: timeout, cancel, requeue
    gpu_seconds: float = 0.0
    max_gpu_hours: float | None = None
    history: tuple[Transition, ...] = ()
    capacity_failures: int = 0   # attempts in a row the infrastructure could not run (reset by any other end)
    # Slurm's scheduling options, copied out of the spec like the columns above
    dependency: str | None = None  # canonical --dependency text (models/dependency.py)
    user_hold: bool = False        # held by its owner or an admin (gqa hold): only `gqa release` frees it,
                                   # never the budget (a budget hold is HELD without it)
    begin: float | None = None     # not started before this time (--begin)
    nice: int = 0
    exclusive: bool = False
    time_min: float | None = None    # Slurm's --time-min: the least wall time backfill may grant it
    time_limit: float | None = None  # the current attempt's wall time when backfill granted less (set by each claim)
    # what the job has used, for history, reports and `gqa cost` per job
    cost: float = 0.0                # money of its attempts so far, at its GPUs' price (set by each settlement)
    gpu_util: float | None = None    # mean GPU utilisation in percent over its run, where it was measured
    gpu_memory: float | None = None  # peak GPU memory in MiB, where it was measured

    @property
    def attempt_wall_time(self) -> float | None:
        """The wall time the current attempt is killed at: the one granted, else its own."""
        return self.time_limit or self.wall_time

    @cached_property
    def spec(self):
        """The parsed spec (parsed once per record: the daemon reads it for every launch and exit)."""
        from .spec import STORED, JobSpec
        return JobSpec.model_validate_json(self.spec_json, context=STORED)

    @property
    def status(self) -> UserStatus:
        return user_status(self.state)

    @property
    def first_start(self) -> float | None:
        for t in self.history:
            if t.state == JobState.RUNNING:
                return t.at
        return None


def transition(job: JobRecord, to: JobState, at: float, reason: str, **changes) -> JobRecord:
    """The one way a state changes: checked against ALLOWED, recorded in history."""
    check_transition(job.state, to)
    return with_changes(job, state=to, reason=reason, history=job.history + (Transition(to, at, reason),), **changes)


def id_order(job_id: str) -> tuple[int, ...]:
    """Sort key that puts 9 before 10 and 10_2 before 10_10."""
    return tuple(int(p) if p.isdigit() else 0 for p in job_id.split("_"))


def group_of(ref: str) -> str:
    """The group a job id belongs to: "12_3" -> "12" (an array's task), "12" -> "12"."""
    return ref.split("_")[0]
