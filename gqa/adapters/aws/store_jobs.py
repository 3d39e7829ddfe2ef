"""The DynamoDB store's job records: ids reserved from one counter, a
submission written absent-only (so a redelivery is harmless), and jobs read
with their whole history (history.py) or as the indexes hold them."""

from __future__ import annotations

import builtins
import heapq
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from itertools import islice
from typing import Any

from ...models.dependency import parsed
from ...models.errors import BackendUnavailable, Conflict, NotFound, Rejected, SpecError
from ...models.job import JobRecord, JobState
from . import history, parents
from . import items as it
from . import tables as t
from .errors import TransactionConflict
from .guarded import write_once
from .store_base import _GROUP, _ID_COUNTER, _JOB_ID, MAX_SUBMITTED_BYTES, List
from .store_settings import DynamoDBSettings
from .writes import chunks, start_update


class DynamoDBJobs(DynamoDBSettings):
    """Job records; their guarded changes are store_changes.py's."""

    # -- jobs: create and read -------------------------------------------------------------
    def reserve_ids(self, jobs: List[JobRecord]) -> List[JobRecord]:
        if not jobs:
            return []
        _check_sizes(jobs)
        arrays = any(j.array_index is not None for j in jobs)
        groups = sum(j.array_index is None for j in jobs) + (1 if arrays else 0)
        # one atomic counter call per submission reserves its group numbers and seqs
        expr = it.Expr()
        out = self.call("UpdateItem", TableName=self.tables.settings, Key=it.dump(_ID_COUNTER),
                        UpdateExpression=f"ADD {expr.n('groups')} {expr.v(groups)}, "
                                         f"{expr.n('seq')} {expr.v(len(jobs))}",
                        ReturnValues="UPDATED_NEW", **expr.kwargs())
        counters = it.load(out["Attributes"])
        group_no = int(counters["groups"]) - groups + 1
        now = time.time()
        # once a day, where the TTL deletes jobs: which groups are old enough to be gone (parents.py)
        if self.keep_history is not None and self._marked != it.end_day(now):
            parents.mark(self.call, self.tables.settings, _ID_COUNTER, group_no - 1, now)
            self._marked = it.end_day(now)
        seq = int(counters["seq"]) - len(jobs) + 1
        # array tasks share the first number, single jobs take the next ones (the SQLite scheme)
        shared, single = str(group_no), group_no + (1 if arrays else 0)
        reserved = []
        for job in jobs:
            if job.array_index is not None:
                job_id, group = f"{shared}_{job.array_index}", shared
            else:
                job_id = group = str(single)
                single += 1
            reserved.append(replace(job, id=job_id, group=group, seq=seq))
            seq += 1
        return reserved

    def reserved(self, group: str) -> bool:
        if not _GROUP.fullmatch(group):
            return False
        out = self.call("GetItem", TableName=self.tables.settings, Key=it.dump(_ID_COUNTER), ConsistentRead=True)
        handed_out = it.load(out.get("Item", {})).get("groups", 0)
        return int(group) <= int(handed_out)

    def purged(self, group: str) -> float | None:
        """An id with no item may be an accepted submission not admitted yet, unless it was handed
        out before any intake message still kept (parents.gone_below): then the TTL deleted it."""
        if not _GROUP.fullmatch(group) or int(group) > self._gone_below():
            return None
        found = self.call("Query", TableName=self.tables.jobs, KeyConditionExpression="#g = :g", Limit=1,
                          ProjectionExpression="#i", ExpressionAttributeNames={"#g": t.GROUP, "#i": t.ID},
                          ExpressionAttributeValues=it.dump({":g": group}), ConsistentRead=True)
        return None if found.get("Items") else (self.keep_history or 0.0)

    def _gone_below(self) -> int:
        out = self.call("GetItem", TableName=self.tables.settings, Key=it.dump(_ID_COUNTER), ConsistentRead=True)
        return parents.gone_below(it.load(out.get("Item", {})), time.time())

    def create(self, jobs: List[JobRecord]) -> List[JobRecord]:
        records = list(jobs)
        fresh = [i for i, j in enumerate(records) if not j.id]
        for i, job in zip(fresh, self.reserve_ids([records[i] for i in fresh])):
            records[i] = job
        existing = self._put_absent(records, must_be_new={records[i].id for i in fresh})
        return [it.job_record(existing[j.id]) if j.id in existing else j for j in records]

    def _put_absent(self, records: List[JobRecord], must_be_new: set[str]) -> dict[str, dict[str, Any]]:
        """Put each job unless its id exists; returns the items found existing.
        A freshly reserved id that exists means the id counter went back: Conflict."""
        existing: dict[str, dict[str, Any]] = {}
        _check_sizes(records)
        if self.keep_history is not None:   # what they wait on outlives their wait (parents.py)
            parents.keep_named(self.call, self.tables.jobs, _named(records), self.keep_history)
        puts = [{"Put": {"TableName": self.tables.jobs, "Item": it.dump(it.job_item(j, 0, keep=self.keep_history)),
                         "ConditionExpression": "attribute_not_exists(#id)", "ExpressionAttributeNames": {"#id": t.ID},
                         "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}
                for j in records]
        # an array over 100 tasks is written in several transactions: atomic per chunk
        for chunk in chunks(puts):
            while chunk:
                try:
                    self._transact(chunk)
                    for put in chunk:
                        self._seen_written(it.load(put["Put"]["Item"]))
                    break
                except TransactionConflict as lost:
                    # the jobs that exist are left as they are; the others are written in a retry
                    failed = set(lost.failed)
                    for i in failed:
                        job_id = it.load(chunk[i]["Put"]["Item"])[t.ID]
                        if job_id in must_be_new:
                            raise Conflict(f"job id {job_id} already exists: was the id counter "
                                           "in the settings table reset?") from None
                        item = lost.reasons[i].get("Item")
                        existing[job_id] = it.load(item) if item else {}
                    chunk = [p for i, p in enumerate(chunk) if i not in failed]
        unread = [job_id for job_id, item in existing.items() if not item]
        existing.update(self._read_jobs(unread) if unread else {})
        if any(not item for item in existing.values()):
            raise Conflict("a job found existing while creating could not be read back")
        return existing

    def get(self, job_id: str) -> JobRecord:
        item = self._get_job(job_id)
        if item is None:
            raise NotFound(f"no job {job_id}")
        return self._whole(item)

    def _whole(self, item: dict[str, Any]) -> JobRecord:
        """The job with its whole history: the moved transitions (one Query of its
        history partition, in order) before the ones its item holds."""
        job = it.job_record(item)
        moved = int(item.get(history.MOVED, 0))
        if not moved:
            return job
        older: List[dict[str, Any]] = []
        for chunk in self._query(self.tables.jobs, {t.GROUP: history.partition(job.id)}, consistent=True):
            older += chunk[history.TRANSITIONS]
        if len(older) != moved:   # written in one transaction with the item: a gap is a damaged table
            raise BackendUnavailable(f"job {job.id}: {len(older)} of its {moved} older transitions were found")
        return replace(job, history=history.decode(older) + job.history)

    def _whole_items(self, projected: List[dict[str, Any]]) -> List[dict[str, Any]]:
        """The whole items of these jobs (known ones as known), in the same order; gone ones left out."""
        known = {i[t.ID]: k for i in projected if (k := self._recall(i[t.ID])) is not None
                 and int(k.get(t.REVISION, 0)) >= int(i.get(t.REVISION, 0))}
        known.update(self._read_jobs([i[t.ID] for i in projected if i[t.ID] not in known]))
        return [known[i[t.ID]] for i in projected if i[t.ID] in known]

    def resolve(self, ref: str, *, history: bool = True) -> list[JobRecord]:
        if not _JOB_ID.match(ref):
            raise NotFound(f"no job or array {ref}")
        key = it.job_key(ref) if "_" in ref else {t.GROUP: ref}   # a group is one partition
        found = sorted(self._query(self.tables.jobs, key, consistent=True), key=lambda i: i[t.SEQ])
        if not found:
            raise NotFound(f"no job or array {ref}")
        return [self._whole(i) if history else it.job_record(i, history=False) for i in found]

    def group_page(self, ref: str, after: str | None, limit: int) -> list[JobRecord]:
        """One Query of the group's partition from the sort key after `after`:
        a page costs its own jobs' reads, wherever in the group it is."""
        if not _JOB_ID.match(ref):
            raise NotFound(f"no job or array {ref}")
        if "_" in ref and after is not None:
            return []    # a task named on its own is one job, done
        key = it.job_key(ref) if "_" in ref else {t.GROUP: ref}
        sort = None
        if after is not None:
            expr = it.Expr()
            sort = (f"{expr.n(t.ID)} > {expr.v(after)}", expr)
        found = builtins.list(islice(self._query(self.tables.jobs, key, sort=sort, consistent=True,
                                                 page=limit), limit))
        if not found and after is None:
            raise NotFound(f"no job or array {ref}")
        for item in found:   # whole items, strongly consistent: the base of the change that follows at once
            self._known.remember(item[t.ID], item)
        return [it.job_record(i, history=False) for i in found]

    def list(self, states: Iterable[JobState] | None = None, *, team: str | None = None,
             limit: int | None = None, history: bool = False) -> list[JobRecord]:
        wanted = list(dict.fromkeys(states)) if states is not None else list(JobState)
        if not wanted or (limit is not None and limit <= 0):
            return []
        found: Iterator[dict]
        if self._pass is not None and team is None and set(wanted) <= it.LIVE_STATES:
            # in a pass, live jobs come from the pass's view: the scheduling columns only, so
            # the whole items when their history is asked for (a read of those jobs alone)
            found = iter(self.live_items(frozenset(s.value for s in wanted)))
            if history:
                found = iter(self._whole_items(builtins.list(islice(found, limit))))
        elif team is not None:
            expr = it.Expr()
            where = None
            if states is not None:
                where = (f"{expr.n(t.STATE)} IN ({', '.join(expr.v(s.value) for s in wanted)})", expr)
            found = self._query(self.tables.jobs, {t.TEAM: team}, index=t.BY_TEAM, where=where,
                                page=None if where else limit)
        else:
            # one index partition per state, each in seq order: merge them lazily
            found = heapq.merge(*(self._query(self.tables.jobs, {t.STATE: s.value}, index=t.BY_STATE, page=limit)
                                  for s in wanted), key=lambda i: i[t.SEQ])
        return [it.job_record(i, history=history) for i in islice(found, limit)]

    def state_counts(self) -> dict[JobState, int]:
        """A count per state partition of the by_state index (Select COUNT: no item comes back)."""
        out: dict[JobState, int] = {}
        for state in JobState:
            expr = it.Expr()
            kwargs: dict[str, Any] = {"TableName": self.tables.jobs, "IndexName": t.BY_STATE, "Select": "COUNT",
                                      "KeyConditionExpression": f"{expr.n(t.STATE)} = {expr.v(state.value)}",
                                      **expr.kwargs()}
            n = 0
            while True:
                page = self.call("Query", **kwargs)
                n += int(page.get("Count", 0))
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            if n:
                out[state] = n
        return out

    # -- the one change that reads nothing first (the others: store_changes.py) -----------
    def record_start(self, job_id: str, attempt: int, token: str, started_at: float,
                     reason: str) -> JobRecord | None:
        """One UpdateItem, no read (writes.start_update); None when its condition
        fails: not that attempt STARTING, or a history that must move first."""
        if not _JOB_ID.match(job_id):
            return None
        try:   # a retry that meets this start applied is told it was (guarded.py)
            out = write_once(self.call, "UpdateItem",
                             **start_update(self.tables.jobs, job_id, attempt, token, started_at, reason))
        except Conflict:   # the condition failed (a missing item fails it too)
            return None
        item = it.load(out["Attributes"])
        self._seen_written(item)
        return it.job_record(item)


def _check_sizes(records: Iterable[JobRecord]) -> None:
    """Refuse, before anything is written, a job whose item would start near
    DynamoDB's 400 KB: its spec, environments and names are what it keeps
    for life (every other attribute is a number or a short token, well
    within the 4 KiB MAX_SUBMITTED_BYTES leaves). Cheap for a 100,000-task
    array: the tasks share one submitter's environment, sized once."""
    env_bytes: dict[int, int] = {}
    for record in records:
        if len(record.history) > history.MOST:
            raise ValueError(f"a new job carries at most {history.MOST} transitions, not {len(record.history)}")
        env = record.submit_env or {}
        if id(env) not in env_bytes:
            env_bytes[id(env)] = history.value_bytes(env)
        size = env_bytes[id(env)] + sum(history.value_bytes(v) for v in (
            record.spec_json, record.extra_env, record.name, record.owner, record.team))
        if size > MAX_SUBMITTED_BYTES:
            raise Rejected(f"job {record.name!r} takes {size // 1024} KiB with its spec and environment; a job "
                           f"on AWS takes at most {MAX_SUBMITTED_BYTES // 1024} KiB (a large environment, a "
                           "large inline script, or long sweep values?)")


def _named(records: List[JobRecord]) -> List[str]:
    """The jobs the dependencies of the waiting ones among `records` name (a task array's, once)."""
    out: dict[str, None] = {}
    for text in dict.fromkeys(j.dependency for j in records if j.dependency and not j.state.terminal):
        try:
            out.update(dict.fromkeys(parsed(text).jobs))
        except SpecError:
            continue   # never met: the pass cancels it
    return list(out)
