"""The usage and spend ledger as items that only ever receive atomic ADDs.

Fair-share usage decays with a half-life h: a charge of u GPU-seconds at time
t counts u * 2^-((now - t) / h) at `now`. Keeping one decayed total per team
would need read-modify-write (decay, then add) and so a lock or a retry loop.
Instead the total is rewritten as

    sum_i u_i * 2^-((now - t_i) / h)  =  2^-((now - e) / h) * sum_i u_i * 2^((t_i - e) / h)

for a reference time e: the sum on the right no longer depends on `now`, so
each charge is one ADD of u * 2^((t - e) / h). To keep the factor small (and
the decimal exact enough), e is the start of a bucket WINDOW half-lives wide;
a team has one item per bucket and the read sums the buckets, each decayed
from its own e. Old buckets shrink to nothing (2^-16 per window) and number a
few per year with a week's half-life, so they are left in place.

A bucket also records the half-life its charges were weighted with; it keeps
decaying with that one if the policy's half-life changes later. The services
read usage with the policy's half-life, the one charges are recorded with.

Every bucket and every period's spend is SHARDS items per team, not one: a
settlement ADDs to the shard its job id picks, in the transaction that
settles the job. Concurrent transactions on one item cancel each other
(TransactionConflict), so with one item per team 50 jobs of a team settling
at once would mostly be retried, and past the retry budget fail; 16 shards
make two settlements meet on an item 1 time in 16. The job id, not chance,
picks the shard, so the same settlement always lands on the same item. A read
sums the shards by the `team` attribute each item carries, and so counts the
unsharded items of earlier versions too (their sort keys lack the shard);
the read stays one Query of the partition."""

from __future__ import annotations

import hashlib
import json
import math

from ...scheduling.budget import period_of

WINDOW = 16          # half-lives per bucket: a charge is multiplied by at most 2^16
PARTITION = "ledger"  # usage buckets and spend share a partition: one Query reads both
USAGE = "usage#"     # sort key prefix of the usage buckets
SPEND = "spend#"     # sort key prefix of spend: "spend#<period>#<team>#<shard>"
SHARDS = 16          # items per team and bucket (and per team and period): see above


def shard_of(job_id: str) -> str:
    """The shard a job's charges go to: fixed per job, spread evenly over SHARDS."""
    return f"{int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:4], 'big') % SHARDS:02d}"


def usage_bucket(team: str, at: float, half_life: float, shard: str) -> tuple[str, float, float]:
    """(sort key, bucket start e, weight 2^((at - e)/h)) of a charge made at `at`, in `shard`."""
    if half_life <= 0:   # no decay: one bucket, plain sums
        return f"{USAGE}{json.dumps([team, 0.0, 0.0])}#{shard}", 0.0, 1.0
    width = WINDOW * half_life
    epoch = math.floor(at / width) * width
    return (f"{USAGE}{json.dumps([team, float(half_life), float(epoch)])}#{shard}", float(epoch),
            math.pow(2.0, (at - epoch) / half_life))


def decayed(total: float, epoch: float, half_life: float, now: float) -> float:
    """A bucket's weighted total as it counts at `now`."""
    if half_life <= 0:
        return total
    return total * math.pow(2.0, (epoch - now) / half_life)


def spend_key(at: float, team: str, shard: str) -> str:
    """Spend is kept per team and budget period (calendar month), in shards."""
    return f"{spend_prefix(period_of(at))}{team}#{shard}"


def spend_prefix(period: str) -> str:
    """The sort keys of one period's spend start with this: a period's teams are one key range."""
    return f"{SPEND}{period}#"
