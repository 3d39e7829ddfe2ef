"""The AWS backend's extra seams: submissions on their way from the API to admission."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol

from ..models.job import JobRecord, JobState, Transition


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
