"""TriggerStore on DynamoDB: triggers and their bursts live in the settings
table (tables.py), each kind in a partition of its own:

    pk "trigger"         sk <trigger id>                the trigger, as its wire form (JSON)
    pk "trigger-burst"   sk <trigger id>                the trigger's open burst, if any
    pk "trigger-closed"  sk <trigger id>#<burst id>     a closed burst: its keys, its submission (kept
                                                        before it is sent), whether it was submitted
    pk "trigger-event"   sk <trigger id>#<event digest> an object event already counted

An object is counted by one transaction of two writes: the event's marker
(put only if absent: a redelivered event is refused there) and the burst
(opened by a conditional put, appended to by one UpdateItem with list_append,
or counted past the cap with an ADD), each guarded on the burst the service
read. Closing is one transaction too: delete the open burst, guarded on its id
and size (so the keys copied are all of them), and put the closed record, so
exactly one close wins and later objects open the next burst in the freed
slot while the closed one waits for its job to be submitted.

Markers and closed bursts carry `expiration` (epoch seconds), the attribute
the table's TTL removes them by, the one Powertools' idempotency records use.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import uuid
from typing import Any

from botocore.exceptions import ClientError

from ...models.burst import Burst, ClosedBurst, StepKind, RECORD_KEY_BYTES, RECORD_KEYS, key_size
from ...models.errors import BackendUnavailable, Conflict, GqaError, NotFound, SpecError
from ...models.trigger import Trigger
from ...ports import Submission
from . import items as it
from . import tables as t
from .errors import CONDITION_FAILED, Retrying, cancellation_reasons, code_of, translate
from .sqs_intake import dump_submission, parse_submission

TRIGGERS, OPEN, CLOSED, EVENTS = "trigger", "trigger-burst", "trigger-closed", "trigger-event"
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
    def __init__(self, client: Any, tables: t.TableNames = t.TableNames(), **retry: Any):
        self.client = client
        self.table = tables.settings
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
        self.call("DeleteItem", TableName=self.table, Key=_key(OPEN, trigger_id))

    # -- bursts --------------------------------------------------------------------------------
    def open_burst(self, trigger_id: str) -> Burst | None:
        item = self._get(OPEN, trigger_id)
        return _burst(trigger_id, item) if item else None

    def count(self, kind: StepKind, burst: Burst, key: str, token: str, expires: float) -> bool:
        marker = {"Put": {"TableName": self.table, "Item": it.dump({
            t.PK: EVENTS, t.SK: f"{burst.trigger_id}#{hashlib.sha256(token.encode()).hexdigest()}",
            EXPIRES: int(expires)}), "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": t.PK}}}
        try:
            self._transact([marker, self._burst_write(kind, burst, key)])
        except _GuardFailed as exc:
            if 0 in exc.failed:   # the marker exists
                return False
            raise Conflict(f"the open burst of trigger {burst.trigger_id} changed; read it again") from None
        return True

    def _burst_write(self, kind: StepKind, burst: Burst, key: str) -> dict[str, Any]:
        expr = it.Expr()
        if kind is StepKind.OPEN:
            item = {t.PK: OPEN, t.SK: burst.trigger_id, **_burst_attributes(burst)}
            return {"Put": {"TableName": self.table, "Item": it.dump(item),
                            "ConditionExpression": f"attribute_not_exists({expr.n(t.PK)})", **expr.kwargs()}}
        same = f"{expr.n('burst')} = {expr.v(burst.id)}"
        listed = f"contains({expr.n('keys')}, {expr.v(key)})"
        base = {"TableName": self.table, "Key": _key(OPEN, burst.trigger_id)}
        if kind is StepKind.APPEND:
            # the same burst, with room for this key (the cap holds however many objects race), not listed yet
            room = (f"{expr.n('key_bytes')} <= {expr.v(RECORD_KEY_BYTES - key_size(key))} "
                    f"AND size({expr.n('keys')}) < {expr.v(RECORD_KEYS)}")
            update = (f"SET {expr.n('keys')} = list_append({expr.n('keys')}, {expr.v([key])}) "
                      f"ADD {expr.n('key_bytes')} {expr.v(key_size(key))}")
            return {"Update": {**base, "UpdateExpression": update,
                               "ConditionExpression": f"{same} AND {room} AND NOT {listed}", **expr.kwargs()}}
        if kind is StepKind.OVERFLOW:
            return {"Update": {**base, "UpdateExpression": f"ADD {expr.n('more')} {expr.v(1)}",
                               "ConditionExpression": f"{same} AND NOT {listed}", **expr.kwargs()}}
        if kind is StepKind.ABSORB:
            return {"ConditionCheck": {**base, "ConditionExpression": f"{same} AND {listed}", **expr.kwargs()}}
        raise ValueError(f"a burst is not written for a {kind} step")

    def close(self, trigger_id: str, burst_id: str, now: float, expires: float) -> ClosedBurst | None:
        for _ in range(5):
            item = self._get(OPEN, trigger_id)
            if item is None or item.get("burst") != burst_id:
                break
            burst = _burst(trigger_id, item)
            expr = it.Expr()
            # guarded on the size read: an object counted meanwhile fails this, and the keys are read again
            unchanged = (f"{expr.n('burst')} = {expr.v(burst_id)} AND size({expr.n('keys')}) = "
                         f"{expr.v(len(burst.keys))} AND {expr.n('more')} = {expr.v(burst.more)}")
            closed = {t.PK: CLOSED, t.SK: f"{trigger_id}#{burst_id}", **_burst_attributes(burst),
                      "closed_at": now, "submitted": False, EXPIRES: int(expires)}
            try:
                self._transact([
                    {"Delete": {"TableName": self.table, "Key": _key(OPEN, trigger_id),
                                "ConditionExpression": unchanged, **expr.kwargs()}},
                    {"Put": {"TableName": self.table, "Item": it.dump(it.plain(closed)),
                             "ConditionExpression": "attribute_not_exists(#pk)",
                             "ExpressionAttributeNames": {"#pk": t.PK}}}])
            except Conflict:   # an object was counted, or another close won: look again
                continue
            return ClosedBurst(burst=burst, closed_at=now)
        else:
            raise Conflict(f"the open burst {burst_id} of trigger {trigger_id} kept changing while closing it")
        item = self._get(CLOSED, f"{trigger_id}#{burst_id}")
        return _closed(trigger_id, item) if item else None

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

    def _transact(self, transact_items: List[dict[str, Any]]) -> None:
        # the token makes our own retry of a request whose answer was lost succeed instead of
        # finding its own marker and calling the event a duplicate
        self.call("TransactWriteItems", TransactItems=transact_items, ClientRequestToken=uuid.uuid4().hex)


def _key(partition: str, sort: str) -> dict[str, Any]:
    return it.dump({t.PK: partition, t.SK: sort})


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
