"""The local store's guarded changes: the shared algorithm (adapters/guarded.py)
over one IMMEDIATE transaction, whose reads and UPDATEs (each guarded on the
state the change expects) cannot lose a race; and apply_each's bulk form for
many jobs at once."""

from __future__ import annotations

from typing import Any

from ...models.errors import Conflict
from ...models.job import JobRecord, JobState, check_transition
from ...ports import Change
from ..guarded import GuardedChanges, Step
from .sqlite_rows import _UPDATE, INSERT_TEXT, SHARED, SharedTexts, _encoded, _record, _row
from .store_jobs import SqliteJobs


class SqliteChanges(SqliteJobs, GuardedChanges):
    """apply() reads and writes in one transaction: nothing to retry."""

    def record_start(self, job_id: str, attempt: int, token: str, started_at: float,
                     reason: str) -> JobRecord | None:
        # a local read costs nothing: check the attempt, then the guarded apply, in one transaction
        with self._tx():
            row = self.db.execute("SELECT state, attempts, proc_token FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or tuple(row) != (JobState.STARTING.value, attempt, token):
                return None
            [job] = self.apply([Change(job_id, JobState.STARTING, JobState.RUNNING, reason, started_at,
                                       {"started_at": started_at, "exit_code": None, "signal": None})])
        return job

    # -- the guarded-change primitives (adapters/guarded.py) ---------------------------
    def _atomically(self) -> Any:
        return self._tx()

    def _read(self, job_ids: list[str], remembered: bool) -> tuple[dict[str, JobRecord], Any]:
        # the caller gets the whole record back, history included, as get() would return it
        jobs = self._with_history([_record(r) for r in self._rows_of(job_ids)])
        return {j.id: j for j in jobs}, None

    def _write(self, steps: list[Step], read: Any, prepared: Any) -> set[str]:
        half_life: float | None = None
        for step in steps:
            change, job = step.change, step.before
            if change.to is not None:
                self.db.execute("INSERT INTO history VALUES (?, ?, ?, ?, ?)",
                                (job.id, len(job.history), change.to.value, change.at, change.reason))
            cursor = self.db.execute(_UPDATE, _row(step.after, None) + (self._stamp(), job.id, change.expect.value))
            if cursor.rowcount != 1:
                raise Conflict(f"job {job.id} changed while being updated")
            if set(change.fields or ()) & set(SHARED):   # the spec or environment: its text kept, then the key
                shared = SharedTexts()
                columns = {c: v for c, v in _encoded(change, shared).items() if c in SHARED}
                self.db.executemany(INSERT_TEXT, shared.bodies.items())
                self.db.execute(f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?",
                                (*columns.values(), job.id))
            half_life = self._charge(job.team, change.at, change.cost, change.usage, half_life)
        return {step.change.job_id for step in steps}

    def apply_each(self, changes: list[Change]) -> list[bool]:
        """One transaction: the jobs' states read at once, then the changes that
        still hold written with one statement per kind of change (each UPDATE
        still guarded on the state), their history rows likewise. Nothing is read
        back: a big array's cancel writes 100,000 jobs in a few seconds."""
        if len({c.job_id for c in changes}) != len(changes):
            raise ValueError("apply_each takes one change per job")
        applied = [False] * len(changes)
        half_life: float | None = None
        with self._tx():
            found = {job_id: (state, team) for job_id, state, team in
                     self._rows_of([c.job_id for c in changes], "id, state, team")}
            # the changes guarded on what their caller read too (Change.unchanged): those jobs whole
            read = {j.id: j for j in map(_record, self._rows_of([c.job_id for c in changes if c.unchanged]))}
            kinds: dict[tuple[str, ...], list[tuple]] = {}
            stamp = self._stamp()
            shared = SharedTexts()     # the changes it saw stay alive in `changes` meanwhile
            for i, change in enumerate(changes):
                if found.get(change.job_id, (None,))[0] != change.expect.value:
                    continue
                if change.unchanged and not change.holds_for(read[change.job_id]):
                    continue
                if change.to is not None:
                    check_transition(change.expect, change.to)
                columns = _encoded(change, shared)
                kinds.setdefault(tuple(columns), []).append((*columns.values(), stamp, change.job_id,
                                                             change.expect.value))
                applied[i] = True
            self.db.executemany(INSERT_TEXT, shared.bodies.items())
            for names, rows in kinds.items():
                cursor = self.db.executemany(f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in names)}, rev = ? "
                                             "WHERE id = ? AND state = ?", rows)
                if cursor.rowcount != len(rows):   # cannot happen inside the transaction; never write half
                    raise Conflict("jobs changed while being updated")
            done = [c for c, ok in zip(changes, applied) if ok]
            self.db.executemany("INSERT INTO history SELECT ?, COALESCE(MAX(n) + 1, 0), ?, ?, ? FROM history "
                                "WHERE job_id = ?", [(c.job_id, c.to.value, c.at, c.reason, c.job_id)
                                                     for c in done if c.to is not None])
            for change in (c for c in done if c.cost or c.usage):
                half_life = self._charge(found[change.job_id][1], change.at, change.cost, change.usage, half_life)
        return applied
