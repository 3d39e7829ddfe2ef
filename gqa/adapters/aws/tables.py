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

The `changes` index is what a scheduling pass reads. It is sparse: a job
is on it only while in a state a pass looks at (queued, held, starting,
running, waiting to retry; the job codec sets its keys in exactly those
states). Its partition key is one of CHANGE_SHARDS values picked by the job
id, so a burst of admissions spreads over that many index partitions (each
takes about 1,000 write units a second); its sort key is the time of the
job's last write (`changed`), so "what changed since t" is one Query per
shard. It projects only what scheduling reads (PASS_ATTRIBUTES, about 300
bytes a job against a whole item's kilobyte or more), so a read of the whole
queue costs a quarter of the units or less; a pass reads whole items only
for the jobs it changes.

The `pass` index is the `changes` index again, projecting more: Slurm's
scheduling options (dependency, user hold, begin, nice, exclusive) and the
job's name (singleton dependencies), each present only when set. DynamoDB
cannot change a projection in place, so the version that added it creates
`pass` (DynamoDB backfills it from the live jobs, which all carry its keys;
passes fail and are retried until it is active, minutes for a small table)
and keeps `changes`, read by no one since; a later upgrade deletes it, one
index per update. The same version added `ended` (history): a deployment
from before both upgrades in two deploys (indexes_through, below).

The `live` index (single partition value, whole items) is what passes read
before `changes`; nothing reads it now. DynamoDB creates or deletes at most one global
secondary index per table update, and cannot change an index's projection
in place, so this version's upgrade creates `changes` (an in-place update:
DynamoDB backfills it from the jobs that already carry its keys) and keeps
`live`; the next version's upgrade deletes `live`. Jobs written before this
version carry no `changed` key: the dispatch function gives them one at its
cold start (DynamoDBStore.add_change_keys, a read of `live` for them), and
again at its whole reads for a quarter of an hour after, while the other
functions' earlier version may still be writing jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...models.errors import SpecError

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
CHANGE_SHARD = "chg"      # the changes index's partition key: "<shard>", only in those states too
CHANGED = "changed"       # the changes index's sort key: epoch seconds of the job's last write
CHANGE_SHARDS = 4         # each index partition takes ~1,000 writes a second; a pass reads every shard

BY_STATE, BY_TEAM, LIVE_INDEX, CHANGES_INDEX, PASS_INDEX = "by_state", "by_team", "live", "changes", "pass"
# what the changes index projects (deployed so; read by no one since the pass index)
CHANGES_ATTRIBUTES = (STATE, SEQ, TEAM, REVISION, "owner", "tier", "gpus", "submitted_at", "gpu_type", "cpus",
                      "memory", "wall_time", "group_limit", "max_gpu_hours", "spot", "reclaims", "assigned",
                      "started_at", "kill_reason", "request", "not_before", "attempts", "proc_token", "gpu_seconds",
                      "array_index")
# what a scheduling pass reads of a job (items.pending_job, running_job, the pass's light records)
# and the revision its guarded writes check: the pass index projects these and its keys only
PASS_ATTRIBUTES = CHANGES_ATTRIBUTES + ("name", "dependency", "user_hold", "begin", "nice", "exclusive",
                                      "time_min", "time_limit")

# the `ended` index: finished jobs by the UTC day of their end (END_DAY, "2026-11-30"; set only on a
# finished job, items.index_keys) and its time, newest first, a Query per day: what `gqa history` reads.
# It projects what a job's summary needs (models/accounting.py), about 600 bytes a job with its recent
# transitions, not the whole item: a job keeps its spec and its submitter's environment for life
# (several KB, up to 256 KiB), which KEYS_ONLY plus a BatchGetItem per page would read for every row,
# at 1 read unit per 4 KB each, against 1 for 4 KB of index entries; a job's end writes its entry once.
END_DAY, ENDED_AT, ENDED_INDEX = "end_day", "ended_at", "ended"
HISTORY_ATTRIBUTES = (STATE, SEQ, TEAM, "owner", "name", "tier", "gpus", "gpu_type", "submitted_at", "started_at",
                      "array_index", "attempts", "error_retries", "reclaims", "interruptions", "exit_code",
                      "signal", "reason", "wall_time", "time_limit", "gpu_seconds", "cost", "gpu_util",
                      "gpu_memory", HISTORY, "history_moved")
# a finished job's item is deleted by DynamoDB's TTL this long after its end (the deployment's
# keep_history_days; items.job_item sets it). The history items of a job past history.MOST
# transitions get the same time when it ends (store_changes.py), so they go together
JOB_EXPIRES = "expires_at"

JOBS = Table(
    "jobs", Key(GROUP, S), Key(ID, S), ttl=JOB_EXPIRES,
    indexes=(
        Index(BY_STATE, Key(STATE, S), Key(SEQ, N)),              # list(states), runtime samples
        Index(BY_TEAM, Key(TEAM, S), Key(SEQ, N)),                # list(team=...)
        Index(LIVE_INDEX, Key(LIVE, S), Key(SEQ, N)),             # read by no one; deleted by the next upgrade
        Index(CHANGES_INDEX, Key(CHANGE_SHARD, S), Key(CHANGED, N),  # read by no one; deleted by a later upgrade
              projection="INCLUDE", include=CHANGES_ATTRIBUTES),
        Index(PASS_INDEX, Key(CHANGE_SHARD, S), Key(CHANGED, N),     # a scheduling pass: all, or what changed
              projection="INCLUDE", include=PASS_ATTRIBUTES),
        Index(ENDED_INDEX, Key(END_DAY, S), Key(ENDED_AT, N),        # history: finished jobs by their end
              projection="INCLUDE", include=HISTORY_ATTRIBUTES),
    ),
)

# The jobs table's indexes in the order versions added them. DynamoDB creates or deletes one
# secondary index per table update, and CloudFormation fails (and rolls back) an update that
# adds two: a deployment more than one index behind upgrades a deploy per index, each with
# `-c gqa:indexes-through=<name>` (infra), which builds the indexes up to that one only.
def indexes_through(table: Table, last: str | None) -> tuple[Index, ...]:
    """`table`'s indexes up to and including the one named `last` (all of them for None)."""
    if last is None:
        return table.indexes
    names = [i.name for i in table.indexes]
    if last not in names:
        raise SpecError(f"gqa:indexes-through names one of the {table.logical} table's indexes "
                        f"({', '.join(names)}), not {last!r}", source="cdk.json context")
    return table.indexes[:names.index(last) + 1]


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
