"""One scheduling pass, as named phases over a snapshot:

1. account  - what the running jobs hold (GPUs, CPUs, memory; per team, user, group)
2. rank     - strict tiers; within a tier the multifactor score, recomputed
              as the pass hands out GPUs so teams interleave by share
3. admit    - quotas: team and user GPU caps, array limits (skip, never block)
4. fit      - gang: all of a job's GPUs of one type, or none; a job that
              does not fit keeps its place and the GPU types it can use are
              reserved for it, so later jobs cannot starve it
"""

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

from .fairshare import fair_share_factor
from .snapshot import Factors, PendingJob, Plan, Snapshot, Start

TIER_NAMES = {0: "high", 1: "normal", 2: "low"}


def plan(snap: Snapshot) -> Plan:
    ledger = _account(snap)
    out = Plan()
    reserved: dict[str | None, str] = {}   # GPU type (None: every type) -> job waiting first for it
    tiers: dict[int, list[PendingJob]] = defaultdict(list)
    for job in snap.pending:
        tiers[job.tier].append(job)
    ranking = _Ranking(snap, ledger)
    for tier in sorted(tiers):
        for job, factors in ranking.in_order(tiers[tier]):
            out.order.append(job.id)
            out.factors[job.id] = factors
            reason = _over_quota(job, snap, ledger)
            if reason is None:
                reason = _behind(job, reserved, snap)
            if reason is not None:
                out.waiting[job.id] = reason
                continue
            gpus, shortfall = _fit(job, snap, ledger, reserved)
            if gpus is None:
                out.waiting[job.id] = shortfall
                if _could_ever_fit(job, snap):  # a job that never fits here must not block the rest
                    for gpu_type in _types_for(job, snap):
                        reserved.setdefault(gpu_type, job.id)
                continue
            ledger.take(job, gpus)
            out.starts.append(Start(job.id, gpus))
    return out


# -- phase 1: account ----------------------------------------------------------

@dataclass
class _Ledger:
    free: dict[int, str]                       # free GPU index -> type
    cpus_free: int | None
    memory_free: int | None
    total_gpus: int
    team: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    user: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    group: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def take(self, job: PendingJob, gpus: tuple[int, ...]) -> None:
        for index in gpus:
            del self.free[index]
        if self.cpus_free is not None and job.cpus:
            self.cpus_free -= job.cpus
        if self.memory_free is not None and job.memory:
            self.memory_free -= job.memory
        self.team[job.team] += job.gpus
        self.user[(job.team, job.user)] += job.gpus
        if job.group:
            self.group[job.group] += 1


def _account(snap: Snapshot) -> _Ledger:
    ledger = _Ledger(free={g.index: g.type for g in snap.gpus}, cpus_free=snap.cpus,
                     memory_free=snap.memory, total_gpus=len(snap.gpus))
    for run in snap.running:
        for index in run.gpus:
            ledger.free.pop(index, None)
        if ledger.cpus_free is not None and run.cpus:
            ledger.cpus_free -= run.cpus
        if ledger.memory_free is not None and run.memory:
            ledger.memory_free -= run.memory
        ledger.team[run.team] += len(run.gpus)
        ledger.user[(run.team, run.user)] += len(run.gpus)
        if run.group:
            ledger.group[run.group] += 1
    return ledger


# -- phase 2: rank -------------------------------------------------------------

class _Ranking:
    """Multifactor order within a tier. The fair-share factor of a team is
    2^(-U/S), U blending the team's decayed past usage with the GPUs it holds
    now (including those handed out earlier in this pass), S its share among
    the teams that want GPUs. Job-level factors (age, size) do not change
    during a pass, so each team's jobs sit in a heap and only the team heads
    compete: a pass is O(n log n) in the pending count."""

    def __init__(self, snap: Snapshot, ledger: _Ledger):
        self.snap, self.ledger = snap, ledger
        w = snap.policy.weights
        self.w_fs, self.w_age, self.w_size = w.fair_share, w.age, w.size
        total_usage = sum(max(0.0, u) for u in snap.usage.values())
        self.past = {t: (max(0.0, u) / total_usage if total_usage > 0 else 0.0) for t, u in snap.usage.items()}
        active = {j.team for j in snap.pending} | {r.team for r in snap.running}
        shares = {t: max(0.0, snap.team(t).share) for t in active}
        total_share = sum(shares.values()) or 1.0
        self.share = {t: s / total_share for t, s in shares.items()}

    def fair_share(self, team: str) -> float:
        held = self.ledger.team.get(team, 0) / self.ledger.total_gpus if self.ledger.total_gpus else 0.0
        usage = 0.5 * self.past.get(team, 0.0) + 0.5 * held
        return fair_share_factor(usage, self.share.get(team, 0.0))

    def job_factors(self, job: PendingJob) -> tuple[float, float]:
        max_age = self.snap.policy.max_age
        age = min(1.0, max(0.0, self.snap.now - job.submitted_at) / max_age) if max_age > 0 else 0.0
        size = min(1.0, job.gpus / self.ledger.total_gpus) if self.ledger.total_gpus else 0.0
        return age, size

    def in_order(self, jobs: list[PendingJob]):
        heaps: dict[str, list] = defaultdict(list)
        for job in jobs:
            age, size = self.job_factors(job)
            part = self.w_age * age + self.w_size * size
            heaps[job.team].append((-part, job.submitted_at, job.seq, job.id, job, age, size))
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
            entry = heapq.heappop(heaps[best_team])
            if not heaps[best_team]:
                del heaps[best_team]
            job, age, size = entry[4], entry[5], entry[6]
            yield job, Factors(fair_share=best_fs, age=age, size=size, score=-best_key[0])


# -- phase 3: admit (quotas) -----------------------------------------------------

def _over_quota(job: PendingJob, snap: Snapshot, ledger: _Ledger) -> str | None:
    team = snap.team(job.team)
    held = ledger.team.get(job.team, 0)
    if team.max_gpus is not None and held + job.gpus > team.max_gpus:
        return f"team {job.team} at {held} of {team.max_gpus} GPUs; needs {job.gpus} more"
    if team.max_gpus_per_user is not None:
        mine = ledger.user.get((job.team, job.user), 0)
        if mine + job.gpus > team.max_gpus_per_user:
            return (f"user {job.user} at {mine} of {team.max_gpus_per_user} GPUs allowed per user "
                    f"in team {job.team}; needs {job.gpus} more")
    if job.group and job.group_limit is not None:
        running = ledger.group.get(job.group, 0)
        if running >= job.group_limit:
            return f"array {job.group} at {running} of {job.group_limit} tasks running at once"
    return None


# -- phase 4: fit (gang) ---------------------------------------------------------

def _types_for(job: PendingJob, snap: Snapshot) -> list[str | None]:
    return [job.gpu_type] if job.gpu_type else [None]


def _behind(job: PendingJob, reserved: dict[str | None, str], snap: Snapshot) -> str | None:
    """A job waiting first for every GPU type, or for this job's type, holds it
    back. (A job of any type is kept off the reserved types in `_fit` instead:
    it may still start on a type nobody is waiting for.)"""
    holder = reserved.get(None)
    if holder is None and job.gpu_type is not None:
        holder = reserved.get(job.gpu_type)
    if holder is None:
        return None
    kind = f"{job.gpu_type} GPUs" if job.gpu_type else "GPUs"
    return f"waiting behind job {holder}, which is first in line for {kind}"


def _could_ever_fit(job: PendingJob, snap: Snapshot) -> bool:
    counts: dict[str, int] = defaultdict(int)
    for gpu in snap.gpus:
        counts[gpu.type] += 1
    most = counts.get(job.gpu_type, 0) if job.gpu_type else max(counts.values(), default=0)
    if job.gpus > most:
        return False
    if snap.cpus is not None and job.cpus and job.cpus > snap.cpus:
        return False
    return not (snap.memory is not None and job.memory and job.memory > snap.memory)


def _fit(job: PendingJob, snap: Snapshot, ledger: _Ledger,
         reserved: dict[str | None, str]) -> tuple[tuple[int, ...] | None, str]:
    by_type: dict[str, list[int]] = defaultdict(list)
    for index, gpu_type in sorted(ledger.free.items()):
        if job.gpu_type is None or gpu_type == job.gpu_type:
            by_type[gpu_type].append(index)
    of = f" of {job.gpu_type}" if job.gpu_type else ""
    if job.gpu_type and not any(g.type == job.gpu_type for g in snap.gpus):
        kinds = ", ".join(sorted({g.type for g in snap.gpus})) or "none"
        return None, f"needs {_gpus(job.gpus)}{of}; this cluster has none of that type (has: {kinds})"
    # best fit: the type with the fewest free GPUs that still holds the whole gang
    candidates = sorted((len(v), t) for t, v in by_type.items() if len(v) >= job.gpus and t not in reserved)
    free = sum(len(v) for v in by_type.values())
    if not candidates:
        taken = sorted(t for t, v in by_type.items() if len(v) >= job.gpus)
        if taken:  # it fits only on GPUs an earlier job is waiting for
            return None, f"waiting behind job {reserved[taken[0]]}, which is first in line for {taken[0]} GPUs"
        most = max((len(v) for v in by_type.values()), default=0)
        detail = f"{free} free" if len(by_type) <= 1 else f"{free} free, at most {most} of one type"
        return None, f"needs {_gpus(job.gpus)}{of}, {detail}"
    if ledger.cpus_free is not None and job.cpus and job.cpus > ledger.cpus_free:
        return None, f"needs {job.cpus} CPUs, {ledger.cpus_free} free"
    if ledger.memory_free is not None and job.memory and job.memory > ledger.memory_free:
        from ..models.units import format_size
        return None, f"needs {format_size(job.memory)} memory, {format_size(ledger.memory_free)} free"
    chosen = by_type[candidates[0][1]][: job.gpus]
    return tuple(chosen), ""


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"
