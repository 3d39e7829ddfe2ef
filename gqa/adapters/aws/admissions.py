"""Admission in chunks on DynamoDB: how many tasks one admit message writes,
how fast, and the progress item that makes each chunk count once.

Why chunks. Every task of an array lands on the same partitions: its group's
in the jobs table (`grp`), and one partition of each index (by_state "QUEUED",
by_team its team, live "live"), each written with the whole item (the
indexes project it all). DynamoDB gives one partition about
PARTITION_UNITS write units a second, and a transactional put costs two
units a KiB on the table and, counted the same way here, on each index. So a
100,000-task array takes minutes to write whatever the code does; what
matters is that no message holds more than one function's time of it.
Spreading the table's items over more partitions would not help: the index
partitions, one value each, take the same units per task.

The numbers:

- ADMIT_UNITS_PER_SECOND = half a partition's rate. The other half is for
  what writes the same index partitions meanwhile: the dispatcher's claims
  and the reconcile function's starts and ends (the live index), and a
  second array admitted at the same moment.
- CHUNK_SECONDS = a third of the admit function's 30 s timeout: the rest is
  for its reads, the progress item, the continuation message, retries under
  throttling, and the other records of its batch.
- a chunk is CHUNK_SECONDS * ADMIT_UNITS_PER_SECOND / (units per task), the
  units measured on the first task's item (the tasks differ by index only):
  a typical task's item is under 1 KiB, 2 units a partition, so 2,500 tasks
  a chunk and a 100,000-task array in 40 chunks, about 7 minutes (on moto, a
  10,000-task array took 4 chunks, its hottest partition, the live index's,
  5,000 units each, paced over 9.6 s).
- within a chunk the writes are paced: transaction i (SLICE tasks) starts no
  sooner than i * SLICE * units / ADMIT_UNITS_PER_SECOND seconds after the
  first, so a chunk's burst never outruns the rate either.

The progress item (settings table, pk ADMISSION, sk the group): total, next
(tasks before it are written), rev (bumped by each decision on the group),
mover (the delivery that last moved next) and the transitions the remaining
tasks are written with. It expires with the intake queues' messages.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from ...models.errors import Conflict
from ...models.job import JobRecord, JobState, Transition
from ...ports import AdmissionProgress
from . import history
from . import items as it
from . import tables as t
from .errors import Retrying
from .guarded import write_once
from .resources import ADMIT_TIMEOUT, INTAKE

PARTITION_UNITS = 1000                 # write units a second one partition (table or index) takes
ADMIT_UNITS_PER_SECOND = PARTITION_UNITS // 2
CHUNK_SECONDS = ADMIT_TIMEOUT / 3
SLICE = 100                            # tasks a transaction writes (TransactWriteItems' 100 actions)
TRANSACTION_FACTOR = 2                 # a transactional write costs two units a KiB
ADMISSION = "admission"                # the progress items' partition in the settings table
KEEP_FOR = max(q.retention for q in INTAKE.values()) + 86400   # seconds: past any message that names it


def units_per_task(job: JobRecord) -> int:
    """Write units one task's put costs on each partition it lands on (the table's, each index's)."""
    size = history.item_bytes(it.job_item(job, 0))
    return TRANSACTION_FACTOR * max(1, math.ceil(size / 1024))


def chunk_tasks(job: JobRecord, seconds: float = CHUNK_SECONDS) -> int:
    """Tasks like `job` one message writes in `seconds` at the paced rate; at least one slice."""
    return max(SLICE, int(seconds * ADMIT_UNITS_PER_SECOND / units_per_task(job)) // SLICE * SLICE)


# how the writes are paced: module attributes, so that a test can make them follow a virtual clock
monotonic: Callable[[], float] = time.monotonic
sleep: Callable[[float], None] = time.sleep


class DynamoDBAdmissions:
    """`seconds`: a chunk's time (default CHUNK_SECONDS, read when asked)."""

    def __init__(self, client: Any, tables: t.TableNames = t.TableNames(), *, clock: Callable[[], float] = time.time,
                 seconds: float | None = None, **retry: Any):
        self.client = client
        self.table = tables.settings
        self.call = Retrying(client, **retry)
        self.clock = clock
        self.seconds = seconds

    def chunk(self, job: JobRecord, seconds: float | None = None) -> int:
        usual = CHUNK_SECONDS if self.seconds is None else self.seconds
        return chunk_tasks(job, usual if seconds is None else min(seconds, usual))

    def pace(self, jobs: list[JobRecord]) -> Iterator[list[JobRecord]]:
        if not jobs:
            return
        per_slice = SLICE * units_per_task(jobs[0]) / ADMIT_UNITS_PER_SECOND
        began = monotonic()
        for n, start in enumerate(range(0, len(jobs), SLICE)):
            wait = began + n * per_slice - monotonic()
            if wait > 0:
                sleep(wait)
            yield jobs[start:start + SLICE]

    def progress(self, group: str) -> AdmissionProgress | None:
        out = self.call("GetItem", TableName=self.table, Key=_key(group), ConsistentRead=True)
        return _progress(it.load(out["Item"])) if "Item" in out else None

    def begin(self, progress: AdmissionProgress) -> AdmissionProgress:
        item = {t.PK: ADMISSION, t.SK: progress.group, "total": progress.total, "next": progress.next,
                "mover": progress.mover, "rev": progress.rev, "history": history.encode(progress.history),
                "state": progress.state.value,
                t.EXPIRATION: int(self.clock()) + KEEP_FOR}
        try:
            self.call("PutItem", TableName=self.table, Item=it.dump(item),
                      ConditionExpression="attribute_not_exists(#pk)", ExpressionAttributeNames={"#pk": t.PK})
            return progress
        except Conflict:   # another delivery of the first chunk began it: its verdict stands
            found = self.progress(progress.group)
            if found is None:
                raise
            return found

    def advance(self, group: str, start: int, end: int, rev: int, mover: str) -> bool:
        e = it.Expr()
        try:
            self.call("UpdateItem", TableName=self.table, Key=_key(group),
                      UpdateExpression=f"SET {e.n('next')} = {e.v(end)}, {e.n('mover')} = {e.v(mover)}",
                      ConditionExpression=f"{e.n('next')} = {e.v(start)} AND {e.n('rev')} = {e.v(rev)}",
                      **e.kwargs())
            return True
        except Conflict:
            return False

    def decide(self, group: str, expect: frozenset[JobState], to: Transition) -> bool:
        e = it.Expr()
        states = ", ".join(e.v(s.value) for s in expect)
        try:   # a retry that meets this decision applied is told it was (guarded.py)
            write_once(self.call, "UpdateItem", TableName=self.table, Key=_key(group),
                       UpdateExpression=f"SET {e.n('history')} = list_append({e.n('history')}, "
                                        f"{e.v(history.encode([to]))}), {e.n('rev')} = {e.n('rev')} + {e.v(1)}, "
                                        f"{e.n('state')} = {e.v(to.state.value)}",
                       ConditionExpression=f"{e.n('next')} < {e.n('total')} AND {e.n('state')} IN ({states})",
                       **e.kwargs())
            return True
        except Conflict:
            return False


def _key(group: str) -> dict[str, Any]:
    return it.dump({t.PK: ADMISSION, t.SK: group})


def _progress(item: dict[str, Any]) -> AdmissionProgress:
    return AdmissionProgress(group=item[t.SK], total=int(item["total"]), next=int(item["next"]),
                             mover=str(item["mover"]), history=history.decode(item["history"]),
                             rev=int(item["rev"]))
