"""BudgetRecords on DynamoDB, in the ledger table (tables.py):

    pk "alert#<key>"      sk "claim"   one item per alert: token, sent, lease_until, expires_at
    pk "live#<period>"    sk <team>    the live spend figure: settled, running, as_of

A claim is a PutItem that succeeds only if the alert has no item yet, or an
unsent one whose lease ran out (its tick died between claiming and sending);
two ticks racing for one alert get one success and one ConditionalCheckFailed.
Confirm and release are guarded on the claim's token, so a tick that lost its
lease cannot confirm or delete the claim of the tick that took it over.

Live spend is overwritten, never added to: it is recomputed each tick from the
settled spend (the period's spend items, only ever ADDed to when an attempt
settles) plus what running attempts have cost so far. A write older than the
stored figure is refused by its condition, so overlapping ticks never make the
figure step back.

Alert items carry `expires_at` (epoch seconds) for DynamoDB's TTL, when the
table enables it on that attribute: claims of past periods and long-gone jobs
then disappear on their own."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from ...models.errors import BackendUnavailable, Conflict
from ...ports import LiveSpend
from . import items as it
from . import tables as t
from .errors import Retrying
from .guarded import write_once

CLAIM = "claim"
KEEP = 400 * 86400.0       # alert claims outlive their period by a year: TTL may then remove them
BATCH = 100                # keys per BatchGetItem


def alert_key(key: str) -> dict[str, str]:
    return {t.PK: f"alert#{key}", t.SK: CLAIM}


def live_partition(period: str) -> str:
    return f"live#{period}"


class DynamoDBBudgetRecords:
    def __init__(self, client: Any, tables: t.TableNames = t.TableNames(), *, attempts: int = 5, **retry: Any):
        self.client = client
        self.table = tables.ledger
        self.call = Retrying(client, attempts=attempts, **retry)

    # -- alert claims ------------------------------------------------------------------------------------
    def sent(self, keys: Iterable[str], now: float) -> set[str]:
        wanted = list(dict.fromkeys(keys))
        out: set[str] = set()
        for start in range(0, len(wanted), BATCH):
            for item in self._batch_get([alert_key(k) for k in wanted[start:start + BATCH]]):
                if item.get("sent") or float(item["lease_until"]) >= now:
                    out.add(item[t.PK].removeprefix("alert#"))
        return out

    def claim(self, key: str, at: float, lease: float) -> str | None:
        token = uuid.uuid4().hex
        e = it.Expr()
        condition = (f"attribute_not_exists({e.n(t.PK)}) OR "
                     f"({e.n('sent')} = {e.v(False)} AND {e.n('lease_until')} < {e.v(float(at))})")
        item = {**alert_key(key), "token": token, "sent": False, "claimed_at": it.plain(float(at)),
                "lease_until": it.plain(float(at + lease)), t.EXPIRES_AT: int(at + KEEP)}
        try:
            # a retry that meets this claim applied keeps it, not waits a lease (guarded.py)
            write_once(self.call, "PutItem", TableName=self.table, Item=it.dump(item),
                       ConditionExpression=condition, **e.kwargs())
        except Conflict:
            return None
        return token

    def confirm(self, key: str, token: str, at: float) -> None:
        e = it.Expr()
        try:
            self.call("UpdateItem", TableName=self.table, Key=it.dump(alert_key(key)),
                      UpdateExpression=f"SET {e.n('sent')} = {e.v(True)}, {e.n('sent_at')} = {e.v(float(at))}",
                      ConditionExpression=f"{e.n('token')} = {e.v(token)}", **e.kwargs())
        except Conflict:
            pass   # our lease ran out and another tick took the claim over: its confirm counts

    def release(self, key: str, token: str) -> None:
        e = it.Expr()
        try:
            self.call("DeleteItem", TableName=self.table, Key=it.dump(alert_key(key)),
                      ConditionExpression=f"{e.n('token')} = {e.v(token)} AND {e.n('sent')} = {e.v(False)}",
                      **e.kwargs())
        except Conflict:
            pass   # no longer ours

    # -- live spend ------------------------------------------------------------------------------------
    def record_spend(self, period: str, spend: list[LiveSpend]) -> None:
        for s in spend:
            e = it.Expr()
            item = {t.PK: live_partition(period), t.SK: s.team, "settled": it.plain(float(s.settled)),
                    "running": it.plain(float(s.running)), "as_of": it.plain(float(s.as_of))}
            try:
                self.call("PutItem", TableName=self.table, Item=it.dump(item),
                          ConditionExpression=f"attribute_not_exists({e.n(t.PK)}) OR "
                                              f"{e.n('as_of')} <= {e.v(float(s.as_of))}", **e.kwargs())
            except Conflict:
                pass   # a later tick already wrote a newer figure

    def live_spend(self, period: str) -> dict[str, LiveSpend]:
        e = it.Expr()
        kwargs: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True,
                                  "KeyConditionExpression": f"{e.n(t.PK)} = {e.v(live_partition(period))}",
                                  **e.kwargs()}
        out: dict[str, LiveSpend] = {}
        while True:
            page = self.call("Query", **kwargs)
            for raw in page.get("Items", []):
                item = it.load(raw)
                out[item[t.SK]] = LiveSpend(item[t.SK], float(item["settled"]), float(item["running"]),
                                            float(item["as_of"]))
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _batch_get(self, keys: list[dict[str, str]]) -> list[dict[str, Any]]:
        """Strongly consistent reads; keys DynamoDB leaves unprocessed (throttling) are asked again."""
        request = {self.table: {"Keys": [it.dump(k) for k in keys], "ConsistentRead": True}}
        found: list[dict[str, Any]] = []
        retry = 0
        while request:
            out = self.call("BatchGetItem", RequestItems=request)
            found += [it.load(raw) for raw in out["Responses"].get(self.table, [])]
            request = out.get("UnprocessedKeys") or {}
            if request:
                retry += 1
                if retry >= self.call.attempts:
                    raise BackendUnavailable("DynamoDB kept leaving alert claims unread (throttling); try again later")
                self.call.sleep(self.call.delay(retry - 1))
        return found
