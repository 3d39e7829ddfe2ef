"""The DynamoDB store's history: finished jobs from the `ended` index
(tables.py), a Query per UTC day of their end from the window's last day
back to its first, newest first: the index projects what a summary needs,
so a page reads its rows and little more. Running jobs from the by_state
index; the ones between attempts from the pass index, which holds the live
jobs' scheduling attributes alone (about 300 bytes a job: what a pass
reads), the few a page lists then read by key; when asked, the ones not
started yet from by_state, each state's partition read down from where the
last page stopped. Retention is DynamoDB's TTL on the job item
(items.job_item): nothing to prune here."""

from __future__ import annotations

import builtins
import heapq
import time
from collections.abc import Iterator
from dataclasses import replace
from fnmatch import fnmatchcase
from itertools import islice
from typing import Any

from ...models.job import TERMINAL, JobRecord, JobState
from ...ports import BETWEEN_ATTEMPTS, WAITING_STATES, HistoryQuery, has_run
from .. import history_token
from . import items as it
from . import tables as t
from .store_jobs import DynamoDBJobs

List = builtins.list
DAY = 86_400
DAYS_A_CALL = 31    # a Query a day: a long window with few jobs answers in several pages, each within a second
# what a history row reads of a job by its key: what the `ended` index projects for a finished one
_ROW_ATTRIBUTES = (t.GROUP, t.ID, t.ENDED_AT, *t.HISTORY_ATTRIBUTES)


class DynamoDBHistory(DynamoDBJobs):
    def history(self, query: HistoryQuery, after: str | None = None) -> tuple[List[JobRecord], str | None]:
        mark = history_token.decode(after, str)
        limit = max(1, query.limit)
        unfinished: List[JobRecord] = []
        if mark is None or mark[0] == history_token.RUNNING:
            unfinished = self._unfinished(query, mark, limit + 1)
            mark = None
        finished, resume = (self._finished(query, mark, limit + 1 - len(unfinished)) if len(unfinished) <= limit
                            else ([], None))
        jobs = unfinished + finished
        token = None
        if len(jobs) <= limit and resume is not None:   # the days one call reads ran out: the next page goes on
            token = history_token.encode(history_token.ENDED, resume, "")
        elif len(jobs) > limit:
            jobs = jobs[:limit]
            last = jobs[-1]
            token = history_token.after(last, last.id)
        return self._whole_histories(jobs), token

    def _unfinished(self, query: HistoryQuery, mark, limit: int) -> List[JobRecord]:
        """At most `limit` jobs not finished, latest start first, ties by seq (the order of
        submission; 0 for a job not started yet): the running ones (whole items, by_state), those
        between attempts (light records from the pass index; the few on the page then read by key)
        and, with `waiting`, those not started yet (by_state, each state's partition read down
        from the mark). Past the jobs that have started, a page reads the last alone."""
        at = None if mark is None else (mark[1], self._seq_of(mark[2]))
        found = {j.id: j for j in self._running(query, at)[:limit]} if query.wants(JobState.RUNNING) else {}
        between = {j.id: j for j in self._between(query, at)} if at is None or at[0] > 0 else {}
        for job in between.values():
            found.setdefault(job.id, job)   # one requeued between the two reads: listed once
        if query.waiting:
            for job in self._not_started(query, at, limit):
                found.setdefault(job.id, job)
        jobs = sorted(found.values(), key=_start_key, reverse=True)[:limit]
        light = [j.id for j in jobs if j.id in between]
        read = {item[t.ID]: _record(item) for item in self._by_key(light, **_projection())} if light else {}
        out = []
        for job in jobs:
            if job.id in between:
                fresh = read.get(job.id)
                if fresh is None or fresh.state.terminal or not self._holds(query, fresh):
                    continue   # gone, or ended since the index was read: the finished ones list it
                job = fresh
            out.append(job)
        return out

    def _holds(self, query: HistoryQuery, job: JobRecord) -> bool:
        """query.holds, where a job not finished that started its last attempt past the window's end
        is read with its whole history (an earlier attempt may have run in the window), if its
        record came without it or with its older transitions moved to history items."""
        if query.holds(job):
            return True
        if not _may_have_run_before(job, query.until) or (job.history and not _cut(job)):
            return False
        item = self._get_job(job.id)
        return item is not None and query.holds(self._whole(item))

    def _seq_of(self, job_id: str) -> int:
        """The seq of the job a token stopped at (the token names it by id); -1 for one gone."""
        found = self.call("GetItem", TableName=self.tables.jobs, Key=it.dump(it.job_key(job_id)),
                          ProjectionExpression="#s", ExpressionAttributeNames={"#s": t.SEQ}).get("Item")
        return int(it.load(found)[t.SEQ]) if found else -1

    def _running(self, query: HistoryQuery, at) -> List[JobRecord]:
        """The running jobs (one by_state partition: a few hundred at most), latest start first."""
        jobs = [_record(i) for i in self._query(self.tables.jobs, {t.STATE: JobState.RUNNING.value},
                                                index=t.BY_STATE)]
        jobs = [j for j in jobs if _matches(j, query) and self._holds(query, j)]
        jobs.sort(key=_start_key, reverse=True)
        return jobs if at is None else [j for j in jobs if _start_key(j) < at]

    def _between(self, query: HistoryQuery, at) -> List[JobRecord]:
        """The jobs between attempts the query holds, as light records: from the pass index, a
        Query per shard (about 300 bytes a live job), the filters applied by DynamoDB."""
        states = [s for s in sorted(BETWEEN_ATTEMPTS) if query.wants(s)]
        if not states:
            return []
        expr = it.Expr()
        where = [f"{expr.n(t.STATE)} IN ({', '.join(expr.v(s.value) for s in states)})",
                 f"attribute_exists({expr.n('started_at')})", *_filters(query, expr)]
        jobs: List[JobRecord] = []
        for shard in range(t.CHANGE_SHARDS):
            jobs += (it.job_record(i, history=False) for i in self._query(
                self.tables.jobs, {t.CHANGE_SHARD: str(shard)}, index=t.PASS_INDEX, where=(" AND ".join(where), expr)))
        jobs = [j for j in jobs if _matches(j, query) and (at is None or _start_key(j) < at)]
        # a light record's start is its last attempt's: one that may have run earlier in the window is
        # read by key with its transitions (few: requeued jobs whose last start is past a past window)
        maybe = [j.id for j in jobs if not query.holds(j) and _may_have_run_before(j, query.until)]
        earlier = {item[t.ID] for item in self._by_key(maybe, **_projection())
                   if self._holds(query, _record(item))} if maybe else set()
        return [j for j in jobs if query.holds(j) or j.id in earlier]

    def _not_started(self, query: HistoryQuery, at, limit: int) -> Iterator[JobRecord]:
        """At most `limit` jobs not started yet, latest seq first: each waiting state's by_state
        partition read down from the mark, merged, and no further than the page needs."""
        reads = []
        for state in (s for s in sorted(WAITING_STATES) if query.wants(s)):
            expr = it.Expr()
            sort = (f"{expr.n(t.SEQ)} < {expr.v(at[1])}", expr) if at is not None and at[0] <= 0 else None
            terms = [f"attribute_not_exists({expr.n('started_at')})", *_filters(query, expr)]
            if query.until is not None:
                terms.append(f"{expr.n('submitted_at')} < {expr.v(query.until)}")
            where = " AND ".join(terms)
            reads.append(self._query(self.tables.jobs, {t.STATE: state.value}, index=t.BY_STATE, sort=sort,
                                     where=(where, expr), forward=False, page=min(1000, limit)))
        jobs = (_record(i) for i in heapq.merge(*reads, key=lambda i: int(i[t.SEQ]), reverse=True))
        return islice((j for j in jobs if query.holds(j) and _matches(j, query)), limit)

    def _finished(self, query: HistoryQuery, mark, limit: int) -> tuple[List[JobRecord], float | None]:
        """At most `limit` finished jobs, latest end first (ties by id): the
        days' partitions newest first, each read down from the window's end
        (or the mark) until past the limit, and to the end of a tie. At most
        DAYS_A_CALL days a call: the end of the days it read when the window
        goes on past them (None when it read to the window's start)."""
        states = [s.value for s in TERMINAL if query.wants(s)]
        if not states:
            return [], None
        until = query.until if query.until is not None else time.time() + DAY   # clocks differ a little
        if mark is not None:   # a mark without a job ("") resumes below its time; one with a job, at it
            until = min(until, mark[1] if mark[2] == "" else mark[1] + 1e-6)
            mark = None if mark[2] == "" else mark
        rows: List[tuple[float, str, dict[str, Any]]] = []
        day = _day_start(until) if until > _day_start(until) else _day_start(until) - DAY
        first = day
        while day + DAY > query.since:
            if first - day >= DAYS_A_CALL * DAY:
                rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
                return [_record(item) for *_, item in rows[:limit]], day + DAY
            for item in self._day(day, query, until, states):
                at = float(item[t.ENDED_AT])
                if len(rows) > limit and at < rows[-1][0]:
                    break
                key = (at, item[t.ID])
                if mark is not None and key >= (mark[1], mark[2]):
                    continue
                if query.name is not None and not fnmatchcase(str(item.get("name", "")), query.name):
                    continue
                rows.append((at, item[t.ID], item))
            if len(rows) > limit:
                break
            day -= DAY
        rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
        return [_record(item) for *_, item in rows[:limit]], None

    def _day(self, day: float, query: HistoryQuery, until: float, states: List[str]):
        """One day's partition of the index, newest first, within [since, until) and the filters."""
        expr = it.Expr()
        low, high = max(query.since, day), until
        if low >= high:   # a window that starts after its end (since in the future): DynamoDB refuses the BETWEEN
            return
        sort = (f"{expr.n(t.ENDED_AT)} BETWEEN {expr.v(low)} AND {expr.v(high)}", expr)
        where = [f"{expr.n(t.STATE)} IN ({', '.join(expr.v(s) for s in states)})"]
        for name, value in (("owner", query.owner), (t.TEAM, query.team), (t.GROUP, query.group)):
            if value is not None:
                where.append(f"{expr.n(name)} = {expr.v(value)}")
        for item in self._query(self.tables.jobs, {t.END_DAY: it.end_day(day)}, index=t.ENDED_INDEX, sort=sort,
                                where=(" AND ".join(where), expr), forward=False, page=min(1000, query.limit + 1)):
            if float(item[t.ENDED_AT]) < until:   # BETWEEN includes its high end; the window's is open
                yield item

    def _whole_histories(self, jobs: List[JobRecord]) -> List[JobRecord]:
        """A job whose older transitions moved to history items (past history.MOST: its item's
        history starts mid-way) read whole, for its first start."""
        out = []
        for job in jobs:
            if _cut(job):
                item = self._get_job(job.id)
                if item is not None:
                    whole = self._whole(item)
                    job = replace(whole, spec_json="", submit_env=None, extra_env={})
            out.append(job)
        return out

    def _finished_since(self, since: float, limit: int) -> List[JobRecord]:
        """recent_events' finished jobs (store_live.py): they have left the pass index for this one."""
        return self.history(HistoryQuery(since=since, states=frozenset(TERMINAL), limit=max(1, limit)))[0]

    def prune_history(self, before: float, batch: int, *, keep: float | None = None) -> int:
        return 0   # DynamoDB's TTL deletes a finished job's item (items.job_item sets its time)


def _day_start(at: float) -> float:
    return float(int(at) // DAY * DAY)


def _cut(job: JobRecord) -> bool:
    """Whether the record's transitions begin mid-way: its older ones moved to history items."""
    return bool(job.history) and job.history[0].state != JobState.SUBMITTED


def _may_have_run_before(job: JobRecord, until: float | None) -> bool:
    """Whether a job not finished whose last start is not before `until` may have run an earlier
    attempt before it: it has launched more than once."""
    return until is not None and not job.state.terminal and job.attempts > 1 and has_run(job)


def _start_key(job: JobRecord) -> tuple[float, int]:
    """An unfinished job's place in a history, latest first: its attempt's start (0 before any), then
    its seq (the order of submission)."""
    return job.started_at or 0.0, job.seq


def _filters(query: HistoryQuery, expr: it.Expr) -> List[str]:
    """The query's owner, team and group as a filter's terms."""
    return [f"{expr.n(name)} = {expr.v(value)}" for name, value in
            (("owner", query.owner), (t.TEAM, query.team), (t.GROUP, query.group)) if value is not None]


def _projection() -> dict[str, Any]:
    names = {f"#a{n}": name for n, name in enumerate(_ROW_ATTRIBUTES)}
    return {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": names}


def _matches(job: JobRecord, query: HistoryQuery) -> bool:
    return ((query.owner is None or job.owner == query.owner) and (query.team is None or job.team == query.team)
            and (query.group is None or job.group == query.group)
            and (query.name is None or fnmatchcase(job.name, query.name)))


def _record(item: dict[str, Any]) -> JobRecord:
    """A job as the index projects it: no spec or environments."""
    return replace(it.job_record(item), spec_json="", submit_env=None, extra_env={})

