"""TriggerStore on DynamoDB: triggers and their bursts live in the settings
table (tables.py):

    pk "trigger"                     sk <trigger id>          the trigger, as its wire form (JSON)
    pk "trigger-burst"               sk <trigger id>          the trigger's open burst, if any: its id and window
    pk "trigger-burst#<trigger id>#<burst id>"                one partition per burst:
                                     sk "gate#<n>"            its GATES gates, while it is open
                                     sk "key#<key digest>"    one per object key counted into it
    pk "trigger-closed"              sk <trigger id>#<burst id>  a closed burst: its keys, its submission (kept
                                                              before it is sent), whether it was submitted
    pk "trigger-event"               sk <trigger id>#<event digest>  an object event already counted

No item is written by every object: concurrent transactions on one item
cancel each other (TransactionConflict), and a burst of objects rewriting one
item would mostly be retried, past any retry budget. An object is counted by
one transaction of three writes, each on items of its own: the event's marker
(put only if absent: a redelivered event is refused there), a check that the
gate its key hashes to still exists (the burst is still open), and its key's
item (SET if_not_exists: an overwritten key stays one item, with its first
arrival). Opening a burst is that transaction with the open burst's put (only
if absent: one open wins) and its gates' puts instead of the gate check.

Closing takes two steps. One transaction seals the burst: it deletes the open
burst and every gate, guarded on the burst's id, and puts the closed record,
so exactly one close wins, and an object whose check comes later finds no
gate and goes to the next burst. The burst's keys are then final: the close
reads its partition (one Query) and writes the record's key list, in arrival
order, up to the cap (models/burst.py), counting the rest. A close that died
between the steps is finished by the next one (the timer's redelivery), and
reads the same keys. A burst opened by an earlier version keeps its keys in
the open burst's item and has no gates: its objects check that item instead,
and its close starts from the keys listed there.

Markers, key items and closed bursts carry `expiration` (epoch seconds), the
attribute the table's TTL removes them by, the one Powertools' idempotency
records use.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from ...models.burst import REMEMBER_BURSTS, Burst, ClosedBurst, StepKind
from ...models.errors import BackendUnavailable, Conflict, GqaError, NotFound, SpecError
from ...models.trigger import Trigger
from ...ports import Submission
from . import items as it
from . import tables as t
from .errors import CONDITION_FAILED, Retrying, cancellation_reasons, code_of, translate
from .sqs_intake import dump_submission, parse_submission

TRIGGERS, OPEN, CLOSED, EVENTS = "trigger", "trigger-burst", "trigger-closed", "trigger-event"
GATE, KEY = "gate#", "key#"     # sort key prefixes in a burst's partition
# Two objects in flight at once conflict only when their keys hash to the same gate: 1 time in 32.
# Opening puts every gate and sealing deletes every gate, each in one transaction of 34 items (of 100).
GATES = 32
COLLECTED = "collected"         # a closed burst whose key list is final (absent: written so, before gates)
EXPIRES = t.EXPIRATION
List = builtins.list


class _GuardFailed(Conflict):
    """A transaction was cancelled because the guards of these of its writes (by position) failed."""

    def __init__(self, message: str, failed: tuple[int, ...]):
        super().__init__(message)
        self.failed = failed


def _translate(error: ClientError, operation: str) -> GqaError:
    # which guard failed decides what a cancelled transaction means (e.g. the event's marker: a duplicate)
    reasons = cancellation_reasons(error)
    if code_of(error) == "TransactionCanceledException" and CONDITION_FAILED in reasons:
        return _GuardFailed(f"{operation}: a record changed under us",
                            tuple(n for n, r in enumerate(reasons) if r == CONDITION_FAILED))
    return translate(error, operation)


class DynamoDBTriggerStore:
    def __init__(self, client: Any, tables: t.TableNames = t.TableNames(), *,
                 clock: Callable[[], float] = time.time, **retry: Any):
        self.client = client
        self.table = tables.settings
        self.clock = clock   # an object's arrival: the order its burst lists keys in
        self.call = Retrying(client, translate=_translate, **retry)

    # -- triggers ------------------------------------------------------------------------------
    def add(self, trigger: Trigger) -> None:
        item = {t.PK: TRIGGERS, t.SK: trigger.id, "json": json.dumps(trigger.to_dict())}
        try:
            self.call("PutItem", TableName=self.table, Item=it.dump(item),
                      ConditionExpression="attribute_not_exists(#pk)", ExpressionAttributeNames={"#pk": t.PK})
        except Conflict:
            raise Conflict(f"a trigger {trigger.id} exists already") from None

    def get(self, trigger_id: str) -> Trigger:
        item = self._get(TRIGGERS, trigger_id)
        if item is None:
            raise NotFound(f"no trigger {trigger_id}")
        return _trigger(item)

    def list(self) -> List[Trigger]:
        kwargs: dict[str, Any] = {"TableName": self.table, "KeyConditionExpression": "#pk = :pk",
                                  "ExpressionAttributeNames": {"#pk": t.PK},
                                  "ExpressionAttributeValues": it.dump({":pk": TRIGGERS}), "ConsistentRead": True}
        out: List[Trigger] = []
        while True:
            page = self.call("Query", **kwargs)
            out.extend(_trigger(it.load(raw)) for raw in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def remove(self, trigger_id: str) -> None:
        out = self.call("DeleteItem", TableName=self.table, Key=_key(TRIGGERS, trigger_id), ReturnValues="ALL_OLD")
        if not out.get("Attributes"):
            raise NotFound(f"no trigger {trigger_id}")
        # its timer then finds no burst; a crash before this leaves a burst whose close finds no trigger
        out = self.call("DeleteItem", TableName=self.table, Key=_key(OPEN, trigger_id), ReturnValues="ALL_OLD")
        if out.get("Attributes") and "keys" not in (head := it.load(out["Attributes"])):
            # its gates: an object that read the burst before now would still be counted into it, for nothing
            gates = [{"Delete": {"TableName": self.table, "Key": _key(_partition(_burst(trigger_id, head)),
                                                                     f"{GATE}{n:02d}")}} for n in range(GATES)]
            self._transact(gates)

    # -- bursts --------------------------------------------------------------------------------
    def open_burst(self, trigger_id: str) -> Burst | None:
        item = self._get(OPEN, trigger_id)
        return _burst(trigger_id, item) if item else None

    def count(self, kind: StepKind, burst: Burst, key: str, token: str, expires: float) -> bool:
        marker = {"Put": {"TableName": self.table, "Item": it.dump({
            t.PK: EVENTS, t.SK: f"{burst.trigger_id}#{_digest(token)}", EXPIRES: int(expires)}),
            "ConditionExpression": "attribute_not_exists(#pk)", "ExpressionAttributeNames": {"#pk": t.PK}}}
        now = self.clock()
        if kind is StepKind.OPEN:
            head = {t.PK: OPEN, t.SK: burst.trigger_id, **it.plain({
                "burst": burst.id, "opened_at": burst.opened_at, "closes_at": burst.closes_at})}
            entry = [{"Put": {"TableName": self.table, "Item": it.dump(head),
                              "ConditionExpression": "attribute_not_exists(#pk)",
                              "ExpressionAttributeNames": {"#pk": t.PK}}},
                     *({"Put": {"TableName": self.table, "Item": _key(_partition(burst), f"{GATE}{n:02d}")}}
                       for n in range(GATES))]
        elif burst.keys:
            # opened by an earlier version (its keys are in the open burst's item, and it has no gates)
            entry = [{"ConditionCheck": {"TableName": self.table, "Key": _key(OPEN, burst.trigger_id),
                                         "ConditionExpression": "#burst = :burst",
                                         "ExpressionAttributeNames": {"#burst": "burst"},
                                         "ExpressionAttributeValues": it.dump({":burst": burst.id})}}]
        else:
            entry = [{"ConditionCheck": {"TableName": self.table, "Key": _key(_partition(burst), _gate(key)),
                                         "ConditionExpression": "attribute_exists(#pk)",
                                         "ExpressionAttributeNames": {"#pk": t.PK}}}]
        expr = it.Expr()
        listed = {"Update": {
            "TableName": self.table, "Key": _key(_partition(burst), f"{KEY}{_digest(key)}"),
            "UpdateExpression": f"SET {expr.n('key')} = {expr.v(key)}, {expr.n('arrived_at')} = "
                                f"if_not_exists({expr.n('arrived_at')}, {expr.v(float(now))}), "
                                f"{expr.n(EXPIRES)} = if_not_exists({expr.n(EXPIRES)}, "
                                f"{expr.v(int(now + REMEMBER_BURSTS))})", **expr.kwargs()}}
        try:
            self._transact([marker, *entry, listed])
        except _GuardFailed as exc:
            if 0 in exc.failed:   # the marker exists
                return False
            raise Conflict(f"the open burst of trigger {burst.trigger_id} changed; read it again") from None
        return True

    def close(self, trigger_id: str, burst_id: str, now: float, expires: float) -> ClosedBurst | None:
        item: dict[str, Any] | None = None
        for _ in range(5):
            head = self._get(OPEN, trigger_id)
            if head is None or head.get("burst") != burst_id:
                item = self._get(CLOSED, f"{trigger_id}#{burst_id}")   # closed before, or never opened
                break
            writes, sealed = self._seal(trigger_id, head, now, expires)
            try:
                self._transact(writes)
            except Conflict:   # another close won, or (a burst of an earlier version) an object was counted
                continue
            item = sealed
            break
        else:
            raise Conflict(f"the open burst {burst_id} of trigger {trigger_id} kept changing while closing it")
        if item is not None and not item.get(COLLECTED, True):
            item = self._collect(trigger_id, item)
        return _closed(trigger_id, item) if item else None

    def _seal(self, trigger_id: str, head: dict[str, Any], now: float,
              expires: float) -> tuple[List[dict[str, Any]], dict[str, Any]]:
        """Delete the open burst and its gates, put its closed record: from then on no object joins it.
        The transaction's items, and the closed record it puts."""
        burst = _burst(trigger_id, head)
        expr = it.Expr()
        unchanged = f"{expr.n('burst')} = {expr.v(burst.id)}"
        gates: List[dict[str, Any]] = []
        if "keys" in head:   # an earlier version's burst: its item is appended to, guard on what was read
            unchanged += (f" AND size({expr.n('keys')}) = {expr.v(len(burst.keys))} AND {expr.n('more')} = "
                          f"{expr.v(burst.more)}")
        else:
            gates = [{"Delete": {"TableName": self.table, "Key": _key(_partition(burst), f"{GATE}{n:02d}"),
                                 "ConditionExpression": "attribute_exists(#pk)",
                                 "ExpressionAttributeNames": {"#pk": t.PK}}} for n in range(GATES)]
        closed = it.plain({t.PK: CLOSED, t.SK: f"{trigger_id}#{burst.id}", **_burst_attributes(burst),
                           "closed_at": now, "submitted": False, COLLECTED: False, EXPIRES: int(expires)})
        return [{"Delete": {"TableName": self.table, "Key": _key(OPEN, trigger_id),
                            "ConditionExpression": unchanged, **expr.kwargs()}},
                *gates,
                {"Put": {"TableName": self.table, "Item": it.dump(closed),
                         "ConditionExpression": "attribute_not_exists(#pk)",
                         "ExpressionAttributeNames": {"#pk": t.PK}}}], closed

    def _collect(self, trigger_id: str, closed: dict[str, Any]) -> dict[str, Any]:
        """Write a sealed burst's key list: its keys, in arrival order, past those it listed already."""
        burst = _burst(trigger_id, closed)
        expr = it.Expr()
        found = self._query(_partition(burst), (f"begins_with({expr.n(t.SK)}, {expr.v(KEY)})", expr))
        listed = set(burst.keys)
        for item in sorted(found, key=lambda i: (float(i["arrived_at"]), i["key"])):
            if item["key"] not in listed:
                listed.add(item["key"])
                burst = burst.with_object(StepKind.APPEND if burst.has_room(item["key"]) else StepKind.OVERFLOW,
                                          item["key"])
        expr = it.Expr()
        attributes = _burst_attributes(burst)
        update = ", ".join(f"{expr.n(k)} = {expr.v(attributes[k])}" for k in ("keys", "key_bytes", "more"))
        try:
            out = self.call("UpdateItem", TableName=self.table, Key=_key(CLOSED, f"{trigger_id}#{burst.id}"),
                            UpdateExpression=f"SET {update}, {expr.n(COLLECTED)} = {expr.v(True)}",
                            ConditionExpression=f"{expr.n(COLLECTED)} = {expr.v(False)}", ReturnValues="ALL_NEW",
                            **expr.kwargs())
        except Conflict:   # another close wrote the same list first
            return self._get(CLOSED, f"{trigger_id}#{burst.id}") or closed
        return it.load(out["Attributes"])

    def hold_submission(self, trigger_id: str, burst_id: str, submission: Submission) -> Submission:
        expr = it.Expr()
        guard = f"attribute_exists({expr.n(t.PK)}) AND attribute_not_exists({expr.n('submission')})"
        try:
            self.call("UpdateItem", TableName=self.table, Key=_key(CLOSED, f"{trigger_id}#{burst_id}"),
                      UpdateExpression=f"SET {expr.n('submission')} = {expr.v(dump_submission(submission))}",
                      ConditionExpression=guard, **expr.kwargs())
            return submission
        except Conflict:
            held = self.held_submission(trigger_id, burst_id)
            if held is None:
                raise NotFound(f"no closed burst {burst_id} of trigger {trigger_id}") from None
            return held

    def held_submission(self, trigger_id: str, burst_id: str) -> Submission | None:
        item = self._get(CLOSED, f"{trigger_id}#{burst_id}")
        return parse_submission(item["submission"]) if item and "submission" in item else None

    def mark_submitted(self, trigger_id: str, burst_id: str, jobs: List[str], dropped: str | None = None) -> None:
        expr = it.Expr()
        update = f"SET {expr.n('submitted')} = {expr.v(True)}, {expr.n('jobs')} = {expr.v(jobs)}"
        if dropped is not None:
            update += f", {expr.n('dropped')} = {expr.v(dropped)}"
        try:
            self.call("UpdateItem", TableName=self.table, Key=_key(CLOSED, f"{trigger_id}#{burst_id}"),
                      UpdateExpression=update, ConditionExpression=f"attribute_exists({expr.n(t.PK)})",
                      **expr.kwargs())
        except Conflict:
            raise NotFound(f"no closed burst {burst_id} of trigger {trigger_id}") from None

    # -- plumbing ------------------------------------------------------------------------------
    def _get(self, partition: str, sort: str) -> dict[str, Any] | None:
        out = self.call("GetItem", TableName=self.table, Key=_key(partition, sort), ConsistentRead=True)
        return it.load(out["Item"]) if "Item" in out else None

    def _query(self, partition: str, sort: tuple[str, it.Expr]) -> List[dict[str, Any]]:
        expr = sort[1]
        kwargs: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True,
                                  "KeyConditionExpression": f"{expr.n(t.PK)} = {expr.v(partition)} AND {sort[0]}",
                                  **expr.kwargs()}
        out: List[dict[str, Any]] = []
        while True:
            page = self.call("Query", **kwargs)
            out += [it.load(raw) for raw in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _transact(self, transact_items: List[dict[str, Any]]) -> None:
        # the token makes our own retry of a request whose answer was lost succeed instead of
        # finding its own marker and calling the event a duplicate
        self.call("TransactWriteItems", TransactItems=transact_items, ClientRequestToken=uuid.uuid4().hex)


def _key(partition: str, sort: str) -> dict[str, Any]:
    return it.dump({t.PK: partition, t.SK: sort})


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _partition(burst: Burst) -> str:
    """A burst's own partition: its gates and its keys."""
    return f"{OPEN}#{burst.trigger_id}#{burst.id}"


def _gate(key: str) -> str:
    """The gate an object with `key` checks: the same one for the same key, spread over GATES."""
    return f"{GATE}{int(_digest(key)[:8], 16) % GATES:02d}"


def _burst_attributes(burst: Burst) -> dict[str, Any]:
    return it.plain({"burst": burst.id, "opened_at": burst.opened_at, "closes_at": burst.closes_at,
                     "keys": list(burst.keys), "key_bytes": burst.key_bytes, "more": burst.more})


def _burst(trigger_id: str, item: dict[str, Any]) -> Burst:
    return Burst(trigger_id=trigger_id, id=item["burst"], opened_at=float(item["opened_at"]),
                 closes_at=float(item["closes_at"]), keys=tuple(item.get("keys", [])),
                 key_bytes=int(item.get("key_bytes", 0)), more=int(item.get("more", 0)))


def _closed(trigger_id: str, item: dict[str, Any]) -> ClosedBurst:
    return ClosedBurst(burst=_burst(trigger_id, item), closed_at=float(item["closed_at"]),
                       submitted=bool(item.get("submitted")), jobs=tuple(item.get("jobs", [])),
                       dropped=item.get("dropped"))


def _trigger(item: dict[str, Any]) -> Trigger:
    try:
        return Trigger.from_dict(json.loads(item["json"]))
    except (KeyError, ValueError, SpecError) as exc:
        raise BackendUnavailable(f"the stored trigger {item.get(t.SK)!r} cannot be read ({exc}); "
                                 "remove it and add it again") from None
