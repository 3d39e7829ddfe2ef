"""The queue database's schema: its tables and indexes, the columns added
since a table was first released, and the triggers that keep the rows'
revision stamps and the shared texts' counts, whichever write changes a row.
sqlite_db.py creates it and brings an older database up to it."""

from __future__ import annotations

import re

SCHEMA_VERSION = 7
INDEX_STATEMENT = re.compile(r"^(?=CREATE INDEX IF NOT EXISTS (\w+))(.*?);", re.M)   # (name, statement) in SCHEMA
# the jobs between attempts (they have run, and wait to run again): jobs_between's rows, by their last
# attempt's start, so a history reads them without reading the queue; few, and no submission writes one. A
# query names them in these very words, for SQLite to know it may read that partial index
BETWEEN_JOBS = "started_at IS NOT NULL AND state IN ('QUEUED', 'HELD', 'STARTING', 'RETRY_WAIT')"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, grp TEXT NOT NULL, name TEXT NOT NULL,
    team TEXT NOT NULL, owner TEXT NOT NULL, tier INTEGER NOT NULL, gpus INTEGER NOT NULL,
    gpu_type TEXT, cpus INTEGER, memory INTEGER, wall_time INTEGER, submitted_at REAL NOT NULL,
    spec_json TEXT NOT NULL, state TEXT NOT NULL, array_index INTEGER, group_limit INTEGER,
    extra_env TEXT NOT NULL DEFAULT '{}', submit_env TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    error_retries INTEGER NOT NULL DEFAULT 0, interruptions INTEGER NOT NULL DEFAULT 0,
    reclaims INTEGER NOT NULL DEFAULT 0, spot INTEGER NOT NULL DEFAULT 0,
    not_before REAL, started_at REAL, ended_at REAL, assigned TEXT NOT NULL DEFAULT '',
    pid INTEGER, proc_token TEXT, exit_code INTEGER, signal INTEGER, reason TEXT NOT NULL DEFAULT '',
    request TEXT, kill_reason TEXT, gpu_seconds REAL NOT NULL DEFAULT 0, max_gpu_hours REAL,
    capacity_failures INTEGER NOT NULL DEFAULT 0, dependency TEXT, user_hold INTEGER NOT NULL DEFAULT 0,
    begin REAL, nice INTEGER NOT NULL DEFAULT 0, exclusive INTEGER NOT NULL DEFAULT 0, time_min REAL,
    time_limit REAL, cost REAL NOT NULL DEFAULT 0, gpu_util REAL, gpu_memory REAL, rev INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, tier, seq);
CREATE INDEX IF NOT EXISTS jobs_by_group ON jobs(grp);
CREATE INDEX IF NOT EXISTS jobs_by_end ON jobs(ended_at, seq) WHERE ended_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_by_owner_end ON jobs(owner, ended_at, seq) WHERE ended_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_by_rev ON jobs(rev);
""" + f"""CREATE INDEX IF NOT EXISTS jobs_between ON jobs(started_at, seq) WHERE {BETWEEN_JOBS};
""" + """CREATE TABLE IF NOT EXISTS history (
    job_id TEXT NOT NULL, n INTEGER NOT NULL, state TEXT NOT NULL, at REAL NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (job_id, n)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS history_by_time ON history(at);
CREATE TABLE IF NOT EXISTS teams (
    team TEXT PRIMARY KEY, share REAL NOT NULL, max_gpus INTEGER, max_gpus_per_user INTEGER, budget REAL,
    stop_at_budget INTEGER NOT NULL DEFAULT 0, members TEXT
);
CREATE TABLE IF NOT EXISTS texts (hash TEXT PRIMARY KEY, body TEXT NOT NULL, refs INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage (team TEXT PRIMARY KEY, gpu_seconds REAL NOT NULL, as_of REAL NOT NULL);
CREATE TABLE IF NOT EXISTS spend (team TEXT NOT NULL, period TEXT NOT NULL, amount REAL NOT NULL,
    PRIMARY KEY (team, period)) WITHOUT ROWID;
"""

# columns added after a table was first released: (table, column, declaration), added on open
ADDED_COLUMNS = (("teams", "stop_at_budget", "INTEGER NOT NULL DEFAULT 0"),
                 ("jobs", "capacity_failures", "INTEGER NOT NULL DEFAULT 0"),
                 ("teams", "members", "TEXT"),   # a JSON list of member patterns; NULL: none
                 # version 4: Slurm's scheduling options (models/dependency.py; gqa hold; --begin, --nice)
                 ("jobs", "dependency", "TEXT"),
                 ("jobs", "user_hold", "INTEGER NOT NULL DEFAULT 0"),
                 ("jobs", "begin", "REAL"),
                 ("jobs", "nice", "INTEGER NOT NULL DEFAULT 0"),
                 ("jobs", "exclusive", "INTEGER NOT NULL DEFAULT 0"),
                 # version 4 too: --time-min, and the wall time backfill granted the current attempt
                 ("jobs", "time_min", "REAL"),
                 ("jobs", "time_limit", "REAL"),
                 # version 5: what a job used, for history, reports and `gqa cost` per job
                 ("jobs", "cost", "REAL NOT NULL DEFAULT 0"),
                 ("jobs", "gpu_util", "REAL"),
                 ("jobs", "gpu_memory", "REAL"),
                 # version 6: the revision that last changed the row (TRIGGERS), so the daemon reads only
                 # the jobs changed since its last pass (live_view.py)
                 ("jobs", "rev", "INTEGER"))

def _held(row: str, sign: str, *, moved: bool = False) -> str:
    """A trigger's statements counting `row`'s shared texts one more (+) or one
    fewer (-), a text no row holds any longer deleted; `moved`: only a column
    whose key changed."""
    out = []
    for column in ("spec_json", "submit_env"):
        when = f" AND NEW.{column} IS NOT OLD.{column}" if moved else ""
        out.append(f"UPDATE texts SET refs = refs {sign} 1 WHERE hash = {row}.{column}{when};")
        if sign == "-":
            out.append(f"DELETE FROM texts WHERE hash = {row}.{column} AND refs <= 0{when};")
    return " ".join(out)


# Every row of jobs carries the store revision its change commits as (meta's `revision` is bumped
# as a transaction that changed a row commits: one more than the value read inside it), and the
# removal of a live job is counted: a reader that saw revision R reads what changed since as the
# rows past R. The store's own writes stamp their rows (_stamp: no second write of the row); the
# triggers stamp a row any other write leaves unstamped. Whole statements: SCHEMA is split at semicolons
_STAMP = ("UPDATE jobs SET rev = COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'revision'), 0) + 1 "
          "WHERE id = NEW.id;")
TRIGGERS = (
    f"CREATE TRIGGER IF NOT EXISTS jobs_rev_on_insert AFTER INSERT ON jobs WHEN NEW.rev IS NULL BEGIN {_STAMP} END",
    # a write that left the stamp as it was (never its own stamp: recursive triggers are off)
    f"CREATE TRIGGER IF NOT EXISTS jobs_rev_on_update AFTER UPDATE ON jobs WHEN NEW.rev IS OLD.rev BEGIN {_STAMP} END",
    "CREATE TRIGGER IF NOT EXISTS jobs_live_deleted AFTER DELETE ON jobs "
    "WHEN OLD.state IN ('QUEUED', 'HELD', 'STARTING', 'RUNNING') BEGIN "
    "INSERT INTO meta VALUES ('live_deleted', '1') "
    "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1; END",
    # a shared text (sqlite_rows.SHARED) counts the rows that hold its key, whichever write adds or
    # removes one, and goes with the last; a row that holds a text itself matches no key
    "CREATE TRIGGER IF NOT EXISTS texts_held AFTER INSERT ON jobs BEGIN "
    f"{_held('NEW', '+')} END",
    "CREATE TRIGGER IF NOT EXISTS texts_moved AFTER UPDATE OF spec_json, submit_env ON jobs "
    "WHEN NEW.spec_json IS NOT OLD.spec_json OR NEW.submit_env IS NOT OLD.submit_env BEGIN "
    f"{_held('NEW', '+', moved=True)} {_held('OLD', '-', moved=True)} END",
    f"CREATE TRIGGER IF NOT EXISTS texts_released AFTER DELETE ON jobs BEGIN {_held('OLD', '-')} END",
)
