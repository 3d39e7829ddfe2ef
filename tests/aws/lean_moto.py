"""moto's DynamoDB made to cost what one request touches, so a long run of
job lives (the calls-per-job benchmark's 10,000-task array) fits in memory
and time; what it answers is unchanged:

- a transaction keeps, for rolling back, a copy of the items it names, not
  of every table it touches (moto deep-copies whole tables per
  TransactWriteItems: time and memory grow with the table, so a run of n
  jobs costs n squared);
- DynamoDB's items are not kept in moto's list of every model instance ever
  made (which only its server's dashboard reads; every copy above joined it
  and none left).

Rollback is what moto does: on a cancelled transaction, every item it named
is as it was before (tests/aws/test_lean_moto.py checks Put, Update, Delete
and ConditionCheck, on tables with and without a sort key)."""

from __future__ import annotations

import copy
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table


class _Untracked(list):  # type: ignore[type-arg]
    """A list that keeps nothing: moto appends every instance it makes."""

    def append(self, _: Any) -> None:
        pass


def _whole_tables_not_copied(value: Any, memo: Any = None) -> Any:
    return value if isinstance(value, Table) else copy.deepcopy(value, memo)


def _keys(backend: Any, transact_items: list[dict[str, Any]]) -> Iterator[tuple[Table, DynamoType, DynamoType | None]]:
    for entry in transact_items:
        _, op = next(iter(entry.items()))
        table = backend.tables.get(op.get("TableName"))
        if table is None:
            continue      # moto answers a missing table as it always does
        attrs = op["Item"] if "Item" in op else op.get("Key", {})
        if table.hash_key_attr not in attrs or (table.range_key_attr and table.range_key_attr not in attrs):
            continue      # a malformed request: moto refuses it before writing
        sort = attrs[table.range_key_attr] if table.range_key_attr else None
        yield table, DynamoType(attrs[table.hash_key_attr]), DynamoType(sort) if sort else None


def _restore(table: Table, hash_key: DynamoType, sort_key: DynamoType | None, before: Item | None) -> None:
    if sort_key is not None:
        if before is None:
            table.items.get(hash_key, {}).pop(sort_key, None)
        else:
            table.items[hash_key][sort_key] = before
    elif before is None:
        table.items.pop(hash_key, None)
    else:
        table.items[hash_key] = before


@contextmanager
def lean_dynamodb() -> Iterator[None]:
    original = dynamodb_models.DynamoDBBackend.transact_write_items
    shallow = types.SimpleNamespace(deepcopy=_whole_tables_not_copied)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        undo = [(table, h, r, copy.deepcopy(table.get_item(h, r)))
                for table, h, r in _keys(self, transact_items)]
        with mock.patch.object(dynamodb_models, "copy", shallow):
            try:
                return original(self, transact_items)
            except Exception:
                for table, h, r, before in reversed(undo):
                    _restore(table, h, r, before)
                raise

    tracked = Item.instances_tracked
    Item.instances_tracked = _Untracked()
    try:
        with mock.patch.object(dynamodb_models.DynamoDBBackend, "transact_write_items", transact_write_items):
            yield
    finally:
        Item.instances_tracked = tracked
