"""The DynamoDB store's ground floor: the client and its retries, the
container's memory of what it read and wrote (views.py), a scheduling pass's
reads (pass_reads), and the calls every part makes: Query, BatchGetItem of
jobs, TransactWriteItems. The parts by concern build on it."""

from __future__ import annotations

import builtins
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError

from ...models.errors import BackendUnavailable, Conflict
from ...models.job import JobState
from . import history, views
from . import items as it
from . import tables as t
from .errors import CONDITION_FAILED, TRANSIENT_REASONS, Retrying, cancellation_reasons, code_of
from .listing import LiveListing

log = logging.getLogger(__name__)
S = JobState
PENDING, ACTIVE = it.PENDING, it.ACTIVE
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


class DynamoDBBase:
    """`settings_ttl` and `samples_ttl`: seconds the settings (inventory,
    policy, teams) and the runtime samples are kept once read (views.py says
    why that is harmless; the Lambda functions use SETTINGS_TTL and
    SAMPLES_TTL). 0, the default, reads them on every call. `keep_history`:
    seconds DynamoDB keeps a finished job after its end (its TTL attribute)."""

    def __init__(self, client: Any, tables: t.TableNames = t.TableNames(), *, attempts: int = 5,
                 base_delay: float = 0.05, max_delay: float = 2.0, conflict_retries: int = 5,
                 sleep: Callable[[float], None] = time.sleep, settings_ttl: float = 0.0, samples_ttl: float = 0.0,
                 keep_history: float | None = None):
        self.client = client
        self.keep_history = keep_history   # seconds a finished job's item lives after its end (TTL); None: for good
        self.tables = tables
        self.call = Retrying(client, attempts=attempts, base_delay=base_delay, max_delay=max_delay, sleep=sleep)
        self.conflict_retries = conflict_retries
        self._settings: views.Expiring[dict[str, dict[str, Any]]] = views.Expiring(settings_ttl)
        self._samples: views.Expiring[tuple[int, List[tuple[str, float, float]]]] = views.Expiring(samples_ttl)
        self._known = views.KnownItems(KNOWN_FOR)
        self._pass: views.PassView | None = None
        self._queue = views.QueueView()   # the live jobs between passes (the dispatch function's container)
        self._listing = LiveListing()     # their scheduling records, brought up to the view in a pass
        self._named: dict[str, dict[str, Any] | None] | None = None
        self._keys_until: float | None = None   # add_change_keys again at whole reads until then
        self._keys_checked = 0.0
        self._ended: dict[str, JobState] = {}   # jobs and tasks states_of saw ended: an end is final
        self._admitted: set[str] = set()        # arrays states_of saw wholly written
        self._expiry: dict[str, int] = {}       # the TTL of the ended jobs states_of saw (parents.py)
        self._marked = ""                       # the day reserve_ids last marked the id counter (parents.py)

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

    def _read_jobs(self, job_ids: List[str]) -> dict[str, dict[str, Any]]:
        """Strongly consistent reads of the jobs (BatchGetItem, 100 keys a call)."""
        found: dict[str, dict[str, Any]] = {}
        for item in self._by_key(job_ids):
            found[item[t.ID]] = item
            self._known.remember(item[t.ID], item)
        return found

    def _by_key(self, job_ids: Iterable[str], **projection: Any) -> Iterator[dict[str, Any]]:
        """The jobs' items read by key, strongly consistent, 100 keys a BatchGetItem; with
        `projection` (ProjectionExpression and its names) only those attributes, which nothing
        may keep as the job's item. Keys left unprocessed (throttling) are asked again, backing off."""
        valid = [j for j in job_ids if _JOB_ID.match(j)]
        for start in range(0, len(valid), 100):
            request = {self.tables.jobs: {"Keys": [it.dump(it.job_key(j)) for j in valid[start:start + 100]],
                                          "ConsistentRead": True, **projection}}
            retry = 0
            while request:
                out = self.call("BatchGetItem", RequestItems=request)
                for raw in out["Responses"].get(self.tables.jobs, []):
                    yield it.load(raw)
                request = out.get("UnprocessedKeys") or {}
                if request:   # returned under throttling: back off as for a refused call
                    retry += 1
                    if retry >= self.call.attempts:
                        raise BackendUnavailable("DynamoDB kept leaving jobs unread (throttling); try again later")
                    self.call.sleep(self.call.delay(retry - 1))

    def _get_job(self, job_id: str) -> dict[str, Any] | None:
        if not _JOB_ID.match(job_id):
            return None
        out = self.call("GetItem", TableName=self.tables.jobs, Key=it.dump(it.job_key(job_id)), ConsistentRead=True)
        if "Item" not in out:
            return None
        item = it.load(out["Item"])
        self._known.remember(job_id, item)
        return item

    def _recall(self, job_id: str) -> dict[str, Any] | None:
        # whole items only: a pass's projected ones lack what a write rewrites (history, sizes)
        return self._known.recall(job_id)

    def _seen_written(self, item: dict[str, Any]) -> None:
        """A job item this store has just written: known as stored, and in or out of the pass's live jobs."""
        job_id = item[t.ID]
        self._known.remember(job_id, item)
        if self._pass is not None and self._pass.live is not None:
            self._pass.ordered = None
            if t.LIVE in item:
                self._queue.put(job_id, it.projected(item))
            else:
                self._queue.drop(job_id)

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
