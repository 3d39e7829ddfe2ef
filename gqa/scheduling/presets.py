"""Named policies: the baselines the simulator compares against, and gqa's own.
Each is the production pass with other settings, never a separate scheduler."""

from dataclasses import replace

from .snapshot import Policy, Weights

NAMES = ("fifo", "multifactor", "gqa")


def preset(name: str, base: Policy | None = None) -> Policy:
    """`base` keeps the queue's limits, half-life and team defaults."""
    base = base or Policy()
    if name == "fifo":  # arrival order, the first job that does not fit blocks the rest
        return replace(base, ordering="fifo", backfill=False)
    if name == "multifactor":  # Slurm's priority/multifactor with fair share and age, plus EASY backfill
        return replace(base, ordering="multifactor", backfill=True,
                       weights=Weights(fair_share=1.0, age=0.25, size=0.0, duration=0.0))
    if name == "gqa":  # multifactor plus a preference for short expected run times
        return replace(base, ordering="multifactor", backfill=True,
                       weights=Weights(fair_share=1.0, age=0.25, size=0.0, duration=1.0))
    raise ValueError(f"unknown policy {name!r}; choose from {', '.join(NAMES)}")
