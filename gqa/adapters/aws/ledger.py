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
read usage with the policy's half-life, the one charges are recorded with."""

from __future__ import annotations

import json
import math

from ...scheduling.budget import period_of

WINDOW = 16          # half-lives per bucket: a charge is multiplied by at most 2^16
PARTITION = "ledger"  # usage buckets and spend share a partition: one Query reads both
USAGE = "usage#"     # sort key prefix of the usage buckets
SPEND = "spend#"     # sort key prefix of spend: "spend#<period>#<team>"


def usage_bucket(team: str, at: float, half_life: float) -> tuple[str, float, float]:
    """(sort key, bucket start e, weight 2^((at - e)/h)) of a charge made at `at`."""
    if half_life <= 0:   # no decay: one bucket, plain sums
        return USAGE + json.dumps([team, 0.0, 0.0]), 0.0, 1.0
    width = WINDOW * half_life
    epoch = math.floor(at / width) * width
    return (USAGE + json.dumps([team, float(half_life), float(epoch)]), float(epoch),
            math.pow(2.0, (at - epoch) / half_life))


def decayed(total: float, epoch: float, half_life: float, now: float) -> float:
    """A bucket's weighted total as it counts at `now`."""
    if half_life <= 0:
        return total
    return total * math.pow(2.0, (epoch - now) / half_life)


def spend_key(at: float, team: str) -> str:
    """Spend is kept per team and budget period (calendar month)."""
    return f"{spend_prefix(period_of(at))}{team}"


def spend_prefix(period: str) -> str:
    """The sort keys of one period's spend start with this: a period's teams are one key range."""
    return f"{SPEND}{period}#"
