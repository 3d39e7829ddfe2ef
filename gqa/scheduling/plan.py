"""One scheduling pass, as named phases over a snapshot:

1. account  - what the running jobs hold (ledger.py)
2. rank     - strict tiers; within a tier the multifactor score (ranking.py)
3. gate     - user holds, --begin, dependencies; skip, never block; a dependency that
              can never be met is listed to be cancelled (dependencies.py)
4. admit    - quotas: team and user GPU caps, array limits; skip, never block (quotas.py)
5. fit      - gang, then FIFO blocking or EASY backfill with reservations (fit.py)
6. preempt  - a blocked job may stop lower, preemptible tiers, and in a tier with time
              slicing, jobs of its own tier that have had their slice (preempt.py, slicing.py)
Budgets (budget.py) are checked with the quotas: over budget, a job is HELD.

CPU-only jobs (0 GPUs) go through the same phases: they count 0 GPUs against
quotas and fair share, and fit on CPUs and memory alone. An exclusive job
never preempts: it waits for the machine to empty.
"""

from bisect import bisect_right, insort
from collections import Counter, defaultdict

from .budget import BudgetLedger
from .dependencies import Gate, gate
from .fit import Capacity
from .inventory import pool_rounds
from .index import QueueIndex, index_of
from .ledger import Ledger
from .ledger import account
from .preempt import Preemptor
from .quotas import over_quota
from .ranked import FIFO_TIER
from .ranking import Ranking
from .snapshot import PendingJob, Plan, Snapshot, Start

INF = float("inf")
# a held job the budget covers again is still HELD until the pass's release is written (its start follows)
BUDGET_ALLOWS = "its team's budget allows it again: released at the queue's next pass"
SKIP_SHARE = 8   # candidates at most this share of a tier's jobs, or the walk is cheaper (_candidates)


def plan(snap: Snapshot, *, explain: bool = True) -> Plan:
    """With explain=False the pass stops once nothing is left to give (fewer GPUs
    free than the smallest job still to look at needs, and no CPU-only job left
    or no CPU for one), so a dispatcher with a long queue pays for the jobs it
    can start, not for explaining the rest; unless a tier preempts across
    tiers, the jobs between that decide nothing are passed over unscored, and
    its `order`, `waiting` and `factors` leave them out.

    A snapshot whose pending and running jobs are views of a QueueIndex the
    caller keeps (index.py) is passed through it as it stands; any other is
    indexed first (O(n log n)). Either way the phases read the same index."""
    index = indexed(snap)
    ledger = account(snap, index)
    ranking = Ranking(snap, ledger, index)
    capacity = Capacity(snap, ledger, index, explain=explain)
    preemptor = Preemptor(snap, ledger.free, index)
    budget = BudgetLedger(snap)
    # time slicing alone lets a pass stop once preemption can help no job left (may_help_from)
    # and not while a job is held for a budget no longer set: the pass releases it, wherever it is
    may_stop = not explain and not budget.active and not snap.policy.preempt_tiers and not index.held
    slicing = bool(preemptor.slicing)
    left = Remaining(index, ledger, capacity, may_stop)
    # for every gated job first: a pass that stops early still lists the never-met
    gated_jobs = index.gated_jobs()
    gated = gate(snap, gated_jobs)
    out = Plan(never=gated.never)
    for job in gated_jobs:   # queued with its owner's hold (approved since): held, however far back
        if job.user_hold and not job.held and job.id in gated and job.id not in gated.never:
            out.hold[job.id] = gated.reason(job.id)
    passed_over = _passed_over(gated, capacity, preemptor, left) if may_stop else None
    # the candidates' books pay for themselves over the passes of an index kept between them (the
    # replay's, the ETA's); one built for this pass alone (a dispatcher reading its queue afresh) walks
    kept = index_of(snap.pending, snap.running) is index
    ordered = ranking.ordered(passed_over, _candidates(index, capacity, left, preemptor) if passed_over and kept
                              else None)
    while True:
        if may_stop and not slicing and not left.may_start():   # asked before the next job: the queue is ranked lazily
            return out
        following = next(ordered, None)
        if following is None:
            break
        job, factors = following
        if may_stop and slicing and _ends_at(job, preemptor, left):
            return out
        left.looked_at(job)
        out.order.append(job.id)
        out.factors[job.id] = factors
        if job.id in gated:   # worded only for a pass that explains: no dispatcher reads why
            out.waiting[job.id] = gated.reason(job.id) if explain else ""
            continue
        over_budget = budget.over(job)
        if job.held or over_budget:
            if over_budget is None:
                # it starts at a later pass: its cap counts now, so a pass releases what the budget
                # could start, not the team's whole queue whenever the headroom passes one job's cap
                budget.started(job)
                out.release.append(job.id)
                over_budget = BUDGET_ALLOWS
            elif not job.held:
                out.hold[job.id] = over_budget
            out.waiting[job.id] = over_budget
            continue
        if not explain and _decides_nothing(job, capacity, preemptor, left):
            out.waiting[job.id] = ""
            continue
        reason = over_quota(job, snap, ledger)
        if reason is None and not capacity.backfill:
            # a job waits first for every GPU (or the machine): nothing after it can start
            held_back = capacity.machine_held or (job.gpus and not left.cpu_room())
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
                victims, shortfall, counted = preemption
                out.preempt += victims
                capacity.hold(counted)
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


def _ends_at(job: PendingJob, preemptor: Preemptor, left: "Remaining") -> bool:
    """Whether a pass that explains nothing and may stop early, under time slicing alone, stops at
    this job: preemption can start neither it nor a job after it, and no GPU is left for any."""
    return not preemptor.may_help_from(job) and not left.may_start()


def _decides_nothing(job: PendingJob, capacity: Capacity, preemptor: Preemptor, left: "Remaining") -> bool:
    """Whether a job that is not held or gated can neither start, hold anything back nor make room:
    its tier's reservation is made and none is left, preemption cannot help it, and no pool has its
    GPUs free long enough (Remaining.may_fit). A pass that explains nothing passes over it."""
    return capacity.reserves_nothing_for(job, job.tier) and not preemptor.may_help(job, job.tier) \
        and not left.may_fit(job)


def _passed_over(gated: Gate, capacity: Capacity, preemptor: Preemptor, left: "Remaining"):
    """For a pass that explains nothing: whether the ranking may pass over a job unscored and
    unlisted (Ranking.ordered), the loop's own test ahead of the loop. Within a pass GPUs are only
    taken, reservations only added, and victims only chosen (the GPUs already on their way back
    only given out), so a job this is true of when the ranking reads it ahead (a team's next head)
    is still passed over when its turn comes. Under time slicing, a job where the loop would stop
    the pass is not passed over: the loop meets it and stops."""
    if not capacity.backfill:
        return None   # without backfill every job holds something back (reserves_nothing_for): none is passed over
    if preemptor.enabled:   # time slicing alone: a pass that may stop early does not preempt across tiers
        def passed_over(job: PendingJob) -> bool:
            if job.held or job.id in gated or not _decides_nothing(job, capacity, preemptor, left):
                return False
            # else, once slicing has nothing left to give, the ranking would pass over the rest of
            # the tier one by one (a dispatcher's index has no candidates' books to jump with)
            return not _ends_at(job, preemptor, left)
        return passed_over
    # the same test where preemption is off (may_help: False), asked of most of a long queue
    reserves_nothing_for, may_fit = capacity.reserves_nothing_for, left.may_fit

    def passed_over_unpreempted(job: PendingJob) -> bool:
        return not job.held and job.id not in gated and reserves_nothing_for(job, job.tier) and not may_fit(job)
    return passed_over_unpreempted


def _candidates(index: QueueIndex, capacity: Capacity, left: "Remaining", preemptor: Preemptor):
    """For a pass that explains nothing: the ids of a tier's jobs (every tier's, for FIFO_TIER) that
    `_passed_over` may not pass over now: held, gated and exclusive jobs, those of a kind with n GPUs
    free in a pool open to it for their shortest limit, and those preemption may help
    (Preemptor.helped_in: a time-sliced tier's jobs that have not had their slice and need no more
    GPUs than slicing could give). Its test only grows more true within a pass, so after a job it
    passed over, these are a superset of the jobs of its list it will not pass over later in the
    pass. None where that would not spare a walk: a tier without its reservation yet (it passes
    over none there), or where these are more than 1 in SKIP_SHARE of the tier's jobs (a walk meets
    one soon). With tens of thousands waiting and a few of them able to fit, the ranking reads
    these instead of passing the rest one by one."""
    refused: set[tuple] = set()   # (tier, horizons' version) found with too many: so while they stand

    def candidates(tier: int) -> set[str] | None:
        books = index.skip_books()
        tiers = list(books.tiers) if tier == FIFO_TIER else [tier]
        if not all(capacity.reserves_nothing_in(t) for t in tiers) or (tier, capacity.version()) in refused:
            return None
        most = sum(books.tiers[t] for t in tiers) // SKIP_SHARE   # more: a walk meets one soon
        helped: set[str] = set()
        for t in tiers:
            more = preemptor.helped_in(t, most - len(helped))
            if more is None:
                return None
            helped |= more
        reaches = {}
        ids = index.gated.keys() | index.held | books.exclusive | helped
        count = len(ids)
        for kind in index.waiting_kinds():
            reach = left.reach(kind)
            if reach is not None:
                reaches[kind] = reach
                count += index.count_within(kind, reach)
        if count * SKIP_SHARE > sum(books.tiers[t] for t in tiers):
            refused.add((tier, capacity.version()))
            return None
        for kind, reach in reaches.items():
            ids.update(index.within(kind, reach))
        if tier == FIFO_TIER:
            return ids
        pending = index.pending
        return {job_id for job_id in ids if pending[job_id].tier == tier}
    return candidates


def indexed(snap: Snapshot) -> QueueIndex:
    """The index the snapshot's jobs are views of, brought up to its `now`; else one built for it."""
    index = index_of(snap.pending, snap.running)
    if index is not None and index.policy is snap.policy and index.gpus is snap.gpus \
            and index.ranked.advance(snap.now):
        index.advance_ends(snap.now)
        return index
    return QueueIndex.of(snap.gpus, snap.policy, snap.pending, snap.running, snap.now)


class Remaining:
    """The jobs a pass has not looked at yet, and whether any of them could still start: one of
    n GPUs needs n free GPUs in one pool open to it that a reservation leaves it for at least its
    shortest limit (the index counts pending jobs by kind and limit; those looked at are taken
    off). A bound, not a fit: it only lets a pass that explains nothing stop early."""

    def __init__(self, index: QueueIndex, ledger: Ledger, capacity: Capacity, may_stop: bool = True):
        """`may_stop`: the pass asks `may_start`; one that cannot stop early only asks `cpu_room`,
        so the jobs it looks at are only counted, not sorted by kind and limit."""
        self.index, self.ledger, self.capacity, self.may_stop = index, ledger, capacity, may_stop
        self.kinds: dict[tuple, int] | None = None                 # jobs per kind, read when first wanted
        self.looked: Counter[tuple] = Counter()                    # kind -> jobs looked at
        self.cpu_only = index.sizes.get(0, 0)
        self.seen: dict[tuple, list[float]] = defaultdict(list)   # kind -> limits looked at, sorted
        self.pools_of: dict[tuple, list] = {}                      # kind -> the pools open to it
        # the last `may_start` that said yes: (horizons' version, kind, span, how many unlooked jobs of
        # the kind fit the span); while the horizons stand and some are left, the answer stands
        self.witness: tuple[tuple, tuple, float, int] | None = None
        # horizons' version, (kind, limit) -> may_fit, kind -> reach
        self.fits: tuple[tuple | None, dict[tuple, bool], dict[tuple, float | None]] = (None, {}, {})

    def looked_at(self, job: PendingJob) -> None:
        """Counts the job as looked at (by kind and limit where the pass may stop early)."""
        self.cpu_only -= job.gpus == 0
        if not self.may_stop:
            return
        kind, limit = self.index.pending_kind(job)
        self.looked[kind] += 1
        insort(self.seen[kind], limit)
        witness = self.witness
        if witness is not None and witness[1] == kind and limit <= witness[2]:
            self.witness = (witness[0], kind, witness[2], witness[3] - 1)

    def may_fit(self, job: PendingJob) -> bool:
        """Whether the job passes the bound `may_start` uses: n GPUs free in one pool open to it
        that no reservation needs within its shortest limit. False: `fit` cannot place it."""
        if not job.gpus:
            return True
        kind_limit, version = self.index.pending_kind(job), self.capacity.version()
        if self.fits[0] != version:
            self.fits = (version, {}, {})
        fits = self.fits[1].get(kind_limit)   # jobs of a kind share few limits: asked once per horizons
        if fits is None:
            kind, reaches = kind_limit[0], self.fits[2]
            if kind not in reaches:   # the kind's other limits ask the same reach
                reaches[kind] = self.reach(kind)
            reach = reaches[kind]
            fits = self.fits[1][kind_limit] = reach is not None and kind_limit[1] <= reach
        return fits

    def reach(self, kind: tuple) -> float | None:
        """The longest a job of this kind could run if it started now: its n-th freest GPU's span in the
        best pool open to it, before a reservation needs it (inf for a CPU-only kind); None: no pool
        has n GPUs free."""
        n = kind[2]
        if not n:
            return INF
        spans = self.capacity.horizons()
        return max((spans[p][n - 1] for p in self.pools_for(kind, spans) if len(spans[p]) >= n), default=None)

    def pools_for(self, kind: tuple, spans) -> list:
        pools = self.pools_of.get(kind)
        if pools is None:
            types, spot, _ = kind
            pools = self.pools_of[kind] = [p for r in pool_rounds(types, spot, spans) for p in r]
        return pools

    def cpu_room(self) -> bool:
        led = self.ledger
        return bool(self.cpu_only) and led.exclusive is None and (led.cpus_free is None or led.cpus_free > 0)

    def may_start(self) -> bool:
        if self.cpu_room():
            return True
        if not self.ledger.free:
            return False   # no GPU free: asked before the queue is even ranked
        version = self.capacity.version()
        witness = self.witness
        if witness is not None and witness[0] == version and witness[3] > 0:
            return True
        if self.kinds is None:
            self.kinds = self.index.kinds()
        spans = self.capacity.horizons()
        for kind, n in self.kinds.items():
            size = kind[2]
            if n <= self.looked[kind] or not size:
                continue
            for pool in self.pools_for(kind, spans):
                free = spans[pool]
                if len(free) < size:
                    continue
                span = free[size - 1]
                left = n - self.looked[kind] if span == INF else \
                    self.index.count_within(kind, span) - bisect_right(self.seen[kind], span)
                if left > 0:
                    self.witness = (version, kind, span, left)
                    return True
        return False
