"""What a QueueIndex (index.py) answers about time slicing (slicing.py), from the running
jobs it keeps per slicing tier by when slicing may stop them (`sliceable`) and its ranked
pending jobs: which runs a pass may stop, whether slicing may make room for a waiting job that
has not had its slice, and when it next may (the replay's and the ETA's wake). Counts are over
every pool together: a bound, so where it says no, a pass stops nothing for slicing."""

import math
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from sortedcontainers import SortedList

from .ranked import RankedJobs
from .slicing import preemptible_below, room_at
from .snapshot import Policy, RunningJob


class SlicingReads:
    """QueueIndex's reads for time slicing (a part of the class, kept apart to be read at once)."""

    sliceable: dict[int, SortedList]   # slicing tier -> (stoppable_at, job id) of its running jobs
    slicing_order: tuple[int, ...]
    slicing: frozenset[int]
    running: dict[str, RunningJob]
    free: dict[int, str]
    stopping: dict[str, None]
    policy: Policy
    ranked: RankedJobs

    if TYPE_CHECKING:
        def rank(self) -> RankedJobs: ...

    def sliced(self, tier: int, now: float) -> list[RunningJob]:
        """The running jobs of a slicing tier that slicing may stop at `now` (slicing.may_stop)."""
        runs = self.sliceable.get(tier)
        if not runs or runs[0][0] > now:
            return []
        return [self.running[job_id] for _, job_id in runs[:runs.bisect_left((math.nextafter(now, math.inf),))]]

    def slice_stops(self, tier: int, now: float) -> Iterator[int]:
        """The GPUs of each running job of the tier slicing may stop at `now`, in the order it may."""
        running = self.running
        for at, job_id in self.sliceable.get(tier, ()):
            if at > now:
                return
            yield len(running[job_id].gpus)

    def may_slice(self, tier: int, now: float) -> bool:
        """Whether slicing may stop some running job of the tier at `now`."""
        runs = self.sliceable.get(tier)
        return runs is not None and bool(runs) and runs[0][0] <= now

    def slicing_may_stop(self, now: float) -> frozenset[int]:
        """The slicing tiers where slicing may stop a run at `now` for a waiting job that is not
        demoted: some run may be stopped, and some such job needs no more GPUs than are free, on
        their way back, or held by runs slicing may stop now (all pools together). Within a pass
        GPUs are only taken and victims only chosen, so in any other tier slicing stops nothing
        for the whole pass (preempt.Preemptor)."""
        may = [tier for tier in self.slicing_order if self.may_slice(tier, now)]
        if not may:
            return frozenset()
        ranked = self.rank()
        ranked.advance(now)
        base, tiers = self._free_or_freeing(), []
        for tier in may:
            start = base + preemptible_below(self.running.values(), tier, self.policy)
            if ranked.least_kept(tier):   # the runs counted only until they are enough
                least = ranked.least_undemoted(tier)
                at = None if least is None else room_at(least, start, self._stops(tier))
                if at is not None and at <= now:
                    tiers.append(tier)
            elif self._undemoted_fits(tier, start, now):
                tiers.append(tier)
        return frozenset(tiers)

    def _undemoted_fits(self, tier: int, start: int, now: float) -> bool:
        """Whether a waiting job of the tier that is not demoted needs no more than `start` GPUs and
        those of the runs slicing may stop at `now`: both read only as far as the answer needs (a
        pass over a queue built for it alone would otherwise read every job that has not had its
        slice)."""
        room = Room(start, self.slice_stops(tier, now))
        return any(room.holds(job.gpus) for job in self.ranked.undemoted(tier))

    def next_sliceable(self, now: float, tiers: Iterable[int] | None = None) -> float | None:
        """When the next running job (of `tiers`, else any) becomes one slicing may stop, after
        `now`, or None."""
        after = (math.nextafter(now, math.inf),)
        kept = self.sliceable
        lists = kept.values() if tiers is None else [kept[t] for t in tiers if t in kept]
        times = [runs[i][0] for runs in lists if (i := runs.bisect_left(after)) < len(runs)]
        times = [t for t in times if t < math.inf]
        return min(times, default=None)

    def next_slicing_change(self, now: float) -> float | None:
        """When time slicing alone next changes what a pass decides, after `now` (slicing.next_change,
        from what the index keeps): the time slicing may first make room for a job that is not demoted
        (then each further run it may stop), or a demoted job's promotion; None: never."""
        if not self.slicing:
            return None
        times = (self.next_slicing_room(now), self.rank().next_promotion())
        return min((t for t in times if t is not None and t > now), default=None)

    def next_slicing_room(self, now: float) -> float | None:
        """When slicing next may make room for a waiting job that is not demoted, after `now`: the
        time its runs first hold enough GPUs for the smallest such job of their tier, else, where
        they already do, the next run it may stop; None: never without a promotion."""
        first = None
        for tier, at in self._slicing_rooms(now).items():
            if at is not None and at <= now:
                at = self.next_sliceable(now, (tier,))
            if at is not None and at > now and (first is None or at < first):
                first = at
        return first

    def _free_or_freeing(self) -> int:
        """The GPUs free and those of running jobs being stopped."""
        if not self.stopping:
            return len(self.free)
        return len(self.free) + sum(len(self.running[job_id].gpus) for job_id in self.stopping)

    def _slicing_rooms(self, now: float) -> dict[int, float | None]:
        """Per slicing tier where a job that is not demoted waits at `now`: when slicing may first make
        room for the smallest such job (slicing.room_at)."""
        ranked = self.rank()
        ranked.advance(now)
        base = self._free_or_freeing()
        rooms = {}
        for tier in self.slicing_order:
            start = base + preemptible_below(self.running.values(), tier, self.policy)
            least = ranked.least_undemoted(tier)
            if least is not None:
                rooms[tier] = room_at(least, start, self._stops(tier))
        return rooms

    def _stops(self, tier: int) -> Iterator[tuple[float, int]]:
        """The tier's running jobs slicing may come to stop, as (stoppable_at, GPUs) in that order."""
        return ((at, len(self.running[job_id].gpus)) for at, job_id in self.sliceable.get(tier, ()))


class Room:
    """GPUs counted lazily: `start` (free, or on their way back), then those of each run slicing
    may stop, in the order it may stop them, only as far as any question has needed."""

    def __init__(self, start: int, stops: Iterator[int]):
        self.gpus, self.stops = start, stops
        self.counted_all = False

    def holds(self, gpus: float) -> bool:
        while self.gpus < gpus and not self.counted_all:
            more = next(self.stops, None)
            if more is None:
                self.counted_all = True
            else:
                self.gpus += more
        return self.gpus >= gpus
