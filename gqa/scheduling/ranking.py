"""Phase 2 of a pass: the order jobs are considered in.

Tiers are strict (the caller walks them in order). Within a tier, the
multifactor score: fair share, age, size and expected duration, each in
[0, 1], weighted. The fair-share factor of a team is 2^(-U/S), U blending the
team's decayed past usage with the GPUs it holds now (including those handed
out earlier in this pass), S its share among the teams that want GPUs.
A job's --nice (Slurm's) shifts its score by -nice / 10,000 (NICE_SCALE):
nice 100 takes 0.01 off, nice -10000 adds 1.0; it never moves a job out of
its tier. Job-level factors do not change during a pass, so each team's jobs
are kept sorted (ranked.RankedJobs) and only the team heads compete: a pass
costs O(log n) per job it looks at. The "fifo" ordering is arrival order and
nothing else; "sjf" is the shortest expected run time first within a tier
(handed true run times, the simulator's oracle baseline)."""

import heapq
import math
from collections.abc import Callable, Iterator

from .fairshare import fair_share_factor
from .index import QueueIndex
from .ranked import NICE_SCALE
from .ledger import Ledger
from .snapshot import Factors, PendingJob, Policy, Snapshot

__all__ = ["NICE_SCALE", "Ranking", "nice_adjustment", "ranks_by_expected_runtime"]


def ranks_by_expected_runtime(policy: Policy) -> bool:
    """Whether the order reads the pending jobs' expected run times: SJF's key, or a duration weight.
    (Fit reads limits, never estimates: elsewhere only ETAs read them.)"""
    return policy.ordering == "sjf" or (policy.ordering == "multifactor" and bool(policy.weights.duration))


def ranks_by_usage(policy: Policy) -> bool:
    """Whether the order reads the teams' decayed usage (fair share): the multifactor order only;
    arrival order and SJF never do, so a replay under them need not sum it at each pass."""
    return policy.ordering == "multifactor"


def nice_adjustment(nice: int) -> float:
    """What a job's --nice adds to its score (positive nice: lower)."""
    return -nice / NICE_SCALE


class Ranking:
    def __init__(self, snap: Snapshot, ledger: Ledger, index: QueueIndex):
        self.snap, self.ledger, self.index = snap, ledger, index
        self.w_fs = snap.policy.weights.fair_share
        # each team's past usage and share: worked out when a score first needs them (FIFO and SJF never do)
        self.past: dict[str, float] | None = None
        self.share: dict[str, float] = {}

    def _shares(self) -> dict[str, float]:
        snap = self.snap
        total_usage = sum(max(0.0, u) for u in snap.usage.values())
        self.past = {t: (max(0.0, u) / total_usage if total_usage > 0 else 0.0) for t, u in snap.usage.items()}
        shares = {t: max(0.0, snap.team(t).share) for t in self.index.teams_active()}
        total_share = sum(shares.values()) or 1.0
        self.share = {t: s / total_share for t, s in shares.items()}
        return self.past

    def fair_share(self, team: str) -> float:
        past = self.past if self.past is not None else self._shares()
        held = self.ledger.team.get(team, 0) / self.ledger.total_gpus if self.ledger.total_gpus else 0.0
        usage = 0.5 * past.get(team, 0.0) + 0.5 * held
        return fair_share_factor(usage, self.share.get(team, 0.0))

    def ordered(self, passed_over: Callable[[PendingJob], bool] | None = None,
                candidates: Callable[[int], set[str] | None] | None = None) -> Iterator[tuple[PendingJob, Factors]]:
        """Every pending job, tier by tier, in the order a pass considers them (lazily: fair share
        moves as the pass hands out GPUs), but those `passed_over` says decide nothing, which are
        neither scored nor handed out (plan.py). `candidates(tier)`: the ids of the tier's jobs it
        might not pass over (None: any), read once a list has passed over a run of jobs."""
        ranked = self.index.rank()   # a pass that stops before its first job never ranks the queue
        if ranked.fifo or ranked.sjf:   # arrival order, or shortest expected run time first: no factors
            none = Factors(fair_share=0.0, age=0.0, size=0.0, score=0.0)
            for job in ranked.in_list_order(passed_over, candidates):
                yield job, none
            return
        for tier in ranked.tiers():
            streams = ranked.teams_in(tier, passed_over, candidates)
            # a heap of the teams' heads as (key, fair share, head, team): a team's key changes only when
            # its head is taken (and its fair share only when that job starts, before the next job is
            # asked for); keys end in the job's id, so two never tie and the rest is never compared.
            # A team enters under a bound below its jobs' keys, with no head: its stream is read (and
            # the jobs it passes over walked) only once that bound tops the heap, so a pass that ends
            # first never walks the list of a team ranked after its last job
            heads: list[tuple[tuple, float, tuple | None, str]] = []
            for team in streams:
                least = ranked.least_part(tier, team)
                if least is not None:
                    fs = self.fair_share(team)
                    # before any job's key that ties it (submitted at -inf), and apart from other bounds by team
                    heads.append(((least - self.w_fs * fs, -math.inf, team), fs, None, team))
            heapq.heapify(heads)
            while heads:
                best_key, best_fs, head, team = heads[0]
                if head is None:   # a bound: the team's real head, if it has one left
                    first = next(streams[team], None)
                    if first is None:
                        heapq.heappop(heads)
                    else:
                        heapq.heapreplace(heads, (*self._keyed(team, first), team))
                    continue
                _, _, _, _, job, (age, size, duration, nice, service) = head
                yield job, Factors(fair_share=best_fs, age=age, size=size, score=-best_key[0], duration=duration,
                                   nice=nice, service=service)
                following = next(streams[team], None)
                if following is None:
                    heapq.heappop(heads)
                else:
                    heapq.heapreplace(heads, (*self._keyed(team, following), team))

    def _keyed(self, team: str, head: tuple) -> tuple[tuple, float, tuple]:
        neg_part, submitted, seq, job_id = head[:4]
        fs = self.fair_share(team)
        return (-(self.w_fs * fs - neg_part), submitted, seq, job_id), fs, head
