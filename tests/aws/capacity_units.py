"""Read and write units as DynamoDB bills them, counted from the calls a
client makes (moto answers them but bills nothing):

- reads: 4 KB of item a unit, strongly consistent; half for eventually
  consistent (every index read); a Query or Scan is billed on the summed
  size of the items it reads, rounded up to 4 KB per call, an index read on
  their projected size (what the index answers); GetItem and BatchGetItem
  per item; a transaction's reads count double;
- writes: 1 KB of item a unit, per item written, transactions double; an
  update is billed on the item's size, taken here as the size this counter
  last saw of that item (from a put or a read; the key's own size if none),
  and each global secondary index the item is on adds a write of its
  projection (the same size for ALL, the projected attributes for INCLUDE).

Sizes follow DynamoDB's rules closely enough for a benchmark (names and
values in UTF-8, numbers by their digits, a list or map 3 bytes plus 1 an
element).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from gqa.adapters.aws.tables import TABLES, Table, TableNames

READ_UNIT, WRITE_UNIT = 4096, 1024


def value_bytes(value: dict[str, Any]) -> int:
    (kind, raw), = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        digits = str(raw).lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(value_bytes(v) + 1 for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_bytes(v) + 1 for k, v in raw.items())
    if kind in ("SS", "NS", "BS"):
        return sum(value_bytes({kind[0]: v}) for v in raw)
    return 0


def item_bytes(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + value_bytes(value) for name, value in item.items())


class CapacityUnits:
    """Installed on clients (or a session, before its clients are made); `names`: the deployed tables."""

    def __init__(self, names: TableNames = TableNames()) -> None:
        self.reads: Counter[str] = Counter()    # table or "table/index" -> read units
        self.writes: Counter[str] = Counter()   # table or "table/index" -> write units
        self._tables = {names.of(t): t for t in TABLES}
        self._seen: dict[tuple[str, str], dict[str, Any]] = {}   # (table, key) -> the item last seen
        self.when: Callable[[], bool] = lambda: True   # count this call's units? (items are seen regardless)

    def install(self, *hosts: Any) -> "CapacityUnits":
        for host in hosts:
            events = host.meta.events if hasattr(host, "meta") else host.events
            events.register("before-parameter-build.dynamodb.*", self._request)
            events.register("after-call.dynamodb.*", self._answered)
        return self

    def reset(self) -> None:
        self.reads.clear()
        self.writes.clear()

    def total(self) -> tuple[float, float]:
        return sum(self.reads.values()), sum(self.writes.values())

    # -- the calls ------------------------------------------------------------------------------------
    @staticmethod
    def _request(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["capacity_request"] = dict(params)

    def _answered(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        request = context.get("capacity_request") or {}
        if "Error" in parsed:
            return
        if not self.when():   # not billed to what is measured; what it wrote is still seen
            reads, writes = Counter(self.reads), Counter(self.writes)
            self._answered_counting(parsed, model, request)
            self.reads, self.writes = reads, writes
            return
        self._answered_counting(parsed, model, request)

    def _answered_counting(self, parsed: dict[str, Any], model: Any, request: dict[str, Any]) -> None:
        name = model.name
        if name in ("Query", "Scan"):
            table, index = request["TableName"], request.get("IndexName")
            items = parsed.get("Items", [])
            factor = 0.5 if index or not request.get("ConsistentRead") else 1.0
            self.reads[f"{table}/{index}" if index else table] += \
                max(1, math.ceil(sum(map(item_bytes, items)) / READ_UNIT)) * factor
            if not index:
                for item in items:
                    self._remember(table, item)
        elif name == "GetItem":
            item = parsed.get("Item")
            factor = 1.0 if request.get("ConsistentRead") else 0.5
            self.reads[request["TableName"]] += max(1, math.ceil(item_bytes(item or {}) / READ_UNIT)) * factor
            if item:
                self._remember(request["TableName"], item)
        elif name == "BatchGetItem":
            for table, items in parsed.get("Responses", {}).items():
                factor = 1.0 if request["RequestItems"][table].get("ConsistentRead") else 0.5
                for item in items:
                    self.reads[table] += max(1, math.ceil(item_bytes(item) / READ_UNIT)) * factor
                    self._remember(table, item)
        elif name in ("PutItem", "UpdateItem", "DeleteItem"):
            self._write(request["TableName"], request.get("Item"), request.get("Key"), 1)
            if parsed.get("Attributes") and request.get("ReturnValues") == "ALL_NEW":
                self._remember(request["TableName"], parsed["Attributes"])
        elif name == "TransactWriteItems":
            for action in request.get("TransactItems", []):
                (kind, body), = action.items()
                if kind != "ConditionCheck":
                    self._write(body["TableName"], body.get("Item"), body.get("Key"), 2)
                else:
                    self.reads[body["TableName"]] += 2
        elif name == "BatchWriteItem":
            for table, requests in request.get("RequestItems", {}).items():
                for r in requests:
                    put = r.get("PutRequest", {}).get("Item")
                    self._write(table, put, r.get("DeleteRequest", {}).get("Key"), 1)

    # -- items ----------------------------------------------------------------------------------------
    def _key(self, table: str, item: dict[str, Any]) -> tuple[str, str] | None:
        definition = self._tables.get(table)
        if definition is None:
            return None
        names = [definition.partition.name] + ([definition.sort.name] if definition.sort else [])
        return table, "|".join(str(item.get(n)) for n in names)

    def _remember(self, table: str, item: dict[str, Any]) -> None:
        key = self._key(table, item)
        if key is not None:
            self._seen[key] = item

    def _write(self, table: str, item: dict[str, Any] | None, key: dict[str, Any] | None, factor: int) -> None:
        if item is not None:
            self._remember(table, item)
        stored = item or self._seen.get(self._key(table, key or {}) or ("", ""), key or {})
        self.writes[table] += max(1, math.ceil(item_bytes(stored) / WRITE_UNIT)) * factor
        definition: Table | None = self._tables.get(table)
        for index in definition.indexes if definition else ():
            if index.partition.name not in stored or (index.sort and index.sort.name not in stored):
                continue
            projected = stored if index.projection == "ALL" else {
                k: v for k, v in stored.items()
                if k in index.include or k in (index.partition.name, getattr(index.sort, "name", None),
                                               definition.partition.name, getattr(definition.sort, "name", None))}
            self.writes[f"{table}/{index.name}"] += max(1, math.ceil(item_bytes(projected) / WRITE_UNIT))
