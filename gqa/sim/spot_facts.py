"""Published spot facts as the replay's numbers: how often spot capacity is
taken back (per hour a job runs there) and what a GPU-hour costs, spot and on
demand. Each number says where it comes from and how it was turned into a rate.

Sources:
- AWS EC2 Spot Instance Advisor: each instance type's "frequency of
  interruption", the share of its spot instances AWS interrupted in the
  trailing month, in bands <5%, 5-10%, 10-15%, 15-20%, >20%.
- Wu et al., "Can't Be Late: Optimizing Spot Instance Savings under
  Deadlines", NSDI 2024 (SkyPilot): measured AWS traces. A single p3.2xlarge
  (1 V100) in 4 zones over 7.4 days: alive 31-79% of the time, lost 41-60
  times per zone. 4- and 16-node V100 groups over 2-3 weeks: on average
  1.4-3.3 of 4 and 6.8-8.8 of 16 nodes alive, 60-181 decreases per zone.
- AWS: a spot interruption is announced two minutes ahead
  (spot/instance-action in the instance metadata). AWS Batch sends the job
  nothing; gqa's job runtime reads the notice and sends SIGTERM, and SIGKILL
  after the checkpoint grace (gqa/runtime/spot_notice.py).
- AWS on-demand prices and spot prices seen, us-east-1, per instance-hour.

A rate here is a constant hazard per hour of running on spot: the chance per
hour that the capacity under a job is reclaimed (the engine draws each
attempt's reclaim from it)."""

import math
from dataclasses import dataclass

NOTICE_SECONDS = 120.0          # AWS's interruption notice
HOURS_PER_MONTH = 365.25 * 24 / 12   # 730.5: the Advisor's trailing month
HOURS_PER_WEEK = 7 * 24


def per_hour_from_monthly_share(share: float) -> float:
    """The constant hazard under which `share` of instances running a whole
    month are interrupted: 1 - exp(-rate x 730.5 h) = share."""
    if not 0 <= share < 1:
        raise ValueError(f"a monthly share of interruptions must be in [0, 1), not {share}")
    return -math.log1p(-share) / HOURS_PER_MONTH


def per_hour_from_losses(losses: float, alive_nodes: float, hours: float) -> float:
    """Losses over the node-hours that were running: a measured trace's rate per
    hour a node is alive (a job runs only while its node is)."""
    if alive_nodes <= 0 or hours <= 0:
        raise ValueError("alive nodes and hours must be positive")
    return losses / (alive_nodes * hours)


def midpoint(low: float, high: float) -> float:
    return (low + high) / 2


# Spot Instance Advisor: band -> its share of instances interrupted a month. A
# band stands for its midpoint; the open top band (">20%") for its floor, 20%.
ADVISOR_BANDS = {"<5%": midpoint(0.0, 0.05), "5-10%": midpoint(0.05, 0.10), "10-15%": midpoint(0.10, 0.15),
                 "15-20%": midpoint(0.15, 0.20), ">20%": 0.20}
ADVISOR_RATES = {band: per_hour_from_monthly_share(share) for band, share in ADVISOR_BANDS.items()}

# "Can't Be Late", single p3.2xlarge: 41-60 losses per zone in 7.4 days, alive 31-79% of the time;
# midpoints: 50.5 losses over 0.55 x 177.6 alive hours
V100_WEEK_RATE = per_hour_from_losses(midpoint(41, 60), midpoint(0.31, 0.79), 7.4 * 24)
# the 4- and 16-node groups together: 60-181 decreases per zone each (midpoint 120.5) over 2-3 weeks
# (2.5), on 1.4-3.3 of 4 (2.35) and 6.8-8.8 of 16 (7.8) nodes alive on average
MULTI_NODE_RATE = per_hour_from_losses(2 * midpoint(60, 181), midpoint(1.4, 3.3) + midpoint(6.8, 8.8),
                                       2.5 * HOURS_PER_WEEK)

# the replay's three cases: what the Advisor publishes for its worst band; the measured multi-node
# groups; the measured single node, a bad zone
RECLAIM_LEVELS = {"low": ADVISOR_RATES[">20%"], "medium": MULTI_NODE_RATE, "high": V100_WEEK_RATE}


@dataclass(frozen=True)
class InstancePrice:
    instance: str
    gpus: int
    gpu: str
    on_demand: float           # $ per instance-hour
    spot_low: float            # the range of spot prices seen, $ per instance-hour
    spot_high: float

    @property
    def on_demand_per_gpu_hour(self) -> float:
        return self.on_demand / self.gpus

    @property
    def spot_per_gpu_hour(self) -> float:
        """The middle of the spot range seen, per GPU-hour."""
        return midpoint(self.spot_low, self.spot_high) / self.gpus

    @property
    def spot_range_per_gpu_hour(self) -> tuple[float, float]:
        return self.spot_low / self.gpus, self.spot_high / self.gpus


# us-east-1 (spot varies by hour and zone)
PRICES = {p.instance: p for p in (
    InstancePrice("g5.xlarge", 1, "a10g", 1.006, 0.397, 0.418),
    InstancePrice("g5.12xlarge", 4, "a10g", 5.672, 1.99, 2.73),
    InstancePrice("g6.xlarge", 1, "l4", 0.8048, 0.388, 0.417),
    InstancePrice("p4d.24xlarge", 8, "a100", 32.7726, 5.09, 9.61),
    InstancePrice("p5.48xlarge", 8, "h100", 98.32, 20.99, 30.33),
)}
