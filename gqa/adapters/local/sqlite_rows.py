"""How a job is a row of the jobs table and back: the columns, the encodings
of the values SQLite has no type for, and the statements built from them.

A job's spec and its submitter's environment are kept once in `texts`, by
the SHA-256 of their text, and its row holds the key: an array's tasks, and
a sweep's jobs, share one spec and one environment, which stored in every
row made a 100,000-task array 4 KB a task (one row to a page) and a
10 KB environment 12 KB. Rows written before keep the text itself, which
the reads take as it is."""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from typing import TypeVar

from ...models.job import JobRecord, JobState, Request
from ...ports import Change

_COLUMNS = [f.name for f in fields(JobRecord) if f.name != "history"]
_DB_COLUMNS = ["grp" if c == "group" else c for c in _COLUMNS]
# each write stamps the rows it writes with the revision it commits as (sqlite_schema.TRIGGERS): the last value
_INSERT = f"INSERT INTO jobs ({', '.join(_DB_COLUMNS)}, rev) VALUES ({', '.join('?' for _ in _DB_COLUMNS)}, ?)"
SHARED = ("spec_json", "submit_env")   # kept once in `texts`, each row holding the key
# a guarded change's write: every column but the shared texts, which only a change that sets one writes
_UPDATE = (f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in _DB_COLUMNS if c != 'id' and c not in SHARED)}, "
           "rev = ? WHERE id = ? AND state = ?")
SHARED_LEAST = 64     # bytes: a shorter text is kept in its row, where it takes less than a key
KEY_MARK = "#"        # a key starts with it, which no JSON text does
# the shared texts read back as the columns' values; a row that holds a text (an older one) reads as it is
_SELECT = ("SELECT " + ", ".join(f"COALESCE(t_{c}.body, jobs.{c})" if c in SHARED else f"jobs.{c}"
                                 for c in _DB_COLUMNS)
           + " FROM jobs" + "".join(f" LEFT JOIN texts AS t_{c} ON t_{c}.hash = jobs.{c}" for c in SHARED))
# what a row's references to `texts` count (sqlite_schema.TRIGGERS keep `refs`); a text is written before its rows
INSERT_TEXT = "INSERT OR IGNORE INTO texts (hash, body, refs) VALUES (?, ?, 0)"
_NO_HISTORY: dict[str, object] = {"history": ()}
T = TypeVar("T")


_STATE, _REQUEST, _ASSIGNED = (_COLUMNS.index(c) for c in ("state", "request", "assigned"))
_EXTRA_ENV = _COLUMNS.index("extra_env")
_SHARED_AT = tuple(_COLUMNS.index(c) for c in SHARED)


class SharedTexts:
    """The texts a batch of rows shares, each encoded and hashed once: a
    value seen again (the same dict or str object, as an array's tasks hold)
    is looked up by its id, so the batch must keep its records alive while
    this lives. `bodies` (key -> text) is what to write to `texts` before
    the rows (INSERT_TEXT)."""

    def __init__(self) -> None:
        self.bodies: dict[str, str] = {}
        self._stored: dict[int, str] = {}

    def stored(self, value: str | dict | None) -> str | None:
        """What the row holds for a spec or an environment: its key, or a short text itself."""
        if value is None:
            return None
        if (kept := self._stored.get(id(value))) is not None:
            return kept
        text = value if isinstance(value, str) else json.dumps(value)
        if len(text) < SHARED_LEAST:
            kept = text
        else:
            kept = KEY_MARK + hashlib.sha256(text.encode()).hexdigest()
            self.bodies[kept] = text
        self._stored[id(value)] = kept
        return kept


def _row(job: JobRecord, shared: SharedTexts | None) -> tuple:
    """The job's column values, its spec and environment as `shared` keeps
    them; without `shared`, _UPDATE's (neither, nor the id)."""
    values = [getattr(job, name) for name in _COLUMNS]
    values[_STATE] = values[_STATE].value
    request = values[_REQUEST]
    values[_REQUEST] = request.value if request is not None else None
    values[_ASSIGNED] = ",".join(str(i) for i in values[_ASSIGNED])
    values[_EXTRA_ENV] = json.dumps(values[_EXTRA_ENV])
    if shared is None:
        return tuple(v for i, v in enumerate(values) if i and i not in _SHARED_AT)
    for at in _SHARED_AT:
        values[at] = shared.stored(values[at])
    return tuple(values)


def _built(cls: type[T], defaults: dict[str, object], values: dict[str, object]) -> T:
    """A frozen dataclass of `values` over its `defaults`, every field given, without the frozen
    __init__'s one object.__setattr__ per field: the scheduling view of 10,000 jobs in a third the time."""
    made = object.__new__(cls)
    made.__dict__.update(defaults, **values)
    return made


def _indices(text: str) -> tuple[int, ...]:
    return tuple(int(i) for i in text.split(",")) if text else ()


def _record(row: tuple, envs: dict[str, dict] | None = None) -> JobRecord:
    """`envs`: submitter environments already decoded, by their text (the
    tasks of an array share one), to decode each once; each record gets a copy."""
    data = dict(zip(_COLUMNS, row))
    data["state"] = JobState(data["state"])
    data["request"] = Request(data["request"]) if data["request"] else None
    data["assigned"] = _indices(data["assigned"])
    data["spot"] = bool(data["spot"])
    data["user_hold"] = bool(data["user_hold"])
    data["exclusive"] = bool(data["exclusive"])
    data["extra_env"] = json.loads(data["extra_env"])
    text = data["submit_env"]
    if not text:
        data["submit_env"] = None
    elif envs is None:
        data["submit_env"] = json.loads(text)
    else:
        if text not in envs:
            envs[text] = json.loads(text)
        data["submit_env"] = dict(envs[text])
    # every field is a column but history: the fields set as they are, without the frozen __init__'s
    # one object.__setattr__ per field, which was most of reading 10,000 pending jobs
    return _built(JobRecord, _NO_HISTORY, data)


def _records_of_group(rows: list[tuple]) -> list[JobRecord]:
    """_record for the rows of one group, whose tasks share one submitter
    environment: decoded once, each record given its own copy."""
    envs: dict[str, dict] = {}
    return [_record(row, envs) for row in rows]


def _encoded(change: Change, shared: SharedTexts) -> dict[str, object]:
    """The columns a change sets, as _row encodes them."""
    columns: dict[str, object] = {}
    if change.to is not None:
        columns.update(state=change.to.value, reason=change.reason)
    for name, value in (change.fields or {}).items():
        if name not in _COLUMNS or name in ("id", "state", "reason"):
            raise ValueError(f"a change cannot set {name!r}")
        if name == "request":
            value = value.value if value is not None else None
        elif name == "assigned":
            value = ",".join(str(i) for i in value)
        elif name in SHARED:
            value = shared.stored(value)
        elif name == "extra_env":
            value = json.dumps(value) if value is not None else None
        elif name in ("spot", "user_hold", "exclusive"):
            value = int(value)
        columns["grp" if name == "group" else name] = value
    return columns
