"""When will each pending job start? The production pass, run forward.

Running jobs end at their expected end (their wall-time limit, scaled by the
mean share of their limits the team's past jobs actually used; a job that
outlives it is expected to run twice as long, and again, up to its limit, as
backfill by predictions counts it in horizon.py); at each end, when a
pending job's --begin time comes, and when time slicing next changes what a
pass decides, the pass runs again on what is left, exactly as the dispatcher
would. Where the pass preempts (a higher tier, or time slicing), its victims
stop and queue again with the service they had, and the next pass runs at
once, as it does once their GPUs come back; past MAX_STOPS stops the replay
lets runs go on to their ends. A job whose dependency is unmet never starts
in the replay (the states of the jobs it names stay as they are now), and a
job whose start depends on a job with no known end gets no ETA (None), rather
than a guess presented as a prediction.

The answer lists the jobs in the order they are predicted to start (one
pass's starts in that pass's order), which is the queue's start order: a
later pass ranks with the fair share the earlier starts used, since the
replay charges each run's GPU time to its team's usage as the store does
(and decays the rest with the half-life).

The replay keeps the queue in a QueueIndex (index.py), a copy of the
caller's where it keeps one: each replayed start and end is one change to
it, and each pass looks only at the jobs it could start, so a prediction
over a long queue costs the passes it replays, not the queue's length at
every one of them."""

import bisect
import heapq
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from ..models.records import with_changes
from .fairshare import decay
from .horizon import doubled_past
from .index import QueueIndex, index_of
from .plan import plan
from .ranking import ranks_by_usage
from .snapshot import PendingJob, RunningJob, Snapshot

INF = float("inf")
DEFAULT_RATIO = 1.0
# A team's history says what share of its limits its jobs use. The pass ranks a job by the median
# share (one job's typical run) and the ETA ends runs by the mean (a start waits on the sum of the
# runs ahead of it, and run times are skewed: a median counts the many short runs and misses the few
# long ones that hold the GPUs). The ETA takes its share as it is (floored only so no job is expected
# to end the moment it starts); the pass's ranking and its backfill by predictions take at least
# RANK_FLOOR of a limit, so a team's history shortens its jobs there at most 20-fold: else a team that
# ran many trivial jobs would rank its week-long ones as minutes under the duration weight.
MIN_RATIO, RANK_FLOOR = 0.0001, 0.05
# A run is expected to end by its team's mean share of its limit, but not later than this many times
# the longest run the team has had: in its history, or still going besides it (early on, a history
# holds none of the long runs, which have not ended yet; on ITP's first 4,000 jobs counting the
# history alone took the mean error from 0.610 to 0.635 of the mean wait). A run that outlives it
# doubles as any other does. A share of a limit reaches past anything the team has run where a job
# asks far more than its team's jobs do: on Alibaba under `model` a running gang that asked 241 days
# was expected, at its team's share of 0.23, to run 56 days, and two gangs queued behind it were told
# 1,162 and 1,116 hours; they started after 97 and 66. Of 1, 2 and 4 times, 2 came out best on the
# table's Alibaba rows. The price: a team's first run far longer than any it has had is expected to
# end early, then later and later as it outlives each expected end
LONGEST_MULTIPLE = 2.0
# the fewest samples whose median's band (median_band) a dispatcher reads: with 4, one standard
# error either side spans every sample
BAND_FROM = 20
# Time slicing may rotate long gangs a slice at a time for days: replaying each stop for a job far
# behind them costs thousands of passes, so past this many stops the replay lets runs go on to their
# expected ends (as it would with no preemption), and what it tells of far starts is that rougher
MAX_STOPS = 200


def _shares(samples: list[tuple[float, float]]) -> list[float]:
    """Each run's share of its limit (one killed at it counts 1); runs with no limit say nothing."""
    return [min(1.0, actual / limit) for actual, limit in samples if limit and limit > 0 and actual >= 0]


def runtime_ratio(samples: list[tuple[float, float]]) -> float:
    """Median of actual run time / wall-time limit over (actual, limit) samples:
    users ask for more than they use, and teams do so consistently. The pass ranks by it."""
    shares = _shares(samples)
    return max(MIN_RATIO, statistics.median(shares)) if shares else DEFAULT_RATIO


def median_band(samples: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The shares the median of `samples` could as well be (runtime_ratio's, floored alike): the
    shares about one standard error of a median either side of it, counted in places, half the
    square root of their count (the places below a median are binomial). None below BAND_FROM
    samples, where a median is too loose for its band to say anything."""
    shares = sorted(_shares(samples))
    n = len(shares)
    if n < BAND_FROM:
        return None
    reach = math.ceil(math.sqrt(n) / 2)
    low, high = shares[(n - 1) // 2 - reach], shares[min(n - 1, n // 2 + reach)]
    return max(MIN_RATIO, low), max(MIN_RATIO, high)


def mean_share(samples: list[tuple[float, float]]) -> float:
    """Mean of actual run time / wall-time limit over (actual, limit) samples: the ETA ends runs by
    it, since what a waiting job waits for is the sum of the runs ahead of it."""
    shares = _shares(samples)
    return max(MIN_RATIO, statistics.fmean(shares)) if shares else DEFAULT_RATIO


def longest_runs(samples: Mapping[str, Iterable[tuple[float, float]]]) -> dict[str, float]:
    """Per team, its longest actual run over its (actual, limit) samples; a team with none is left out."""
    longest = {team: max((actual for actual, _ in runs if actual >= 0), default=None)
               for team, runs in samples.items()}
    return {team: run for team, run in longest.items() if run is not None}


def expected_runtime(wall_time: float | None, ratio: float) -> float | None:
    """The run time the pass counts for a job: its wall time times its team's ratio, at least
    RANK_FLOOR of it."""
    return wall_time * max(ratio, RANK_FLOOR) if wall_time else None


def predict_starts(snap: Snapshot, *, shares: Mapping[str, float] | None = None,
                   targets: set[str] | None = None, max_passes: int = 10_000, max_stops: int = MAX_STOPS,
                   most: int | None = None, runtimes: Mapping[str, float] | None = None,
                   longest: Mapping[str, float] | None = None) -> dict[str, float | None]:
    """Predicted start time of each pending job (or of `targets` only, which
    can stop the replay early), in predicted start order: its first start in
    the replay, which a later preemption does not move. `shares`: per team,
    the mean share of their limits its runs use (mean_share); `longest`: per
    team, its longest run (longest_runs): a run is not expected to go on past
    LONGEST_MULTIPLE times that, or the longest of its team's other runs
    going now, unless it already has. `most`: stop
    once that many starts are told (the rest None), as Slurm's backfill tests
    a bounded number of jobs. `max_stops`: the preemptions the replay makes
    before it lets every run go on to its expected end. `runtimes`: job id ->
    its true run time, where known (a what-if for measuring what estimates
    cost an ETA): such a job ends after it, within its wall time, though it
    is still ranked by its estimate, as the pass ranks it."""
    shares = shares or {}
    longest_of = _longest_besides(snap, longest or {})
    asked: dict[str, float | None] = {}     # job id -> its own wall time, where backfill granted a shorter one

    def end_of(run: RunningJob) -> float:
        known = runtimes.get(run.id) if runtimes else None
        if known is None:
            return _expected_end(run, shares, longest_of(run), asked.get(run.id))
        return run.started_at + (min(known, run.wall_time) if run.wall_time else known)

    wanted = set(targets) if targets is not None else {j.id for j in snap.pending}
    starts: dict[str, float | None] = {}
    index = _replay_index(snap)
    ends: list[tuple[float, str, int]] = []   # (expected end, job id, attempt) of running jobs
    attempt: dict[str, int] = {}              # a preempted job's earlier attempt's end is stale
    began: dict[str, PendingJob] = {}         # what each job the replay started was, to queue it again
    for run in index.running.values():
        heapq.heappush(ends, (_not_before(end_of(run), run, snap.now), run.id, 0))
    next_begin = _begins_after(index, snap.now)
    now = snap.now
    used: dict[str, float] = {}     # GPU-seconds the replay's runs add to each team's usage since snap.now
    reads_usage = ranks_by_usage(snap.policy)
    usage: dict[str, float] = {}
    for _ in range(max_passes):
        if reads_usage:
            usage = {team: decay(u, now - snap.now, snap.policy.half_life) for team, u in snap.usage.items()}
            for team, seconds in used.items():
                usage[team] = usage.get(team, 0.0) + seconds
        # a copy that skips the frozen __init__ (records.py): a replay to a far start makes thousands
        current = with_changes(snap, now=now, pending=index.pending_view, running=index.running_view, usage=usage)
        decision = plan(current, explain=False)
        stopped = decision.preempt if max_stops > 0 else []
        max_stops -= len(stopped)
        for job_id in stopped:   # stopped and queued again, as the dispatcher requeues them
            victim = index.stop(job_id)
            index.add(_requeued(victim, began.get(job_id), snap, now))
            attempt[job_id] = attempt.get(job_id, 0) + 1
            asked.pop(job_id, None)
        for start in decision.starts:
            job = index.remove(start.job_id)
            if job.id in wanted:
                starts.setdefault(job.id, now)   # when it starts: a stop and a later restart do not move it
            began[job.id] = job
            run = _as_running(job, start.gpus, now, start.wall_time)
            if start.wall_time and job.wall_time != start.wall_time:
                asked[job.id] = job.wall_time
            index.start(run)
            heapq.heappush(ends, (end_of(run), job.id, attempt.get(job.id, 0)))
        if wanted <= starts.keys() or not index.pending or (most is not None and len(starts) >= most):
            break
        if stopped:
            continue   # the victims' GPUs are free now: the next pass, at once, starts what they were stopped for
        # the next thing that can change the plan: a running job's end, a --begin time coming, or time
        # slicing stopping a run that has had its slice or promoting a demoted job (slicing.next_change)
        change = index.next_slicing_change(now) if max_stops > 0 else None
        following = min(ends[0][0] if ends else INF, next_begin(now), INF if change is None else change)
        if following == INF:
            break  # nothing we can see will free GPUs
        # what runs until then is charged to its team, as the store's usage counts it (fairshare.py)
        for team, gpus in index.team_gpus.items():
            if gpus:
                used[team] = used.get(team, 0.0) + gpus * (following - now)
        now = following
        while ends and ends[0][0] <= now:
            _, job_id, which = heapq.heappop(ends)
            if job_id in index.running and attempt.get(job_id, 0) == which:
                index.stop(job_id)
    for job_id in index.pending:
        if job_id in wanted:
            starts.setdefault(job_id, None)
    return {k: v for k, v in starts.items() if targets is None or k in wanted}


def _replay_index(snap: Snapshot) -> QueueIndex:
    """The replay's own index: a copy of the one the caller keeps (O(n)), else one built for the snapshot."""
    kept = index_of(snap.pending, snap.running)
    if kept is not None and kept.policy is snap.policy and kept.gpus is snap.gpus and kept.ranked.now <= snap.now:
        return kept.copy()
    return QueueIndex.of(snap.gpus, snap.policy, snap.pending, snap.running, snap.now)


def _begins_after(index: QueueIndex, now: float) -> Callable[[float], float]:
    """The next --begin time after a time, of the jobs queued now: read once, since no job starts
    before its --begin and a job the replay queues again (stopped) has started, so the --begin
    times still ahead are those of jobs queued now. A replay past 2,000 --begin jobs had walked
    them all at every step."""
    begins = sorted(job.begin for job in index.gated_jobs() if job.begin is not None and job.begin > now)

    def after(at: float) -> float:
        place = bisect.bisect_right(begins, at)
        return begins[place] if place < len(begins) else INF
    return after


def _requeued(run: RunningJob, job: PendingJob | None, snap: Snapshot, now: float) -> PendingJob:
    """A preempted run queued again, with the service it has had: as it was queued before the replay
    started it, else as its running record tells it (on the GPU type it held)."""
    served = run.attained(now)
    if job is not None:
        return replace(job, served=served)
    held = sorted({gpu.type for gpu in snap.gpus if gpu.index in run.gpus})
    return PendingJob(id=run.id, team=run.team, user=run.user, tier=run.tier, gpus=len(run.gpus),
                      submitted_at=run.submitted_at, gpu_type=",".join(held) or None, cpus=run.cpus,
                      memory=run.memory, wall_time=run.wall_time, group=run.group,
                      expected_runtime=run.expected_runtime, exclusive=run.exclusive, name=run.name, served=served)


def _longest_besides(snap: Snapshot, longest: Mapping[str, float]) -> Callable[[RunningJob], float | None]:
    """For a run, the longest run its team has had besides it: the longest in its history
    (`longest`), or of its other runs going at `snap.now`; None for a team with no history."""
    going: dict[str, list[tuple[float, str]]] = {}
    for run in snap.running:
        if run.started and run.team in longest:
            going.setdefault(run.team, []).append((snap.now - run.started_at, run.id))
    two = {team: heapq.nlargest(2, runs) for team, runs in going.items()}   # the longest besides any one

    def of(run: RunningJob) -> float | None:
        if run.team not in longest:
            return None
        other = next((elapsed for elapsed, job_id in two.get(run.team, ()) if job_id != run.id), 0.0)
        return max(longest[run.team], other)
    return of


def _expected_end(run: RunningJob, shares: Mapping[str, float], longest: float | None,
                  asked: float | None = None) -> float:
    """When a run is expected to end: its start plus `asked` (the wall time its job asked, where
    backfill granted it a shorter one; else its own) times its team's mean share, where the replay has
    the team's history (as it is: the run's own expected run time is the pass's count, the median
    floored at RANK_FLOOR), and at most LONGEST_MULTIPLE times `longest`, the team's longest run
    besides it (at least MIN_RATIO of `asked`); else plus that expected run time; else at its limit.
    Never after its limit."""
    asked = asked or run.wall_time
    if asked and run.team in shares:
        expected = asked * shares[run.team]
        if longest is not None:
            expected = min(expected, max(LONGEST_MULTIPLE * longest, asked * MIN_RATIO))
        return min(run.started_at + expected, run.ends_by)
    if run.expected_runtime:
        return min(run.started_at + run.expected_runtime, run.ends_by)
    if run.wall_time:
        return run.started_at + run.wall_time * DEFAULT_RATIO
    return INF


def _not_before(end: float, run: RunningJob, now: float) -> float:
    """A job already past its expected end is still running: expect it to run twice as long as
    expected, and again while that is past (as backfill by predictions counts it, horizon.py),
    never past its limit and never before now. With no limit, no end is known."""
    if end >= now:
        return end
    if not run.wall_time:
        return INF
    expected = end - run.started_at
    if expected <= 0:
        return max(now, run.ends_by)
    return max(now, doubled_past(run.started_at, expected, now, run.ends_by))


def _as_running(job: PendingJob, gpus: tuple[int, ...], now: float, granted: float | None = None) -> RunningJob:
    """`granted`: the shorter wall time backfill gave it (--time-min), which bounds its run."""
    wall_time = granted or job.wall_time
    expected = min(job.expected_runtime, granted) if job.expected_runtime and granted else job.expected_runtime
    return RunningJob(id=job.id, team=job.team, user=job.user, gpus=gpus, started_at=now, cpus=job.cpus,
                      memory=job.memory, group=job.group, wall_time=wall_time, expected_runtime=expected,
                      exclusive=job.exclusive, tier=job.tier, name=job.name, served=job.served,
                      submitted_at=job.submitted_at)
