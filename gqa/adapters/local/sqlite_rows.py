"""How a job is a row of the jobs table and back: the columns, the encodings
of the values SQLite has no type for, and the statements built from them."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import TypeVar

from ...models.job import JobRecord, JobState, Request
from ...ports import Change

_COLUMNS = [f.name for f in fields(JobRecord) if f.name != "history"]
_DB_COLUMNS = ["grp" if c == "group" else c for c in _COLUMNS]
# each write stamps the rows it writes with the revision it commits as (sqlite_db.TRIGGERS): the last value
_INSERT = f"INSERT INTO jobs ({', '.join(_DB_COLUMNS)}, rev) VALUES ({', '.join('?' for _ in _DB_COLUMNS)}, ?)"
_UPDATE = (f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in _DB_COLUMNS if c != 'id')}, rev = ? "
           "WHERE id = ? AND state = ?")
_SELECT = f"SELECT {', '.join(_DB_COLUMNS)} FROM jobs"
_NO_HISTORY: dict[str, object] = {"history": ()}
T = TypeVar("T")


_STATE, _REQUEST, _ASSIGNED = (_COLUMNS.index(c) for c in ("state", "request", "assigned"))
_ENVS = tuple(_COLUMNS.index(c) for c in ("extra_env", "submit_env"))


def _row(job: JobRecord, encoded: dict[int, str] | None = None) -> tuple:
    """The job's column values. `encoded`: environments already encoded, by
    the id of their dict, for a batch whose records share one (an array's
    tasks): each is encoded once. It lives no longer than the batch."""
    values = [getattr(job, name) for name in _COLUMNS]
    values[_STATE] = values[_STATE].value
    request = values[_REQUEST]
    values[_REQUEST] = request.value if request is not None else None
    values[_ASSIGNED] = ",".join(str(i) for i in values[_ASSIGNED])
    for at in _ENVS:
        env = values[at]
        if env is None:
            continue
        if encoded is None:
            values[at] = json.dumps(env)
        elif (text := encoded.get(id(env))) is not None:
            values[at] = text
        else:
            values[at] = encoded[id(env)] = json.dumps(env)
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


def _encoded(change: Change) -> dict[str, object]:
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
        elif name in ("extra_env", "submit_env"):
            value = json.dumps(value) if value is not None else None
        elif name in ("spot", "user_hold", "exclusive"):
            value = int(value)
        columns["grp" if name == "group" else name] = value
    return columns
