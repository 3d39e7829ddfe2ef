"""Phase 4 of a pass: fit. Gang: a job gets all its GPUs from one pool (a GPU
type bought spot or on demand), or none. A spot-tolerant job tries spot pools
first, then on-demand ones; once reclaimed too often for how long it has run
(inventory.spot_first), on-demand ones first, then spot. A job may accept
several GPU types.

A job that does not fit keeps its place. Without backfill, the GPU types it
can use are held for it: nothing later starts on them (FIFO blocking). With
backfill (EASY), it gets a reservation instead: the earliest time enough GPUs
free up, from the running jobs' wall-time limits (hard bounds: a job is killed
at its limit). A later job may start now only on GPUs it will have released,
by its own limit, before any reservation on them begins, so it provably
delays no reserved job. With `policy.backfill_by` "predictions", expected run
times stand in for the limits (horizon.py): reservations start when jobs are
expected to end, and a backfilled job that runs longer than expected may
delay one. The first `reservation_depth` blocked jobs and the first blocked
job of every tier get reservations; the "fifo" ordering, which reads no
tier, counts the queue as one tier (EASY: its first blocked job alone, at
depth 1).

A job with a --time-min that does not fit with its whole wall time may be
backfilled with a shorter one, ending before the reservation it would
otherwise delay, but never shorter than its time-min (Slurm's --time-min);
its Start carries the granted limit.

A CPU-only job (0 GPUs) takes no GPU: it starts when its CPUs and memory fit
(one CPU when it names none), whatever the GPUs do, and reserves nothing.
An exclusive job starts only on an empty machine (nothing running, nothing
started before it in this pass); blocked, it reserves the whole machine from
when everything running has ended, so nothing, CPU-only jobs included, may
start that would run past that."""

import heapq
from collections import defaultdict
from collections.abc import Iterator
from itertools import islice

from ..models.units import format_count
from .horizon import PREDICTIONS, counted_run
from .index import QueueIndex
from .inventory import pool_rounds, spot_first, tables
from .ledger import Ledger
from .ranked import FIFO_TIER
from .slicing import slicing_tiers
from .snapshot import PendingJob, Snapshot

INF = float("inf")
Pool = tuple[str, bool]   # (GPU type, spot)
# what fit() decides: the GPUs it starts on (None: it does not start), why not, and a shorter wall time granted
Placement = tuple[tuple[int, ...] | None, str, float | None]


def pools_for(job: PendingJob, pools, policy) -> list[list[Pool]]:
    """The pools a job may use, in rounds of preference (inventory.pool_rounds)."""
    return pool_rounds(job.types(), job.spot, pools, prefer_spot=spot_first(job, policy))


class Capacity:
    def __init__(self, snap: Snapshot, ledger: Ledger, index: QueueIndex, *, explain: bool = True):
        self.snap, self.ledger, self.now = snap, ledger, snap.now
        self.backfill, self.explain = snap.policy.backfill, explain
        inventory = tables(snap.gpus)
        self.pool_of, self.pools, self.types = inventory.pool_of, inventory.pools, inventory.types
        self.timeline = Timeline(index, snap.now)                 # when each GPU is next free
        self.booked: dict[int, tuple[float, str]] = {}            # GPU -> (held from, job) of its first reservation
        self.reserved_start: dict[str, float] = {}                # job -> its reserved start (inf: unknown)
        self.held_types: dict[str | None, str] = {}               # without backfill: type -> blocking job
        self.depth_left = snap.policy.reservation_depth
        self.tiers_reserved: set[int] = set()
        # arrival order reads no tier, so neither do its reservations: one list, one first blocked job
        self.one_list = snap.policy.ordering == "fifo"
        self.sliced_tiers = slicing_tiers(snap.policy)   # reserve nothing: their jobs get GPUs by preempting
        self.machine_booked: tuple[float, str] | None = None     # (held from, job): an exclusive job's reservation
        self.machine_held: str | None = None                       # without backfill: exclusive job first in line
        self.cpu_ends: list[float] = list(index.cpu_only_ends.values())   # CPU-only jobs' ends
        # a pass reads the index's free GPUs per pool (kept in order) and what it changed itself,
        # so a fit costs the GPUs it takes and those it skips, not the cluster's free GPUs
        self.free_in = index.free_in                                # pool -> free GPUs at the pass's start
        self.taken_in: dict[Pool, int] = defaultdict(int)           # pool -> GPUs started on in this pass
        self.booked_in: dict[Pool, dict[int, float]] = defaultdict(dict)   # pool -> GPU -> held from
        self.reservations = 0                                       # made in this pass (a version for horizons)
        self._horizons: tuple[tuple[int, int, bool], dict[Pool, Spans]] = ((-1, -1, False), {})

    # -- gates -------------------------------------------------------------------
    def behind(self, job: PendingJob) -> str | None:
        """Without backfill: a job waiting first for all types, or for this job's type, holds it back
        (an exclusive one holds the whole machine: CPU-only jobs too)."""
        if self.machine_held is not None:
            return f"waiting behind job {self.machine_held}, which is first in line for the whole machine (--exclusive)"
        if job.gpus == 0:
            return None   # it takes no GPU: GPUs held for others do not hold it back
        holder = self.held_types.get(None)
        types = job.types()
        if holder is None and types is not None:
            holder = next((self.held_types[t] for t in types if t in self.held_types), None)
        if holder is None:
            return None
        kind = f"{'/'.join(types)} GPUs" if types else "GPUs"
        return f"waiting behind job {holder}, which is first in line for {kind}"

    def fit(self, job: PendingJob) -> Placement:
        """The GPUs the job starts on now (() for a CPU-only job), or None and why not (with numbers);
        and the shorter wall time backfill grants it, if it needs one (--time-min)."""
        led = self.ledger
        if led.exclusive is not None:
            return None, f"job {led.exclusive} has the machine to itself (--exclusive)", None
        if job.exclusive and led.jobs:
            return None, (f"waits for the machine to be empty (--exclusive): {led.jobs} "
                          f"{'job' if led.jobs == 1 else 'jobs'} running"), None
        if job.gpus == 0:
            return self._fit_cpu_only(job)
        if not self.explain and job.gpus > len(led.free):
            return None, "", None  # cannot fit, and nobody will read why
        types = job.types()
        of = f" of {'/'.join(types)}" if types else ""
        if types and not any(t in self.types for t in types):
            kinds = ", ".join(sorted(self.types)) or "none"
            return None, f"needs {gpus_text(job.gpus)}{of}; this cluster has none of that type (has: {kinds})", None
        rounds = pools_for(job, self.pools, self.snap.policy)
        if not rounds and self.pools:
            return (None, f"needs {gpus_text(job.gpus)}{of} on demand; this cluster has only spot capacity for them",
                    None)
        limit_end = self._counted_end(job, self.now)
        chosen: list[int] | None = None
        granted = None
        for pools in rounds:  # best fit within a round: the pool with the fewest usable GPUs that holds the gang
            candidates = sorted((n, p) for p in pools if (n := self._usable_count(p, limit_end)) >= job.gpus)
            if candidates:
                chosen = self._first_usable(candidates[0][1], job.gpus, limit_end)
                break
        if chosen is None and (self.explain or self._may_shorten(job)):
            free, blocker = self._survey({p for r in rounds for p in r}, limit_end)
            if blocker is not None and self._may_shorten(job):
                chosen, granted = self._shortened(job, rounds, free)
            if chosen is None:
                return None, (self._shortfall(job, free, blocker, of) if self.explain else ""), None
        if chosen is None:
            return None, "", None
        short = self._resources_short(job)
        if short is not None:
            return None, short, None
        return tuple(chosen), "", granted

    def horizons(self) -> dict[Pool, "Spans"]:
        """Per pool, for each of its free GPUs, how long a job could hold it before a reservation
        needs it (inf: none does), longest first: a job of n GPUs can start now in a pool only if
        it fits in the pool's n-th (a bound, for stopping a pass early)."""
        version = self.version()
        if self._horizons[0] != version:
            free, now = self.ledger.free, self.now
            spans: dict[Pool, Spans] = {}
            for pool in self.pools:
                count = self._free_count(pool)
                booked = sorted((start - now for gpu, start in self.booked_in[pool].items() if gpu in free),
                                reverse=True) if count and pool in self.booked_in else []
                spans[pool] = Spans(count - len(booked), booked)
            self._horizons = (version, spans)
        return self._horizons[1]

    def version(self) -> tuple[int, int, bool]:
        """Changes when the horizons may: a pass only takes GPUs (or the machine) and adds reservations."""
        return (len(self.ledger.free), self.reservations, self.ledger.exclusive is not None)

    def reserves_nothing_for(self, job: PendingJob, tier: int) -> bool:
        """Whether `blocked` holds nothing back for the job: its tier has had its reservation and
        none is left (an exclusive job and FIFO without backfill always hold something)."""
        return self.reserves_nothing_in(tier) and not job.exclusive

    def reserves_nothing_in(self, tier: int) -> bool:
        """Whether `blocked` holds nothing back for any job of the tier that is not exclusive: a
        time-sliced tier never does, any other once it has had its reservation and none is left."""
        return self.backfill and (tier in self.sliced_tiers or self._reservations_spent(tier))

    def _reservations_spent(self, tier: int) -> bool:
        """No reservation is left for a job of the tier: the depth is spent and the tier has had its own first."""
        return self.depth_left <= 0 and (FIFO_TIER if self.one_list else tier) in self.tiers_reserved

    # -- the free GPUs of a pool, as this pass has changed them ---------------------------
    def _free_count(self, pool: Pool) -> int:
        if self.ledger.exclusive is not None:
            return 0
        return len(self.free_in.get(pool, ())) - self.taken_in[pool]

    def _usable_count(self, pool: Pool, limit_end: float) -> int:
        """The pool's free GPUs a job ending at `limit_end` may take: none of a type held for a blocked
        job (no backfill), and none booked by a reservation that begins before it would end."""
        count = self._free_count(pool)
        if not count or (not self.backfill and pool[0] in self.held_types):
            return 0
        booked = self.booked_in.get(pool)
        if booked:
            free = self.ledger.free
            count -= sum(1 for gpu, start in booked.items() if limit_end > start and gpu in free)
        return count

    def _first_usable(self, pool: Pool, n: int, limit_end: float) -> list[int]:
        """The first n usable GPUs of the pool by index (the caller counted that there are n)."""
        free, booked = self.ledger.free, self.booked_in.get(pool, {})
        chosen: list[int] = []
        for gpu in self.free_in[pool]:
            if gpu in free and not (gpu in booked and limit_end > booked[gpu]):
                chosen.append(gpu)
                if len(chosen) == n:
                    break
        return chosen

    def _survey(self, allowed: set[Pool], limit_end: float) -> tuple[dict[Pool, list[int]], tuple | None]:
        """For a job that does not fit and whose reason is wanted: the free GPUs of its pools, and
        the first of them held back (by the job holding it, and its type). O(free GPUs)."""
        free: dict[Pool, list[int]] = defaultdict(list)
        blocker = None
        for index in sorted(self.ledger.free):
            pool = self.pool_of[index]
            if pool not in allowed:
                continue
            free[pool].append(index)
            if blocker is not None:
                continue
            if not self.backfill and pool[0] in self.held_types:
                blocker = (self.held_types[pool[0]], pool[0])
                continue
            booking = self.booked.get(index)
            if booking is not None and limit_end > booking[0]:
                blocker = (booking[1], pool[0])
        return free, blocker

    def _resources_short(self, job: PendingJob) -> str | None:
        led = self.ledger
        cpus = job.cpus_counted
        if led.cpus_free is not None and cpus and cpus > led.cpus_free:
            return f"needs {cpus} CPUs, {max(0, led.cpus_free)} free"
        if led.memory_free is not None and job.memory and job.memory > led.memory_free:
            from ..models.units import format_size
            return f"needs {format_size(job.memory)} memory, {format_size(max(0, led.memory_free))} free"
        return None

    def _fit_cpu_only(self, job: PendingJob) -> Placement:
        """No GPU: its CPUs and memory, and, once an exclusive job has reserved the machine,
        an end before that reservation (or a shorter wall time, --time-min)."""
        short = self._resources_short(job)
        if short is not None:
            return None, short, None
        booked = self.machine_booked
        end = self._counted_end(job, self.now)
        if booked is None or end <= booked[0]:
            return (), "", None
        if self._may_shorten(job) and booked[0] - self.now >= (job.time_min or INF):
            return (), "", booked[0] - self.now
        return None, self._behind(booked[1], job), None

    def _may_shorten(self, job: PendingJob) -> bool:
        return self.backfill and job.time_min is not None

    def _shortened(self, job: PendingJob, rounds: list[list[Pool]],
                   free: dict[Pool, list[int]]) -> tuple[list[int] | None, float | None]:
        """--time-min: the GPUs free for at least its time-min before any reservation on them, those
        reserved last first; the granted wall time ends at the earliest reservation among them."""
        time_min = job.time_min or 0.0
        for pools in rounds:   # the pool that grants the longest time, in the first round that has one
            best: tuple[float, list[int]] | None = None
            for pool in pools:
                until = {i: self.booked[i][0] if i in self.booked else INF for i in free[pool]}
                ready = sorted((i for i in until if until[i] - self.now >= time_min), key=lambda i: (-until[i], i))
                if len(ready) < job.gpus:
                    continue
                chosen = ready[: job.gpus]
                granted = min(until[i] for i in chosen) - self.now
                if best is None or granted > best[0]:
                    best = (granted, chosen)
            if best is not None:
                return best[1], (best[0] if best[0] < (job.wall_time or INF) else None)
        return None, None

    def _shortfall(self, job: PendingJob, free: dict[Pool, list[int]], blocker, of: str) -> str:
        total = sum(len(v) for v in free.values())
        if blocker is not None and any(len(v) >= job.gpus for v in free.values()):
            holder, gpu_type = blocker
            if not self.backfill:
                return f"waiting behind job {holder}, which is first in line for {gpu_type} GPUs"
            return self._behind(holder, job)
        most = max((len(v) for v in free.values()), default=0)
        unit = "in one pool" if any(p[1] for p in free) else "of one type"
        detail = f"{total} free" if len(free) <= 1 else f"{total} free, at most {most} {unit}"
        types = job.types()
        idle = [] if job.spot else [self._free_count(p) for p in self.pools
                                    if p[1] and (types is None or p[0] in types)]
        if idle and max(idle) >= job.gpus:   # else "0 free" reads wrong beside spot GPUs it would fit
            detail += f" on demand; {sum(idle)} free on spot, which its spec does not allow (spot: false)"
        reason = f"needs {gpus_text(job.gpus)}{of}, {detail}"
        allowed = [p for r in pools_for(job, self.pools, self.snap.policy) for p in r]
        most_ever = max((len(self.pools[p]) for p in allowed), default=0)
        if allowed and job.gpus > most_ever:   # e.g. the queue's GPUs are fewer than when it was admitted
            unit = ("in all" if len(allowed) == 1 else "in one pool" if any(p[1] for p in allowed)
                    else "of one type")
            reason += (f"; the queue has {most_ever} {unit}, so it cannot start until it has more "
                       f"(gqa update {job.id} --gpus N, or gqa cancel {job.id})")
        return reason

    def _behind(self, holder: str, job: PendingJob) -> str:
        """Why a job that would run past a reservation waits (backfill)."""
        start = self.booked_start(holder)
        what = "the machine" if self.machine_booked is not None and holder == self.machine_booked[1] \
            else "these GPUs"
        if start == INF:
            return (f"waiting behind job {holder}, which holds {what} until running jobs end "
                    "(they have no wall time, so nothing can be backfilled safely)")
        length = counted_run(job, self.snap.policy)
        if not length:
            why = "it has no wall time"
        elif self.snap.policy.backfill_by == PREDICTIONS and length != job.wall_time:
            why = f"its expected run of {_in(length)} would run past that"
        else:
            why = f"its wall time of {_in(length)} would run past that"
        if job.time_min is not None:
            why += f", and so would its --time-min of {_in(job.time_min)}"
        return f"waiting behind job {holder}, reserved to start in {_in(start - self.now)}; {why}"

    def booked_start(self, job_id: str) -> float:
        return self.reserved_start.get(job_id, INF)

    def _counted_end(self, job: PendingJob, start: float) -> float:
        """When backfill counts on `job`, started at `start`, giving its GPUs back (inf: never)."""
        length = counted_run(job, self.snap.policy)
        return start + length if length else INF

    # -- outcomes ------------------------------------------------------------------
    def started(self, job: PendingJob, gpus: tuple[int, ...], granted: float | None = None) -> bool:
        """Record a start (with the wall time backfill granted it, if shorter); True if it started
        ahead of a reserved job (backfill)."""
        limit = granted or counted_run(job, self.snap.policy)
        end = self.now + limit if limit else INF
        if not gpus:
            self.cpu_ends.append(end)
        for index in gpus:
            self.timeline.set(index, end)
            self.taken_in[self.pool_of[index]] += 1
        return bool(self.booked) or self.machine_booked is not None

    def hold(self, gpus: list[int]) -> None:
        """Free GPUs a job that preempts counts on: taken for it for the rest of the pass, as a start
        takes them (its victims' GPUs join them once they have stopped)."""
        for index in gpus:
            del self.ledger.free[index]
            self.timeline.set(index, INF)
            self.taken_in[self.pool_of[index]] += 1

    def blocked(self, job: PendingJob, tier: int) -> float | None:
        """Hold capacity for a job that does not fit; the reserved start, if one was made. Time slicing
        holds nothing for its tiers' jobs (slicing.py): they get GPUs by preempting instead."""
        if tier in self.sliced_tiers:
            return None
        if self.reserves_nothing_for(job, tier):
            return None   # no reservation left for it (checked first: the cheap answer for a long queue)
        if not self._could_ever_fit(job):
            return None  # it can never run here: it must not block the rest
        if job.exclusive:
            return self._block_machine(job, tier)
        if job.gpus == 0:
            return None  # CPUs are not reserved: a CPU-only job waits without holding anything back
        if not self.backfill:
            for gpu_type in (job.types() or (None,)):
                self.held_types.setdefault(gpu_type, job.id)
            return None
        if not self._take_reservation(tier):
            return None
        return self._reserve(job)

    def _take_reservation(self, tier: int) -> bool:
        """Books one of the pass's reservations for a job of the tier: False when none is left."""
        if self._reservations_spent(tier):
            return False
        self.depth_left -= 1
        self.tiers_reserved.add(FIFO_TIER if self.one_list else tier)
        self.reservations += 1
        return True

    def _block_machine(self, job: PendingJob, tier: int) -> float | None:
        """An exclusive job that cannot start: without backfill, nothing after it starts; with it, the
        whole machine is reserved from when every running (and just started) job has ended."""
        if not self.backfill:
            self.machine_held = self.machine_held or job.id
            self.held_types.setdefault(None, job.id)
            return None
        if not self._take_reservation(tier):
            return None
        busy_until = self.timeline.everything()
        start = max([self.now, *busy_until.values(), *self.cpu_ends])
        self.reserved_start[job.id] = start
        hold_from = start if start < INF else self.now
        end = self._counted_end(job, start)
        for index in busy_until:
            self._book(index, hold_from, job.id)
            self.timeline.set(index, end)
        if self.machine_booked is None or hold_from < self.machine_booked[0]:
            self.machine_booked = (hold_from, job.id)
        self.cpu_ends.append(end)   # a later whole-machine reservation comes after this one
        return start

    def _reserve(self, job: PendingJob) -> float:
        best = None
        for pools in pools_for(job, self.pools, self.snap.policy):
            for pool in pools:
                if len(self.pools[pool]) < job.gpus:
                    continue
                soonest = self.timeline.soonest(pool)    # (free from, GPU), earliest first
                first = list(islice(soonest, job.gpus))
                start = first[-1][0]
                if best is None or start < best[0]:
                    if start == INF:  # unknowable: hold the GPUs free soonest, i.e. those free now
                        ready = [index for _, index in first]
                    else:
                        # of the GPUs free by then, book those that free up last: GPUs free now stay
                        # available to long jobs that could not otherwise backfill (EASY's "extra" nodes)
                        by_then = first + list(until(soonest, start))
                        ready = [index for _, index in sorted(by_then, key=lambda e: (-e[0], e[1]))]
                    best = (start, ready[: job.gpus])
        assert best is not None, "only a job that fits some pool is reserved (blocked() checks)"
        start, chosen = best
        self.reserved_start[job.id] = start
        # unknown ends make the start unknowable: then nothing may borrow these GPUs at all
        hold_from = start if start < INF else self.now
        end = self._counted_end(job, start)
        for index in chosen:
            self._book(index, hold_from, job.id)
            self.timeline.set(index, end)
        return start

    def _book(self, gpu: int, hold_from: float, job_id: str) -> None:
        """A reservation holds the GPU from `hold_from`; the earliest reservation on a GPU is the one kept."""
        if gpu not in self.booked or hold_from < self.booked[gpu][0]:
            self.booked[gpu] = (hold_from, job_id)
            pool = self.pool_of.get(gpu)
            if pool is not None:
                self.booked_in[pool][gpu] = hold_from

    def _could_ever_fit(self, job: PendingJob) -> bool:
        pools = [p for r in pools_for(job, self.pools, self.snap.policy) for p in r]
        if job.gpus > max((len(self.pools[p]) for p in pools), default=0):
            return False
        snap = self.snap
        if snap.cpus is not None and job.cpus and job.cpus > snap.cpus:
            return False
        return not (snap.memory is not None and job.memory and job.memory > snap.memory)


def gpus_text(n: int) -> str:
    return format_count(n, "GPU")


def _in(seconds: float) -> str:
    if seconds == INF:
        return "an unknown time (running jobs have no wall time)"
    from ..models.units import format_duration
    return format_duration(seconds)


class Spans:
    """A pool's horizons, longest first, as a sequence: its free GPUs no reservation holds (inf)
    are counted, not listed, so reading one costs the booked GPUs, not the free ones."""
    __slots__ = ("open", "booked")

    def __init__(self, open_count: int, booked: list[float]):
        self.open, self.booked = open_count, booked    # booked: longest first

    def __len__(self) -> int:
        return self.open + len(self.booked)

    def __getitem__(self, i: int) -> float:
        return INF if i < self.open else self.booked[i - self.open]


def until(entries: Iterator[tuple[float, int]], limit: float) -> Iterator[tuple[float, int]]:
    """The entries of an ascending stream up to `limit`."""
    for entry in entries:
        if entry[0] > limit:
            return
        yield entry


class Timeline:
    """When each GPU is next free during one pass: now for a free GPU, its running job's
    wall-time end (from the index, kept sorted) for a busy one, and what this pass set on
    top (its starts, its reservations). Reading the soonest GPUs of a pool costs what is
    read, not the size of the cluster."""

    def __init__(self, index: QueueIndex, now: float):
        self.index, self.now = index, now
        self.changed: dict[int, float] = {}

    def set(self, gpu: int, until: float) -> None:
        self.changed[gpu] = until

    def soonest(self, pool) -> Iterator[tuple[float, int]]:
        """(free from, GPU) of the pool's GPUs, earliest first (ties: lower index)."""
        changed, now = self.changed, self.now
        pool_of = self.index.pool_of
        mine = sorted((until, gpu) for gpu, until in changed.items() if pool_of[gpu] == pool)
        free = ((now, gpu) for gpu in self.index.free_in[pool] if gpu not in changed)
        busy = (entry for entry in self.index.busy_in(pool) if entry[1] not in changed)
        return heapq.merge(free, busy, mine)

    def everything(self) -> dict[int, float]:
        """Every GPU's time (O(GPUs): for whole-machine reservations only)."""
        out = dict.fromkeys(self.index.pool_of, self.now)
        for entries in self.index.busy_books().values():
            for until, gpu in entries:
                out[gpu] = until
        out.update(self.changed)
        return out
