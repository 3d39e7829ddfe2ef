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
and ConditionCheck, on tables with and without a sort key).

`lean_everywhere` (installed for the whole run by tests/conftest.py) takes
two costs out of every DynamoDB request on moto, answering the same:

- moto writes each attribute value of an answer by looking up all ten
  members of AttributeValue (S, N, B, ... BOOL) under up to a dozen
  candidate names each, though a value holds one: reading back 10,000 items
  took minutes. Only the members the value holds are written, each through
  moto's own code for its type, so the body is the same text;
- moto checks an item's 400 KB limit as it builds the item, by summing the
  sizes of every attribute so far at each attribute it adds (the square of
  the attributes). The sizes are summed once: every partial sum is at most
  the whole, so the item is refused exactly when moto refuses it.

test_lean_moto.py compares both with moto's own on generated values."""

from __future__ import annotations

import copy
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from moto.core import serialize as moto_serialize
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.utilities import bytesize
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


_ATTRIBUTE_VALUE = "AttributeValue"
_original_structure = moto_serialize.BaseJSONSerializer._serialize_type_structure


def _serialize_type_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
    """moto's, for an attribute value that is a plain dict of its members'
    names: only the members present are written (an absent one, or None, is
    left out by moto's too), in the model's order, each as moto writes it."""
    members = shape.members
    if (shape.name != _ATTRIBUTE_VALUE or type(value) is not dict or not value.keys() <= members.keys()
            or getattr(self._value_picker, "response_transformers", None)):
        return _original_structure(self, serialized, value, shape, key)
    wrapper = self.MAP_TYPE() if key else serialized
    for member_key, member_shape in members.items():
        member_value = value.get(member_key)
        if member_value is not None:
            member_shape.parent = shape
            self._serialize(wrapper, member_value, member_shape, member_key)
    if key:
        self._default_serialize(serialized, wrapper, shape, key)


_original_item_init = Item.__init__
ITEM_LIMIT = 405000     # moto's own figure (dynamo_type.LimitedSizeDict): between AWS's 400 KB and what it takes


def _item_init(self: Item, hash_key: DynamoType, range_key: DynamoType | None, attrs: dict[str, Any]) -> None:
    """moto's Item.__init__, the size summed once (see the module's doc)."""
    self.hash_key = hash_key
    self.range_key = range_key
    values = {key: DynamoType(value) for key, value in attrs.items()}
    if sum(bytesize(key) + value.size() for key, value in values.items()) > ITEM_LIMIT:
        raise ItemSizeTooLarge
    self.attrs = LimitedSizeDict(values)   # its update() adds them without checking each again


def lean_everywhere() -> None:
    """Install the two shortcuts above for the rest of the process (see the module's doc)."""
    from moto.core.responses import get_service_model

    attribute_value = get_service_model("dynamodb").shape_for(_ATTRIBUTE_VALUE)
    # Plain member names are the only ones moto could pick from a plain dict: no member is serialised
    # under another name, and none is named like a member's shape or its snake_case form.
    assert not any(m.serialization.get("name") for m in attribute_value.members.values())
    moto_serialize.BaseJSONSerializer._serialize_type_structure = _serialize_type_structure  # type: ignore[method-assign]
    Item.__init__ = _item_init  # type: ignore[method-assign]
