"""What a caller that runs pass after pass keeps between them, so a pass costs
what it looks at rather than the whole queue and cluster.

A pass needs the pending jobs in rank order, what the running jobs hold, and
when each GPU frees up. Built from a snapshot, that is O(n log n) in the queue
and O(GPUs) in the cluster at every pass. `QueueIndex` keeps all three up to
date one change at a time (a job queued, started, ended), so a replay or a
long-lived dispatcher pays O(log n) per change and a pass walks the ranked
jobs lazily, stopping when nothing more can start.

The rank order is kept under keys that hold still as time passes
(ranked.py, `RankedJobs`).

A snapshot carries the index through its `pending` and `running` fields
(`index.pending_view`, `index.running_view`): a snapshot with other pending
or running jobs (a `dataclasses.replace`, an ETA replay) simply has no index,
and the pass builds what it needs from scratch, as it always could."""

import gc
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from sortedcontainers import SortedList

from .horizon import PREDICTIONS, busy_until, counted_run
from .inventory import Pool, tables
from .ranked import RankedJobs
from .index_slicing import SlicingReads
from .slicing import in_slicing, slicing_tiers, stoppable_at
from .snapshot import Gpu, PendingJob, Policy, RunningJob

J = TypeVar("J", PendingJob, RunningJob)


class LiveView(Generic[J]):
    """One of the index's job tables (`pending` or `running`) as a snapshot's field: read-only,
    live, and found again by `index_of`."""

    __slots__ = ("index", "table")

    def __init__(self, index: "QueueIndex", table: str):
        self.index, self.table = index, table

    def _jobs(self) -> dict:
        return getattr(self.index, self.table)

    def __iter__(self) -> Iterator[J]:
        return iter(self._jobs().values())

    def __len__(self) -> int:
        return len(self._jobs())

    def __contains__(self, job: object) -> bool:
        return self._jobs().get(getattr(job, "id", None)) is job


def index_of(pending: object, running: object) -> "QueueIndex | None":
    """The index a snapshot's jobs come from, if they are its two tables' views."""
    if isinstance(pending, LiveView) and isinstance(running, LiveView) and pending.index is running.index \
            and (pending.table, running.table) == ("pending", "running"):
        return pending.index
    return None


REBUILD_SHARE = 4   # replace_many ranks the whole queue again when given a quarter of it or more


def _shortest_limit_of(policy: Policy):
    """The shortest time backfill could count on a job holding its GPUs, as a function of the job:
    its --time-min, else its run as backfill counts it (horizon.counted_run; inf: no end). A build
    calls it for every pending job, so backfill by limits reads the wall time directly."""
    if policy.backfill_by != PREDICTIONS:
        return _shortest_by_limits

    def by_predictions(job: PendingJob) -> float:
        length = counted_run(job, policy) or math.inf
        return min(job.time_min, length) if job.time_min is not None else length
    return by_predictions


def _shortest_by_limits(job: PendingJob) -> float:
    if job.time_min is not None:
        return job.time_min
    return job.wall_time or math.inf


def gated(job: PendingJob) -> bool:
    """A job the gate phase must look at: a dependency, its owner's hold or a --begin."""
    return bool(job.dependency or job.user_hold or job.begin is not None)


@contextmanager
def _no_cycle_collection():
    """A bulk build allocates a few objects per job, none of them cyclic garbage, yet the cyclic
    collector would walk the growing heap over and over meanwhile: over half the build's time
    at 100,000 jobs. Paused for the build, and resumed as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class QueueIndex(SlicingReads):
    def __init__(self, gpus: tuple[Gpu, ...], policy: Policy):
        self.gpus, self.policy = gpus, policy
        inventory = tables(gpus)
        self.type_of, self.pool_of = inventory.type_of, inventory.pool_of
        self.pending: dict[str, PendingJob] = {}
        self.running: dict[str, RunningJob] = {}
        self.pending_view: LiveView[PendingJob] = LiveView(self, "pending")
        self.running_view: LiveView[RunningJob] = LiveView(self, "running")
        # the pending side
        self.sizes: Counter[int] = Counter()                 # GPU counts of pending jobs
        # (fit class, GPU count) -> shortest limits (_shortest_limit_of): what a pass may stop on (plan.Remaining)
        self.limits: dict[tuple, SortedList] = defaultdict(SortedList)
        self.unranked: list[PendingJob] | None = None       # a build's jobs, until a pass ranks them
        # pending jobs with a dependency, hold or --begin, in queue order (pending's: a job joins both
        # at once), so that a pass reads them alone and not every pending job to find them
        self.gated: dict[str, None] = {}
        self.held: set[str] = set()                          # pending jobs held for a budget
        # which pending jobs a pass may not pass over (plan._candidates): built when a pass over a kept
        # index first asks (it asks only with a long queue to walk), then kept
        self.books: SkipBooks | None = None
        self.kinds_known: dict[str, tuple[PendingJob, tuple]] = {}   # id -> (job, its kind and limit): pending_kind
        self.ranked = RankedJobs(policy, len(gpus))
        self.shortest_limit = _shortest_limit_of(policy)
        # the running side: the pass's ledger and timeline, kept
        self.free: dict[int, str] = dict(inventory.type_of)  # free GPU -> type
        self.free_in: dict[Pool, SortedList] = {p: SortedList(ix) for p, ix in inventory.pools.items()}   # in order
        # (until, GPU) per pool, read only by reservations (fit.Timeline, `busy_in`): brought up to date
        # when read, from the GPUs placed since with the `until` each had in it (None: not in it), so
        # a replay whose passes reserve nothing (time slicing) never sorts its gangs' GPUs
        self.busy: dict[Pool, SortedList] = {p: SortedList() for p in inventory.pools}
        self.busy_stale: dict[int, float | None] = {}
        self.until: dict[int, float] = {}                    # busy GPU -> when its last holder ends
        self.holder: dict[int, str] = {}                     # busy GPU -> the one job holding it
        self.shared: dict[int, dict[str, float]] = {}       # a GPU two or more hold -> their ends
        self.team_gpus: Counter[str] = Counter()
        self.user_gpus: Counter[tuple[str, str]] = Counter()
        self.group_jobs: Counter[str] = Counter()
        self.team_jobs: Counter[str] = Counter()             # running jobs per team, CPU-only ones too
        self.cpus_used = self.memory_used = 0
        self.exclusive: dict[str, None] = {}                 # running exclusive jobs, in start order
        self.stopping: dict[str, None] = {}                  # running jobs being stopped
        self.cpu_only_ends: dict[str, float] = {}            # CPU-only running job -> its end (busy_until)
        # with backfill by predictions, the running jobs whose end (busy_until) is a prediction that
        # moves once outlived, as (end, id): a pass brought to a later `now` moves those (advance_ends)
        self.now = 0.0
        self.predicted: SortedList = SortedList()
        self.predicted_end: dict[str, float] = {}
        # time slicing (slicing.py): per slicing tier, (stoppable_at, id) of the running jobs in it,
        # so a pass finds those it may stop, and the loop the next to become so, in O(log n)
        self.slicing = slicing_tiers(policy)
        self.slicing_order = tuple(sorted(self.slicing))
        self.sliceable: dict[int, SortedList] = defaultdict(SortedList)

    @classmethod
    def of(cls, gpus: tuple[Gpu, ...], policy: Policy, pending, running, now: float) -> "QueueIndex":
        """Built from scratch, as a pass without one needs it (O(n log n))."""
        with _no_cycle_collection():
            return cls._built(gpus, policy, pending, running, now)

    @classmethod
    def _built(cls, gpus: tuple[Gpu, ...], policy: Policy, pending, running, now: float) -> "QueueIndex":
        index = cls(gpus, policy)
        index.now = now
        index._start_all({run.id: run for run in running}.values())
        jobs = list(pending)
        waiting = index.pending
        for job in jobs:
            waiting[job.id] = job
        if len(waiting) != len(jobs):
            # a snapshot read while a job changed may list it twice: it counts once, as its
            # latest listing says (a pass must not fail, or the queue stops)
            jobs = list(waiting.values())
        index.gated, index.held = _gated_and_held(jobs)
        index.sizes = Counter([job.gpus for job in jobs])
        index.ranked.now = now
        # ranked and counted by kind only when a pass looks at a job: with no GPU free it does not
        index.unranked = jobs
        return index

    def _rank(self) -> None:
        """Ranks and counts by kind the jobs a build left unranked."""
        jobs, self.unranked = self.unranked, None
        if jobs is None:
            return
        with _no_cycle_collection():
            self.limits = defaultdict(SortedList, {k: SortedList(limits) for k, limits in self._by_kind(jobs).items()})
            self.ranked.bulk_add(jobs)

    def _by_kind(self, jobs: list[PendingJob]) -> dict[tuple, list[float]]:
        """Each kind's shortest limits. A pass that builds its index pays this for every
        pending job, so jobs are grouped by the fields a kind is made of, and each group's
        kind is worked out once, from its first job."""
        fields: dict[tuple, tuple[PendingJob, list[float]]] = {}
        shortest_limit = self.shortest_limit
        for job in jobs:
            key = (job.gpu_types, job.gpu_type, job.spot, job.gpus)
            group = fields.get(key)
            if group is None:
                group = fields[key] = (job, [])
            group[1].append(shortest_limit(job))
        kinds: dict[tuple, list[float]] = {}
        for first, limits in fields.values():
            kinds.setdefault(self.kind(first), []).extend(limits)
        return kinds

    def rank(self) -> "RankedJobs":
        """The pending jobs in rank order (ranked now, if a build left them unranked)."""
        self._rank()
        return self.ranked

    def _start_all(self, runs) -> None:
        """`start` for many at once: each pool's busy GPUs sorted once, not inserted one by one
        (a job sharing a GPU with an earlier one takes `start`'s way, after the rest)."""
        until, holder, later, running = self.until, self.holder, [], self.running
        team_gpus, user_gpus, team_jobs, group_jobs = self.team_gpus, self.user_gpus, self.team_jobs, self.group_jobs
        cpus = memory = 0
        for run in runs:   # `start` and `_count`, inlined: a pass builds this for every running job
            gpus, team = run.gpus, run.team
            if gpus and not until.keys().isdisjoint(gpus):
                later.append(run)
                continue
            running[run.id] = run
            end = self._end_of(run)
            for index in gpus:
                holder[index] = run.id
                until[index] = end
            if not gpus:
                self.cpu_only_ends[run.id] = end
            team_gpus[team] += len(gpus)
            user_gpus[(team, run.user)] += len(gpus)
            team_jobs[team] += 1
            if run.group:
                group_jobs[run.group] += 1
            cpus += run.cpus or (0 if gpus else 1)
            memory += run.memory or 0
            if run.exclusive:
                self.exclusive[run.id] = None
            if run.stopping:
                self.stopping[run.id] = None
        self.cpus_used += cpus
        self.memory_used += memory
        self._sync_busy()
        busy: dict[Pool, list[tuple[float, int]]] = defaultdict(list)
        for index, end in until.items():
            self.free.pop(index, None)
            pool = self.pool_of.get(index)
            if pool is not None:
                self.free_in[pool].discard(index)
                busy[pool].append((end, index))
        for pool, entries in busy.items():
            self.busy[pool] = SortedList(entries)
        if self.slicing:
            sliceable: dict[int, list[tuple[float, str]]] = defaultdict(list)
            for run in running.values():
                if in_slicing(run, self.slicing):
                    sliceable[run.tier].append((stoppable_at(run, self.policy), run.id))
            self.sliceable.update((tier, SortedList(entries)) for tier, entries in sliceable.items())
        for run in later:
            self.start(run)

    def copy(self) -> "QueueIndex":
        """An independent copy in O(n) (an ETA replay runs one forward without touching the caller's)."""
        self._rank()
        new = QueueIndex(self.gpus, self.policy)
        new.pending, new.running = dict(self.pending), dict(self.running)
        new.sizes, new.gated, new.ranked = Counter(self.sizes), dict(self.gated), self.ranked.copy()
        new.held, new.books = set(self.held), self.books and self.books.copy()
        new.kinds_known = dict(self.kinds_known)
        new.limits = defaultdict(SortedList, {kind: limits.copy() for kind, limits in self.limits.items()})
        new.free, new.free_in = dict(self.free), {pool: gpus.copy() for pool, gpus in self.free_in.items()}
        new.busy = {pool: entries.copy() for pool, entries in self.busy_books().items()}
        new.until, new.holder = dict(self.until), dict(self.holder)
        new.shared = {gpu: dict(jobs) for gpu, jobs in self.shared.items()}
        new.team_gpus, new.user_gpus = Counter(self.team_gpus), Counter(self.user_gpus)
        new.group_jobs, new.team_jobs = Counter(self.group_jobs), Counter(self.team_jobs)
        new.cpus_used, new.memory_used = self.cpus_used, self.memory_used
        new.exclusive, new.cpu_only_ends = dict(self.exclusive), dict(self.cpu_only_ends)
        new.stopping = dict(self.stopping)
        new.now, new.predicted, new.predicted_end = self.now, self.predicted.copy(), dict(self.predicted_end)
        new.sliceable = defaultdict(SortedList, {tier: runs.copy() for tier, runs in self.sliceable.items()})
        return new

    # -- changes ---------------------------------------------------------------------
    def add(self, job: PendingJob) -> None:
        self._rank()
        if job.id in self.pending:
            raise ValueError(f"job {job.id} is already pending")
        self.ranked.add(job)
        self._note_pending(job)

    def _note_pending(self, job: PendingJob) -> None:
        self.pending[job.id] = job
        self.sizes[job.gpus] += 1
        kind, limit = self.kind(job), self.shortest_limit(job)
        self.limits[kind].add(limit)
        if self.books is not None:
            self.books.add(job, kind, limit)
        if gated(job):
            self.gated[job.id] = None
        if job.held:
            self.held.add(job.id)

    def remove(self, job_id: str) -> PendingJob:
        self._rank()
        job = self.pending.pop(job_id)
        self.ranked.remove(job)
        self.sizes[job.gpus] -= 1
        if not self.sizes[job.gpus]:
            del self.sizes[job.gpus]
        kind, limit = self.kind(job), self.shortest_limit(job)
        self.limits[kind].remove(limit)
        if self.books is not None:
            self.books.remove(job, kind, limit)
        self.gated.pop(job_id, None)
        self.held.discard(job_id)
        self.kinds_known.pop(job_id, None)
        return job

    def replace(self, job: PendingJob) -> None:
        """A pending job whose ranking inputs changed (say, a new expected run time); it keeps
        its place in the queue's order, as a fresh snapshot lists it."""
        self._rank()
        was = self._replaced(job)
        self.ranked.remove(was)
        self.ranked.add(job)
        (old_kind, old_limit), (kind, limit) = (self.kind(was), self.shortest_limit(was)), \
            (self.kind(job), self.shortest_limit(job))
        self.limits[old_kind].remove(old_limit)
        self.limits[kind].add(limit)
        if self.books is not None:
            self.books.remove(was, old_kind, old_limit)
            self.books.add(job, kind, limit)
        self._note_kept(was, job)
        self.pending[job.id] = job

    def replace_many(self, jobs: list[PendingJob]) -> None:
        """`replace` for many pending jobs at once (the teams' run-time ratios refreshed):
        when they are a good part of the queue, it is ranked again as a build ranks it,
        O(n) and lazily, rather than each job taken out of its list and put back. All of them are
        checked before any is replaced: one refused leaves the index as it was."""
        for job in jobs:
            self._replaced(job)
        if len(jobs) * REBUILD_SHARE < len(self.pending):
            for job in jobs:
                self.replace(job)
            return
        for job in jobs:
            self._note_kept(self.pending[job.id], job)
            self.pending[job.id] = job
        now, self.ranked = self.ranked.now, RankedJobs(self.policy, len(self.gpus))
        self.ranked.now = now
        self.unranked, self.books = list(self.pending.values()), None

    def _note_kept(self, was: PendingJob, job: PendingJob) -> None:
        """Whether a replaced record is held for a budget."""
        if job.held:
            self.held.add(job.id)
        elif was.held:
            self.held.discard(job.id)

    def _replaced(self, job: PendingJob) -> PendingJob:
        """The pending record `job` replaces, if it may: the same size and gates (else the job's
        counts and the gate phase's set would go stale)."""
        was = self.pending[job.id]
        if was.gpus != job.gpus or gated(was) != gated(job):
            raise ValueError(f"job {job.id}: replace() keeps a job's size and gates; remove and add it instead")
        return was

    def start(self, run: RunningJob) -> None:
        if run.id in self.running:
            raise ValueError(f"job {run.id} is already running")
        self.running[run.id] = run
        end = self._end_of(run)
        for index in run.gpus:
            if index in self.until:   # a second job on a busy GPU: both are kept
                shared = self.shared.get(index)
                if shared is None:
                    shared = self.shared[index] = {self.holder.pop(index): self.until[index]}
                shared[run.id] = end
                self._place(index, max(shared.values()))
            else:
                self.holder[index] = run.id
                self._place(index, end)
        if not run.gpus:
            self.cpu_only_ends[run.id] = end
        if self.slicing and in_slicing(run, self.slicing):
            self.sliceable[run.tier].add((stoppable_at(run, self.policy), run.id))
        self._count(run, +1)

    def stop(self, job_id: str) -> RunningJob:
        run = self.running.pop(job_id)
        for index in run.gpus:
            shared = self.shared.get(index)
            if shared is None:
                del self.holder[index]
                self._place(index, None)
                continue
            del shared[job_id]
            if len(shared) == 1:
                del self.shared[index]
                (self.holder[index], until), = shared.items()
            else:
                until = max(shared.values())
            self._place(index, until)
        self.cpu_only_ends.pop(job_id, None)
        end = self.predicted_end.pop(job_id, None)
        if end is not None:
            self.predicted.remove((end, job_id))
        if self.slicing and in_slicing(run, self.slicing):
            self.sliceable[run.tier].remove((stoppable_at(run, self.policy), run.id))
        self._count(run, -1)
        return run

    def _end_of(self, run: RunningJob) -> float:
        """When backfill counts on the running job's GPUs coming back (horizon.busy_until, as of the
        index's `now`); a prediction that may move is kept in `predicted`."""
        end = busy_until(run, self.policy, self.now)
        if end < run.ends_by:
            self.predicted_end[run.id] = end
            self.predicted.add((end, run.id))
        return end

    def advance_ends(self, now: float) -> None:
        """Brings the running jobs' predicted ends to `now`: each one outlived moves on, as a
        build at `now` would place it (O(log n) each; nothing to do with backfill by limits)."""
        self.now = max(self.now, now)
        predicted = self.predicted
        while predicted and predicted[0][0] <= now:
            _, job_id = predicted[0]
            self.start(self.stop(job_id))

    def _place(self, index: int, until: float | None) -> None:
        """A GPU is busy until its last holder's end (a snapshot may show two jobs on one GPU, one
        of them stopping, or a GPU no longer in the inventory), else (None) free."""
        pool = self.pool_of.get(index)
        was = self.until.pop(index, None)
        if pool is not None and index not in self.busy_stale:
            self.busy_stale[index] = was   # what `busy` holds for it until read again
        if until is not None:
            self.until[index] = until
            self.free.pop(index, None)
            if pool is not None:
                self.free_in[pool].discard(index)
        elif pool is not None:
            self.free[index] = self.type_of[index]
            self.free_in[pool].add(index)

    def busy_in(self, pool: Pool) -> SortedList:
        """The pool's busy GPUs as (until, GPU), soonest first."""
        return self.busy_books()[pool]

    def busy_books(self) -> dict[Pool, SortedList]:
        """Every pool's `busy_in`."""
        if self.busy_stale:
            self._sync_busy()
        return self.busy

    def _sync_busy(self) -> None:
        """Moves each GPU placed since the last read from the end `busy` holds for it to its own."""
        until, pool_of, busy = self.until, self.pool_of, self.busy
        for index, was in self.busy_stale.items():
            now = until.get(index)
            if now != was:
                entries = busy[pool_of[index]]
                if was is not None:
                    entries.remove((was, index))
                if now is not None:
                    entries.add((now, index))
        self.busy_stale.clear()

    def _count(self, run: RunningJob, sign: int) -> None:
        n = len(run.gpus) * sign
        self.team_gpus[run.team] += n
        self.user_gpus[(run.team, run.user)] += n
        self.team_jobs[run.team] += sign
        if run.group:
            self.group_jobs[run.group] += sign
        self.cpus_used += run.cpus_counted * sign
        self.memory_used += (run.memory or 0) * sign
        for flag, ids in ((run.exclusive, self.exclusive), (run.stopping, self.stopping)):
            if flag and sign > 0:
                ids[run.id] = None
            elif flag:
                ids.pop(run.id, None)

    # -- reads ---------------------------------------------------------------------------
    def kind(self, job: PendingJob) -> tuple:
        """What decides where a job may fit: its GPU types, whether it may run on spot (the
        pools of inventory.pool_rounds, whatever their order), its size. `_by_kind` groups a
        build's jobs by the fields this reads: a field read here must join its key."""
        return job.types(), job.spot, job.gpus

    def pending_kind(self, job: PendingJob) -> tuple[tuple, float]:
        """`(kind(job), its shortest limit)`, kept for as long as the job is pending as this very
        record: pass after pass looks at the same jobs (a record that replaced it is worked out anew)."""
        known = self.kinds_known.get(job.id)
        if known is not None and known[0] is job:
            return known[1]
        kind_limit = (self.kind(job), self.shortest_limit(job))
        self.kinds_known[job.id] = (job, kind_limit)
        return kind_limit

    def kinds(self) -> dict[tuple, int]:
        """Pending jobs per kind."""
        self._rank()
        return {kind: len(limits) for kind, limits in self.limits.items() if limits}

    def waiting_kinds(self) -> list[tuple]:
        """The kinds of the pending jobs."""
        self._rank()
        return [kind for kind, limits in self.limits.items() if limits]

    def count_within(self, kind: tuple, limit: float) -> int:
        """Pending jobs of a kind that could run within `limit` seconds (their shortest limits)."""
        self._rank()
        limits = self.limits.get(kind)
        return limits.bisect_right(limit) if limits else 0

    def within(self, kind: tuple, limit: float) -> Iterator[str]:
        """The ids of the pending jobs of a kind that could run within `limit` seconds."""
        ids = self.skip_books().by_limit.get(kind)
        if ids:
            for _, job_id in ids.islice(0, self.count_within(kind, limit)):
                yield job_id

    def skip_books(self) -> "SkipBooks":
        """The books plan._candidates reads, built from the pending jobs when first asked."""
        self._rank()
        if self.books is None:
            self.books = SkipBooks.of(self.pending.values(), self.kind, self.shortest_limit)
        return self.books

    def teams_active(self) -> set[str]:
        waiting = {j.team for j in self.unranked} if self.unranked is not None else \
            {t for t, n in self.ranked.team_count.items() if n}
        return waiting | {t for t, n in self.team_jobs.items() if n}

    def gated_jobs(self) -> list[PendingJob]:
        """In queue order, as a fresh gate pass meets them."""
        return [self.pending[job_id] for job_id in self.gated]


def _gated_and_held(jobs: list[PendingJob]) -> tuple[dict[str, None], set[str]]:
    """The ids of the jobs the gate phase looks at, and of those held for a budget: one loop, as a
    pass that builds its index pays this for every pending job."""
    gates: dict[str, None] = {}
    holds: set[str] = set()
    for job in jobs:
        if gated(job):
            gates[job.id] = None
        if job.held:
            holds.add(job.id)
    return gates, holds


class SkipBooks:
    """What a pass reads to list the jobs it may not pass over (plan._candidates): each kind's
    (shortest limit, id) in order, the pending jobs per tier, the exclusive ones."""

    def __init__(self) -> None:
        self.by_limit: dict[tuple, SortedList] = defaultdict(SortedList)
        self.tiers: Counter[int] = Counter()
        self.exclusive: set[str] = set()

    @classmethod
    def of(cls, jobs: Iterable[PendingJob], kind_of, limit_of) -> "SkipBooks":
        books, by_limit = cls(), defaultdict(list)
        for job in jobs:
            by_limit[kind_of(job)].append((limit_of(job), job.id))
            books.tiers[job.tier] += 1
            if job.exclusive:
                books.exclusive.add(job.id)
        books.by_limit.update({kind: SortedList(ids) for kind, ids in by_limit.items()})
        return books

    def copy(self) -> "SkipBooks":
        new = SkipBooks()
        new.by_limit.update({kind: ids.copy() for kind, ids in self.by_limit.items()})
        new.tiers, new.exclusive = Counter(self.tiers), set(self.exclusive)
        return new

    def add(self, job: PendingJob, kind: tuple, limit: float) -> None:
        self.by_limit[kind].add((limit, job.id))
        self.tiers[job.tier] += 1
        if job.exclusive:
            self.exclusive.add(job.id)

    def remove(self, job: PendingJob, kind: tuple, limit: float) -> None:
        self.by_limit[kind].remove((limit, job.id))
        self.tiers[job.tier] -= 1
        if not self.tiers[job.tier]:
            del self.tiers[job.tier]
        self.exclusive.discard(job.id)
