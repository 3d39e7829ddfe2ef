"""JobStore on DynamoDB (tables in tables.py).

Every job write is an UpdateItem guarded on the state the caller expects and
on the item's revision, and every apply() is one TransactWriteItems holding
the jobs' updates and the ledger ADDs they bring. The revision guard makes a
read-modify-write exact: a write computed from a stale read fails instead of
overwriting, and is recomputed if the state still is what the caller expects.
That guard also lets apply() plan its first try from an item this store read
or wrote a moment ago instead of reading it again (views.py).

A job item has a bounded size whatever happens to the job (history.py): its
older transitions move to history items in the transaction that would make
it too long. get() and resolve() return the whole history; list(), apply()
and a scheduling pass read job items only, whose history is the recent part
(at least history.KEEP transitions, all a service looks back on).

Reads are shaped for the calls a job's life costs: the settings are one
partition (one Query), the ledger another, and one sparse index holds every
job a scheduling pass looks at; within pass_reads() each is read once.
A pass reads that index as a projection sized to scheduling (tables.py),
and in a warm container only what changed since its previous pass
(views.QueueView); it reads whole items only for the jobs it changes.

The client is injected (like Powertools' persistence layers) so the caller
chooses region, credentials and botocore config, and tests pass a moto one.
Queries on secondary indexes are eventually consistent on AWS: a job created
a moment ago may be missing from list() or scheduling_view() for a moment,
never from get() or resolve() (strongly consistent reads of the table).

The store is composed by concern, each part building on the one before:
store_base.py (the client, the container's memory, the common calls),
store_live.py (the live jobs a pass reads), store_settings.py (settings and
the usage ledger), store_jobs.py (job records) and store_changes.py (the
guarded changes, over the algorithm both backends share); store_history.py
reads the finished jobs by the day of their end.
"""

from __future__ import annotations

from .store_base import KNOWN_FOR, MAX_SUBMITTED_BYTES, SAMPLES_TTL, SETTINGS_TTL, JobRefused
from .store_changes import DynamoDBChanges
from .store_history import DynamoDBHistory
from .store_settings import inventory_setting, policy_setting, setting_item, setting_update, team_setting

__all__ = ["KNOWN_FOR", "MAX_SUBMITTED_BYTES", "SAMPLES_TTL", "SETTINGS_TTL", "DynamoDBStore", "JobRefused",
           "inventory_setting", "policy_setting", "setting_item", "setting_update", "team_setting"]


class DynamoDBStore(DynamoDBChanges, DynamoDBHistory):
    """The AWS backend's JobStore: every part of the port, on the jobs,
    settings and ledger tables (`DynamoDBStore(client, tables, ...)`, see
    store_base.DynamoDBBase)."""
