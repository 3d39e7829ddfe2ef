"""The DynamoDB tables: keys, secondary indexes and the attribute names they
are built on. The adapter reads its keys from here, the CDK stack builds its
tables from here, and the tests create their moto tables from here, so the
three cannot drift apart. Plain data: importing it needs no boto3.

Three tables:

- jobs      one item per job (partition `grp`, sort `id`): a group's jobs
            share a partition, so resolve(group) is one Query and a job's key
            follows from its id ("7_3" lives in group "7").
- settings  team policies, inventory, scheduling policy, the id counter
            (partition `pk` says which kind, sort `sk` which one).
- ledger    fair-share usage buckets and spend per team and period, written
            with atomic ADDs in the same transaction as the job's change.

Sparse indexes hold an item only while the attribute they are keyed on is
present; the job codec sets those attributes in exactly the states the index
is for, so "pending jobs in scheduling order" is a Query, never a Scan.
Their partition key has a single value: every entry of one index shares a
partition, which orders them all and stays far below a partition's write
limit for a job queue (pending and running jobs, not history).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

S, N = "S", "N"


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # "S" or "N"


@dataclass(frozen=True)
class Index:
    name: str
    partition: Key
    sort: Key | None = None
    projection: str = "ALL"            # ALL | KEYS_ONLY | INCLUDE
    include: tuple[str, ...] = ()      # non-key attributes, for INCLUDE

    def schema(self) -> list[dict[str, str]]:
        return _schema(self.partition, self.sort)


@dataclass(frozen=True)
class Table:
    logical: str
    partition: Key
    sort: Key | None = None
    indexes: tuple[Index, ...] = ()

    def index(self, name: str) -> Index:
        return next(i for i in self.indexes if i.name == name)

    def create_kwargs(self, table_name: str) -> dict[str, Any]:
        """Arguments for the CreateTable API (on-demand billing)."""
        keys: dict[str, str] = {}
        for key in (self.partition, self.sort, *(k for i in self.indexes for k in (i.partition, i.sort))):
            if key is not None:
                keys[key.name] = key.type
        kwargs: dict[str, Any] = {
            "TableName": table_name,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in keys.items()],
            "KeySchema": _schema(self.partition, self.sort),
        }
        if self.indexes:
            kwargs["GlobalSecondaryIndexes"] = [
                {"IndexName": i.name, "KeySchema": i.schema(),
                 "Projection": {"ProjectionType": i.projection,
                                **({"NonKeyAttributes": list(i.include)} if i.include else {})}}
                for i in self.indexes]
        return kwargs


def _schema(partition: Key, sort: Key | None) -> list[dict[str, str]]:
    out = [{"AttributeName": partition.name, "KeyType": "HASH"}]
    if sort is not None:
        out.append({"AttributeName": sort.name, "KeyType": "RANGE"})
    return out


# -- jobs ----------------------------------------------------------------------------
# Job attributes are JobRecord's field names, except `group`, stored as GROUP.
GROUP, ID, SEQ, STATE, TEAM = "grp", "id", "seq", "state", "team"
REVISION = "rev"          # bumped by every write: the optimistic-concurrency guard
HISTORY = "history"       # the transitions, appended with list_append

# sparse index keys (present only in the states named)
PENDING, PENDING_ORDER = "pending", "pending_order"   # QUEUED, HELD; "tier#seq", zero-padded
ACTIVE = "active"                                     # STARTING, RUNNING
REQUESTED = "requested"                               # active, request set, kill not yet sent
RETRY, RETRY_AT = "retry", "retry_at"                 # RETRY_WAIT; not_before

BY_STATE, BY_TEAM, PENDING_INDEX, ACTIVE_INDEX, REQUESTS_INDEX, RETRIES_INDEX = (
    "by_state", "by_team", "pending", "active", "requests", "retries")

# what scheduling_view() reads from the two lean indexes (not the spec, not the history)
PENDING_FIELDS = ("team", "owner", "tier", "gpus", "submitted_at", "gpu_type", "cpus", "memory", "wall_time",
                  "group_limit", SEQ, "max_gpu_hours", STATE, "spot", "reclaims")
ACTIVE_FIELDS = ("team", "owner", "tier", "gpus", "assigned", "started_at", "cpus", "memory", "wall_time",
                 "kill_reason", STATE)

JOBS = Table(
    "jobs", Key(GROUP, S), Key(ID, S),
    indexes=(
        Index(BY_STATE, Key(STATE, S), Key(SEQ, N)),              # list(states), runtime samples
        Index(BY_TEAM, Key(TEAM, S), Key(SEQ, N)),                # list(team=...)
        Index(PENDING_INDEX, Key(PENDING, S), Key(PENDING_ORDER, S), "INCLUDE", PENDING_FIELDS),
        Index(ACTIVE_INDEX, Key(ACTIVE, S), Key(SEQ, N), "INCLUDE", ACTIVE_FIELDS),
        Index(REQUESTS_INDEX, Key(REQUESTED, S), Key(SEQ, N)),    # with_requests()
        Index(RETRIES_INDEX, Key(RETRY, S), Key(RETRY_AT, N)),    # due_retries(), next_wakeup()
    ),
)

# -- settings and ledger ----------------------------------------------------------------
PK, SK = "pk", "sk"
SETTINGS = Table("settings", Key(PK, S), Key(SK, S))
LEDGER = Table("ledger", Key(PK, S), Key(SK, S))

TABLES = (JOBS, SETTINGS, LEDGER)


@dataclass(frozen=True)
class TableNames:
    """The deployed names of the three tables (a stack may prefix them)."""

    jobs: str = "gqa-jobs"
    settings: str = "gqa-settings"
    ledger: str = "gqa-ledger"

    @classmethod
    def prefixed(cls, prefix: str) -> "TableNames":
        return cls(jobs=f"{prefix}jobs", settings=f"{prefix}settings", ledger=f"{prefix}ledger")

    def of(self, table: Table) -> str:
        return getattr(self, table.logical)


def create_tables(client: Any, names: TableNames) -> None:
    """Create the three tables (tests and local tooling; the stack does this on AWS)."""
    for table in TABLES:
        client.create_table(**table.create_kwargs(names.of(table)))
    for table in TABLES:   # on AWS a table takes seconds to become ACTIVE; moto answers at once
        client.get_waiter("table_exists").wait(TableName=names.of(table), WaiterConfig={"Delay": 1})
