"""One scheduling pass, as named phases over a snapshot:

1. account  - what the running jobs hold (ledger.py)
2. rank     - strict tiers; within a tier the multifactor score (ranking.py)
3. gate     - user holds, --begin, dependencies; skip, never block; a dependency that
              can never be met is listed to be cancelled (dependencies.py)
4. admit    - quotas: team and user GPU caps, array limits; skip, never block (quotas.py)
5. fit      - gang, then FIFO blocking or EASY backfill with reservations (fit.py)
6. preempt  - a blocked job may stop lower, preemptible tiers (preempt.py)
Budgets (budget.py) are checked with the quotas: over budget, a job is HELD.

CPU-only jobs (0 GPUs) go through the same phases: they count 0 GPUs against
quotas and fair share, and fit on CPUs and memory alone. An exclusive job
never preempts: it waits for the machine to empty.
"""

from .budget import BudgetLedger
from .dependencies import gate
from .fit import Capacity
from .ledger import account
from .preempt import Preemptor
from .quotas import over_quota
from .ranking import Ranking
from .snapshot import Plan, Snapshot, Start


def plan(snap: Snapshot, *, explain: bool = True) -> Plan:
    """With explain=False the pass stops once nothing is left to give (no GPU
    free, and no CPU-only job still to look at or no CPU for one), so a
    dispatcher with a long queue pays for the jobs it can start, not for
    explaining the rest."""
    ledger = account(snap)
    cpu_only_left = sum(1 for job in snap.pending if job.gpus == 0)

    def cpu_room() -> bool:
        return bool(cpu_only_left) and ledger.exclusive is None and (ledger.cpus_free is None or ledger.cpus_free > 0)

    ranking = Ranking(snap, ledger)
    capacity = Capacity(snap, ledger, explain=explain)
    preemptor = Preemptor(snap, ledger.free)
    budget = BudgetLedger(snap)
    gated = gate(snap)   # for every pending job first: a pass that stops early still lists the never-met
    out = Plan(never=gated.never)
    for jobs in ranking.tiers():
        for job, factors in ranking.in_order(jobs):
            if not explain and not ledger.free and not cpu_room() and not preemptor.enabled and not budget.active:
                return out
            cpu_only_left -= job.gpus == 0
            out.order.append(job.id)
            out.factors[job.id] = factors
            if job.id in gated.waiting:
                out.waiting[job.id] = gated.waiting[job.id]
                if job.user_hold and not job.held and job.id not in gated.never:
                    out.hold[job.id] = out.waiting[job.id]   # queued with its owner's hold (approved since)
                continue
            over_budget = budget.over(job)
            if job.held or over_budget:
                if over_budget is None:
                    out.release.append(job.id)
                    over_budget = "the budget allows it again: back in the queue"
                elif not job.held:
                    out.hold[job.id] = over_budget
                out.waiting[job.id] = over_budget
                continue
            reason = over_quota(job, snap, ledger)
            if reason is None and not capacity.backfill:
                # a job waits first for every GPU (or the machine): nothing after it can start
                held_back = capacity.machine_held or (job.gpus and not cpu_room())
                if not explain and None in capacity.held_types and held_back and not preemptor.enabled \
                        and not budget.active:
                    return out
                reason = capacity.behind(job)
            if reason is not None:
                out.waiting[job.id] = reason
                continue
            gpus, shortfall, granted = capacity.fit(job)
            if gpus is None:
                preemption = None if job.exclusive else preemptor.victims_for(job, job.tier)
                if preemption is not None:
                    victims, shortfall = preemption
                    out.preempt += victims
                out.waiting[job.id] = shortfall
                start = capacity.blocked(job, job.tier)
                if start is not None:
                    out.reserved[job.id] = start
                continue
            ledger.take(job, gpus)
            budget.started(job)
            if capacity.started(job, gpus, granted):
                out.backfilled.add(job.id)
            out.starts.append(Start(job.id, gpus, granted))
    return out
