"""A job's priority tier: its name in specs, the CLI and metrics, and its
rank (0 is served first) in the scheduler, the intake queues and the policy's
preemptible tiers. The one place both are spelled; imports nothing, so the
light CLI paths may use it without loading the spec's validation."""

from __future__ import annotations

from enum import StrEnum


class Priority(StrEnum):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 is served first."""
        return _RANK[self]

    @classmethod
    def of_rank(cls, rank: int) -> Priority:
        """The tier a rank stands for; ValueError for a rank no tier has."""
        for priority, r in _RANK.items():
            if r == rank:
                return priority
        raise ValueError(f"no priority tier has rank {rank}; ranks are 0 (high), 1 (normal), 2 (low)")


_RANK = {Priority.HIGH: 0, Priority.NORMAL: 1, Priority.LOW: 2}
