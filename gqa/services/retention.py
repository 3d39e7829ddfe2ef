"""How long finished jobs are kept: the local daemon deletes those that ended
more than `keep` seconds ago, now and then, a small batch per transaction,
so a first prune of a long history never holds the queue's database for
long. On AWS DynamoDB's TTL does it (a finished job's item carries its time)."""

from __future__ import annotations

from ..ports import Clock, HistoryReads

DAY = 86_400.0
DEFAULT_DAYS = 90
BATCH = 500          # jobs per transaction: a few milliseconds of the database's write lock
BATCHES = 4          # transactions per turn; the daemon comes back soon while more are due


class Retention:
    def __init__(self, store: HistoryReads, clock: Clock, keep: float, *, batch: int = BATCH,
                 batches: int = BATCHES):
        self.store, self.clock, self.keep = store, clock, keep
        self.batch, self.batches = batch, batches

    def prune(self) -> tuple[int, bool]:
        """(jobs deleted, whether more are due). A prune that fails mid-way has
        committed whole batches only; the next one carries on from there."""
        before = self.clock.now() - self.keep
        deleted = 0
        for _ in range(self.batches):
            n = self.store.prune_history(before, self.batch, keep=self.keep)
            deleted += n
            if n < self.batch:
                return deleted, False
        return deleted, True
