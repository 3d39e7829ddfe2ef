"""Phase 2 of a pass: the order jobs are considered in.

Tiers are strict (the caller walks them in order). Within a tier, the
multifactor score: fair share, age, size and expected duration, each in
[0, 1], weighted. The fair-share factor of a team is 2^(-U/S), U blending the
team's decayed past usage with the GPUs it holds now (including those handed
out earlier in this pass), S its share among the teams that want GPUs.
A job's --nice (Slurm's) shifts its score by -nice / 10,000 (NICE_SCALE):
nice 100 takes 0.01 off, nice -10000 adds 1.0; it never moves a job out of
its tier. Job-level factors do not change during a pass, so each team's jobs sit in a
heap and only the team heads compete: a pass is O(n log n) in the pending
count. The "fifo" ordering is arrival order and nothing else."""

import heapq
import math
from collections import defaultdict

from .fairshare import fair_share_factor
from .ledger import Ledger
from .snapshot import Factors, PendingJob, Snapshot

NICE_SCALE = 10_000.0   # nice 100 = 0.01 of the score, the whole range (+-10,000) = +-1.0


def nice_adjustment(nice: int) -> float:
    """What a job's --nice adds to its score (positive nice: lower)."""
    return -nice / NICE_SCALE


class Ranking:
    def __init__(self, snap: Snapshot, ledger: Ledger):
        self.snap, self.ledger = snap, ledger
        w = snap.policy.weights
        self.w_fs, self.w_age, self.w_size, self.w_dur = w.fair_share, w.age, w.size, w.duration
        total_usage = sum(max(0.0, u) for u in snap.usage.values())
        self.past = {t: (max(0.0, u) / total_usage if total_usage > 0 else 0.0) for t, u in snap.usage.items()}
        active = {j.team for j in snap.pending} | {r.team for r in snap.running}
        shares = {t: max(0.0, snap.team(t).share) for t in active}
        total_share = sum(shares.values()) or 1.0
        self.share = {t: s / total_share for t, s in shares.items()}
        self.log_max_runtime = math.log1p(max(1.0, snap.policy.max_runtime))

    def tiers(self) -> list[list[PendingJob]]:
        """The pending jobs grouped in the order their groups are served."""
        if self.snap.policy.ordering == "fifo":
            return [list(self.snap.pending)]
        tiers: dict[int, list[PendingJob]] = defaultdict(list)
        for job in self.snap.pending:
            tiers[job.tier].append(job)
        return [tiers[t] for t in sorted(tiers)]

    def fair_share(self, team: str) -> float:
        held = self.ledger.team.get(team, 0) / self.ledger.total_gpus if self.ledger.total_gpus else 0.0
        usage = 0.5 * self.past.get(team, 0.0) + 0.5 * held
        return fair_share_factor(usage, self.share.get(team, 0.0))

    def job_factors(self, job: PendingJob) -> tuple[float, float, float]:
        max_age = self.snap.policy.max_age
        age = min(1.0, max(0.0, self.snap.now - job.submitted_at) / max_age) if max_age > 0 else 0.0
        size = min(1.0, job.gpus / self.ledger.total_gpus) if self.ledger.total_gpus else 0.0
        expected = job.expected_runtime or job.wall_time
        # log scale: 10 minutes vs 1 hour matters as much as 1 day vs 6 days
        duration = max(0.0, 1.0 - math.log1p(expected) / self.log_max_runtime) if expected else 0.0
        return age, size, duration

    def in_order(self, jobs: list[PendingJob]):
        if self.snap.policy.ordering == "fifo":
            for job in sorted(jobs, key=lambda j: (j.submitted_at, j.seq, j.id)):
                yield job, Factors(fair_share=0.0, age=0.0, size=0.0, score=0.0)
            return
        heaps: dict[str, list] = defaultdict(list)
        for job in jobs:
            age, size, duration = self.job_factors(job)
            nice = nice_adjustment(job.nice)
            part = self.w_age * age + self.w_size * size + self.w_dur * duration + nice
            heaps[job.team].append((-part, job.submitted_at, job.seq, job.id, job, age, size, duration, nice))
        for heap in heaps.values():
            heapq.heapify(heap)
        while heaps:
            best_key, best_team, best_fs = None, None, 0.0
            for team, heap in heaps.items():
                fs = self.fair_share(team)
                neg_part, submitted, seq, job_id = heap[0][:4]
                key = (-(self.w_fs * fs - neg_part), submitted, seq, job_id)
                if best_key is None or key < best_key:
                    best_key, best_team, best_fs = key, team, fs
            assert best_key is not None and best_team is not None   # heaps is not empty
            entry = heapq.heappop(heaps[best_team])
            if not heaps[best_team]:
                del heaps[best_team]
            job, age, size, duration, nice = entry[4], entry[5], entry[6], entry[7], entry[8]
            yield job, Factors(fair_share=best_fs, age=age, size=size, score=-best_key[0], duration=duration,
                               nice=nice)
