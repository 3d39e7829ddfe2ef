"""The guarded-change algorithm, once for every store: read the jobs as they
are, check each change's expected state, apply its Transition
(models.job.transition), write them all atomically, and Conflict for a
change whose job is no longer in the state it expects. Each backend
implements a few primitives (as Powertools' idempotency layer does with its
BasePersistenceLayer): how to read the jobs, how to write a batch guarded on
what was read, and whether its writes can lose a race to retry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

from ..models.errors import Conflict, NotFound
from ..models.job import JobRecord, transition
from ..ports import Change, apply_all_else_each


@dataclass(frozen=True)
class Step:
    """One change as planned: the job before it and after it."""

    index: int        # the change's place in the caller's list
    change: Change
    before: JobRecord
    after: JobRecord


def plan(current: Mapping[str, JobRecord], changes: list[tuple[int, Change]]) -> list[Step]:
    """Walk the changes in order over the jobs as read (a job changed twice is
    changed from what the first change made of it). NotFound for a job not
    read, Conflict for one not in the state its change expects or no longer
    holding the values it names (`Change.unchanged`)."""
    records = dict(current)
    steps: list[Step] = []
    for index, change in changes:
        job = records.get(change.job_id)
        if job is None:
            raise NotFound(f"no job {change.job_id}")
        if job.state != change.expect:
            raise Conflict(f"job {job.id} is {job.state}, expected {change.expect}")
        if not change.holds_for(job):
            raise Conflict(f"job {job.id} changed since it was read")
        extra = dict(change.fields or {})
        new = replace(job, **extra) if change.to is None else \
            transition(job, change.to, change.at, change.reason, **extra)
        records[change.job_id] = new
        steps.append(Step(index, change, job, new))
    return steps


class GuardedChanges(ABC):
    """apply() and apply_each() over a backend's primitives.

    `conflict_retries`: how often a batch whose write lost a race (another
    writer changed a job after it was read, though it is still in the state
    its change expects) is planned again from a fresh read; 0 where the read
    and the write are one transaction that cannot lose. `remembers`: the
    first read may serve jobs as the backend last saw them (a change judged
    stale on those is judged again on a fresh read). `each_chunk`: how many
    changes apply_each() tries as one transaction."""

    conflict_retries = 0
    remembers = False
    each_chunk = 25

    def apply(self, changes: list[Change]) -> list[JobRecord]:
        results: list[JobRecord | None] = [None] * len(changes)
        todo = list(range(len(changes)))
        prepared = self._prepare(changes)
        remembered = self.remembers
        with self._atomically():
            for _ in range(self.conflict_retries + 1):
                if not todo:
                    break
                ids = list(dict.fromkeys(changes[i].job_id for i in todo))
                current, read = self._read(ids, remembered)
                try:
                    steps = plan(current, [(i, changes[i]) for i in todo])
                except Conflict:
                    if not remembered:
                        raise
                    remembered = False   # judged on remembered jobs: judge again on fresh ones
                    continue
                remembered = False
                for step in steps:
                    results[step.index] = step.after
                done = self._write(steps, read, prepared)
                todo = [i for i in todo if changes[i].job_id not in done]
        if todo:
            raise Conflict(f"job {changes[todo[0]].job_id} kept changing while being updated")
        return results  # type: ignore[return-value]

    def apply_each(self, changes: list[Change]) -> list[bool]:
        """Chunks of `each_chunk` changes, each one transaction with its ledger
        items (so all or nothing); a chunk refused because a job moved on or is
        gone is applied change by change, skipping those that no longer hold."""
        applied: list[bool] = []
        for start in range(0, len(changes), self.each_chunk):
            done = apply_all_else_each(self.apply, changes[start:start + self.each_chunk], (Conflict, NotFound))
            applied += [job is not None for job in done]
        return applied

    # -- the primitives a backend implements ---------------------------------------------------
    def _prepare(self, changes: list[Change]) -> Any:
        """What the writes of this apply() need once, whatever the retries (e.g. the half-life)."""
        return None

    def _atomically(self) -> AbstractContextManager[Any]:
        """Around the whole apply(): a transaction where the backend has one for reads and writes."""
        return nullcontext()

    @abstractmethod
    def _read(self, job_ids: list[str], remembered: bool) -> tuple[dict[str, JobRecord], Any]:
        """The jobs as they are now (`remembered`: as the backend remembers them,
        where it does), gone ones left out; and what the write needs of the read."""

    @abstractmethod
    def _write(self, steps: list[Step], read: Any, prepared: Any) -> set[str]:
        """Write the steps guarded on the jobs as read; the jobs written. A
        backend that writes in several transactions returns those committed
        before one lost its guard (apply() plans the rest again); a change the
        backend refuses outright raises Conflict."""
