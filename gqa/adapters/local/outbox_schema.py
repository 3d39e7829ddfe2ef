"""The local queue's outbox of notices: its table and the trigger that fills
it, created when the outbox is first opened and brought up to date with the
queue's schema (sqlite_db)."""

from __future__ import annotations

import sqlite3

from ...models.notices import EVENT_OF_STATE

# The trigger counts the attempt from the job's history (its launches so far), not off the jobs
# row, which a guarded change updates after its history row and a bulk one before. A job asks for
# notices when its spec's notify is an object (`"notify":{` cannot occur inside a JSON string, where
# quotes are escaped): a substring test, not a JSON parse, on every move of every job, of the spec
# its row holds or keeps in `texts` (sqlite_rows.SHARED).
OUTBOX_SCHEMA = """
CREATE TABLE IF NOT EXISTS notices (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, job_id TEXT, state TEXT, at REAL NOT NULL,
    reason TEXT NOT NULL DEFAULT '', attempt INTEGER NOT NULL DEFAULT 0,
    kind TEXT NOT NULL, subject TEXT, message TEXT, recipient TEXT, team TEXT,
    tries INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL DEFAULT 0, error TEXT,
    done_at REAL, outcome TEXT
);
CREATE INDEX IF NOT EXISTS notices_due ON notices(next_at) WHERE done_at IS NULL;
CREATE TRIGGER IF NOT EXISTS notices_of_moves AFTER INSERT ON history
WHEN NEW.state IN (TOLD_STATES)
BEGIN
    INSERT OR IGNORE INTO notices (key, job_id, state, at, reason, attempt, kind)
    SELECT NEW.job_id || '.' || (SELECT COUNT(*) FROM history WHERE job_id = NEW.job_id AND state = 'STARTING'
                                 AND n <= NEW.n) || '.' || lower(NEW.state),
           NEW.job_id, NEW.state, NEW.at, NEW.reason,
           (SELECT COUNT(*) FROM history WHERE job_id = NEW.job_id AND state = 'STARTING' AND n <= NEW.n), 'job'
    FROM jobs AS j WHERE j.id = NEW.job_id
    AND instr(COALESCE((SELECT body FROM texts WHERE hash = j.spec_json), j.spec_json), '"notify":{') > 0;
END;
""".replace("TOLD_STATES", ", ".join(f"'{state.value}'" for state in EVENT_OF_STATE))


def outbox_statements() -> list[str]:
    """The schema's statements, each whole (a trigger's body holds ';' of its own)."""
    out, current = [], ""
    for line in OUTBOX_SCHEMA.strip().splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            out.append(current)
            current = ""
    return out


def drop_stale_trigger(db: sqlite3.Connection) -> None:
    """Drop the notices' trigger where an earlier gqa made it otherwise (a state told since then:
    REJECTED), so the statements above make it anew; in the caller's transaction."""
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'notices_of_moves'").fetchone()
    if row is not None and row[0] != _TRIGGER_AS_STORED:
        db.execute("DROP TRIGGER notices_of_moves")


# SQLite keeps a CREATE TRIGGER as written, less its IF NOT EXISTS and its last ';'
_TRIGGER_AS_STORED = next(statement for statement in outbox_statements() if "CREATE TRIGGER" in statement) \
    .replace("IF NOT EXISTS ", "", 1).strip().removesuffix(";")
