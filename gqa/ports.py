"""What the services need from the outside world. One adapter per backend
implements each; services receive them, never import them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Protocol

from .models.job import JobRecord, JobState, Transition
from .models.batch_events import BatchJobEvent
from .models.burst import Burst, ClosedBurst, StepKind
from .models.outcome import ExitKind
from .models.trigger import Trigger
from .scheduling.snapshot import Gpu, PendingJob, Policy, RunningJob, TeamPolicy


class Clock(Protocol):
    def now(self) -> float: ...


class Random(Protocol):
    def random(self) -> float: ...


class JobStore(Protocol):
    # (settings) the GPUs the queue schedules over, and the policy
    def inventory(self) -> Inventory | None: ...

    def set_inventory(self, inventory: Inventory) -> None: ...

    """Durable job records. Every state change is one atomic write guarded on
    the current state: a stale writer gets Conflict, never a lost update."""

    def create(self, jobs: list[JobRecord]) -> list[JobRecord]:
        """Insert the jobs of one submission atomically, assigning ids and seq;
        job.group == "" asks for a fresh group id (array tasks share it).
        Jobs that arrive with an id (reserved by reserve_ids) are written under
        it only if no job has it yet: a job that exists is left as it is, so a
        redelivered submission is harmless. Returns the stored records."""

    def get(self, job_id: str) -> JobRecord: ...

    def resolve(self, ref: str, *, history: bool = True) -> list[JobRecord]:
        """A job id or a group id (array, sweep) -> its jobs; NotFound if none.
        With history=False the records carry no transitions: far cheaper for
        a big array (one read for the group, not one per job)."""

    def list(self, states: Iterable[JobState] | None = None, *, team: str | None = None,
             limit: int | None = None, history: bool = False) -> list[JobRecord]:
        """Jobs in submission order; with history=True each carries its transitions."""

    def state_counts(self) -> dict[JobState, int]:
        """How many jobs are in each state; states with none are left out."""

    def apply(self, changes: list["Change"]) -> list[JobRecord]:
        """Apply state changes in one transaction; each is guarded on the
        state it expects. Raises Conflict (and applies nothing) on a mismatch.
        A change's `usage` is added to its team's decayed usage atomically."""

    def record_start(self, job_id: str, attempt: int, token: str, started_at: float,
                     reason: str) -> JobRecord | None:
        """Record that attempt `attempt` (launched as `token`, the proc_token)
        started at `started_at`: STARTING -> RUNNING with `reason`, started_at
        set, exit_code and signal cleared, in one write that reads nothing
        first. Applies only while the job is STARTING on that attempt and
        token; else changes nothing and returns None (a duplicate, a late
        event, a job that moved or is unknown, or one the backend must first
        read to write: the caller then reads and decides). Returns the record
        as apply() would (the recent history at least)."""

    def apply_each(self, changes: list["Change"]) -> list[bool]:
        """Apply each change that still holds and skip the others: each is
        guarded on the state it expects, as in apply(), but a job that moved on
        (or is gone) leaves the rest to apply. Whether each applied. For many
        jobs at once (a big array's cancel): as few transactions as the backend
        allows, and nothing is read back."""

    def with_requests(self) -> list[JobRecord]:
        """Active jobs whose owner asked for a cancel or requeue not yet carried out."""

    def scheduling_view(self) -> tuple[list[PendingJob], list[RunningJob]]:
        """QUEUED and HELD jobs as the scheduler sees them, and the jobs holding GPUs."""

    def spend(self, period: str) -> dict[str, float]:
        """Money spent per team in a budget period (finished attempts)."""

    def runtime_samples(self, limit: int = 500) -> list[tuple[str, float, float]]:
        """(team, actual run time, wall-time limit) of recent successful jobs that had a limit."""

    def next_wakeup(self) -> float | None:
        """The earliest not_before of a job in RETRY_WAIT."""

    def due_retries(self, now: float) -> list[JobRecord]: ...

    def teams(self) -> dict[str, TeamPolicy]: ...

    def set_team(self, team: str, policy: TeamPolicy) -> None: ...

    def team_members(self) -> dict[str, tuple[str, ...]]:
        """Each team's member patterns (users, IAM ARN patterns, @groups); teams with none left out."""

    def set_team_members(self, team: str, members: tuple[str, ...]) -> None:
        """Replace a team's members; a team not configured yet gets the default policy."""

    def usage(self, now: float, half_life: float) -> dict[str, float]:
        """Decayed GPU-seconds per team as of now."""


    def policy(self) -> Policy: ...

    def set_policy(self, policy: Policy) -> None: ...

    def reserve_ids(self, jobs: list[JobRecord]) -> list[JobRecord]:
        """The jobs with id, group and seq assigned as create() would assign them,
        reserved for good (never handed out again); nothing else is written."""

    def reserved(self, group: str) -> bool:
        """Whether reserve_ids (or create) has handed out this group id ("12";
        an array's tasks are "12_0", "12_1", ...), its jobs recorded or not.
        Reads the id counter only; False for an id the store never makes."""


@dataclass(frozen=True)
class Change:
    """One guarded change: move job `job_id` from `expect` to `to` (or, with
    `to` None, update `fields` only while it is still in `expect`)."""

    job_id: str
    expect: JobState
    to: JobState | None
    reason: str
    at: float
    fields: dict | None = None
    usage: float = 0.0   # GPU-seconds to add to the job's team in the same transaction
    cost: float = 0.0    # money to add to the team's spend for the period of `at`, likewise


@dataclass(frozen=True)
class Inventory:
    gpus: tuple[Gpu, ...]
    cpus: int | None = None
    memory: int | None = None


@dataclass(frozen=True)
class Launched:
    pid: int
    token: str


@dataclass(frozen=True)
class Exit:
    """How a job's process ended. `code` is its exit status, `signal` the
    signal that killed it; either may be None when unknown. `kind` is what
    the backend says ended it (APP: the process itself, so the code decides),
    `detail` the backend's own words on it, and `memory` the bytes the
    container was given, when the backend reports them (for an OOM message)."""

    job_id: str
    attempt: int
    code: int | None
    signal: int | None
    kind: ExitKind = ExitKind.APP
    detail: str = ""
    memory: int | None = None
    ended_at: float | None = None   # when the process ended, if the backend knows (else: when it was noticed)


class Compute(Protocol):
    """Where job attempts run. `holds_launches`: nothing launch() starts runs
    before release() (a local process waits at its gate), so the supervisor may
    launch first and record the claim and the launch in one write.

    `launch_is_start`: a launched attempt runs at once (a local process), so
    its launch is recorded as its start (RUNNING). False where the backend
    queues what it is given (AWS Batch waits RUNNABLE for an instance, minutes
    or hours): the launch is recorded on the STARTING job (its attempt and
    proc_token) and the attempt becomes RUNNING only when the backend says it
    started; until then it consumes no wall time and is charged nothing. A
    backend that leaves the attribute out is taken to start what it launches."""

    holds_launches: bool
    launch_is_start: bool

    def inventory(self) -> Inventory: ...

    def launch(self, job: JobRecord, gpus: tuple[int, ...], attempt: int) -> Launched:
        """Start attempt `attempt` of the job on these GPUs. Raises LaunchFailed.
        A backend that can hold an attempt back (a local process) keeps it from
        running the job until release(): the launch is recorded first, so a
        crash in between never leaves an unrecorded copy running."""

    def release(self, job_ids: list[str]) -> None:
        """Let these launched attempts run: their launch is recorded."""

    def abandon(self, job_ids: list[str]) -> None:
        """These launched attempts were not recorded: they must never run."""

    def terminate(self, job: JobRecord, grace: float) -> None:
        """Ask the attempt to stop (SIGTERM to its whole group), then force it after `grace`."""

    def alive(self, job: JobRecord) -> bool:
        """Is the attempt recorded on this job still running?"""

    def reap(self, job: JobRecord) -> Exit | None:
        """How a finished attempt ended, if the compute side recorded it."""

    def cleanup(self, job: JobRecord) -> None:
        """Stop anything left of a finished attempt (stray processes)."""

    def forget(self, job: JobRecord) -> None:
        """Drop the record of how the attempt ended: called only once its
        result is committed, so a crash before that can still read it."""


class Waker(Protocol):
    """Tells the control loop that something changed: `jobs`, the jobs the
    caller has just written, when it knows them (the loop may read those
    first, wherever its other reads lag)."""

    def wake(self, jobs: Iterable[str] = ()) -> None: ...


# -- the AWS backend's extra seams ----------------------------------------------

@dataclass(frozen=True)
class Submission:
    """A validated request on its way from the API to admission: the spec as
    JSON, who asked, and a key that makes redelivery harmless. `job_ids` are
    the ids the API reserved, in the order expand(spec) yields the jobs, and
    `seq` the first job's seq (the others follow in order)."""

    spec_json: str
    owner: str
    tier: int
    idempotency_key: str
    environment: dict[str, str] | None = None
    job_ids: tuple[str, ...] = ()
    seq: int | None = None
    start: int = 0      # where in job_ids this message's work begins: > 0 for a large array's continuation


class Intake(Protocol):
    """Queues between the API and admission, one per priority tier, so a long
    low-priority sweep never delays a high-priority admission."""

    def send(self, submission: Submission) -> None: ...

    def wake_dispatcher(self) -> None:
        """Ask for a scheduling pass soon."""


@dataclass(frozen=True)
class AdmissionProgress:
    """How far a large submission's admission in chunks has got: the tasks
    before `next` (an index into its job ids) are written. `history` is what
    every task written from now on carries: the submission's verdict, with
    what was decided on the whole group since (an approval, a cancel), so the
    last transition's state is the state the rest are written in. `rev`
    changes with each such decision; `mover` is the delivery that last moved
    `next` (only it may hand the rest on again, after a crash)."""

    group: str
    total: int
    next: int
    mover: str
    history: tuple[Transition, ...]
    rev: int = 0

    @property
    def state(self) -> JobState:
        return self.history[-1].state

    @property
    def remaining(self) -> int:
        return self.total - self.next


class Admissions(Protocol):
    """Admission in chunks (AWS): a submission too large to write within one
    admit function's time is written a chunk per message, each chunk moving
    the group's progress item on once, whoever delivers it how often."""

    def chunk(self, job: JobRecord, seconds: float | None = None) -> int:
        """How many tasks like this one one message writes (in `seconds`, when
        the caller has less time left than a chunk's usual share)."""

    def pace(self, jobs: list[JobRecord]) -> Iterator[list[JobRecord]]:
        """The chunk's jobs in slices, each given out no sooner than the
        backend's write rate allows after the one before (it waits)."""

    def progress(self, group: str) -> AdmissionProgress | None: ...

    def begin(self, progress: AdmissionProgress) -> AdmissionProgress:
        """Record a group's first progress (next 0) and return it; or, when
        one is recorded already, that one."""

    def advance(self, group: str, start: int, end: int, rev: int, mover: str) -> bool:
        """Move `next` from `start` to `end`, only if it is at `start` and the
        decisions are still `rev`; whether it moved."""

    def decide(self, group: str, expect: frozenset[JobState], to: Transition) -> bool:
        """Add a decision on the tasks not written yet (cancel, approve, deny),
        only while some remain and their state is one of `expect`."""


class Notifier(Protocol):
    """Alerts and approval requests (SNS on AWS, the log locally)."""

    def notify(self, subject: str, message: str, *, kind: str, team: str | None = None) -> None: ...


class Checkpoints(Protocol):
    """Where a job's checkpoints live, and the latest good one."""

    def location(self, job_id: str) -> str:
        """The directory or URI handed to the job (GQA_CHECKPOINT_DIR / GQA_CHECKPOINT_URI)."""

    def latest(self, job_id: str) -> str | None:
        """The latest complete checkpoint, for GQA_RESUME_FROM; None if there is none."""


@dataclass(frozen=True)
class AttemptLog:
    """Where one attempt's output is, as the compute backend knows it. `stream`
    is None while the attempt has no output to read (not yet running, or a
    container that never started); `detail` then says why, in the backend's
    words."""

    attempt: int
    source: str                 # what ran it, for people: e.g. "Batch job 5f0c..."
    status: str                 # the backend's own state of it when last read, e.g. RUNNABLE, RUNNING, FAILED
    started_at: float | None    # epoch seconds, when known
    group: str | None = None    # e.g. the CloudWatch log group
    stream: str | None = None   # e.g. the CloudWatch log stream
    detail: str = ""


@dataclass(frozen=True)
class LogChunk:
    """Lines read from a stream. `token` continues after them (the same token
    when nothing new came); `caught_up` says the stream had no more lines now."""

    lines: tuple[str, ...]
    token: str | None
    caught_up: bool


class JobLogs(Protocol):
    """The output of a job's attempts (CloudWatch Logs on AWS)."""

    def attempt(self, job: JobRecord, attempt: int) -> AttemptLog | None:
        """Where attempt `attempt` (1-based, at most job.attempts) wrote its
        output; None if the backend no longer knows the attempt. Once it has
        a stream the answer may come from memory (a stream does not move)."""

    def read(self, log: AttemptLog, token: str | None, limit: int) -> LogChunk:
        """Up to `limit` lines of the attempt's stream after `token` (None:
        from the start). NotFound if the stream does not exist."""


# -- the budget watch's seams ---------------------------------------------------------

@dataclass(frozen=True)
class LiveSpend:
    """A team's spend this period as of `as_of`: settled attempts plus what the
    running ones had cost by then (a figure for dashboards, rewritten each tick)."""

    team: str
    settled: float
    running: float
    as_of: float

    @property
    def amount(self) -> float:
        return self.settled + self.running


class BudgetRecords(Protocol):
    """What the budget watch keeps besides the jobs: which alerts went out, and
    each team's live spend. A claim is a conditional write, so two overlapping
    watch ticks never send the same alert twice."""

    def sent(self, keys: Iterable[str], now: float) -> set[str]:
        """Which of these alert keys are sent, or claimed by a tick still within its lease at `now`."""

    def claim(self, key: str, at: float, lease: float) -> str | None:
        """Claim an alert for sending: a token if this caller won it, None if it is
        sent or claimed by another. A claim not confirmed within `lease` seconds
        (its tick died) may be taken over."""

    def confirm(self, key: str, token: str, at: float) -> None:
        """The alert went out: it is never claimed again."""

    def release(self, key: str, token: str) -> None:
        """Sending failed: let a later tick claim the alert again."""

    def record_spend(self, period: str, spend: list[LiveSpend]) -> None:
        """Replace the live spend figures of the period (a figure older than the
        one stored is ignored, so overlapping ticks never step back in time)."""

    def live_spend(self, period: str) -> dict[str, LiveSpend]: ...


class GpuUtilization(Protocol):
    """How busy running jobs keep their GPUs (the jobs publish it, gqa.runtime.gpu_metrics)."""

    def recent(self, job_ids: list[str], window: float, now: float) -> dict[str, float]:
        """Mean GPU utilisation in percent over [now - window, now], per job that
        reported any; a job without data is absent, never 0."""


class Metrics(Protocol):
    """Metrics out (CloudWatch EMF on AWS). Dimensions added apply until the next flush."""

    def add_metric(self, name: str, unit: str, value: float) -> None: ...

    def add_dimension(self, name: str, value: str) -> None: ...

    def flush_metrics(self) -> None: ...


# -- triggers' seams -------------------------------------------------------------------

class TriggerStore(Protocol):
    """Triggers and their bursts (the settings table on AWS). Every burst write
    is guarded on the burst the caller read, and counts an event at most once."""

    def add(self, trigger: Trigger) -> None:
        """Conflict if a trigger has this id."""

    def get(self, trigger_id: str) -> Trigger:
        """NotFound if there is none."""

    def list(self) -> list[Trigger]: ...

    def remove(self, trigger_id: str) -> None:
        """Remove the trigger and its open burst (its timer then finds nothing); NotFound if there is none."""

    def open_burst(self, trigger_id: str) -> Burst | None:
        """The trigger's open burst, read consistently. The AWS store returns the burst's id and
        window with `keys` empty: its keys are listed when it closes."""

    def count(self, kind: StepKind, burst: Burst, key: str, token: str, expires: float) -> bool:
        """Record one object as `kind` decided on `burst` (for OPEN, the burst to open; otherwise the
        one read). False if the event `token` was counted before (a redelivery). Conflict if the
        burst is no longer what the caller read: read it again and plan again."""

    def close(self, trigger_id: str, burst_id: str, now: float, expires: float) -> ClosedBurst | None:
        """Close the open burst `burst_id`, exactly once however often it is asked; the closed burst
        (submitted or not), or None if no burst of that id was ever opened or it was removed."""

    def hold_submission(self, trigger_id: str, burst_id: str, submission: Submission) -> Submission:
        """Keep the closed burst's submission (with its reserved job ids) before it is sent; if one is
        kept already, that one is returned and `submission` is not kept."""

    def held_submission(self, trigger_id: str, burst_id: str) -> Submission | None: ...

    def mark_submitted(self, trigger_id: str, burst_id: str, jobs: list[str], dropped: str | None = None) -> None:
        """Record that the closed burst's job was submitted (or, with `dropped`, never will be)."""


class BurstTimer(Protocol):
    """Closes a burst when its window ends (a delayed SQS message on AWS)."""

    def schedule(self, trigger_id: str, burst_id: str, delay: int) -> None: ...


class Manifests(Protocol):
    """Where the key list of a large burst is written for its job."""

    def write(self, name: str, text: str) -> str:
        """Store `text` under `name` (overwriting the same text is harmless); returns its URI."""


# -- launches the dispatcher lost track of ------------------------------------------------

@dataclass(frozen=True)
class FoundLaunch:
    """An attempt the compute backend holds, found by the job and attempt it
    was launched for: what launch() would have returned, when the backend
    received it and started it, and how it ended, if it has (times in epoch
    seconds, None where the backend does not say)."""

    launched: Launched
    submitted_at: float | None = None
    started_at: float | None = None
    ended: Exit | None = None
    ended_at: float | None = None


class LaunchLookup(Protocol):
    """Finds a launch whose answer was never recorded (the dispatcher died, or
    the backend's answer was lost, between the launch and the write)."""

    def find(self, job: JobRecord, attempt: int) -> FoundLaunch | None:
        """Attempt `attempt` of the job if the backend holds it; None if it
        never received it. Raises BackendUnavailable when it cannot tell."""


# -- attempts whose events were lost ------------------------------------------------------

class AttemptStatus(Protocol):
    """What the compute backend says now of attempts gqa recorded, many per
    call: for when the events that would have told it were lost."""

    def attempts_now(self, jobs: Iterable[JobRecord]) -> dict[str, BatchJobEvent | None]:
        """By job id: each job's recorded attempt (job.proc_token) as the event
        the backend would send about it now, or None when the backend no longer
        knows it; a job it could not be asked about is left out. Raises
        BackendUnavailable when the backend cannot be asked."""
