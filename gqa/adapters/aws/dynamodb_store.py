"""JobStore on DynamoDB (tables in tables.py).

Every job write is an UpdateItem guarded on the state the caller expects and
on the item's revision, and every apply() is one TransactWriteItems holding
the jobs' updates and the ledger ADDs they bring. The revision guard makes a
read-modify-write exact: a write computed from a stale read fails instead of
overwriting, and is recomputed if the state still is what the caller expects.
That guard also lets apply() plan its first try from an item this store read
or wrote a moment ago instead of reading it again (views.py).

A job item has a bounded size whatever happens to the job (history.py): its
older transitions move to history items in the transaction that would make
it too long. get() and resolve() return the whole history; list(), apply()
and a scheduling pass read job items only, whose history is the recent part
(at least history.KEEP transitions, all a service looks back on).

Reads are shaped for the calls a job's life costs: the settings are one
partition (one Query), the ledger another, and one sparse index holds every
job a scheduling pass looks at; within pass_reads() each is read once.
A pass reads that index as a projection sized to scheduling (tables.py),
and in a warm container only what changed since its previous pass
(views.QueueView); it reads whole items only for the jobs it changes.

The client is injected (like Powertools' persistence layers) so the caller
chooses region, credentials and botocore config, and tests pass a moto one.
Queries on secondary indexes are eventually consistent on AWS: a job created
a moment ago may be missing from list() or scheduling_view() for a moment,
never from get() or resolve() (strongly consistent reads of the table).
"""

from __future__ import annotations

import builtins
import heapq
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields, replace
from itertools import islice
from typing import Any

from botocore.exceptions import ClientError

from ...models.errors import BackendUnavailable, Conflict, NotFound, Rejected
from ...models.job import JobRecord, JobState, transition
from ...ports import Change, Inventory, apply_all_else_each
from ...scheduling.fairshare import with_running
from ...scheduling.snapshot import PendingJob, Policy, RunningJob, TeamPolicy
from ... import settings_codec
from . import history
from . import items as it
from . import ledger
from . import tables as t
from . import views
from .errors import CONDITION_FAILED, TRANSIENT_REASONS, Retrying, TransactionConflict, cancellation_reasons, code_of
from .writes import JobWrite, chunks, pack, start_update, transaction

log = logging.getLogger(__name__)
S = JobState
PENDING = frozenset({S.QUEUED.value, S.HELD.value})
ACTIVE = frozenset({S.STARTING.value, S.RUNNING.value})
# `list` is also a method of the store: annotations below it name the builtin this way
List = builtins.list
# apply_each's transactions: a job's update plus at most a usage and a spend item, well within one of 100
EACH_CHUNK = 25
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")
_GROUP = re.compile(r"[1-9][0-9]*")   # a group id as reserve_ids makes one
_ID_COUNTER = {t.PK: t.COUNTER, t.SK: "jobs"}   # "groups" and "seq": how many reserve_ids has handed out
TEAM_PREFIX = "team#"   # a team's policy in the settings partition
MEMBERS = "members"     # a team item's member patterns (a list; absent: none)
# What the Lambda functions keep per container (views.py). Settings: a change
# (a quota, a price) takes effect within this; samples only shape estimates.
SETTINGS_TTL = 30.0
SAMPLES_TTL = 1800.0
KNOWN_FOR = 10.0        # seconds a job item read or written is the base of the next apply's first try
PREFETCH = 25           # most queued jobs a named wake-up's read takes along (views.QueueView)
# what a submission may bring into a job item: the fixed part's ceiling less room for what its
# life adds (times, pid, GPUs, the attempt's token)
MAX_SUBMITTED_BYTES = history.MAX_FIXED_BYTES - 4096


class JobRefused(Conflict):
    """DynamoDB refused a job's write for its content (ValidationError: an item
    over 400 KB, a malformed value), not for a lost race: writing it again
    would fail the same way. A Conflict, so a pass that applies jobs one by
    one where one fails skips this one and carries on with the others."""

    def __init__(self, message: str, job_ids: List[str]):
        super().__init__(message)
        self.job_ids = job_ids


class DynamoDBStore:
    """`settings_ttl` and `samples_ttl`: seconds the settings (inventory,
    policy, teams) and the runtime samples are kept once read (views.py says
    why that is harmless; the Lambda functions use SETTINGS_TTL and
    SAMPLES_TTL). 0, the default, reads them on every call."""

    def __init__(self, client: Any, tables: t.TableNames = t.TableNames(), *, attempts: int = 5,
                 base_delay: float = 0.05, max_delay: float = 2.0, conflict_retries: int = 5,
                 sleep: Callable[[float], None] = time.sleep, settings_ttl: float = 0.0, samples_ttl: float = 0.0):
        self.client = client
        self.tables = tables
        self.call = Retrying(client, attempts=attempts, base_delay=base_delay, max_delay=max_delay, sleep=sleep)
        self.conflict_retries = conflict_retries
        self._settings: views.Expiring[dict[str, dict[str, Any]]] = views.Expiring(settings_ttl)
        self._samples: views.Expiring[tuple[int, List[tuple[str, float, float]]]] = views.Expiring(samples_ttl)
        self._known = views.KnownItems(KNOWN_FOR)
        self._pass: views.PassView | None = None
        self._queue = views.QueueView()   # the live jobs between passes (the dispatch function's container)
        self._named: dict[str, dict[str, Any] | None] | None = None
        self._keys_until: float | None = None   # add_change_keys again at whole reads until then
        self._keys_checked = 0.0

    def close(self) -> None:
        """The client belongs to the caller; nothing to release."""

    @contextmanager
    def pass_reads(self, changed: Iterable[str] | Mapping[str, dict[str, Any] | None] | None = None
                   ) -> Iterator[None]:
        """One scheduling pass: while it lasts, the live jobs, the ledger and the
        settings are read at most once each, and kept up to date with this
        store's own writes (views.PassView). Re-entrant.

        `changed`: the jobs the wake-ups behind this pass name (their writers'
        jobs), with the items as written where the wake-up carried them
        (wakeups.py); the others are read from the table itself, strongly
        consistent. Either way a pass woken right after a write sees it
        however far the index lags; the index is then not read (the
        scheduled passes read it). None: what changed is unknown, and the
        index is read from the previous pass's watermark (views.QueueView)."""
        if self._pass is not None:
            yield
            return
        self._pass = views.PassView()
        if changed is None or isinstance(changed, Mapping):
            self._named = None if changed is None else dict(changed)
        else:
            self._named = dict.fromkeys(changed)
        try:
            yield
        finally:
            self._pass = None
            self._named = None

    # -- settings -------------------------------------------------------------------
    def _settings_items(self) -> dict[str, dict[str, Any]]:
        """The settings partition, sk -> item: one Query for inventory, policy and teams."""
        if self._pass is not None and self._pass.settings is not None:
            return self._pass.settings
        found = self._settings.get(lambda: {i[t.SK]: i for i in self._query(
            self.tables.settings, {t.PK: t.SETTING}, consistent=True)})
        if self._pass is not None:
            self._pass.settings = found
        return found

    def _put_setting(self, name: str, attributes: dict[str, Any]) -> None:
        self.call("PutItem", TableName=self.tables.settings, Item=setting_item(name, attributes))
        self._settings.clear()
        if self._pass is not None:
            self._pass.settings = None

    def inventory(self) -> Inventory | None:
        item = self._settings_items().get("inventory")
        return settings_codec.inventory_from(item["json"]) if item else None

    def set_inventory(self, inventory: Inventory) -> None:
        self._put_setting(*inventory_setting(inventory))

    def policy(self) -> Policy:
        item = self._settings_items().get("policy")
        return settings_codec.policy_from(item["json"]) if item else Policy()

    def set_policy(self, policy: Policy) -> None:
        self._put_setting(*policy_setting(policy))

    def teams(self) -> dict[str, TeamPolicy]:
        return {sk.removeprefix(TEAM_PREFIX): it.team_policy(item)
                for sk, item in self._settings_items().items() if sk.startswith(TEAM_PREFIX)}

    def set_team(self, team: str, policy: TeamPolicy) -> None:
        # the whole policy, in place: the item's members (set_team_members, the deploy) stay
        given = it.team_attributes(policy)
        expr = it.Expr()
        sets = ", ".join(f"{expr.n(k)} = {expr.v(v)}" for k, v in given.items())
        removed = [f.name for f in fields(TeamPolicy) if f.name not in given]
        update = f"SET {sets}" + (f" REMOVE {', '.join(expr.n(k) for k in removed)}" if removed else "")
        self._update_setting(TEAM_PREFIX + team, update, expr)

    def team_members(self) -> dict[str, tuple[str, ...]]:
        return {sk.removeprefix(TEAM_PREFIX): tuple(item[MEMBERS]) for sk, item in self._settings_items().items()
                if sk.startswith(TEAM_PREFIX) and item.get(MEMBERS)}

    def set_team_members(self, team: str, members: tuple[str, ...]) -> None:
        """Replace the team's members; a team not configured yet gets the default policy with them."""
        expr = it.Expr()
        # if_not_exists: a new team item carries the default policy, an existing one keeps its own
        defaults = [f"{expr.n(k)} = if_not_exists({expr.n(k)}, {expr.v(v)})"
                    for k, v in it.team_attributes(self.policy().default_team).items()]
        if members:
            update = "SET " + ", ".join([f"{expr.n(MEMBERS)} = {expr.v(list(members))}", *defaults])
        else:
            update = "SET " + ", ".join(defaults) + f" REMOVE {expr.n(MEMBERS)}"
        self._update_setting(TEAM_PREFIX + team, update, expr)

    def _update_setting(self, name: str, update: str, expr: it.Expr) -> None:
        self.call("UpdateItem", TableName=self.tables.settings, Key=it.dump({t.PK: t.SETTING, t.SK: name}),
                  UpdateExpression=update, **expr.kwargs())
        self._settings.clear()
        if self._pass is not None:
            self._pass.settings = None

    # -- the ledger ----------------------------------------------------------------------
    def _ledger(self, prefix: str) -> List[dict[str, Any]]:
        """The ledger items whose sort key starts with `prefix` (in a pass: one read of the partition)."""
        if self._pass is not None:
            if self._pass.ledger is None:
                self._pass.ledger = builtins.list(self._query(self.tables.ledger, {t.PK: ledger.PARTITION}))
            return [i for i in self._pass.ledger if i[t.SK].startswith(prefix)]
        expr = it.Expr()
        return builtins.list(self._query(self.tables.ledger, {t.PK: ledger.PARTITION},
                                         sort=(f"begins_with({expr.n(t.SK)}, {expr.v(prefix)})", expr)))

    def usage(self, now: float, half_life: float) -> dict[str, float]:
        """Decayed GPU-seconds per team. Charges decay with the half-life they were
        recorded under (ledger.py); the services pass that same policy half-life."""
        out: dict[str, float] = {}
        for item in self._ledger(ledger.USAGE):
            team = item["team"]
            out[team] = out.get(team, 0.0) + ledger.decayed(
                float(item["total"]), float(item["epoch"]), float(item["half_life"]), now)
        return with_running(out, ((i[t.TEAM], int(i["gpus"]), float(i["started_at"])) for i in self._live()
                                  if i[t.STATE] == S.RUNNING.value and i.get("started_at") is not None), now)

    def spend(self, period: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for item in self._ledger(ledger.spend_prefix(period)):   # a team's shards (ledger.py), summed
            out[item["team"]] = out.get(item["team"], 0.0) + float(item["amount"])
        return out

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
                        UpdateExpression=f"ADD {expr.n('groups')} {expr.v(groups)}, {expr.n('seq')} {expr.v(len(jobs))}",
                        ReturnValues="UPDATED_NEW", **expr.kwargs())
        counters = it.load(out["Attributes"])
        group_no = int(counters["groups"]) - groups + 1
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
        puts = [{"Put": {"TableName": self.tables.jobs, "Item": it.dump(it.job_item(j, 0)),
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

    def _get_job(self, job_id: str) -> dict[str, Any] | None:
        if not _JOB_ID.match(job_id):
            return None
        out = self.call("GetItem", TableName=self.tables.jobs, Key=it.dump(it.job_key(job_id)), ConsistentRead=True)
        if "Item" not in out:
            return None
        item = it.load(out["Item"])
        self._known.remember(job_id, item)
        return item

    def resolve(self, ref: str, *, history: bool = True) -> list[JobRecord]:
        if not _JOB_ID.match(ref):
            raise NotFound(f"no job or array {ref}")
        key = it.job_key(ref) if "_" in ref else {t.GROUP: ref}   # a group is one partition
        found = sorted(self._query(self.tables.jobs, key, consistent=True), key=lambda i: i[t.SEQ])
        if not found:
            raise NotFound(f"no job or array {ref}")
        return [self._whole(i) if history else it.job_record(i, history=False) for i in found]

    def list(self, states: Iterable[JobState] | None = None, *, team: str | None = None,
             limit: int | None = None, history: bool = False) -> list[JobRecord]:
        wanted = list(dict.fromkeys(states)) if states is not None else list(JobState)
        if not wanted or (limit is not None and limit <= 0):
            return []
        found: Iterator[dict]
        if self._pass is not None and team is None and set(wanted) <= it.LIVE_STATES:
            # in a pass, live jobs come from the pass's view: the scheduling columns only, so
            # the whole items when their history is asked for (a read of those jobs alone)
            values = {s.value for s in wanted}
            found = (i for i in self._live() if i[t.STATE] in values)
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

    # -- jobs: guarded changes ---------------------------------------------------------------
    def record_start(self, job_id: str, attempt: int, token: str, started_at: float,
                     reason: str) -> JobRecord | None:
        """One UpdateItem, no read (writes.start_update); None when its condition
        fails: not that attempt STARTING, or a history that must move first."""
        if not _JOB_ID.match(job_id):
            return None
        try:
            out = self.call("UpdateItem", **start_update(self.tables.jobs, job_id, attempt, token, started_at,
                                                         reason))
        except Conflict:   # the condition failed (a missing item fails it too)
            return None
        item = it.load(out["Attributes"])
        self._seen_written(item)
        return it.job_record(item)

    def apply(self, changes: List[Change]) -> List[JobRecord]:
        """All changes in one transaction (per 100 items, see writes.pack). A write that
        lost only on the revision (the job changed, but is still in the state the
        change expects) is recomputed from a fresh read; a wrong state is Conflict."""
        results: List[JobRecord | None] = [None] * len(changes)
        half_life = self.policy().half_life if any(c.usage for c in changes) else 0.0
        todo = list(range(len(changes)))
        known = True    # the first try plans from the items this store knows (views.KnownItems)
        for _ in range(self.conflict_retries + 1):
            if not todo:
                break
            try:
                writes = self._plan([(i, changes[i]) for i in todo], half_life, results, known)
            except Conflict:
                if not known:
                    raise
                known = False   # judged on remembered items: judge again on fresh ones
                continue
            known = False
            done = self._commit(writes)
            todo = [i for i in todo if changes[i].job_id not in done]
        if todo:
            raise Conflict(f"job {changes[todo[0]].job_id} kept changing while being updated")
        return results  # type: ignore[return-value]

    def apply_each(self, changes: List[Change]) -> List[bool]:
        """apply() per chunk small enough to be one transaction with its ledger
        items (so all or nothing); a chunk refused because a job moved on is
        applied change by change, skipping those that no longer hold."""
        applied: List[bool] = []
        for start in range(0, len(changes), EACH_CHUNK):
            done = apply_all_else_each(self.apply, changes[start:start + EACH_CHUNK], (Conflict, NotFound))
            applied += [job is not None for job in done]
        return applied

    def _plan(self, changes: List[tuple[int, Change]], half_life: float, results: List[JobRecord | None],
              known: bool = False) -> dict[str, JobWrite]:
        """Walk the changes in order over the items (fresh reads, or with `known` the
        ones this store has seen lately), as the SQLite adapter does in its transaction."""
        ids = builtins.list(dict.fromkeys(c.job_id for _, c in changes))
        items = {i: item for i in ids if (item := self._recall(i)) is not None} if known else {}
        unread = [i for i in ids if i not in items]
        if unread:
            items.update(self._read_jobs(unread))
        writes: dict[str, JobWrite] = {}
        for index, change in changes:
            if change.job_id not in items:
                raise NotFound(f"no job {change.job_id}")
            write = writes.get(change.job_id)
            if write is None:
                write = writes[change.job_id] = JobWrite(items[change.job_id], it.job_record(items[change.job_id]))
            job = write.record
            if job.state != change.expect:
                raise Conflict(f"job {job.id} is {job.state}, expected {change.expect}")
            extra = dict(change.fields or {})
            write.record = replace(job, **extra) if change.to is None else \
                transition(job, change.to, change.at, change.reason, **extra)
            results[index] = write.record
            if change.usage:
                sk, epoch, weight = ledger.usage_bucket(job.team, change.at, half_life, ledger.shard_of(job.id))
                add = write.usage.get(sk, (job.team, half_life, epoch, 0.0))[3] + change.usage * weight
                write.usage[sk] = (job.team, half_life, epoch, add)
            if change.cost:
                key = (ledger.spend_key(change.at, job.team, ledger.shard_of(job.id)), job.team)
                write.spend[key] = write.spend.get(key, 0.0) + change.cost
        return writes

    def _whole_items(self, projected: List[dict[str, Any]]) -> List[dict[str, Any]]:
        """The whole items of these jobs (known ones as known), in the same order; gone ones left out."""
        known = {i[t.ID]: k for i in projected if (k := self._recall(i[t.ID])) is not None
                 and int(k.get(t.REVISION, 0)) >= int(i.get(t.REVISION, 0))}
        known.update(self._read_jobs([i[t.ID] for i in projected if i[t.ID] not in known]))
        return [known[i[t.ID]] for i in projected if i[t.ID] in known]

    def _read_jobs(self, job_ids: List[str]) -> dict[str, dict[str, Any]]:
        """Strongly consistent reads of the jobs (BatchGetItem, 100 keys a call)."""
        found: dict[str, dict[str, Any]] = {}
        valid = [j for j in job_ids if _JOB_ID.match(j)]
        for start in range(0, len(valid), 100):
            request = {self.tables.jobs: {"Keys": [it.dump(it.job_key(j)) for j in valid[start:start + 100]],
                                          "ConsistentRead": True}}
            retry = 0
            while request:
                out = self.call("BatchGetItem", RequestItems=request)
                for raw in out["Responses"].get(self.tables.jobs, []):
                    item = it.load(raw)
                    found[item[t.ID]] = item
                    self._known.remember(item[t.ID], item)
                request = out.get("UnprocessedKeys") or {}
                if request:   # returned under throttling: back off as for a refused call
                    retry += 1
                    if retry >= self.call.attempts:
                        raise BackendUnavailable("DynamoDB kept leaving jobs unread (throttling); try again later")
                    self.call.sleep(self.call.delay(retry - 1))
        return found

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

    def _seen_written(self, item: dict[str, Any]) -> None:
        """A job item this store has just written: known as stored, and in or out of the pass's live jobs."""
        job_id = item[t.ID]
        self._known.remember(job_id, item)
        if self._pass is not None and self._pass.live is not None:
            if t.LIVE in item:
                self._pass.live[job_id] = it.projected(item)
            else:
                self._pass.live.pop(job_id, None)

    def _recall(self, job_id: str) -> dict[str, Any] | None:
        # whole items only: a pass's projected ones lack what a write rewrites (history, sizes)
        return self._known.recall(job_id)

    def _transact(self, transact_items: List[dict[str, Any]]) -> None:
        # the token makes our own retries of this request idempotent: a retry after a
        # lost response cannot apply the ledger ADDs twice
        try:
            self.call("TransactWriteItems", TransactItems=transact_items, ClientRequestToken=uuid.uuid4().hex)
        except BackendUnavailable as exc:
            refused = _refused(exc, transact_items)
            if refused is None:
                raise
            log.warning("DynamoDB refused the write of job %s for its content (%s); the others go on",
                        ", ".join(refused[0]), refused[1])
            raise JobRefused(f"job {', '.join(refused[0])}: DynamoDB refused the write ({refused[1]}); "
                             "it is left as it was", refused[0]) from exc

    # -- jobs: what the supervisor and the scheduler ask -----------------------------------------
    def _live(self) -> List[dict[str, Any]]:
        """The live jobs as the changes index projects them, in seq order: a
        read of every shard (outside a pass), or the pass's view (once per pass)."""
        if self._pass is None:
            return sorted(self._read_changes(None).values(), key=lambda i: i[t.SEQ])
        if self._pass.live is None:
            self._pass.live = self._refresh()
        return sorted(self._pass.live.values(), key=lambda i: i[t.SEQ])   # our own writes may have added some

    def _refresh(self) -> dict[str, dict[str, Any]]:
        """Bring the container's view of the live jobs up to this pass: all of
        it when stale (a cold start, every views.RESYNC_EVERY), else what the
        index holds changed since the watermark less views.CHANGE_MARGIN,
        unless the wake-ups named the jobs that changed; then those jobs, from
        the table (a job that left the live states leaves the view)."""
        view, named = self._queue, self._named
        began = it.wall_clock()
        if view.watermark is None or (named is None and view.stale()):
            # a cold container, or a pass that reads the index anyway (the scheduled ones): it
            # reads it whole; passes a wake-up named the jobs for never wait on such a read
            if self._keys_until is not None and views.now() < self._keys_until and \
                    views.now() - self._keys_checked >= views.RESYNC_EVERY:
                self.add_change_keys()
            view.jobs = self._read_changes(None)
            view.watermark, view.resynced = began, views.now()
        elif named is None:
            for job_id, item in self._read_changes(view.watermark - views.CHANGE_MARGIN).items():
                if int(item.get(t.REVISION, 0)) >= int(view.jobs.get(job_id, {}).get(t.REVISION, -1)):
                    view.jobs[job_id] = item   # an index entry older than our own write of it is not taken
            view.watermark = began
        if named:
            carried = {i: item for i, item in named.items() if item is not None}
            unread = [i for i in named if i not in carried]
            if unread:
                # what a wake-up names ended or stopped jobs (free GPUs) or released some: the pass
                # is likely to start the queue's head, whose whole items its claims need; read as
                # many of them with the named ones, in the same call
                head = heapq.nsmallest(min(len(unread), PREFETCH), (
                    (int(i["tier"]), i[t.SEQ], i[t.ID]) for i in view.jobs.values()
                    if i[t.STATE] == S.QUEUED.value and i[t.ID] not in named and self._recall(i[t.ID]) is None))
                found = self._read_jobs(unread + [job_id for _, _, job_id in head])
                carried.update({i: found.get(i) for i in unread})   # None: no such job
            for job_id, item in carried.items():
                seen = view.jobs.get(job_id)
                if item is not None and seen is not None and int(item.get(t.REVISION, 0)) < int(seen.get(t.REVISION, 0)):
                    continue   # a wake-up delivered late: the view has a later write of the job
                if item is not None and t.LIVE in item:
                    view.jobs[job_id] = it.projected(item)
                else:
                    view.jobs.pop(job_id, None)
        return view.jobs

    def wakeup_items(self, job_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The jobs as this store has just written them, as a wake-up carries
        them (wakeups.py): the changes index's projection, and whether the
        job is still live. Jobs it has not seen lately are left out (the pass
        reads those)."""
        out: dict[str, dict[str, Any]] = {}
        for job_id in job_ids:
            item = self._known.recall(job_id)
            if item is not None:
                out[job_id] = {**it.projected(item), **({t.LIVE: t.LIVE} if t.LIVE in item else {})}
        return out

    def _read_changes(self, since: float | None) -> dict[str, dict[str, Any]]:
        """The changes index, every shard: all of it, or what was written at or after `since`."""
        found: dict[str, dict[str, Any]] = {}
        for shard in range(t.CHANGE_SHARDS):
            sort = None
            if since is not None:
                expr = it.Expr()
                sort = (f"{expr.n(t.CHANGED)} >= {expr.v(since)}", expr)
            for item in self._query(self.tables.jobs, {t.CHANGE_SHARD: str(shard)}, index=t.CHANGES_INDEX,
                                    sort=sort):
                found[item[t.ID]] = item
        return found

    def add_change_keys(self, *, again_for: float = 0.0) -> int:
        """Give the live jobs written before the changes index its keys (tables.py):
        one read of the live index for the jobs without them, one UpdateItem each.
        The job's content and revision stay: no guarded write is disturbed. Returns
        how many it gave keys to. `again_for`: seconds during which each whole read
        of a pass does it again (an upgrade's other functions may still run the
        earlier version for a while, writing jobs without the keys)."""
        if again_for:
            self._keys_until = views.now() + again_for
        self._keys_checked = views.now()
        expr = it.Expr()
        where = (f"attribute_not_exists({expr.n(t.CHANGE_SHARD)})", expr)
        given = 0
        for item in self._query(self.tables.jobs, {t.LIVE: t.LIVE}, index=t.LIVE_INDEX, where=where):
            e = it.Expr()
            try:
                self.call("UpdateItem", TableName=self.tables.jobs, Key=it.dump(it.job_key(item[t.ID])),
                          UpdateExpression=f"SET {e.n(t.CHANGE_SHARD)} = {e.v(it.change_shard(item[t.ID]))}, "
                                           f"{e.n(t.CHANGED)} = {e.v(it.changed_now())}",
                          ConditionExpression=f"attribute_exists({e.n(t.LIVE)}) AND "
                                              f"attribute_not_exists({e.n(t.CHANGE_SHARD)})", **e.kwargs())
                given += 1
            except Conflict:   # it left the live states, or got its keys meanwhile
                continue
        return given

    def with_requests(self) -> List[JobRecord]:
        return [it.job_record(i, history=False) for i in self._live()
                if i[t.STATE] in ACTIVE and i.get("request") is not None and i.get("kill_reason") is None]

    def scheduling_view(self) -> tuple[List[PendingJob], List[RunningJob]]:
        live = self._live()
        # tier first, then submission order
        pending = sorted((i for i in live if i[t.STATE] in PENDING), key=lambda i: (int(i["tier"]), i[t.SEQ]))
        return [it.pending_job(i) for i in pending], [it.running_job(i) for i in live if i[t.STATE] in ACTIVE]

    def runtime_samples(self, limit: int = 500) -> List[tuple[str, float, float]]:
        def read() -> tuple[int, List[tuple[str, float, float]]]:
            expr = it.Expr()
            where = (" AND ".join(f"attribute_exists({expr.n(a)})" for a in ("wall_time", "started_at", "ended_at")),
                     expr)
            found = self._query(self.tables.jobs, {t.STATE: S.SUCCEEDED.value}, index=t.BY_STATE, where=where,
                                forward=False)
            return limit, [(i[t.TEAM], float(i["ended_at"]) - float(i["started_at"]), float(i["wall_time"]))
                           for i in islice(found, max(0, limit))]
        kept = self._samples.get(read)
        if kept[0] != limit:
            self._samples.clear()
            kept = self._samples.get(read)
        return kept[1]

    def next_wakeup(self) -> float | None:
        times = [float(i["not_before"]) for i in self._live()
                 if i[t.STATE] == S.RETRY_WAIT.value and i.get("not_before") is not None]
        return min(times) if times else None

    def due_retries(self, now: float) -> List[JobRecord]:
        return [it.job_record(i, history=False) for i in self._live()
                if i[t.STATE] == S.RETRY_WAIT.value and (i.get("not_before") is None or float(i["not_before"]) <= now)]

    # -- queries ------------------------------------------------------------------------------------
    def _query(self, table: str, key: dict[str, Any], *, index: str | None = None,
               sort: tuple[str, it.Expr] | None = None, where: tuple[str, it.Expr] | None = None,
               forward: bool = True, consistent: bool = False, page: int | None = None) -> Iterator[dict[str, Any]]:
        """Items of one partition (of the table or an index), page by page, lazily.
        `sort` and `where` share the Expr that built them (one placeholder space)."""
        expr = (sort or where or (None, it.Expr()))[1]
        condition = " AND ".join(f"{expr.n(k)} = {expr.v(v)}" for k, v in key.items())
        if sort:
            condition += f" AND {sort[0]}"
        kwargs: dict[str, Any] = {"TableName": table, "KeyConditionExpression": condition,
                                  "ScanIndexForward": forward, **expr.kwargs()}
        if index:
            kwargs["IndexName"] = index
        elif consistent:
            kwargs["ConsistentRead"] = True
        if where:
            kwargs["FilterExpression"] = where[0]
        if page:
            kwargs["Limit"] = page
        while True:
            out = self.call("Query", **kwargs)
            for raw in out.get("Items", []):
                yield it.load(raw)
            if "LastEvaluatedKey" not in out:
                return
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


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


def _refused(error: BackendUnavailable, transact_items: List[dict[str, Any]]) -> tuple[List[str], str] | None:
    """The jobs a transaction was refused for, for their content, and the code;
    None when it failed otherwise. DynamoDB cancels it naming the items (an
    item over 400 KB: ValidationError); a ValidationException names none, so
    it is laid on every job of the transaction (the caller then writes them
    one by one and finds which)."""
    cause = error.__cause__
    if not isinstance(cause, ClientError):
        return None
    code = code_of(cause)
    if code == "ValidationException":
        bad = dict.fromkeys(range(len(transact_items)), code)
    elif code == "TransactionCanceledException":
        bad = {i: c for i, c in enumerate(cancellation_reasons(cause))
               if c not in ("None", CONDITION_FAILED) and c not in TRANSIENT_REASONS}
    else:
        return None
    ids: List[str] = []
    for i in bad:
        request = next(iter(transact_items[i].values())) if i < len(transact_items) else {}
        key = it.load(request.get("Key") or request.get("Item") or {})
        job_id = history.job_of(key) if t.GROUP in key else None   # a ledger item has none
        if job_id is not None and job_id not in ids:
            ids.append(job_id)
    return (ids, ", ".join(sorted(set(bad.values())))) if ids else None


# -- the settings items, as stored: the store writes them, and a deployment writes
# its pools, policy and teams with the same functions (infra/registration.py)
def setting_item(name: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """The settings item `name` in DynamoDB's JSON form (PutItem's Item)."""
    return it.dump({t.PK: t.SETTING, t.SK: name, **attributes})


def inventory_setting(inventory: Inventory) -> tuple[str, dict[str, Any]]:
    return "inventory", {"json": settings_codec.inventory_json(inventory)}


def policy_setting(policy: Policy) -> tuple[str, dict[str, Any]]:
    return "policy", {"json": settings_codec.policy_json(policy)}


def team_setting(team: str, policy: TeamPolicy, members: Iterable[str] = ()) -> tuple[str, dict[str, Any]]:
    """A team's item: its policy and, when it lists any, its members (what
    the api function checks a submission's team against; they are kept here,
    not in the functions' environment, which Lambda limits to 4 KB)."""
    members = builtins.list(members)
    return TEAM_PREFIX + team, {**it.team_attributes(policy), **({MEMBERS: members} if members else {})}
