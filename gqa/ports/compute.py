"""Where attempts run, the clock, and wake-ups of the control loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

from ..models.batch_events import BatchJobEvent
from ..models.job import JobRecord
from ..models.outcome import ExitKind
from .store import Inventory


class Clock(Protocol):
    def now(self) -> float: ...


class Random(Protocol):
    def random(self) -> float: ...

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

    def ended(self, job: JobRecord) -> bool:
        """Has the attempt already ended, its end not yet reported? Then there is
        nothing to stop: its end, reported soon, is its own. False where the
        backend cannot tell at once (its events report the end)."""

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


# -- a wall clock that steps ------------------------------------------------------------

class AttemptClock(Protocol):
    """When running attempts began, read on a clock that setting the wall clock
    does not move (the machine's boot clock), so that a wall clock stepped by
    NTP or by hand neither stops an attempt early nor charges it the step."""

    def began(self, jobs: Iterable[JobRecord], now: float) -> dict[str, float]:
        """By job id: when each job's recorded attempt started, on the wall clock
        that reads `now` at this moment; a job whose attempt is no longer running
        (or cannot be told) is left out."""
