"""DynamoDB's transaction conflicts, which moto does not have.

On DynamoDB a TransactWriteItems holds its items from the moment it is
applied until it commits; another transaction touching one of them in that
time is cancelled with reason TransactionConflict (a ConditionCheck counts as
touching). moto applies each request alone and cancels nothing. Clients made
by `Conflicts.client` share one register of the items in flight: a
transaction runs under moto_support.SerializedClient's lock (one request at
a time, as moto needs), then holds its items for `hold` seconds outside it,
while other threads' transactions run and may meet them.

`writes` counts the actions of committed transactions per item, (table, key),
so a test sees which single item took the most writes (LIMITS counts per
partition)."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from botocore.exceptions import ClientError

from tests.aws.moto_support import SerializedClient


class Conflicts:
    def __init__(self, hold: float = 0.005):
        self.hold = hold
        self.in_flight: Counter[tuple[str, str]] = Counter()
        self.writes: Counter[tuple[str, str]] = Counter()
        self.cancelled = 0            # transactions cancelled for a conflict
        self._guard = threading.Lock()
        self._schemas: dict[str, list[str]] = {}

    def client(self, client: Any) -> "ConflictingClient":
        return ConflictingClient(SerializedClient(client), self)

    def hottest(self, table: str) -> int:
        """The most actions any one item of `table` took in committed transactions."""
        return max((n for (t, _), n in self.writes.items() if t == table), default=0)

    def key_names(self, client: Any, table: str) -> list[str]:
        if table not in self._schemas:
            schema = client.describe_table(TableName=table)["Table"]["KeySchema"]
            self._schemas[table] = [k["AttributeName"] for k in schema]
        return self._schemas[table]


class ConflictingClient:
    """A serialized moto client whose transactions conflict as DynamoDB's do."""

    def __init__(self, inner: SerializedClient, conflicts: Conflicts):
        self._inner, self._conflicts = inner, conflicts

    @property
    def meta(self) -> Any:
        return self._inner.meta

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        c = self._conflicts
        items = []
        for action in kwargs["TransactItems"]:
            (_, body), = action.items()
            table = body["TableName"]
            names = c.key_names(self._inner, table)
            given = body.get("Key") or body.get("Item")
            items.append((table, json.dumps({n: given[n] for n in names}, sort_keys=True)))
        with SerializedClient._lock:
            with c._guard:
                busy = [n for n, item in enumerate(items) if c.in_flight[item]]
                if busy:
                    c.cancelled += 1
                else:
                    c.in_flight.update(items)
            if busy:
                reasons = [{"Code": "TransactionConflict" if n in busy else "None"} for n in range(len(items))]
                raise ClientError({"Error": {"Code": "TransactionCanceledException",
                                             "Message": "Transaction cancelled (TransactionConflict)"},
                                   "CancellationReasons": reasons}, "TransactWriteItems")
            try:
                out = self._inner.transact_write_items(**kwargs)
            except BaseException:
                with c._guard:
                    c.in_flight.subtract(items)
                raise
        time.sleep(c.hold)   # committing: the items stay held
        with c._guard:
            c.in_flight.subtract(items)
            c.writes.update(items)
        return out


@contextmanager
def rollback_by_item() -> Iterator[None]:
    """moto undoes a cancelled transaction by copying, before it, every table it
    touches, once per action: a test of 1,000 transactions on a table that grows
    to thousands of items spends minutes copying. This keeps a copy of the items
    the transaction touches instead, and puts them back (or deletes the new
    ones) when it is cancelled: the same outcome, every item as it was."""
    from moto.dynamodb import models

    apply = models.DynamoDBBackend.transact_write_items

    class TablesUncopied:   # the `copy` moto's backend module sees
        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, models.Table) else copy.deepcopy(value, memo)

    def transact_write_items(backend: Any, transact_items: list[dict[str, Any]]) -> None:
        before = []
        for action in transact_items:
            for op in action.values():
                table = backend.get_table(op["TableName"])
                key = op.get("Key") or {a: op["Item"][a] for a in (table.hash_key_attr, table.range_key_attr) if a}
                before.append((op["TableName"], key, copy.deepcopy(backend.get_item(op["TableName"], key))))
        try:
            apply(backend, transact_items)
        except Exception:
            for table_name, key, item in reversed(before):
                if item is not None:
                    backend.put_item(table_name, item.to_json()["Attributes"])
                elif backend.get_item(table_name, key) is not None:
                    backend.delete_item(table_name, key)
            raise

    with mock.patch.object(models, "copy", TablesUncopied), \
            mock.patch.object(models.DynamoDBBackend, "transact_write_items", transact_write_items):
        yield
