"""The finished jobs a waiting job names, kept past the retention while it
waits, as the local queue's prune keeps them.

DynamoDB's TTL deletes a finished job's item some time after its
`expires_at` (typically within days, and an expired item is still read until
then); an item whose `expires_at` is moved on before that deletion is kept.
So a job that names others pushes their expiry on, each a conditional
UpdateItem that only ever moves it later (`#e < :e`): two dependants
admitted at once, or one admission delivered twice, push to the same end,
and an item already gone is not written back. Its admission pushes them
before it is written; the dispatcher's passes, which read the states of what
every waiting job names, push again whenever fewer than half the retention
is left (`due`), so a parent outlives its last dependant's wait by half the
retention at least and the TTL then deletes it as any other. A parent not
finished yet has no expiry to push: it gets one at its end, and the passes
push that. Older history items (history.py) carry the job's expiry and move
with it.

A name no item answers in a group handed out more than KEEP_FOR ago (any
intake message that could still record it is gone by then) is a job the
TTL deleted: `gone_below` reads the highest such group from the marks
reserve_ids leaves on the id counter, one a day (`mark`)."""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable
from typing import Any

from ...models.errors import Conflict
from . import history
from . import items as it
from . import tables as t
from .admissions import KEEP_FOR
from .errors import Retrying

DAY = 86_400
MARK = "groups_on_"     # the id counter's attribute for a day: the groups handed out when it began


def expiry(now: float, keep: float) -> int:
    """The expiry a push gives: the whole retention from now."""
    return int(now + keep) + 1


def due(expires: int | None, now: float, keep: float) -> bool:
    """Whether an item's expiry is to be pushed: it has one, and less than half the retention is left."""
    return expires is not None and expires < now + keep / 2


def push(call: Retrying, table: str, job_id: str, until: int) -> None:
    """The job's item and its older history items kept until `until`, if it expires sooner;
    nothing where it has no expiry (not finished, kept for good) or no item (gone)."""
    e = it.Expr()
    try:
        out = call("UpdateItem", TableName=table, Key=it.dump(it.job_key(job_id)),
                   UpdateExpression=f"SET {e.n(t.JOB_EXPIRES)} = {e.v(until)}",
                   ConditionExpression=f"{e.n(t.JOB_EXPIRES)} < {e.v(until)}", ReturnValues="UPDATED_NEW", **e.kwargs())
    except Conflict:
        return   # no expiry, a later one already, or no item: a condition on a missing attribute fails
    if out.get("Attributes") is None:
        return
    for key in history_keys(call, table, job_id):
        e = it.Expr()
        try:
            call("UpdateItem", TableName=table, Key=it.dump(key), UpdateExpression=f"SET {e.n(t.JOB_EXPIRES)} = "
                 f"{e.v(until)}", ConditionExpression=f"{e.n(t.JOB_EXPIRES)} < {e.v(until)}", **e.kwargs())
        except Conflict:
            continue


def history_keys(call: Retrying, table: str, job_id: str) -> list[dict[str, Any]]:
    """The keys of a job's history items (a Query of its history partition, keys only)."""
    expr = it.Expr()
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True,
                              "KeyConditionExpression": f"{expr.n(t.GROUP)} = {expr.v(history.partition(job_id))}",
                              "ProjectionExpression": f"{expr.n(t.GROUP)}, {expr.n(t.ID)}", **expr.kwargs()}
    keys: list[dict[str, Any]] = []
    while True:
        out = call("Query", **kwargs)
        keys += [it.load(raw) for raw in out.get("Items", [])]
        if "LastEvaluatedKey" not in out:
            return keys
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def named_items(call: Retrying, table: str, ref: str) -> dict[str, int | None]:
    """The jobs `ref` names (a job, a task, or an array's every task), by id, with their expiry."""
    group = ref.split("_")[0]
    expr = it.Expr()
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True,
                              "KeyConditionExpression": f"{expr.n(t.GROUP)} = {expr.v(group)}",
                              "ProjectionExpression": f"{expr.n(t.ID)}, {expr.n(t.JOB_EXPIRES)}", **expr.kwargs()}
    found: dict[str, int | None] = {}
    while True:
        out = call("Query", **kwargs)
        for raw in out.get("Items", []):
            item = it.load(raw)
            if item[t.ID] == ref or (ref == group and "_" in item[t.ID]):
                found[item[t.ID]] = int(item[t.JOB_EXPIRES]) if t.JOB_EXPIRES in item else None
        if "LastEvaluatedKey" not in out:
            return found
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def keep_named(call: Retrying, table: str, refs: Iterable[str], keep: float, now: float | None = None) -> None:
    """What a job being admitted names, kept the whole retention from now where less is left."""
    now = time.time() if now is None else now
    for ref in dict.fromkeys(refs):
        for job_id, expires in named_items(call, table, ref).items():
            if due(expires, now, keep):
                push(call, table, job_id, expiry(now, keep))


def mark(call: Retrying, table: str, key: dict[str, Any], before: int, now: float) -> None:
    """Today's mark on the id counter: the groups handed out before this reservation, if none yet."""
    e = it.Expr()
    call("UpdateItem", TableName=table, Key=it.dump(key),
         UpdateExpression=f"SET {e.n(MARK + it.end_day(now))} = if_not_exists({e.n(MARK + it.end_day(now))}, "
                          f"{e.v(before)})", **e.kwargs())


def gone_below(counter: dict[str, Any], now: float) -> int:
    """The highest group handed out more than KEEP_FOR ago, by the counter's marks; 0 for none.
    A day's mark counts groups handed out by that day's end."""
    best = 0
    for name, value in counter.items():
        if not name.startswith(MARK):
            continue
        try:
            day = calendar.timegm(time.strptime(name[len(MARK):], "%Y-%m-%d"))
        except ValueError:
            continue
        if day + DAY + KEEP_FOR <= now:
            best = max(best, int(value))
    return best
