"""What the control loop reads of the DynamoDB queue: the live jobs through the
sharded changes index, kept by the container between passes and brought up
to date by what changed or what wake-ups named (views.QueueView)."""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable
from itertools import islice
from typing import Any

from ...models.errors import Conflict
from ...models.job import PENDING as NOT_STARTED
from ...models.job import JobRecord, JobState
from ...ports.store import JobEvent, PendingChanges, QueueListing
from ...scheduling.dependencies import delay_anchor
from ...scheduling.snapshot import PendingJob, RunningJob
from . import items as it
from . import parents
from . import tables as t
from . import views
from .admissions import ADMISSION
from .listing import LiveListing
from .store_base import _ID_COUNTER, _JOB_ID, ACTIVE, PREFETCH, DynamoDBBase, List, S


_RETRY_WAIT = S.RETRY_WAIT.value   # read per live job: an enum member's value is a property
_RETRYING = frozenset({_RETRY_WAIT})
# the states a listing of the queue shows (QueueListing), a by-state index partition each
_LISTED = sorted(s.value for s in NOT_STARTED | {S.STARTING, S.RUNNING})


def _seq(item: dict[str, Any]) -> Any:
    return item[t.SEQ]


class DynamoDBLive(DynamoDBBase):
    """The live jobs (_live) and the reads the control loop makes of them."""

    # -- jobs: what the supervisor and the scheduler ask -----------------------------------------
    def _live(self) -> List[dict[str, Any]]:
        """The live jobs as the changes index projects them, in seq order: a
        read of every shard (outside a pass), or the pass's view (once per pass)."""
        if self._pass is None:
            return sorted(self._read_changes(None).values(), key=_seq)
        if self._pass.live is None:
            self._pass.live = self._refresh()
        if self._pass.ordered is None:   # sorted once a pass, and again after our own writes (_seen_written)
            self._pass.ordered = sorted(self._pass.live.values(), key=_seq)
        return self._pass.ordered

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
            view.whole(self._read_changes(None))
            view.watermark, view.resynced = began, views.now()
        elif named is None:
            for job_id, entry in self._read_changes(view.watermark - views.CHANGE_MARGIN).items():
                if int(entry.get(t.REVISION, 0)) >= int(view.jobs.get(job_id, {}).get(t.REVISION, -1)):
                    view.put(job_id, entry)   # an index entry older than our own write of it is not taken
            view.watermark = began
        if named:
            carried: dict[str, dict[str, Any] | None] = {i: item for i, item in named.items() if item is not None}
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
                if item is not None and seen is not None and \
                        int(item.get(t.REVISION, 0)) < int(seen.get(t.REVISION, 0)):
                    continue   # a wake-up delivered late: the view has a later write of the job
                if item is not None and t.LIVE in item:
                    view.put(job_id, it.projected(item))
                else:
                    view.drop(job_id)
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
        """The pass index (the changes index, projecting more: tables.py), every
        shard: all of it, or what was written at or after `since`."""
        found: dict[str, dict[str, Any]] = {}
        for shard in range(t.CHANGE_SHARDS):
            sort = None
            if since is not None:
                expr = it.Expr()
                sort = (f"{expr.n(t.CHANGED)} >= {expr.v(since)}", expr)
            for item in self._query(self.tables.jobs, {t.CHANGE_SHARD: str(shard)}, index=t.PASS_INDEX,
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

    def recent_events(self, *, since: float, limit: int) -> List[JobEvent]:
        """The live jobs written last (the pass index read newest first,
        `limit` entries a shard, then their items for the transitions each
        keeps) and the jobs finished since `since` (which have left the pass
        index), their transitions merged newest first."""
        if limit <= 0:
            return []
        latest: list[dict[str, Any]] = []
        for shard in range(t.CHANGE_SHARDS):
            latest += islice(self._query(self.tables.jobs, {t.CHANGE_SHARD: str(shard)}, index=t.PASS_INDEX,
                                         forward=False, page=limit), limit)
        named = [i[t.ID] for i in heapq.nlargest(limit, latest, key=lambda i: i[t.CHANGED])]
        jobs = [it.job_record(item) for item in self._read_jobs(named).values()]
        jobs += self._finished_since(since, limit)
        events: list[tuple[float, int, JobEvent]] = []
        for job in {j.id: j for j in jobs}.values():
            events += [(step.at, n, JobEvent(job.id, job.name, step.state, step.at, step.reason))
                       for n, step in enumerate(job.history) if step.at >= since]
        events.sort(key=lambda e: e[:2], reverse=True)
        return [event for *_, event in events[:limit]]

    def _finished_since(self, since: float, limit: int) -> List[JobRecord]:
        """At most `limit` jobs finished at or after `since`, with their transitions
        (the history's index by end time answers them where the store has it)."""
        return []

    def with_requests(self) -> List[JobRecord]:
        return [it.job_record(i, history=False) for i in self.live_items(ACTIVE)
                if i.get("request") is not None and i.get("kill_reason") is None]

    def live_items(self, states: frozenset[str]) -> List[dict[str, Any]]:
        """The live items in these states, in seq order: in a pass, those of the running jobs or
        those waiting to retry from the kept listing (a few, however long the queue), else a walk."""
        if self._pass is not None:
            if states <= ACTIVE:
                self._brought_up()
                return [i for i in self._listing.running_items() if i[t.STATE] in states]
            if states == {_RETRY_WAIT}:
                self._brought_up()
                return self._listing.retrying_items()
        return [i for i in self._live() if i[t.STATE] in states]

    def scheduling_view(self) -> tuple[List[PendingJob], List[RunningJob]]:
        """The pending jobs, tier first and then in submission order, and the running ones in
        submission order. In a pass, the records the container kept from the pass before, brought
        up to date by the jobs that changed since (listing.py): at 20,000 queued jobs, walking every
        live item was most of a warm pass."""
        if self._pass is None:
            listing = LiveListing()
            listing.brought_up(self._read_changes(None), None)
            return listing.view()
        self._brought_up()
        return self._listing.view()

    def scheduling_feed(self, mark: object | None) -> tuple[List[PendingJob], List[RunningJob], object,
                                                             PendingChanges | None]:
        """scheduling_view() with the pending jobs' changes since `mark` (ports.PendingFeed); outside
        a pass, read whole, they are not known."""
        pending, running = self.scheduling_view()
        if self._pass is None:
            return pending, running, None, None
        mark, changes = self._listing.feed(mark)
        return pending, running, mark, changes

    def queue_listing(self) -> QueueListing:
        """The whole items of the listed states (a Query of the by-state index each), and the
        scheduling view made from those very items, not read apart from the pass index: with no
        read across queries, the view and the rows then agree. A job written between two of the
        Queries (it started, ended, went back to the queue) may come back from both: its later
        write, by revision, is the one listed."""
        latest: dict[str, dict[str, Any]] = {}
        for state in _LISTED:
            for item in self._query(self.tables.jobs, {t.STATE: state}, index=t.BY_STATE):
                seen = latest.get(item[t.ID])
                if seen is None or int(item.get(t.REVISION, 0)) > int(seen.get(t.REVISION, 0)):
                    latest[item[t.ID]] = item
        items = sorted(latest.values(), key=_seq)
        return QueueListing(
            [it.pending_job(i) for i in items if i[t.STATE] in it.PENDING],
            [it.running_job(i) for i in items if i[t.STATE] in ACTIVE],
            # a launch's wait is timed from its claim, among the transitions its item holds
            [it.job_record(i, history=i[t.STATE] == S.STARTING.value) for i in items])

    def _brought_up(self) -> None:
        if self._pass is not None and self._pass.live is None:
            self._pass.live = self._refresh()
        self._listing.brought_up(self._queue.jobs, self._queue.taken_dirty())

    def states_of(self, refs: Iterable[str]) -> dict[str, dict[JobState, int]]:
        """Strongly consistent (a pass woken by a settlement sees that end), ids and states
        only: a job or a task read by its key, 100 to a BatchGetItem; an array's whole group, which
        has no item of its own, by one Query of its tasks (as is a name no key found). A job or
        task seen ended is not read again (an end is final). A Query each, a queue whose jobs wait
        on 1,000 others made 1,000 calls a pass; now 10. What they name is kept past the retention
        while they wait: an ended job's TTL is pushed on where half of it is left (parents.py). A name
        no item answers in a group handed out before any intake message still kept is gone: `{}`."""
        out: dict[str, dict[JobState, int]] = {}
        unread: list[str] = []
        for ref in dict.fromkeys(refs):
            if not _JOB_ID.match(ref):
                continue
            ended = self._ended.get(ref)
            if ended is not None:
                out[ref] = {ended: 1}
            else:
                unread.append(ref)
        read = {item[t.ID]: item for item in self._by_key(unread, ProjectionExpression="#i, #s, #e",
                                                          ExpressionAttributeNames={"#i": t.ID, "#s": t.STATE,
                                                                                    "#e": t.JOB_EXPIRES})}
        by_key = {job_id: JobState(item[t.STATE]) for job_id, item in read.items()}
        groups: dict[str, list[str]] = {}
        for ref in unread:
            state = by_key.get(ref)
            if state is None:   # an array's group, or a job not written yet
                groups.setdefault(ref.split("_")[0], []).append(ref)
                continue
            out[ref] = {state: 1}
            if state.terminal:
                self._ended[ref] = state
                if t.JOB_EXPIRES in read[ref]:
                    self._expiry[ref] = int(read[ref][t.JOB_EXPIRES])
        for group, named in groups.items():
            states: dict[str, JobState] = {}
            kwargs: dict[str, Any] = {
                "TableName": self.tables.jobs, "KeyConditionExpression": "#g = :g",
                "ProjectionExpression": "#i, #s, #e",
                "ExpressionAttributeNames": {"#g": t.GROUP, "#i": t.ID, "#s": t.STATE, "#e": t.JOB_EXPIRES},
                "ExpressionAttributeValues": it.dump({":g": group}), "ConsistentRead": True}
            while True:
                page = self.call("Query", **kwargs)
                for raw in page.get("Items", []):
                    item = it.load(raw)
                    states[item[t.ID]] = JobState(item[t.STATE])
                    if t.JOB_EXPIRES in item and states[item[t.ID]].terminal:
                        self._expiry[item[t.ID]] = int(item[t.JOB_EXPIRES])
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            for ref in named:
                counts: dict[JobState, int] = {}
                for job_id, state in states.items():
                    if ref == job_id or (ref == group and "_" in job_id):
                        counts[state] = counts.get(state, 0) + 1
                if ref == group and counts:
                    unwritten = self._unwritten_tasks(group)
                    if unwritten:   # accepted, still being admitted a chunk at a time: they have not ended
                        counts[JobState.SUBMITTED] = unwritten
                if counts:
                    out[ref] = counts
                if ref in states and states[ref].terminal:
                    self._ended[ref] = states[ref]
        self._keep_named([ref for ref in dict.fromkeys(refs) if _JOB_ID.match(ref)], out)
        return out

    def start_times(self, refs: Iterable[str]) -> dict[str, tuple[float, bool]]:
        """Strongly consistent, as states_of: a job or a task by its key, 100 to a BatchGetItem; an
        array's whole group by one Query of its tasks. Read only for an `after` with a delay whose
        jobs states_of found started, so few and seldom."""
        asked = [ref for ref in dict.fromkeys(refs) if _JOB_ID.match(ref)]
        names = {"#i": t.ID, "#s": t.STATE, "#b": "started_at", "#e": "ended_at"}
        found: dict[str, list[tuple[float | None, float | None, str]]] = {}

        def add(ref: str, item: dict[str, Any]) -> None:
            started, ended = item.get("started_at"), item.get("ended_at")
            found.setdefault(ref, []).append((None if started is None else float(started),
                                              None if ended is None else float(ended), item[t.STATE]))

        for item in self._by_key(asked, ProjectionExpression="#i, #s, #b, #e", ExpressionAttributeNames=names):
            add(item[t.ID], item)
        for group in dict.fromkeys(ref for ref in asked if ref not in found and "_" not in ref):
            kwargs: dict[str, Any] = {
                "TableName": self.tables.jobs, "KeyConditionExpression": "#g = :g",
                "ProjectionExpression": "#i, #s, #b, #e", "ExpressionAttributeNames": {"#g": t.GROUP, **names},
                "ExpressionAttributeValues": it.dump({":g": group}), "ConsistentRead": True}
            while True:
                page = self.call("Query", **kwargs)
                for raw in page.get("Items", []):
                    item = it.load(raw)
                    if "_" in item[t.ID]:
                        add(group, item)
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            if group in found and self._unwritten_tasks(group):
                del found[group]   # still being admitted a chunk at a time: those have not started
        return {ref: anchor for ref, jobs in found.items() if (anchor := delay_anchor(jobs)) is not None}

    def _keep_named(self, asked: list[str], out: dict[str, dict[JobState, int]]) -> None:
        """Push on the TTL of the ended jobs named (`asked`) where half of it is left, and name `{}`
        what the TTL deleted (parents.py)."""
        now = time.time()
        if self.keep_history is not None:
            wanted, groups = set(asked), {ref for ref in asked if "_" not in ref}
            named = [j for j in self._expiry if j in wanted or j.split("_")[0] in groups]
            for job_id in named:
                if parents.due(self._expiry[job_id], now, self.keep_history):
                    self._expiry[job_id] = parents.expiry(now, self.keep_history)
                    parents.push(self.call, self.tables.jobs, job_id, self._expiry[job_id])
        missing = [ref for ref in asked if ref not in out]
        if missing and self.keep_history is not None:   # without a TTL nothing is deleted
            counter = self.call("GetItem", TableName=self.tables.settings, Key=it.dump(_ID_COUNTER),
                                ConsistentRead=True)
            below = parents.gone_below(it.load(counter.get("Item", {})), now)
            for ref in missing:
                if int(ref.split("_")[0]) <= below:
                    out[ref] = {}

    def _unwritten_tasks(self, group: str) -> int:
        """How many of an array's tasks its admission in chunks has still to write
        (admissions.py's progress item; none once it is done, which is final)."""
        if group in self._admitted:
            return 0
        out = self.call("GetItem", TableName=self.tables.settings, ConsistentRead=True,
                        Key=it.dump({t.PK: ADMISSION, t.SK: group}), ProjectionExpression="#t, #n",
                        ExpressionAttributeNames={"#t": "total", "#n": "next"})
        item = it.load(out["Item"]) if "Item" in out else None
        left = int(item["total"]) - int(item["next"]) if item else 0
        if left <= 0:
            self._admitted.add(group)
        return max(0, left)

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
        times = [float(i["not_before"]) for i in self.live_items(_RETRYING) if i.get("not_before") is not None]
        return min(times) if times else None

    def due_retries(self, now: float) -> List[JobRecord]:
        return [it.job_record(i, history=False) for i in self.live_items(_RETRYING)
                if i.get("not_before") is None or float(i["not_before"]) <= now]
