"""The TransactWriteItems requests: a job's guarded update (with the history
items its older transitions move to, history.py), the ledger ADDs that go
with it, and how a long batch is split into transactions; and the one
write that needs no read, an attempt's start (start_update)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from ...models.job import JobRecord, JobState, Transition
from . import history
from . import items as it
from . import ledger
from . import tables as t

MAX_TRANSACTION = 100               # items in one TransactWriteItems
MAX_TRANSACTION_BYTES = 3_500_000   # DynamoDB takes 4 MB of items in one; room for what the sizes round
LEDGER_ITEM_BYTES = 128             # a ledger item but for its sort key and team: names, partition, numbers


@dataclass
class JobWrite:
    """What one apply() does to one job: from the item as read to the record as it will be."""

    old: dict[str, Any]
    record: JobRecord
    usage: dict[str, tuple[str, float, float, float]] = field(default_factory=dict)  # sk -> (team, h, e, add)
    spend: dict[tuple[str, str], float] = field(default_factory=dict)               # (sk, team) -> add
    keep: float | None = None       # seconds a finished job is kept (its TTL, items.job_item); None: for good
    # the keys of the history items written before, given the job item's TTL once it has ended (after
    # the transaction, one UpdateItem each: a job of 10,000 transitions has more than a transaction holds)
    expiring: list[dict[str, Any]] = field(default_factory=list)

    def stored(self) -> tuple[dict[str, Any], list[tuple[int, list]]]:
        """The job item as this write leaves it, and the history items it adds
        ((first index, transitions)): `record.history` is the item's history
        as read plus the new transitions; past history.MOST the oldest move out."""
        moved, kept, chunks = history.split(int(self.old.get(history.MOVED, 0)),
                                            history.encode(self.record.history))
        revision = int(self.old.get(t.REVISION, 0)) + 1
        item = it.job_item(replace(self.record, history=()), revision, moved, self.keep)
        item[t.HISTORY] = kept
        return item, chunks

    def footprint(self) -> tuple[int, int]:
        """TransactItems this write takes without the ledger's (the job and its new history
        items), and their bytes as DynamoDB sizes items: the job item as the write leaves it."""
        item, moved = self.stored()
        expires = item.get(t.JOB_EXPIRES)
        return 1 + len(moved), history.item_bytes(item) + sum(
            history.item_bytes(history_item(self.record.id, first, transitions, expires))
            for first, transitions in moved)

    def ledger_items(self) -> dict[Any, int]:
        """The ledger items this write ADDs to, by key, with their bytes."""
        return {**{sk: ledger_item_bytes(sk, team) for sk, (team, *_) in self.usage.items()},
                **{key: ledger_item_bytes(*key) for key in self.spend}}


def ledger_item_bytes(sk: str, team: str) -> int:
    return LEDGER_ITEM_BYTES + len(sk.encode()) + len(team.encode())


def pack(writes: dict[str, JobWrite]) -> list[dict[str, JobWrite]]:
    """Group jobs into transactions of at most MAX_TRANSACTION items and
    MAX_TRANSACTION_BYTES of them: a job's update plus its ledger items, a
    ledger item shared by jobs counted once. Atomicity then holds per
    transaction: a batch this large is rare (a scheduling pass starting or
    cancelling more than ~50 jobs at once, or jobs whose items are large)."""
    out: list[dict[str, JobWrite]] = []
    current: dict[str, JobWrite] = {}
    ledger_items: dict[Any, int] = {}
    jobs_items = jobs_bytes = 0
    for job_id, write in writes.items():
        items, size = write.footprint()
        joined = {**ledger_items, **write.ledger_items()}
        if current and (jobs_items + items + len(joined) > MAX_TRANSACTION
                        or jobs_bytes + size + sum(joined.values()) > MAX_TRANSACTION_BYTES):
            out.append(current)
            current, jobs_items, jobs_bytes = {}, 0, 0
            joined = write.ledger_items()
        current[job_id] = write
        ledger_items = joined
        jobs_items += items
        jobs_bytes += size
    if current:
        out.append(current)
    return out


def chunks(transact_items: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Split a long list of independent writes (a large array's puts) into
    transactions the API accepts, by count and by bytes (action_bytes)."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for item in transact_items:
        item_size = action_bytes(item)
        if chunk and (len(chunk) == MAX_TRANSACTION or size + item_size > MAX_TRANSACTION_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += item_size
    if chunk:
        yield chunk


def action_bytes(action: dict[str, Any]) -> int:
    """A TransactItems entry's bytes as DynamoDB sizes items (UTF-8, not characters): a Put's
    item, or the key and the values an Update, Delete or ConditionCheck names."""
    (body,) = action.values()
    return sum(attribute_bytes(body.get(part) or {}) for part in ("Item", "Key", "ExpressionAttributeValues"))


def attribute_bytes(values: dict[str, Any]) -> int:
    """An AttributeValue map's size by history.value_bytes's rules: names and values in UTF-8."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in values.items())


def _value_bytes(value: dict[str, Any]) -> int:
    (kind, raw), = value.items()
    if kind == "N":
        return history.value_bytes(Decimal(raw))
    if kind == "L":
        return 3 + sum(1 + _value_bytes(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_bytes(v) for k, v in raw.items())
    if kind in ("SS", "NS", "BS"):
        return sum(_value_bytes({kind[0]: v}) for v in raw)
    return history.value_bytes(raw)   # S, B, BOOL, NULL


def transaction(tables: t.TableNames, writes: dict[str, JobWrite]) -> list[dict[str, Any]]:
    """The TransactItems of one chunk: each job's guarded update, then the
    ledger ADDs, merged per item (a transaction may touch an item only once)."""
    out = [request for w in writes.values() for request in job_update(tables.jobs, w)]
    usage: dict[str, tuple[str, float, float, float]] = {}
    spend: dict[tuple[str, str], float] = {}
    for w in writes.values():
        for sk, (team, half_life, epoch, add) in w.usage.items():
            usage[sk] = (team, half_life, epoch, usage.get(sk, (team, half_life, epoch, 0.0))[3] + add)
        for key, add in w.spend.items():
            spend[key] = spend.get(key, 0.0) + add
    for sk, (team, half_life, epoch, add) in usage.items():
        e = it.Expr()
        out.append({"Update": {
            "TableName": tables.ledger, "Key": it.dump({t.PK: ledger.PARTITION, t.SK: sk}),
            "UpdateExpression": f"SET {e.n('team')} = {e.v(team)}, {e.n('half_life')} = {e.v(half_life)}, "
                                f"{e.n('epoch')} = {e.v(epoch)} ADD {e.n('total')} {e.v(add)}", **e.kwargs()}})
    for (sk, team), add in spend.items():
        e = it.Expr()
        out.append({"Update": {"TableName": tables.ledger, "Key": it.dump({t.PK: ledger.PARTITION, t.SK: sk}),
                               "UpdateExpression": f"SET {e.n('team')} = {e.v(team)} ADD {e.n('amount')} {e.v(add)}",
                               **e.kwargs()}})
    return out


def job_update(table: str, write: JobWrite) -> list[dict[str, Any]]:
    """The job's TransactItems: SET what changed, REMOVE what became None,
    append the new transitions (list_append: the history is never rewritten)
    or, when older ones move to history items, SET the item's remaining ones
    and Put those items; guarded on the state and the revision that were read."""
    old, record = write.old, write.record
    revision = int(old.get(t.REVISION, 0))
    new, chunks = write.stored()
    e = it.Expr()
    sets = [f"{e.n(k)} = {e.v(v)}" for k, v in new.items() if k != t.HISTORY and old.get(k) != v]
    removes = [e.n(k) for k in old if k not in new]
    if chunks:
        sets.append(f"{e.n(t.HISTORY)} = {e.v(new[t.HISTORY])}")
    else:
        appended = new[t.HISTORY][len(old.get(t.HISTORY, [])):]
        if appended:
            sets.append(f"{e.n(t.HISTORY)} = list_append({e.n(t.HISTORY)}, {e.v(appended)})")
    expression = f"SET {', '.join(sets)}" + (f" REMOVE {', '.join(removes)}" if removes else "")
    condition = f"{e.n(t.STATE)} = {e.v(old[t.STATE])} AND {e.n(t.REVISION)} = {e.v(revision)}"
    update = {"Update": {"TableName": table, "Key": it.dump(it.job_key(record.id)), "UpdateExpression": expression,
                         "ConditionExpression": condition, **e.kwargs()}}
    expires = new.get(t.JOB_EXPIRES)
    return [update] + [history_put(table, record.id, first, moved, expires) for first, moved in chunks]


def history_put(table: str, job_id: str, first: int, transitions: list[dict[str, Any]],
                expires: int | None = None) -> dict[str, Any]:
    """A history item's Put, written only if its key is new: each index moves once."""
    return {"Put": {"TableName": table, "Item": it.dump(history_item(job_id, first, transitions, expires)),
                    "ConditionExpression": "attribute_not_exists(#id)", "ExpressionAttributeNames": {"#id": t.ID}}}


def history_item(job_id: str, first: int, transitions: list[dict[str, Any]],
                 expires: int | None = None) -> dict[str, Any]:
    """A history item; a finished job's carries the job item's TTL."""
    item: dict[str, Any] = {**history.history_key(job_id, first), history.TRANSITIONS: transitions}
    if expires is not None:
        item[t.JOB_EXPIRES] = expires
    return item


def history_expiry(table: str, key: dict[str, Any], expires: int) -> dict[str, Any]:
    """UpdateItem's arguments giving an older history item its job's TTL, so DynamoDB deletes them together."""
    return {"TableName": table, "Key": it.dump(key), "UpdateExpression": "SET #e = :e",
            "ExpressionAttributeNames": {"#e": t.JOB_EXPIRES}, "ExpressionAttributeValues": it.dump({":e": expires})}


def start_update(table: str, job_id: str, attempt: int, token: str, started_at: float,
                 reason: str) -> dict[str, Any]:
    """UpdateItem's arguments for recording an attempt's start without reading
    the item first: STARTING -> RUNNING, the transition appended and the
    revision bumped (so a write planned on an older read loses its guard).
    It applies only to that attempt and token while STARTING, and only while
    the item holds fewer than history.MOST transitions: one more then needs
    no move to history items, which only a write that read the item can make."""
    e = it.Expr()
    entry = history.encode([Transition(JobState.RUNNING, started_at, reason)])
    update = (f"SET {e.n(t.STATE)} = {e.v(JobState.RUNNING)}, {e.n('reason')} = {e.v(history.cut(reason))}, "
              f"{e.n('started_at')} = {e.v(started_at)}, {e.n(t.CHANGED)} = {e.v(it.changed_now())}, "
              f"{e.n(t.HISTORY)} = list_append({e.n(t.HISTORY)}, {e.v(entry)}), "
              f"{e.n(t.REVISION)} = {e.n(t.REVISION)} + {e.v(1)} "
              f"REMOVE {e.n('exit_code')}, {e.n('signal')}")
    condition = (f"{e.n(t.STATE)} = {e.v(JobState.STARTING)} AND {e.n('attempts')} = {e.v(attempt)} "
                 f"AND {e.n('proc_token')} = {e.v(token)} AND size({e.n(t.HISTORY)}) < {e.v(history.MOST)}")
    return {"TableName": table, "Key": it.dump(it.job_key(job_id)), "UpdateExpression": update,
            "ConditionExpression": condition, "ReturnValues": "ALL_NEW", **e.kwargs()}
