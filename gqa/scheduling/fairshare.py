"""Fair share: usage decays with a half-life and is compared with the share."""

import math


def decay(value: float, elapsed: float, half_life: float) -> float:
    """`value` GPU-seconds recorded `elapsed` seconds ago, as they count now."""
    if half_life <= 0 or elapsed <= 0:
        return value
    return value * math.pow(0.5, elapsed / half_life)


def fair_share_factor(usage_fraction: float, share_fraction: float) -> float:
    """Slurm's classic 2^(-U/S): 1.0 for a team that used nothing, 0.5 for one
    that used exactly its share, towards 0 for one far over it."""
    if share_fraction <= 0:
        return 0.0
    return math.pow(2.0, -usage_fraction / share_fraction)
