"""Records <-> DynamoDB items, and the expression placeholders the store needs.

Items are built as plain Python values (numbers as Decimal, absent for None)
and converted to the wire format at the edge with boto3's serializer."""

from __future__ import annotations

import time
import typing
import zlib
from collections.abc import Callable
from dataclasses import MISSING, asdict, fields
from decimal import Decimal
from enum import Enum
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from ...models.job import JobRecord, JobState, Request
from ...scheduling.snapshot import PendingJob, RunningJob, TeamPolicy
from . import history
from . import tables as t

S = JobState
PENDING = frozenset({S.QUEUED.value, S.HELD.value})     # the live states a pass reads as waiting
ACTIVE = frozenset({S.STARTING.value, S.RUNNING.value})   # and as holding GPUs
_FIELDS = {f.name: f for f in fields(JobRecord)}
_HINTS = typing.get_type_hints(JobRecord)
_FLOATS = {n for n, h in _HINTS.items() if h is float or float in typing.get_args(h)}
_INTS = {n for n, h in _HINTS.items() if h is int or int in typing.get_args(h)}

# Slurm's scheduling options: most jobs have none, so an item holds each only when it is set
_ONLY_WHEN_SET = frozenset({"dependency", "user_hold", "begin", "nice", "exclusive", "cost"})

# the states a scheduling pass reads and changes: the jobs on the live index
LIVE_STATES = frozenset({S.QUEUED, S.HELD, S.STARTING, S.RUNNING, S.RETRY_WAIT})

_serializer, _deserializer = TypeSerializer(), TypeDeserializer()
# what a job's `changed` key is stamped with: epoch seconds, comparable across the functions'
# containers (a module attribute, so that a test's virtual clock can stand in)
wall_clock: Callable[[], float] = time.time


def dump(item: dict[str, Any]) -> dict[str, Any]:
    """Plain item -> AttributeValue map."""
    return {k: _serializer.serialize(v) for k, v in item.items()}


def load(item: dict[str, Any]) -> dict[str, Any]:
    """AttributeValue map -> plain item."""
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def plain(value: Any) -> Any:
    """A Python value as DynamoDB stores it: floats as exact decimals (repr
    round-trips), enums as their value, tuples as lists."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


# -- jobs -----------------------------------------------------------------------------

def job_key(job_id: str) -> dict[str, str]:
    """A job's primary key: its group is the id before "_" (array task "7_3" is in group "7")."""
    return {t.GROUP: job_id.split("_")[0], t.ID: job_id}


def job_item(job: JobRecord, revision: int, moved: int = 0, keep: float | None = None) -> dict[str, Any]:
    """The job's item; `job.history` is what the item holds, after the `moved`
    transitions kept in history items (history.py), reasons cut to size.
    `keep`: seconds a finished job is kept after its end (its TTL); None: for good."""
    item: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(job, name)
        if name == "history" or value is None or (name in _ONLY_WHEN_SET and value == _FIELDS[name].default):
            continue
        item[t.GROUP if name == "group" else name] = plain(value)
    for name in ("reason", "kill_reason"):
        if name in item:
            item[name] = history.cut(item[name])
    item[t.HISTORY] = history.encode(job.history)
    if moved:
        item[history.MOVED] = moved
    item[t.REVISION] = revision
    item.update(index_keys(job))
    if keep is not None and t.END_DAY in item and job.ended_at is not None:
        item[t.JOB_EXPIRES] = int(job.ended_at + keep) + 1
    return item


def index_keys(job: JobRecord) -> dict[str, Any]:
    """The sparse indexes' keys, present only in the states a pass looks at:
    the live index's, and the changes index's shard and time of this write;
    and a finished job's day of its end, for the history's index."""
    if job.state.terminal and job.ended_at is not None:
        return {t.END_DAY: end_day(job.ended_at)}
    if job.state not in LIVE_STATES:
        return {}
    return {t.LIVE: t.LIVE, t.CHANGE_SHARD: change_shard(job.id), t.CHANGED: changed_now()}


def end_day(at: float) -> str:
    """The history index's partition of a job that ended at `at`: its UTC day, "2026-11-30"."""
    return time.strftime("%Y-%m-%d", time.gmtime(at))


def change_shard(job_id: str) -> str:
    """The job's partition of the changes index: fixed by its id, spread evenly."""
    return str(zlib.crc32(job_id.encode()) % t.CHANGE_SHARDS)


def changed_now() -> Decimal:
    """The `changed` key of a write made now, to the millisecond."""
    return Decimal(int(wall_clock() * 1000)) / 1000


def projected(item: dict[str, Any]) -> dict[str, Any]:
    """What the pass index holds of a job item: its keys and PASS_ATTRIBUTES."""
    keep = _PROJECTED
    return {k: v for k, v in item.items() if k in keep}


_PROJECTED = frozenset((t.GROUP, t.ID, t.CHANGE_SHARD, t.CHANGED, *t.PASS_ATTRIBUTES))


def field_value(name: str, raw: Any) -> Any:
    """One stored attribute back into the JobRecord field's type."""
    if raw is None:
        return None
    if name == "state":
        return JobState(raw)
    if name == "request":
        return Request(raw)
    if name == "assigned":
        return tuple(int(i) for i in raw)
    if name == "history":
        return history.decode(raw)
    if name in ("extra_env", "submit_env"):
        return dict(raw)
    if name in _FLOATS:
        return float(raw)
    if name in _INTS:
        return int(raw)
    return raw


def job_record(item: dict[str, Any], *, history: bool = True) -> JobRecord:
    """The job an item holds. Built from a projection (the changes index), the
    record has the scheduling columns only: no spec, names or history."""
    data: dict[str, Any] = {}
    for name, f in _FIELDS.items():
        raw = item.get(t.GROUP if name == "group" else name)
        if raw is not None:
            data[name] = field_value(name, raw)
        elif f.default is not MISSING:
            data[name] = f.default
        elif f.default_factory is not MISSING:
            data[name] = f.default_factory()
        else:
            data[name] = None
    if not history:
        data["history"] = ()
    return JobRecord(**data)


def _get(item: dict[str, Any], name: str) -> Any:
    return field_value(name, item.get(name))


def pending_job(item: dict[str, Any]) -> PendingJob:
    g = lambda name: _get(item, name)  # noqa: E731
    return PendingJob(id=item[t.ID], team=g("team"), user=g("owner"), tier=g("tier"), gpus=g("gpus"),
                      submitted_at=g("submitted_at"), gpu_type=g("gpu_type"), cpus=g("cpus"), memory=g("memory"),
                      wall_time=g("wall_time"), group=item[t.GROUP], group_limit=g("group_limit"), seq=g("seq"),
                      max_gpu_hours=g("max_gpu_hours"), held=item[t.STATE] == S.HELD.value,
                      spot=bool(g("spot")), reclaims=g("reclaims") or 0,   # absent on items written before them
                      name=g("name") or "", dependency=g("dependency"), user_hold=bool(g("user_hold")),
                      begin=g("begin"), nice=g("nice") or 0,   # absent unless set
                      # on AWS a machine is an instance: an exclusive job asks Batch for a whole one
                      # (batch_resources.py), and the pass does not wait for the whole cluster to empty
                      time_min=g("time_min"), served=float(g("gpu_seconds") or 0.0))


def running_job(item: dict[str, Any]) -> RunningJob:
    g = lambda name: _get(item, name)  # noqa: E731
    return RunningJob(id=item[t.ID], team=g("team"), user=g("owner"), gpus=g("assigned") or (),
                      started_at=g("started_at") or 0.0, cpus=g("cpus"), memory=g("memory"), group=item[t.GROUP],
                      wall_time=g("time_limit") or g("wall_time"), tier=g("tier"),
                      stopping=item.get("kill_reason") is not None, started=item[t.STATE] == S.RUNNING.value,
                      name=g("name") or "", served=float(g("gpu_seconds") or 0.0),
                      submitted_at=g("submitted_at") or 0.0)


# -- settings (JSON, as the SQLite adapter stores them) ----------------------------------------

_TEAM_FIELDS = {f.name: f for f in fields(TeamPolicy)}


def team_attributes(policy: TeamPolicy) -> dict[str, Any]:
    return {k: plain(v) for k, v in asdict(policy).items() if v is not None}


def team_policy(item: dict[str, Any]) -> TeamPolicy:
    out: dict[str, Any] = {}
    for name in _TEAM_FIELDS:
        raw = item.get(name)
        if raw is not None:
            out[name] = float(raw) if name in ("share", "budget") else bool(raw) if name == "stop_at_budget" \
                else int(raw)
    return TeamPolicy(**out)


# -- expressions ---------------------------------------------------------------------------------

class Expr:
    """Placeholders for one request: every attribute name goes through
    #n (many are reserved words: state, name, owner, signal), every value through :v."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def n(self, name: str) -> str:
        for placeholder, known in self.names.items():
            if known == name:
                return placeholder
        placeholder = f"#n{len(self.names)}"
        self.names[placeholder] = name
        return placeholder

    def v(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = plain(value)
        return placeholder

    def kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.names:
            out["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            out["ExpressionAttributeValues"] = dump(self.values)
        return out
