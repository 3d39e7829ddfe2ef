"""The local store's history: finished jobs read newest first by the
`jobs_by_end` index (ended_at, seq; `jobs_by_owner_end` for one owner's),
running ones by the state index, a page at a time; and the retention's
prune, a small batch per transaction."""

from __future__ import annotations


from ...models.job import TERMINAL, JobRecord, JobState
from ...ports import HistoryQuery
from .. import history_token
from .sqlite_rows import _DB_COLUMNS, _record
from .store_jobs import SqliteJobs

# a history row carries no spec or environments: a page of jobs reads their scheduling columns only
_LIGHT = {"spec_json": "''", "submit_env": "NULL", "extra_env": "'{}'"}
_SELECT_LIGHT = "SELECT " + ", ".join(_LIGHT.get(c, c) for c in _DB_COLUMNS) + " FROM jobs"
# `list` is also a method of the store: annotations below it name the builtin this way
List = list


class SqliteHistory(SqliteJobs):
    def history(self, query: HistoryQuery, after: str | None = None) -> tuple[List[JobRecord], str | None]:
        mark = history_token.decode(after, int)
        limit = max(1, query.limit)
        running: List[JobRecord] = []
        if query.wants(JobState.RUNNING) and (mark is None or mark[0] == history_token.RUNNING):
            running = self._running(query, mark, limit + 1)
            mark = None
        finished = self._finished(query, mark, limit + 1 - len(running)) if len(running) <= limit else []
        jobs = running + finished
        token = None
        if len(jobs) > limit:
            jobs = jobs[:limit]
            last = jobs[-1]
            token = history_token.after(last, last.seq)
        return self._with_history(jobs), token

    def _running(self, query: HistoryQuery, mark, limit: int) -> List[JobRecord]:
        where, params = ["state = 'RUNNING'"], []
        if query.until is not None:
            where.append("COALESCE(started_at, submitted_at) < ?")
            params.append(query.until)
        if mark is not None:
            where.append("(COALESCE(started_at, 0) < ? OR (COALESCE(started_at, 0) = ? AND seq < ?))")
            params += [mark[1], mark[1], mark[2]]
        where, params = self._filters(query, where, params)
        sql = (f"{_SELECT_LIGHT} WHERE {' AND '.join(where)} ORDER BY COALESCE(started_at, 0) DESC, seq DESC "
               f"LIMIT {int(limit)}")
        return [_record(r) for r in self.db.execute(sql, params)]

    def _finished(self, query: HistoryQuery, mark, limit: int) -> List[JobRecord]:
        states = sorted(s.value for s in TERMINAL if query.wants(s))
        if not states:
            return []
        # `+state`: not by the state index, whose rows would all be read and sorted; the end's index is in order
        where = ["ended_at >= ?", f"+state IN ({', '.join('?' for _ in states)})"]
        params: list = [query.since, *states]
        if query.until is not None:
            where.append("ended_at < ?")
            params.append(query.until)
        if mark is not None:
            where.append("(ended_at < ? OR (ended_at = ? AND seq < ?))")
            params += [mark[1], mark[1], mark[2]]
        where, params = self._filters(query, where, params)
        # newest first straight off the index: a page reads its rows and stops
        sql = f"{_SELECT_LIGHT} WHERE {' AND '.join(where)} ORDER BY ended_at DESC, seq DESC LIMIT {int(limit)}"
        return [_record(r) for r in self.db.execute(sql, params)]

    @staticmethod
    def _filters(query: HistoryQuery, where: List[str], params: list) -> tuple[List[str], list]:
        for column, value in (("owner", query.owner), ("team", query.team), ("grp", query.group)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if query.name is not None:
            where.append("name GLOB ?")   # the shell's wildcards, case-sensitive, as fnmatchcase
            params.append(query.name)
        return where, params

    def prune_history(self, before: float, batch: int) -> int:
        terminal = sorted(s.value for s in TERMINAL)
        batch = min(500, max(1, int(batch)))   # 500 ids: within a statement's parameters
        with self._tx():
            ids = [r[0] for r in self.db.execute(
                f"SELECT id FROM jobs WHERE ended_at < ? AND state IN ({', '.join('?' for _ in terminal)}) "
                "ORDER BY ended_at, seq LIMIT ?", (before, *terminal, batch))]   # oldest first, by the index
            if not ids:
                return 0
            marks = ", ".join("?" for _ in ids)
            self.db.execute(f"DELETE FROM history WHERE job_id IN ({marks})", ids)
            self.db.execute(f"DELETE FROM jobs WHERE id IN ({marks})", ids)
        return len(ids)
