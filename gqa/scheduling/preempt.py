"""Preemption (opt-in per tier): a waiting job may stop running jobs of lower,
preemptible tiers. Victims are chosen to lose the least work: the least time
since their last checkpoint, then the least elapsed. They are sent back to the
queue keeping their place; the waiting job starts once their GPUs are free.
GPUs of jobs already being stopped count first, so one shortage never
preempts twice, and the free GPUs it counts on are held for it for the rest
of the pass (fit.Capacity.hold), so its victims never stop for a job ranked
below it.

In a tier with time slicing (slicing.py), a job that is not demoted may also
stop jobs of its own tier that have had their slice, those with the most
service first; back in the queue they rank behind it, demoted. Slicing is asked
only for a job no larger than the GPUs free and those of the runs it may stop,
all pools together: under a long overload the jobs that have not had their
slice are often gangs far larger than that, and a pass that explains nothing
passes them over."""

from collections import defaultdict
from itertools import chain

from .fit import pools_for
from .inventory import Pool
from .index import QueueIndex
from .index_slicing import Room
from .slicing import demoted, slicing_tiers
from .snapshot import PendingJob, RunningJob, Snapshot


class Preemptor:
    """`free`: the GPUs no job holds, index -> type (the ledger's free list).
    GPUs are counted per pool (type, spot): a job runs in one pool."""

    def __init__(self, snap: Snapshot, free: dict[int, str], index: QueueIndex):
        self.slicing = slicing_tiers(snap.policy)
        self.enabled = bool(snap.policy.preempt_tiers or self.slicing)
        self.now = snap.now
        self.policy = snap.policy
        self.free = free
        self.stopping: dict[Pool, list[int]] = defaultdict(list)   # pool -> GPUs already on their way back
        self.candidates: list[RunningJob] = []   # of preemptible tiers
        self.index = index   # which running jobs slicing may stop: asked per tier when first wanted
        self.sliced: dict[int, list[RunningJob]] = {}   # tier -> those slicing may stop, most service first
        self.sliced_left: dict[int, int] = {}   # tier -> the GPUs of those not chosen yet
        self.chosen: set[str] = set()
        self.slices_from: dict[int, tuple[tuple[int, ...], bool]] = {}   # tier -> _slices_from(tier)
        # the tiers where slicing may stop a run for some job of theirs that is not demoted, GPUs
        # counted: asked once, when first wanted (QueueIndex.slicing_may_stop)
        self.slices_in: frozenset[int] | None = None
        self.slice_rooms: dict[int, Room] = {}   # tier -> _slice_room(tier)
        self.demoted_now: dict[str, bool] = {}   # job -> demoted: asked of each job several times a pass
        if not self.enabled:
            return
        self.pool_of = index.pool_of   # GPU index -> pool (type, spot)
        self.all_pools = set(index.free_in)
        policy = snap.policy
        # the running jobs are walked only where preemption across tiers may pick them, or GPUs
        # are on their way back: a pass that may only slice reads the index's order instead
        for run in snap.running if policy.preempt_tiers or index.stopping else ():
            if run.stopping:
                for gpu in run.gpus:
                    self.stopping[self.pool_of[gpu]].append(gpu)
            elif run.tier in policy.preempt_tiers:
                self.candidates.append(run)
        self.candidates.sort(key=lambda r: (self.now - (r.checkpointed_at or r.started_at), -r.started_at, r.id))
        # (tier, pools) -> the fewest GPUs preemption could not find there: victims are only ever
        # taken, so a job as large, looked at later in the pass, cannot find them either
        self.short: dict[tuple, int] = {}

    def may_help_from(self, job: PendingJob) -> bool:
        """Whether preemption might start `job` or a job ranked after it: a pass that explains
        nothing and has no GPU left for anything stops when it cannot (plan.py). Only time
        slicing is asked: jobs it may stop, in this job's tier if it is not demoted, or below,
        while the pass has left it GPUs enough to give (`_spent`)."""
        below, own = self._slices_from(job.tier)
        for tier in below:
            if not self._spent(tier):
                return True
        return own and not self._demoted(job) and not self._spent(job.tier)

    def _spent(self, tier: int) -> bool:
        """Whether slicing has nothing left to give in the tier for the rest of the pass: once it
        has chosen victims there (so its runs are read), the GPUs free, on their way back and held
        by its runs not chosen are fewer than the smallest job there that is not demoted needs (1
        where the index does not keep that size). Within a pass these only shrink. A pass that
        stopped every run it may for the first jobs would else look at every job of the tier
        behind them."""
        left = self._left_in(tier)
        if left is None:
            return False
        ranked = self.index.rank()
        least = ranked.least_undemoted(tier) if ranked.least_kept(tier) else 1
        return least is None or left < least

    def _left_in(self, tier: int) -> int | None:
        """The GPUs slicing could still give a job of the tier in this pass, counted exactly once it
        has chosen victims there (its runs are read then): free, on their way back, and held by its
        runs not chosen. None before: `_slice_room` bounds them."""
        left = self.sliced_left.get(tier)
        if left is None:
            return None
        return left + len(self.free) + sum(len(gpus) for gpus in self.stopping.values())

    def _demoted(self, job: PendingJob) -> bool:
        known = self.demoted_now.get(job.id)
        if known is None:
            known = self.demoted_now[job.id] = demoted(job, self.policy, self.slicing, self.now)
        return known

    def _slices_from(self, tier: int) -> tuple[tuple[int, ...], bool]:
        """The tiers below `tier` where slicing may stop a job for a job there that is not demoted,
        with GPUs enough for the smallest (QueueIndex.slicing_may_stop), and whether `tier` is one:
        asked of the index once a pass, as its answer only grows more false within one."""
        known = self.slices_from.get(tier)
        if known is None:
            if self.slices_in is None:
                self.slices_in = self.index.slicing_may_stop(self.now)
            known = self.slices_from[tier] = (tuple(sorted(t for t in self.slices_in if t > tier)),
                                              tier in self.slices_in)
        return known

    def may_help(self, job: PendingJob, tier: int) -> bool:
        """Whether `victims_for` might find room for the job (False: it surely returns None): only
        with jobs of preemptible tiers running, GPUs on their way back, or, if it has not had its
        slice, running jobs of its tier that slicing may stop, holding with the free GPUs as many
        as it needs (`_slice_room`; once victims are chosen there, `_left_in`)."""
        if not self.enabled:
            return False
        if self.candidates or any(self.stopping.values()):
            return True
        if not (tier in self.slicing and self._slices_from(tier)[1] and not self._demoted(job)):
            return False
        left = self._left_in(tier)
        return self._slice_room(tier).holds(job.gpus) if left is None else left >= job.gpus

    def helped_in(self, tier: int, most: int) -> set[str] | None:
        """The ids of the tier's waiting jobs `may_help` is true of (None: it may be of any): a pass
        that explains nothing reads them beside the jobs that may fit (plan._candidates). Read no
        further than `most` + 1 of them: more are too many to spare a walk."""
        if not self.enabled:
            return set()
        if self.candidates or any(self.stopping.values()):
            return None
        if not (tier in self.slicing and self._slices_from(tier)[1]) or self._spent(tier):
            return set()
        left = self._left_in(tier)
        # the runs slicing may stop are counted only as far as the largest job read needs
        holds = self._slice_room(tier).holds if left is None else left.__ge__
        helped: set[str] = set()
        for job in self.index.rank().undemoted(tier):
            if holds(job.gpus):
                helped.add(job.id)
                if len(helped) > most:
                    break
        return helped

    def _slice_room(self, tier: int) -> Room:
        """The GPUs slicing could give a job of the tier in this pass, every pool together: those
        free when first asked, then those of the runs it may stop (fixed within a pass), counted as
        far as any ask has needed."""
        room = self.slice_rooms.get(tier)
        if room is None:
            room = self.slice_rooms[tier] = Room(len(self.free), self.index.slice_stops(tier, self.now))
        return room

    def victims_for(self, job: PendingJob, tier: int) -> tuple[list[str], str, list[int]] | None:
        """Jobs to stop so `job` can start, a reason, and the free GPUs it counts on beside theirs,
        which the pass must hold for it (Capacity.hold): a job ranked below that started on them
        would leave the victims stopped for nothing, to be preempted again in the next pass. None
        if preemption cannot help."""
        if not self.may_help(job, tier):
            return None
        best = None
        slices = tier in self.slicing and not self._demoted(job)
        pools = sorted({p for r in pools_for(job, self.all_pools, self.policy) for p in r})
        short = (tier, slices, tuple(pools))
        if job.gpus >= self.short.get(short, job.gpus + 1):
            return None
        # lower tiers' jobs, then (LAS) its own tier's that had their slice: walked, not copied
        lower = [r for r in self.candidates if r.tier > tier] if self.candidates else []
        own = self._sliced(tier) if slices else []
        for pool in pools:
            free_now = self._free_in(pool)
            if free_now >= job.gpus:
                return None  # enough GPUs: it waits for another reason (a reservation), not for capacity
            have = free_now + len(self.stopping[pool])
            picked = []
            for run in chain(lower, own):
                if have >= job.gpus:
                    break
                if run.id in self.chosen:
                    continue
                mine = [i for i in run.gpus if self.pool_of[i] == pool]
                if mine:
                    picked.append(run)
                    have += len(mine)
            picked = self._without_spares(picked, pool, have - job.gpus)
            if have >= job.gpus and (best is None or len(picked) < len(best[1])):
                best = (pool, picked)
        if best is None:
            if not any(self._free_in(pool) >= job.gpus for pool in pools):
                self.short[short] = min(job.gpus, self.short.get(short, job.gpus))
            return None
        pool, picked = best
        # what it takes: the free GPUs, the stopping ones and these victims, kept for this job
        counted = [index for index in self.free if self.pool_of[index] == pool]
        need = job.gpus - len(counted)
        self.stopping[pool] = self.stopping[pool][max(0, need):]
        self.chosen.update(r.id for r in picked)
        if slices:   # its own tier's victims came from `_sliced(tier)`; a lower tier's stay counted in
            # theirs, an overcount that only keeps a pass going (one preempting across tiers never stops early)
            self.sliced_left[tier] -= sum(len(r.gpus) for r in picked if r.tier == tier)
        lost = sum(self.now - (r.checkpointed_at or r.started_at) for r in picked)
        if not picked:
            return [], "starts when the preempted jobs have stopped", counted
        names = ", ".join(r.id for r in picked)
        why = "lower tier" if all(r.tier > tier for r in picked) else \
            f"had their {self.policy.slice_after / 3600:.2g} GPU-hour slice" if all(r.tier == tier for r in picked) \
            else "lower tier, or had their slice"
        return [r.id for r in picked], (f"preempting {names} ({why}; {lost / 60:.0f} GPU-job-minutes "
                                        "since their last checkpoints)"), counted

    def _sliced(self, tier: int) -> list[RunningJob]:
        runs = self.sliced.get(tier)
        if runs is None:   # LAS: the most service first
            now = self.now
            ranked = sorted([(-run.attained(now), run.id, run) for run in self.index.sliced(tier, now)])
            runs = self.sliced[tier] = [run for _, _, run in ranked]   # ids differ: runs are never compared
            self.sliced_left[tier] = sum(len(run.gpus) for run in runs if run.id not in self.chosen)
        return runs

    def _without_spares(self, picked: list[RunningJob], pool: Pool, spare: int) -> list[RunningJob]:
        """`picked` less the victims the others make unneeded (a later, larger victim can cover an
        earlier one), the most work lost dropped first: no victim is stopped for nothing."""
        kept = list(picked)
        for run in sorted(picked, key=lambda r: (r.checkpointed_at or r.started_at, r.id)):
            gpus = sum(1 for i in run.gpus if self.pool_of[i] == pool)
            if gpus <= spare:
                kept.remove(run)
                spare -= gpus
        return kept

    def _free_in(self, pool: Pool) -> int:
        return sum(1 for index in self.free if self.pool_of[index] == pool)
