"""The DynamoDB store's guarded changes: the shared algorithm
(adapters/guarded.py) over a revision-guarded TransactWriteItems per 100
items (writes.pack). The first try plans from the items this store read or
wrote a moment ago (views.KnownItems); a write that lost only on the
revision (the job changed, but is still in the state the change expects) is
planned again from a fresh read."""

from __future__ import annotations

import logging
from typing import Any

from ...models.errors import Conflict, GqaError
from ...models.job import JobRecord
from ...ports import Change
from ..guarded import GuardedChanges, Step
from . import history
from . import items as it
from . import ledger
from . import tables as t
from .store_base import EACH_CHUNK, JobRefused, List
from .store_jobs import DynamoDBJobs
from .writes import JobWrite, history_expiry, pack, transaction

log = logging.getLogger(__name__)


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
            if (step.after.state.terminal and self.keep_history is not None and not write.expiring
                    and int(write.old.get(history.MOVED, 0)) and t.JOB_EXPIRES not in write.old):
                write.expiring = self._history_keys(job.id)   # they expire with the job
            if change.usage:
                sk, epoch, weight = ledger.usage_bucket(job.team, change.at, half_life, ledger.shard_of(job.id))
                add = write.usage.get(sk, (job.team, half_life, epoch, 0.0))[3] + change.usage * weight
                write.usage[sk] = (job.team, half_life, epoch, add)
            if change.cost:
                key = (ledger.spend_key(change.at, job.team, ledger.shard_of(job.id)), job.team)
                write.spend[key] = write.spend.get(key, 0.0) + change.cost
        return self._commit(writes)

    def _expire_history(self, write: JobWrite, stored: dict[str, Any]) -> None:
        """A finished job's older history items get its TTL. Best effort: one that
        fails stays (a few KB, read by nothing once the job is gone), logged."""
        expires = stored.get(t.JOB_EXPIRES)
        if expires is None:
            return
        for key in write.expiring:
            try:
                self.call("UpdateItem", **history_expiry(self.tables.jobs, key, int(expires)))
            except GqaError as exc:
                log.warning("job %s: a history item keeps no TTL (%s)", write.record.id, exc)
                return

    def _history_keys(self, job_id: str) -> List[dict[str, Any]]:
        """The keys of a job's history items (a Query of its history partition, keys only)."""
        expr = it.Expr()
        kwargs: dict[str, Any] = {"TableName": self.tables.jobs, "ConsistentRead": True,
                                  "KeyConditionExpression": f"{expr.n(t.GROUP)} = {expr.v(history.partition(job_id))}",
                                  "ProjectionExpression": f"{expr.n(t.GROUP)}, {expr.n(t.ID)}", **expr.kwargs()}
        keys: List[dict[str, Any]] = []
        while True:
            out = self.call("Query", **kwargs)
            keys += [it.load(raw) for raw in out.get("Items", [])]
            if "LastEvaluatedKey" not in out:
                return keys
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

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
                stored = write.stored()[0]
                self._seen_written(stored)
                self._expire_history(write, stored)
            if self._pass is not None and any(w.usage or w.spend for w in chunk.values()):
                self._pass.ledger = None
        return done
