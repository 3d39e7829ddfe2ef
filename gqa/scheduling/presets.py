"""Named policies: the baselines the simulator compares against, and gqa's own.
Each is the production pass with other settings, never a separate scheduler."""

from dataclasses import replace

from .horizon import LIMITS
from .snapshot import Policy, Weights

NAMES = ("fifo", "fifo-easy", "multifactor", "gqa", "gqa-slice", "sjf-oracle")


def preset(name: str, base: Policy | None = None) -> Policy:
    """`base` keeps the queue's limits, half-life and team defaults, and for gqa's own its
    `backfill_by`; the baselines backfill by limits, as Slurm does."""
    base = base or Policy()
    if name in ("fifo", "fifo-easy"):   # arrival order preempts nothing (Policy)
        base = replace(base, preempt_tiers=())
    if name == "fifo":  # arrival order, the first job that does not fit blocks the rest
        return replace(base, ordering="fifo", backfill=False, backfill_by=LIMITS)
    if name == "fifo-easy":  # Slurm's default sched/backfill with priority = age: arrival order plus EASY backfill
        return replace(base, ordering="fifo", backfill=True, backfill_by=LIMITS)
    if name == "multifactor":  # Slurm's priority/multifactor with fair share and age, plus EASY backfill
        return replace(base, ordering="multifactor", backfill=True, backfill_by=LIMITS,
                       weights=Weights(fair_share=1.0, age=0.25, size=0.0, duration=0.0))
    if name == "gqa":  # multifactor plus a preference for short expected run times: the queue's defaults
        return replace(base, ordering="multifactor", backfill=True, weights=Weights())
    if name == "gqa-slice":  # gqa with every tier time-sliced (slicing.py): for jobs that checkpoint when stopped
        return replace(preset("gqa", base), slice_tiers=(0, 1, 2))
    if name == "sjf-oracle":  # shortest expected run time first, plus EASY backfill: handed the true run
        # times (gqa.sim's oracle), it is the lower bound no real scheduler reaches
        return replace(base, ordering="sjf", backfill=True, backfill_by=LIMITS)
    raise ValueError(f"unknown policy {name!r}; choose from {', '.join(NAMES)}")
