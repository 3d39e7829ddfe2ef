"""The DynamoDB store's guarded changes: the shared algorithm
(adapters/guarded.py) over a revision-guarded TransactWriteItems per 100
items (writes.pack). The first try plans from the items this store read or
wrote a moment ago (views.KnownItems); a write that lost only on the
revision (the job changed, but is still in the state the change expects) is
planned again from a fresh read."""

from __future__ import annotations

from typing import Any

from ...models.errors import Conflict
from ...models.job import JobRecord
from ...ports import Change
from ..guarded import GuardedChanges, Step
from . import items as it
from . import ledger
from .store_base import EACH_CHUNK, JobRefused, List
from .store_jobs import DynamoDBJobs
from .writes import JobWrite, pack, transaction


class DynamoDBChanges(DynamoDBJobs, GuardedChanges):
    """apply() and apply_each() as guarded.GuardedChanges runs them, on DynamoDB's primitives."""

    remembers = True
    each_chunk = EACH_CHUNK

    def _prepare(self, changes: List[Change]) -> float:
        # the half-life the usage charges are recorded under (ledger.py), read once
        return self.policy().half_life if any(c.usage for c in changes) else 0.0

    def _read(self, job_ids: List[str], remembered: bool) -> tuple[dict[str, JobRecord], Any]:
        """The items (with `remembered`, the ones this store has seen lately; the others read), and their records."""
        items = {i: item for i in job_ids if (item := self._recall(i)) is not None} if remembered else {}
        unread = [i for i in job_ids if i not in items]
        if unread:
            items.update(self._read_jobs(unread))
        return {i: it.job_record(item) for i, item in items.items()}, items

    def _write(self, steps: List[Step], read: Any, prepared: Any) -> set[str]:
        """Each job's update from its item as read to its record after its last
        step, with the ledger ADDs its steps bring; committed as writes.pack groups them."""
        half_life: float = prepared
        writes: dict[str, JobWrite] = {}
        for step in steps:
            job, change = step.before, step.change
            write = writes.get(job.id)
            if write is None:
                write = writes[job.id] = JobWrite(read[job.id], job, keep=self.keep_history)
            write.record = step.after
            if change.usage:
                sk, epoch, weight = ledger.usage_bucket(job.team, change.at, half_life, ledger.shard_of(job.id))
                add = write.usage.get(sk, (job.team, half_life, epoch, 0.0))[3] + change.usage * weight
                write.usage[sk] = (job.team, half_life, epoch, add)
            if change.cost:
                key = (ledger.spend_key(change.at, job.team, ledger.shard_of(job.id)), job.team)
                write.spend[key] = write.spend.get(key, 0.0) + change.cost
        return self._commit(writes)

    def _commit(self, writes: dict[str, JobWrite]) -> set[str]:
        """Write the jobs in as few transactions as fit; the ids committed before
        one lost its guard (those are then re-planned by apply)."""
        done: set[str] = set()
        for chunk in pack(writes):
            try:
                self._transact(transaction(self.tables, chunk))
            except JobRefused:
                raise
            except Conflict:
                for job_id in chunk:   # what we knew of them is out of date
                    self._known.forget(job_id)
                return done
            done.update(chunk)
            for write in chunk.values():
                # the item as now stored: writes.job_update sets exactly this
                self._seen_written(write.stored()[0])
            if self._pass is not None and any(w.usage or w.spend for w in chunk.values()):
                self._pass.ledger = None
        return done
