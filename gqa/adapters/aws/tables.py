"""The DynamoDB tables: keys, secondary indexes and the attribute names they
are built on. The adapter reads its keys from here, the CDK stack builds its
tables from here, and the tests create their moto tables from the synthesized
template, so the three cannot drift apart. Plain data: importing it needs no boto3.

Three tables:

- jobs      one item per job (partition `grp`, sort `id`): a group's jobs
            share a partition, so resolve(group) is one Query and a job's key
            follows from its id ("7_3" lives in group "7"). A job's older
            transitions live in history items, partition "<job id>#history",
            sort the first transition's index (history.py): never a group's
            partition, and without the indexes' attributes.
- settings  inventory, scheduling policy and team policies in one partition
            (`pk` "setting", so one Query reads them all), and the id counter
            (`pk` "counter"). Triggers and their bursts (triggers.py): an open
            burst is `pk` "trigger-burst", sk the trigger id (its id and
            window), and a partition of its own, `pk`
            "trigger-burst#<trigger>#<burst>", holding its gates (sk
            "gate#<n>", 32, while it is open) and one item per object key
            (sk "key#<key digest>"); no item is written by every object.
- ledger    fair-share usage buckets and spend per team and period, in one
            partition (one Query reads both), written with atomic ADDs in the
            same transaction as the job's change. Each is 16 shards per team,
            the one a job's charges go to picked by its job id (sk
            "usage#<bucket>#<shard>", "spend#<period>#<team>#<shard>";
            ledger.py), summed when read, with unsharded items of earlier
            versions, so concurrent settlements of one team rarely meet on an item.

The `live` index is sparse: it holds a job only while the job is in a state a
scheduling pass looks at (queued, held, starting, running, waiting to retry);
the job codec sets its key in exactly those states. It projects whole items,
so one Query gives a pass every job it may change, as the base of its guarded
writes. Its partition key has a single value, which orders every entry and
stays below a partition's write limit for a job queue (live jobs, not
history); a burst of thousands of admissions at once is absorbed by
DynamoDB's retries in the adapter.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    ttl: str | None = None         # the epoch-seconds attribute DynamoDB's TTL deletes items by

    def index(self, name: str) -> Index:
        return next(i for i in self.indexes if i.name == name)


def _schema(partition: Key, sort: Key | None) -> list[dict[str, str]]:
    out = [{"AttributeName": partition.name, "KeyType": "HASH"}]
    if sort is not None:
        out.append({"AttributeName": sort.name, "KeyType": "RANGE"})
    return out


# -- jobs ----------------------------------------------------------------------------
# Job attributes are JobRecord's field names, except `group`, stored as GROUP.
GROUP, ID, SEQ, STATE, TEAM = "grp", "id", "seq", "state", "team"
REVISION = "rev"          # bumped by every write: the optimistic-concurrency guard
HISTORY = "history"       # the recent transitions, appended with list_append (older ones: history.py)

LIVE = "live"             # sparse index key: present only in the states a pass looks at (items.LIVE_STATES)

BY_STATE, BY_TEAM, LIVE_INDEX = "by_state", "by_team", "live"

JOBS = Table(
    "jobs", Key(GROUP, S), Key(ID, S),
    indexes=(
        Index(BY_STATE, Key(STATE, S), Key(SEQ, N)),              # list(states), runtime samples
        Index(BY_TEAM, Key(TEAM, S), Key(SEQ, N)),                # list(team=...)
        Index(LIVE_INDEX, Key(LIVE, S), Key(SEQ, N)),             # everything a scheduling pass reads
    ),
)

# -- settings and ledger ----------------------------------------------------------------
PK, SK = "pk", "sk"
SETTING = "setting"       # the settings partition: sk "inventory", "policy", "team#<name>"
COUNTER = "counter"       # the id counter's partition (never part of a settings read)
EXPIRATION = "expiration"  # trigger events and closed bursts (triggers.py)
EXPIRES_AT = "expires_at"  # budget alert claims (budget_ledger.py)
SETTINGS = Table("settings", Key(PK, S), Key(SK, S), ttl=EXPIRATION)
LEDGER = Table("ledger", Key(PK, S), Key(SK, S), ttl=EXPIRES_AT)

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
