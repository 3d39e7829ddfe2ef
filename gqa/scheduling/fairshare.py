"""Fair share: usage decays with a half-life and is compared with the share."""

import math
from collections.abc import Iterable


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


def with_running(usage: dict[str, float], running: Iterable[tuple[str, int, float | None]],
                 now: float) -> dict[str, float]:
    """Running jobs count as they run: each (team, GPUs, started at) adds its
    GPU-seconds so far to its team's usage, so a team holding GPUs now is
    charged for them before their attempts end. Updates `usage` and returns it;
    an attempt not started yet (None) adds nothing."""
    for team, gpus, started_at in running:
        if started_at is not None:
            usage[team] = usage.get(team, 0.0) + gpus * max(0.0, now - started_at)
    return usage
