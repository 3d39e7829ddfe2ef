"""The pending jobs in rank order, under keys that hold still while time passes
(the QueueIndex's ranking: index.py).

Rank order within a tier moves with time only through the age factor, which
grows at the same rate for every job until it saturates at `max_age`. So each
(tier, team) keeps two sorted lists: jobs younger than `max_age`, by their
score less the shared `now` term, and older ones, by their score with age at 1.
A job moves from the first to the second once (`advance`). The ranking
compares the heads of the two lists, and of every team, at `now`, with the
same score formula a fresh pass uses. A fresh build keeps heaps (O(n)), read
in order lazily, and sorts them only if the index is then changed."""

import bisect
import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from itertools import islice

from sortedcontainers import SortedList

from .slicing import demoted, had_slice_at, promoted_at, slicing_tiers
from .snapshot import PendingJob, Policy

FIFO_TIER = -1           # FIFO ignores tiers and teams: its one list
NICE_SCALE = 10_000.0   # nice 100 = 0.01 of the score, the whole range (+-10,000) = +-1.0


LAZY_READS = 64   # a heap read further than this is sorted instead: a pass that reads it all sorts once
SKIP_AFTER = 16   # jobs passed over in a row before a list reads only the candidates after them
# how far (relative) `least_part` stays below a list's first key: a bound as a key computes it may
# be rounded otherwise than the part a job is scored with, by far less than this
BOUND_SLACK = 1e-9


def in_order(entries) -> Iterator:
    """A sorted list's entries, or a heap's in order without changing it: the first LAZY_READS
    one by one (each O(log k)), so a pass that stops early never sorts; past them, a sorted copy
    of the rest, since reading a whole heap entry by entry costs several times a sort."""
    if not isinstance(entries, list):
        yield from entries
        return
    if not entries:
        return
    frontier, read = [(entries[0], 0)], 0
    while frontier:
        if read == LAZY_READS:
            yield from islice(sorted(entries), read, None)   # entries are unique: the first `read` were these
            return
        entry, at = heapq.heappop(frontier)
        read += 1
        yield entry
        for child in (2 * at + 1, 2 * at + 2):
            if child < len(entries):
                heapq.heappush(frontier, (entries[child], child))


class RankedJobs:
    """The pending jobs in rank order, under keys that hold still while time passes."""

    def __init__(self, policy: Policy, total_gpus: int):
        w = policy.weights
        self.policy, self.total_gpus = policy, total_gpus
        self.fifo = policy.ordering == "fifo"
        self.sjf = policy.ordering == "sjf"       # shortest expected run time first, per tier
        self.max_age = policy.max_age
        self.age_rate = w.age / policy.max_age if policy.max_age > 0 else 0.0
        self.w_size, self.w_dur, self.w_age = w.size, w.duration, w.age
        self.log_max_runtime = math.log1p(max(1.0, policy.max_runtime))
        # time slicing (slicing.py): a demoted job ranks after the rest of its tier, its score
        # lowered by more than the whole range of scores, nice included
        self.slicing = slicing_tiers(policy)
        self.demotion = abs(w.fair_share) + abs(w.age) + abs(w.size) + abs(w.duration) + 3.0
        self.promoting: list[tuple[float, str]] = []          # (promoted at, job id) of demoted jobs, lazily pruned
        self.promoting_built = True                           # False: rebuild `promoting` from `where` when wanted
        self._durations: dict[float, float] = {}              # expected run time -> its duration factor
        # tier -> team -> SortedList; FIFO keeps one list (FIFO_TIER, team "")
        self.young: dict[int, dict[str, SortedList]] = defaultdict(dict)
        self.old: dict[int, dict[str, SortedList]] = defaultdict(dict)
        self.where: dict[str, tuple] = {}                     # job id -> (old?, tier, team, entry)
        self.where_built = True                               # False: `where` is rebuilt from the lists when wanted
        self.heaped = False                                   # the lists are heaps (a fresh build), not sorted
        self.ageing: list[tuple[float, str]] = []             # (submitted, job id) of young jobs, lazily pruned
        self.ageing_built = True                              # False: rebuild `ageing` from `where` when wanted
        self.team_count: Counter[str] = Counter()
        self.now = -math.inf                                  # the latest `advance`
        # tier -> least_undemoted(tier), kept while known: an add lowers it, a remove may forget it
        self.least: dict[int, int | None] = {}

    def _sorted(self) -> None:
        """Heaps (a fresh build's) become sorted lists, before the first change."""
        if self.heaped:
            for lists in (self.young, self.old):
                for teams in lists.values():
                    for team, entries in teams.items():
                        teams[team] = SortedList(entries)
            self.heaped = False

    def _places(self) -> dict[str, tuple]:
        if not self.where_built:
            for old, lists in ((False, self.young), (True, self.old)):
                for tier, teams in lists.items():
                    for team, entries in teams.items():
                        for entry in entries:
                            self.where[entry[-2]] = (old, tier, team, entry)
            self.where_built = True
        return self.where

    def copy(self) -> "RankedJobs":
        self._sorted()
        new = RankedJobs(self.policy, self.total_gpus)
        for mine, theirs in ((self.young, new.young), (self.old, new.old)):
            for tier, teams in mine.items():
                theirs[tier] = {team: entries.copy() for team, entries in teams.items()}
        new.where, new.ageing, new.ageing_built = dict(self._places()), list(self.ageing), self.ageing_built
        new.team_count, new.now = Counter(self.team_count), self.now
        new.promoting, new.promoting_built = list(self.promoting), self.promoting_built
        return new

    def _constant(self, job: PendingJob) -> float:
        """The job's score without its age term."""
        size = 0.0
        if self.w_size and self.total_gpus:
            size = job.gpus / self.total_gpus if job.gpus < self.total_gpus else 1.0
        duration = 0.0
        expected = job.expected_runtime or job.wall_time
        if self.w_dur and expected:
            known = self._durations.get(expected)
            if known is None:   # a queue's jobs share a few wall times: each log once
                known = self._durations[expected] = max(0.0, 1.0 - math.log1p(expected) / self.log_max_runtime)
            duration = known
        return self.w_size * size + self.w_dur * duration - job.nice / NICE_SCALE + self.service(job)

    def service(self, job: PendingJob) -> float:
        """What time slicing adds to its score at `now`: minus `demotion` while it is demoted, else 0."""
        if self.slicing and demoted(job, self.policy, self.slicing, self.now):
            return -self.demotion
        return 0.0

    def _entry(self, job: PendingJob, old: bool) -> tuple:
        if self.fifo:
            return (job.submitted_at, job.seq, job.id, job)
        if self.sjf:
            return (job.expected_runtime or job.wall_time or math.inf, job.submitted_at, job.seq, job.id, job)
        if old or not self.age_rate:
            key = -(self._constant(job) + (self.w_age if self.age_rate else 0.0))
        else:
            key = -(self._constant(job) - self.age_rate * job.submitted_at)
        return (key, job.submitted_at, job.seq, job.id, job)

    def _is_old(self, job: PendingJob) -> bool:
        return bool(self.age_rate) and not self.sjf and self.now - job.submitted_at >= self.max_age

    def _slot(self, job: PendingJob) -> tuple[int, str]:
        """(tier, team) of the list a job is kept in: FIFO keeps one, SJF one per tier."""
        if self.fifo:
            return FIFO_TIER, ""
        return job.tier, ("" if self.sjf else job.team)

    def add(self, job: PendingJob) -> None:
        self._sorted()
        old = not self.fifo and self._is_old(job)
        tier, team = self._slot(job)
        lists = self.old if old else self.young
        slot = lists[tier].get(team)
        if slot is None:
            slot = lists[tier][team] = SortedList()
        entry = self._entry(job, old)
        slot.add(entry)
        self.where[job.id] = (old, tier, team, entry)
        self.team_count[job.team] += 1
        if job.tier in self.least and not demoted(job, self.policy, self.slicing, self.now):
            least = self.least[job.tier]
            self.least[job.tier] = job.gpus if least is None else min(least, job.gpus)
        if not self.fifo and not self.sjf and not old and self.age_rate:
            heapq.heappush(self.ageing, (job.submitted_at, job.id))
        if self.promoting_built and self.service(job):
            heapq.heappush(self.promoting, (promoted_at(job, self.policy), job.id))

    def bulk_add(self, jobs) -> None:
        """Many jobs at once: one sort per list rather than an insertion per job."""
        ages = not self.fifo and not self.sjf and bool(self.age_rate)
        if self.fifo:   # one list: `_entry`'s, for every job at once
            groups: dict[tuple, list] = {(False, FIFO_TIER, ""): [(job.submitted_at, job.seq, job.id, job)
                                                                  for job in jobs]} if jobs else {}
        elif self.sjf:
            groups = defaultdict(list)
            for job in jobs:
                tier, team = self._slot(job)
                groups[(False, tier, team)].append(self._entry(job, False))
        else:
            groups = self._scored(jobs, ages)
        self.where_built = False   # each job's place is wanted only once one is removed or moves
        self.least.clear()
        self.team_count.update(Counter([job.team for job in jobs]))
        if ages:   # the young ones' ageing order is wanted only once time moves on (advance)
            self.ageing_built = False
        if self.slicing:   # so is the demoted ones' promotion order
            self.promoting_built = False
        if self.young or self.old:   # into kept lists: sorted in
            self._sorted()
            for (old, tier, team), entries in groups.items():
                lists = self.old if old else self.young
                if team in lists[tier]:
                    lists[tier][team].update(entries)
                else:
                    lists[tier][team] = SortedList(entries)
            return
        # a fresh build: heaps, O(n), read in order lazily; sorted only if the index is then changed
        for (old, tier, team), entries in groups.items():
            heapq.heapify(entries)
            (self.old if old else self.young)[tier][team] = entries
        self.heaped = True

    def _scored(self, jobs, ages: bool) -> dict[tuple, list]:
        """The multifactor entries of many jobs, grouped by (old?, tier, team): `_entry` and
        `_constant` inlined, term for term, since a pass that builds its index pays this for
        every pending job (a third of a 100,000-job pass when called per job)."""
        groups: dict[tuple, list] = {}
        now, max_age, age_rate, w_age = self.now, self.max_age, self.age_rate, self.w_age
        w_size, w_dur, total, log_max = self.w_size, self.w_dur, self.total_gpus, self.log_max_runtime
        sizing = bool(w_size and total)
        durations, log1p = self._durations, math.log1p
        slicing, had_slice, demotion, policy = self.slicing, had_slice_at(self.policy), self.demotion, self.policy
        old_key = w_age if age_rate else 0.0
        for job in jobs:
            submitted = job.submitted_at
            size = 0.0
            if sizing:
                gpus = job.gpus
                size = gpus / total if gpus < total else 1.0
            duration = 0.0
            expected = job.expected_runtime or job.wall_time
            if w_dur and expected:
                duration = durations.get(expected)   # type: ignore[assignment]
                if duration is None:
                    duration = durations[expected] = max(0.0, 1.0 - log1p(expected) / log_max)
            constant = w_size * size + w_dur * duration - job.nice / NICE_SCALE
            if slicing and job.served >= had_slice and job.tier in slicing and now < promoted_at(job, policy):
                constant -= demotion
            old = ages and now - submitted >= max_age
            key = -(constant + old_key) if old or not age_rate else -(constant - age_rate * submitted)
            slot = (old, job.tier, job.team)
            group = groups.get(slot)
            if group is None:
                group = groups[slot] = []
            group.append((key, submitted, job.seq, job.id, job))
        return groups

    def remove(self, job: PendingJob) -> None:
        self._sorted()
        old, tier, team, entry = self._places().pop(job.id)
        lists = self.old if old else self.young
        slot = lists[tier][team]
        slot.remove(entry)
        if not slot:
            del lists[tier][team]
            if not lists[tier]:
                del lists[tier]
        self.team_count[job.team] -= 1
        least = self.least.get(job.tier)
        if least is not None and job.gpus <= least and not demoted(job, self.policy, self.slicing, self.now):
            del self.least[job.tier]   # it may have been the smallest

    def advance(self, now: float) -> bool:
        """Moves the jobs that reached `max_age` by `now` to their tier's old list;
        False if `now` is earlier than an earlier call's (the lists no longer tell)."""
        if now < self.now:
            return False
        if now == self.now:
            return True
        self.now = now
        if not self.ageing_built:
            self.ageing = [(entry[-1].submitted_at, job_id) for job_id, (old, _, _, entry) in self._places().items()
                           if not old]
            heapq.heapify(self.ageing)
            self.ageing_built = True
        while self.ageing and now - self.ageing[0][0] >= self.max_age:
            _, job_id = heapq.heappop(self.ageing)
            place = self._places().get(job_id)
            if place is None or place[0]:
                continue   # gone, or already moved
            job = place[3][-1]
            self.remove(job)
            self.add(job)
        if self.slicing:
            self._promote()
        return True

    def _promote(self) -> None:
        """Re-ranks the demoted jobs whose starvation guard promoted them by `now`."""
        if not self.promoting_built:
            # every job that has had its slice: those not demoted are skipped when their time comes
            after, tiers = had_slice_at(self.policy), self.slicing
            self.promoting = [(promoted_at(entry[-1], self.policy), job_id)
                              for job_id, (_, _, _, entry) in self._places().items()
                              if entry[-1].served >= after and entry[-1].tier in tiers]
            heapq.heapify(self.promoting)
            self.promoting_built = True
        while self.promoting and self.promoting[0][0] <= self.now:
            _, job_id = heapq.heappop(self.promoting)
            place = self._places().get(job_id)
            if place is None or place[3][0] == self._entry(place[3][-1], place[0])[0]:
                continue   # gone, or already re-ranked
            job = place[3][-1]
            self.remove(job)
            self.add(job)

    def next_promotion(self) -> float | None:
        """When the starvation guard next promotes a demoted job, after `now` (None: no job is
        demoted); a job promoted since, or gone, may still be listed: a wake for nothing."""
        if not self.slicing:
            return None
        self._promote()   # those due by `now` are re-ranked: what is left is later
        return self.promoting[0][0] if self.promoting else None

    def least_undemoted(self, tier: int) -> int | None:
        """The fewest GPUs a job of the tier that is not demoted waits for at `now`; None: none waits.
        Kept between calls while jobs are only added (a promotion re-adds its job)."""
        if tier in self.least:
            return self.least[tier]
        least = min((job.gpus for job in self.undemoted(tier)), default=None)
        if self.slicing:
            self.least[tier] = least
        return least

    def least_kept(self, tier: int) -> bool:
        """Whether `least_undemoted(tier)` is kept, so costs nothing to ask."""
        return tier in self.least

    def undemoted(self, tier: int) -> Iterator[PendingJob]:
        """The jobs of the tier that are not demoted at `now`, list by list: in each, a demoted job
        ranks after every one that is not, so each is read up to its first demoted job."""
        policy, tiers, now = self.policy, self.slicing, self.now
        for lists in (self.young, self.old):
            for entries in lists.get(tier, {}).values():
                for entry in in_order(entries):
                    job = entry[-1]
                    if demoted(job, policy, tiers, now):
                        break
                    yield job

    def tiers(self) -> list[int]:
        return sorted(set(self.young) | set(self.old))

    def teams_in(self, tier: int, passed_over: Callable[[PendingJob], bool] | None = None,
                 candidates: Callable[[int], set[str] | None] | None = None) -> dict[str, Iterator[tuple]]:
        """Per team, its jobs of the tier in rank order at `now`, as (neg part, submitted, seq, id, job,
        factors) with the part as a fresh pass computes it (`score`) and the factors it is made of
        (`factors(job)`; never compared: the ids differ); without the jobs `passed_over` (read when
        the stream reaches them, before they are scored), and, once a list has passed over a run of
        them, reading only the `candidates` of the tier after it (Skips)."""
        out: dict[str, Iterator[tuple]] = {}
        skips = Skips(self, tier, candidates) if candidates is not None else None
        for team in set(self.young.get(tier, ())) | set(self.old.get(tier, ())):
            young, old = self.young.get(tier, {}).get(team), self.old.get(tier, {}).get(team)
            streams = [self._at_now(entries, passed_over, skips, (is_old, team))
                       for is_old, entries in ((True, old), (False, young)) if entries]
            out[team] = heapq.merge(*streams) if len(streams) == 2 else \
                streams[0] if streams else iter(())
        return out

    def least_part(self, tier: int, team: str) -> float | None:
        """A bound below the first item of everything the team's stream in the tier yields at `now`
        (`teams_in`: minus a job's score but for fair share), read off the first key of each of its
        lists, with no job scored (None: it has none). A young job's key is that item at time 0."""
        least = None
        age_shift = self.age_rate * self.now if self.age_rate else 0.0   # no ageing: keys are parts
        for entries, shift in ((self.young.get(tier, {}).get(team), age_shift),
                               (self.old.get(tier, {}).get(team), 0.0)):
            if entries:   # a heap's first is its least, as a sorted list's
                key = entries[0][0]
                part = key - shift - BOUND_SLACK * (1.0 + abs(key) + abs(shift))
                least = part if least is None else min(least, part)
        return least

    def _at_now(self, entries, passed_over: Callable[[PendingJob], bool] | None,
                skips: "Skips | None" = None, place: tuple[bool, str] = (False, "")) -> Iterator[tuple]:
        for entry in self._unpassed(entries, passed_over, skips, place) if passed_over is not None \
                else in_order(entries):
            job = entry[-1]
            factors = self.factors(job)
            yield (-self.score(factors), job.submitted_at, job.seq, job.id, job, factors)

    @staticmethod
    def _unpassed(entries, passed_over: Callable[[PendingJob], bool], skips: "Skips | None",
                  place: tuple[bool, str]) -> Iterator[tuple]:
        """A list's entries in order but those `passed_over`; after SKIP_AFTER passed over in a row,
        only the entries `skips` lists for it (its place: old?, team) after the last one read, where it
        lists any (else it asks again after twice as long a run). Once another list of the tier has
        had them in this pass, after the first passed over: asking again costs nothing."""
        run, needed, source = 0, SKIP_AFTER, in_order(entries)
        while True:
            for entry in source:
                if not passed_over(entry[-1]):
                    run = 0
                    yield entry
                    continue
                run += 1
                if skips is not None and (run == needed or skips.lists is not None):
                    rest = skips.entries(place)
                    if rest is not None:
                        source, skips = iter(rest[bisect.bisect_right(rest, entry):]), None
                        break
                    run, needed = 0, 2 * needed   # not now (too many may fit, or no reservation yet): later
            else:
                return

    def factors(self, job: PendingJob) -> tuple[float, float, float, float, float]:
        """Its age, size, duration, nice and service terms at `now`, each as a fresh pass computes it."""
        age = min(1.0, max(0.0, self.now - job.submitted_at) / self.max_age) if self.max_age > 0 else 0.0
        size = min(1.0, job.gpus / self.total_gpus) if self.total_gpus else 0.0
        expected = job.expected_runtime or job.wall_time
        duration = 0.0
        if expected:   # log scale: 10 minutes vs 1 hour matters as much as 1 day vs 6 days (as `_constant`)
            duration = self._durations.get(expected)   # type: ignore[assignment]
            if duration is None:
                duration = self._durations[expected] = max(0.0, 1.0 - math.log1p(expected) / self.log_max_runtime)
        return age, size, duration, -job.nice / NICE_SCALE, self.service(job)

    def score(self, factors: tuple[float, float, float, float, float]) -> float:
        """A job's part of the score at `now` (all but fair share), from its `factors`."""
        age, size, duration, nice, service = factors
        return self.w_age * age + self.w_size * size + self.w_dur * duration + nice + service

    def in_list_order(self, passed_over: Callable[[PendingJob], bool] | None = None,
                      candidates: Callable[[int], set[str] | None] | None = None) -> Iterator[PendingJob]:
        """FIFO and SJF: tier by tier (FIFO has one), each tier's one list in order, but the jobs
        `passed_over` (as teams_in)."""
        for tier in self.tiers():
            skips = Skips(self, tier, candidates) if candidates is not None else None
            for team, slot in self.young.get(tier, {}).items():
                if passed_over is None:
                    for entry in in_order(slot):
                        yield entry[-1]
                    continue
                for entry in self._unpassed(slot, passed_over, skips, (False, team)):
                    yield entry[-1]


class Skips:
    """A pass's candidates of one tier (plan._candidates), asked for when a list of the tier first
    passes over a run of jobs (once they are known, kept for the pass: they only shrink within it),
    and handed to each list as its sorted entries: the jobs a pass that explains nothing may not
    pass over, so a list with tens of thousands waiting reads those few, not every job between."""

    def __init__(self, ranked: RankedJobs, tier: int, candidates: Callable[[int], set[str] | None]):
        self.ranked, self.tier, self.candidates = ranked, tier, candidates
        self.lists: dict[tuple[bool, str], list] | None = None   # (old?, team) -> sorted entries

    def entries(self, place: tuple[bool, str]) -> list | None:
        """The candidates in the list at `place` (old?, team), sorted; None: none known yet."""
        if self.lists is None:
            ids = self.candidates(self.tier)
            if ids is None:
                return None
            places, lists = self.ranked._places(), defaultdict(list)
            for job_id in ids:
                old, _, team, entry = places[job_id]
                lists[(old, team)].append(entry)
            for entries in lists.values():
                entries.sort()
            self.lists = lists
        return self.lists.get(place, [])
