"""How much of its starts a dispatch pass launches before its time is up.

On AWS a pass runs in a Lambda function, killed at its timeout, and each
launch is a SubmitJob (150-300 ms, longer when throttled and retried; a
resumed attempt reads its latest checkpoint first). A pass that launched a
few hundred jobs one after the other and recorded them at its end would be
killed with none recorded: every one left STARTING with no Batch job for
LAUNCH_GRACE, its GPUs counted busy, until the repair found it. So a pass
given a deadline:

- claims, launches and records its starts a batch at a time, so a kill loses
  the records of one batch at most (services/repair.py finds those launches);
- claims a batch only as large as fits before the deadline at the slowest
  launch it has made, and begins no launch at or past it. What it does not
  launch stays in the queue (a claimed one goes back, through RETRY_WAIT due
  at once, as a launch the backend never received) for the next pass, which
  the supervisor wakes at once.

Without a deadline and a batch size (the local daemon, whose launches are
processes held at their gates until recorded) a pass is one batch, as ever."""

from __future__ import annotations

from dataclasses import dataclass

from ..ports import Clock


@dataclass
class Pacing:
    """`until`: when the pass must stop beginning launches, on `clock` (None: never);
    `batch`: the most starts claimed, launched and recorded together (None: all)."""

    clock: Clock
    until: float | None = None
    batch: int | None = None
    slowest: float = 0.0        # the longest launch of this pass so far, in seconds

    def next_batch(self, left: int) -> int:
        """How many of the `left` starts the next batch takes: none once the time is up."""
        size = left if self.batch is None else min(left, self.batch)
        if self.until is None:
            return size
        room = self.until - self.clock.now()
        if room <= 0:
            return 0
        if self.slowest > 0:
            size = min(size, max(1, int(room / self.slowest)))
        return size

    def may_launch(self) -> bool:
        return self.until is None or self.clock.now() < self.until

    def launched(self, began: float) -> None:
        """A launch begun at `began` (on the clock) has answered."""
        self.slowest = max(self.slowest, self.clock.now() - began)
