"""Read the scheduler's snapshot from a store, with expected run times
(wall time scaled by what each team's past jobs used of theirs)."""

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping

from ..models.dependency import parsed
from ..models.errors import SpecError
from ..models.job import JobState
from ..models.records import rebuilt_with, with_changes
from ..ports import PendingChanges, SchedulingInputs
from ..scheduling import Snapshot
from ..scheduling.snapshot import PendingJob, RunningJob
from ..scheduling.budget import period_of, running_cost
from ..scheduling.dependencies import STARTED
from ..scheduling.eta import RANK_FLOOR, expected_runtime, mean_share, median_band, runtime_ratio

# a caller that plans pass after pass keeps a team's run-time ratio until the median its samples
# give moves by more than this share of it. A median moves with most successes, and each move
# re-estimated the team's whole queue: on SQLite, with 3,000 queued, every pass after a success
# built the index afresh (201 builds in 201 passes). At 5%, a median that flips between two
# neighbouring samples as their count turns odd and even still got through: 89 builds in 201
# passes at 3,000 queued, 73 at 10,000; at 10%, 24 and 33 (benchmarks/local_pass.py). A ratio 10%
# off moves a job's duration term by about 0.04 of the score at the default weights, as much as 6
# hours of waiting
RATIO_DRIFT = 0.1


Band = tuple[float, float]
# the run-time ratios a view of the queue ranks by, given the ones a team's samples give and their
# medians' bands: Supervisor.ratios_in_use where a dispatcher plans beside it
RatiosInUse = Callable[[Mapping[str, float], Mapping[str, Band]], dict[str, float]]


def ratios_as_they_are(ratios: Mapping[str, float], bands: Mapping[str, Band] | None = None) -> dict[str, float]:
    """The ratios a view with no dispatcher beside it ranks by: those the samples give now."""
    return dict(ratios)


def _stands(was: float, ratio: float, band: Band | None) -> bool:
    """Whether the ratio in use, `was`, stands beside the one the samples give now: within
    RATIO_DRIFT of it, or within the band of their median (median_band), which the samples cannot
    tell from it. A median flips between neighbouring samples as their count turns odd and even,
    further apart than the drift where they are sparse: with 30,000 queued, 42 of 201 passes built
    the index afresh, each about 300 ms against 4 for a pass that kept it; with the band, 26, most
    while the samples were too few for one, and the mean pass 0.68x (benchmarks/local_pass.py).
    Below RANK_FLOOR every ratio estimates alike, so a team whose runs use a sliver of their limits
    keeps its records (runs of minutes to hours on limits of 5-7 days, 3,000 queued: 32 of 200
    passes built the index; 2)."""
    was, ratio = max(was, RANK_FLOOR), max(ratio, RANK_FLOOR)
    if abs(ratio - was) <= RATIO_DRIFT * was:
        return True
    return band is not None and max(band[0], RANK_FLOOR) <= was <= max(band[1], RANK_FLOOR)


def team_samples(store: SchedulingInputs) -> dict[str, list[tuple[float, float]]]:
    """Each team's (actual run time, wall-time limit) of its past runs."""
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for team, actual, limit in store.runtime_samples():
        samples[team].append((actual, limit))
    return samples


def team_ratios(samples: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Per team, the median share of its limits its runs use: the pass ranks by it."""
    return {team: runtime_ratio(s) for team, s in samples.items()}


def team_bands(samples: dict[str, list[tuple[float, float]]]) -> dict[str, Band]:
    """Per team with enough samples, the band of its median share (median_band)."""
    return {team: band for team, s in samples.items() if (band := median_band(s)) is not None}


def team_shares(samples: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Per team, the mean share of its limits its runs use: the ETA ends runs by it."""
    return {team: mean_share(s) for team, s in samples.items()}


class Estimated:
    """The records a pass plans from: the store's, each with its expected run time (its wall time
    scaled by its team's ratio). A caller that plans pass after pass keeps one (`kept=True`), and
    a job's record is made again only when the store hands back another record for it or its
    team's ratio moved by more than RATIO_DRIFT: a store that keeps its view between passes
    (both do: the dispatch function's by item, SQLite's by the revision each row carries) hands
    back the same record for a job that did not change, and one that reads a row again an equal
    one. Kept records are built by their class's __init__ (`rebuilt_with`),
    since passes read them again and again; the index a dispatcher keeps (scheduling/kept.py)
    knows an unchanged job by its very record."""

    def __init__(self, *, kept: bool = False):
        self.kept = kept
        self._copy = rebuilt_with if kept else with_changes
        self._ratios: dict[str, float] = {}
        self._pending: dict[str, tuple[PendingJob, float, PendingJob]] = {}
        self._running: dict[str, tuple[RunningJob, float, RunningJob]] = {}
        # fed the store's changes (a kept caller over a store that says what changed, ports.PendingFeed):
        # the estimated pending jobs (in the store's order where it appends, as SQLite's does; a pass
        # does not depend on the order), the ratios they were made with, and the store's mark they stand at
        self._listed: dict[str, PendingJob] | None = None
        self._listed_ratios: dict[str, float] = {}
        self.mark: object | None = None
        # each pending() call's number, and the jobs it handed back new records for since the call
        # before, by id (None: gone), where it knows them: what the kept index is brought by
        self.version = 0
        self.changes: dict[str, PendingJob | None] | None = None
        # kept with the listing, for the pass's other reads of every pending job: how many name each
        # dependency, and each --begin time; `_fed`: whether they stand for the last call's jobs
        self._dependencies: Counter[str] = Counter()
        self._begins: dict[str, float] = {}
        self._fed = False

    def settled(self, ratios: Mapping[str, float], bands: Mapping[str, Band] | None = None) -> dict[str, float]:
        """The teams' ratios to estimate by, given the ones their samples give now and their
        medians' bands: a kept caller goes on with a team's ratio while it stands beside the new
        one (`_stands`; a team's first ratio is taken as it comes); a one-off caller takes them as
        they are."""
        settled = self.in_use(ratios, bands)
        if self.kept:
            self._ratios = settled
        return settled

    def in_use(self, ratios: Mapping[str, float], bands: Mapping[str, Band] | None = None) -> dict[str, float]:
        """What settled() would hand back now, kept nowhere: for a view of the queue beside the
        passes (gqa queue, gqa top) to rank as they do."""
        if not self.kept:
            return dict(ratios)
        bands = bands or {}
        out = {}
        for team, ratio in ratios.items():
            was = self._ratios.get(team)
            out[team] = was if was is not None and _stands(was, ratio, bands.get(team)) else ratio
        return out

    def pending(self, jobs: Iterable[PendingJob], ratios: Mapping[str, float],
                feed: tuple[object, PendingChanges | None] | None = None) -> list[PendingJob]:
        """The jobs' estimated records. `feed`: the store's mark for `jobs` and its changes since
        self.mark (ports.PendingFeed), which a kept caller applies alone where it can: a pass then
        looks at what changed, not at every pending job."""
        self.version += 1
        self.changes, self._fed = None, False
        if self.kept and feed is not None:
            mark, changes = feed
            if changes is not None and self._listed is not None and ratios == self._listed_ratios:
                self.mark = None   # until the changes are in: one that fails halfway leaves a whole read next
                self.changes = self._applied(changes, ratios)
                jobs = jobs if isinstance(jobs, list) else list(jobs)
                if len(self._listed) == len(jobs):   # else a store that broke its word: every job is looked at
                    self.mark, self._fed = mark, True
                    return list(self._listed.values())
                self.changes = None
        jobs = jobs if isinstance(jobs, list) else list(jobs)
        made: dict[str, tuple] = {}
        out = [self._estimated(self._pending, made, job, ratios.get(job.team, 1.0)) for job in jobs]
        if self.kept:
            self._pending = made
            if feed is not None:
                self._listed = {job.id: estimated for job, estimated in zip(jobs, out)}   # the store's order, here
                self._listed_ratios, self.mark, self._fed = dict(ratios), feed[0], True
                self._dependencies = Counter(job.dependency for job in jobs if job.dependency)
                self._begins = {job.id: job.begin for job in jobs if job.begin is not None}
        return out

    def dependencies(self) -> Collection[str] | None:
        """The dependencies the last call's jobs name, where kept with a fed listing (else None)."""
        return self._dependencies.keys() if self._fed else None

    def begin_times(self) -> list[float] | None:
        """The --begin times of the last call's jobs, where kept with a fed listing (else None)."""
        return list(self._begins.values()) if self._fed else None

    def _applied(self, changes: PendingChanges, ratios: Mapping[str, float]) -> dict[str, PendingJob | None]:
        """The store's changes applied, in the order it made them: a job new or back in the queue last."""
        seen, listed = self._pending, self._listed
        assert listed is not None
        out: dict[str, PendingJob | None] = {}
        dependencies, begins = self._dependencies, self._begins
        for job_id, job in changes:
            was = listed.get(job_id)
            if was is not None and was.dependency:
                dependencies[was.dependency] -= 1
                if not dependencies[was.dependency]:
                    del dependencies[was.dependency]
            begins.pop(job_id, None)
            if job is None:
                seen.pop(job_id, None)
                listed.pop(job_id, None)
                out[job_id] = None
                continue
            listed[job_id] = out[job_id] = self._estimated(seen, seen, job, ratios.get(job.team, 1.0))
            if job.dependency:
                dependencies[job.dependency] += 1
            if job.begin is not None:
                begins[job_id] = job.begin
        return out

    def running(self, jobs: Iterable[RunningJob], ratios: Mapping[str, float], now: float) -> list[RunningJob]:
        made: dict[str, tuple] = {}
        out = []
        for run in jobs:
            ratio = ratios.get(run.team, 1.0)
            if run.started:
                out.append(self._estimated(self._running, made, run, ratio))
            else:
                # an attempt not started yet (STARTING) still carries its previous attempt's start: seen
                # from now it begins now, so backfill, ETAs and preemption give it its whole wall time
                # ahead and nothing to lose (made again at every pass, as `now` moves)
                out.append(self._copy(run, expected_runtime=expected_runtime(run.wall_time, ratio), started_at=now))
        if self.kept:
            self._running = made
        return out

    def _estimated(self, seen: dict, made: dict, job, ratio: float):
        """The job's estimated record: the one kept in `seen` while its store record and ratio stand."""
        known = seen.get(job.id)
        if known is None or known[1] != ratio or (known[0] is not job and known[0] != job):
            known = (job, ratio, self._copy(job, expected_runtime=expected_runtime(job.wall_time, ratio)))
        made[job.id] = known
        return known[2]


def read_snapshot(store: SchedulingInputs, now: float, ratios: dict[str, float] | None = None,
                  view: tuple[list, list] | None = None, estimated: Estimated | None = None,
                  feed: tuple[object, PendingChanges | None] | None = None) -> Snapshot:
    """`view`: the store's scheduling_view() when the caller has just read it. `estimated`: what a
    caller that plans pass after pass keeps of the records it planned from. `feed`: the store's
    mark and changes read with `view` (ports.PendingFeed)."""
    inventory = store.inventory()
    policy = store.policy()
    estimated = estimated or Estimated()
    if ratios is None:
        samples = team_samples(store)
        ratios = estimated.settled(team_ratios(samples), team_bands(samples))
    else:
        ratios = estimated.settled(ratios)
    pending, running = store.scheduling_view() if view is None else view
    pending = estimated.pending(pending, ratios, feed)
    running = estimated.running(running, ratios, now)
    gpus = inventory.gpus if inventory else ()
    named = dependency_states(store, pending, estimated.dependencies())
    started = start_times(store, pending, named, estimated.dependencies())
    return Snapshot(now=now, gpus=gpus, pending=tuple(pending),
                    running=tuple(running), teams=store.teams(), usage=store.usage(now, policy.half_life),
                    policy=policy, cpus=inventory.cpus if inventory else None,
                    memory=inventory.memory if inventory else None, spend=spend_now(store, running, gpus, now),
                    named=named, started=started)


def dependency_states(store: SchedulingInputs, pending: list[PendingJob],
                      texts: Collection[str] | None = None) -> dict[str, dict[JobState, int]]:
    """The states of the jobs the pending jobs' dependencies name (one narrow read; none without any).
    `texts`: those dependencies, where the caller keeps them (else read off every pending job)."""
    refs: dict[str, None] = {}
    if texts is None:
        texts = {job.dependency for job in pending if job.dependency}   # an array's tasks share theirs
    corresponding = False
    for text in texts:
        try:
            dependency = parsed(text)
        except SpecError:
            continue   # the pass says why it can never be met
        refs.update(dict.fromkeys(dependency.jobs))
        corresponding = corresponding or dependency.corresponding
    if corresponding:   # an aftercorr reads, for each task, the task of its index: those tasks' own
        for job in pending:
            if job.dependency and "aftercorr" in job.dependency:
                refs.update(dict.fromkeys(parsed(job.dependency).named_by(job.id)))
    return store.states_of(refs) if refs else {}


def start_times(store: SchedulingInputs, pending: list[PendingJob], named: dict[str, dict[JobState, int]],
                texts: Collection[str] | None = None) -> dict[str, tuple[float, bool]]:
    """When the jobs an `after` waits some minutes past (after:12+10) started, for those `named`
    says have all started or ended (one narrow read; none without any such `after`)."""
    if texts is None:
        texts = {job.dependency for job in pending if job.dependency}
    refs: dict[str, None] = {}
    for text in texts:
        if "+" in text:
            try:
                refs.update(dict.fromkeys(parsed(text).delayed))
            except SpecError:
                continue
    asked = [ref for ref in refs if named.get(ref) and all(s in STARTED for s, n in named[ref].items() if n)]
    return store.start_times(asked) if asked else {}


def spend_now(store: SchedulingInputs, running, gpus, now: float) -> dict[str, float]:
    """This period's spend per team: settled attempts plus what running ones have cost so far."""
    spend = dict(store.spend(period_of(now)))
    for team, cost in running_cost(running, gpus, now).items():
        spend[team] = spend.get(team, 0.0) + cost
    return spend
