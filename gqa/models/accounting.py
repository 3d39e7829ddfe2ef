"""One job as history and reports show it: when it waited and ran, what it
used and cost, how it ended. Pure: built from the record and the time now,
so `gqa history`, `gqa report`, `gqa top` and a simulated run all count a job
the same way."""

from __future__ import annotations

from dataclasses import dataclass

from .job import JobRecord, JobState, UserStatus, held_by_person


@dataclass(frozen=True)
class JobSummary:
    id: str
    group: str
    array_index: int | None
    name: str
    team: str
    owner: str
    tier: int
    state: JobState
    gpus: int
    gpu_type: str | None
    submitted_at: float
    first_start: float | None     # when its first attempt began; None if it never ran
    ended_at: float | None        # None while it is not finished
    elapsed: float                # seconds its attempts ran, the one running now counted to `now`
    wait: float | None            # submission to first start; for a job still waiting, until `now`
    gpu_hours: float              # GPU-hours of all attempts, the running one counted to `now`
    cost: float                   # money of all attempts, the running one counted to `now` at `hourly`
    attempts: int
    error_retries: int            # application errors retried
    reclaims: int                 # attempts whose spot instance was taken back
    interruptions: int            # requeues, restarts, reclaims, preemptions: never errors
    exit_code: int | None
    signal: int | None
    reason: str
    wall_time: float | None       # the limit its attempts run under (seconds), None if unlimited
    gpu_util: float | None        # mean GPU utilisation (%), where measured
    gpu_memory: float | None      # peak GPU memory (MiB), where measured
    # where its time waiting went: (why, seconds) per kind of wait (WAITS), from its transitions
    waited: tuple[tuple[str, float], ...] = ()
    # when its attempts held their GPUs: (start, end) each, the running one to `now`; empty where the
    # record came without its transitions (then first_start and elapsed are all there is)
    runs: tuple[tuple[float, float], ...] = ()

    @property
    def status(self) -> UserStatus:
        from .job import user_status
        return user_status(self.state)

    @property
    def finished(self) -> bool:
        return self.state.terminal

    @property
    def exit_text(self) -> str:
        """`0`, `3`, `SIGKILL` (Slurm's ExitCode column in words), `-` before an exit."""
        if self.signal:
            import signal as signals
            try:
                return signals.Signals(self.signal).name
            except ValueError:
                return f"signal {self.signal}"
        return "-" if self.exit_code is None else str(self.exit_code)


def summarise(job: JobRecord, now: float, *, hourly: float = 0.0) -> JobSummary:
    """The job as of `now`. With its transitions (`job.history`) the wait runs
    to its first start and the elapsed time adds up every attempt; a record
    read without them counts from its last attempt's start. `hourly`: what its
    GPUs cost an hour, for a running attempt's money so far (its GPU-hours are
    counted to `now` whatever the price)."""
    runs = _runs(job, now)
    first, ran = (runs[0][0], sum(end - start for start, end in runs)) if runs else _last_run(job, now)
    ended = job.ended_at if job.state.terminal else None
    if first is not None:
        wait: float | None = max(0.0, first - job.submitted_at)
    elif job.state.terminal:
        wait = None        # it never ran: cancelled, rejected or failed while waiting
    else:
        wait = max(0.0, now - job.submitted_at)
    running, spent = so_far(job, now, hourly=hourly)
    return JobSummary(
        id=job.id, group=job.group, array_index=job.array_index, name=job.name, team=job.team,
        owner=job.owner, tier=job.tier, state=job.state, gpus=job.gpus, gpu_type=job.gpu_type,
        submitted_at=job.submitted_at, first_start=first, ended_at=ended, elapsed=ran, wait=wait,
        gpu_hours=(job.gpu_seconds + running) / 3600, cost=job.cost + spent, attempts=job.attempts,
        error_retries=job.error_retries, reclaims=job.reclaims, interruptions=job.interruptions,
        exit_code=job.exit_code, signal=job.signal, reason=job.reason, wall_time=job.attempt_wall_time,
        gpu_util=job.gpu_util, gpu_memory=job.gpu_memory, waited=_waited(job, now),
        runs=runs)


def so_far(job: JobRecord, now: float, *, hourly: float = 0.0) -> tuple[float, float]:
    """The GPU-seconds and money of the attempt running now, counted to `now` at `hourly`
    (the record holds its ended attempts' alone); none for a job not running."""
    if job.state != JobState.RUNNING or job.started_at is None:
        return 0.0, 0.0
    ran = max(0.0, now - job.started_at)
    return ran * job.gpus, hourly * ran / 3600


# Why a job waited, by the state it waited in. A pass does not record why a
# queued job did not start, so a queued span reads as GPUs or quota (or its
# dependency, where it has one), and up to a --begin time as that time.
WAIT_APPROVAL = "awaiting approval"
WAIT_BUDGET = "held by its team's budget"
WAIT_OWNER = "held by its owner"
WAIT_BEGIN = "its --begin time"
WAIT_DEPENDENCY = "a dependency, GPUs or quota"
WAIT_GPUS = "GPUs or quota"
WAIT_RETRY = "backoff before a retry"
WAIT_STARTING = "launch (on AWS: an instance)"
WAIT_ADMISSION = "admission"
WAITS = (WAIT_APPROVAL, WAIT_BUDGET, WAIT_OWNER, WAIT_BEGIN, WAIT_DEPENDENCY, WAIT_GPUS, WAIT_RETRY,
         WAIT_STARTING, WAIT_ADMISSION)


def _waited(job: JobRecord, now: float) -> tuple[tuple[str, float], ...]:
    """Seconds per kind of wait over every span not running: before the first
    start and between attempts."""
    spent: dict[str, float] = {}

    def add(why: str, seconds: float) -> None:
        if seconds > 0:
            spent[why] = spent.get(why, 0.0) + seconds

    steps = job.history
    for i, t in enumerate(steps):
        end = steps[i + 1].at if i + 1 < len(steps) else (t.at if job.state.terminal else now)
        if t.state == JobState.QUEUED:
            begun = min(end, max(t.at, job.begin or t.at))
            add(WAIT_BEGIN, begun - t.at)
            add(WAIT_DEPENDENCY if job.dependency else WAIT_GPUS, end - begun)
        elif t.state == JobState.HELD:
            add(WAIT_OWNER if held_by_person(t.reason) else WAIT_BUDGET, end - t.at)
        elif t.state == JobState.PENDING_APPROVAL:
            add(WAIT_APPROVAL, end - t.at)
        elif t.state == JobState.RETRY_WAIT:
            add(WAIT_RETRY, end - t.at)
        elif t.state == JobState.STARTING:
            add(WAIT_STARTING, end - t.at)
        elif t.state == JobState.SUBMITTED:
            add(WAIT_ADMISSION, end - t.at)
    return tuple((why, spent[why]) for why in WAITS if why in spent)


def _last_run(job: JobRecord, now: float) -> tuple[float | None, float]:
    """(its start, seconds run) of a record read without its transitions: its last attempt only."""
    if job.started_at is None:
        return None, 0.0
    if job.state.terminal and job.ended_at is not None:
        end = job.ended_at
    elif job.state == JobState.RUNNING:
        end = now
    else:
        end = job.ended_at if job.ended_at is not None else job.started_at
    return job.started_at, max(0.0, end - job.started_at)


def _runs(job: JobRecord, now: float) -> tuple[tuple[float, float], ...]:
    """Each attempt's run, from RUNNING to the transition after it (to `now` while it runs)."""
    runs: list[tuple[float, float]] = []
    since: float | None = None
    for t in job.history:
        if since is not None:
            runs.append((since, max(since, t.at)))
            since = None
        if t.state == JobState.RUNNING:
            since = t.at
    if since is not None:
        runs.append((since, max(since, now)))
    return tuple(runs)
