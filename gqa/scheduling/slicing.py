"""Time slicing within a tier: Tiresias' discretised two-queue LAS (Gu et al.,
NSDI'19), opt-in per tier (`policy.slice_tiers`), for tiers whose jobs
checkpoint when stopped.

A job's service is the GPU-seconds it has run, over all its attempts. In a
slicing tier:

- A waiting job that has had its slice (`slice_after` GPU-seconds) is demoted:
  it ranks after every job of its tier that has not (ranked.py), and gets no
  reservation (fit.py): with no knowledge of run times, the jobs that have run
  least go first, as in LAS.
- A waiting job that has not had its slice may preempt a running job of its
  tier that has, once that job has run `slice_min_run` seconds in its attempt
  (preempt.py): the stop costs a restart, and the minimum keeps two jobs from
  trading the GPUs back and forth.
- Starvation guard (Tiresias' PROMOTEKNOB): a demoted job is promoted back once
  it has waited `slice_starve` times as long as it ran. Waited and ran are
  counted from its submission, so the time it is promoted is fixed while it
  waits and the index moves it then (ranked.RankedJobs.advance). As Tiresias
  forgets a promoted job's service, an attempt started after its promotion
  runs a whole slice of its own before slicing may stop it.
- Slicing stops a run only once, queued again, it would be demoted: once it
  has run a `1 + slice_starve`th of its time since submission (an attempt
  started `w` seconds after promoted_at, which for a job that has not run is
  its submission, runs `w / slice_starve`). Else a job stopped for a waiting
  job of its tier was queued promoted, outranked that job by age and took its
  GPUs back at the next pass: the two swapped every slice, each swap a
  restart. At most `CATCH_UP_SLICES` slices, though: a job that waited days
  then trades its GPUs every few slices rather than holding them for hours
  while its tier waits.
- An attempt started while its job is demoted (on GPUs no job above it
  wanted, since slicing reserves nothing) runs `DEMOTED_SLICES` slices' worth
  before slicing may stop it: stopped after `slice_min_run`, such a job was
  stopped by every fresh job of its tier, a restart each, and so restarted
  more often the more jobs arrived rather than once per slices' worth of
  service.

Policies ordered by FIFO or SJF do not slice."""

import math
from collections.abc import Iterable

from .snapshot import PendingJob, Policy, RunningJob


SLICE_ROUNDING = 1e-3   # GPU-seconds
# the most slices an attempt runs before slicing may stop it, however long the job waited: on
# Alibaba's 8-16 GPU replays, unbounded, 8-GPU pods that had waited days ran 3-10 hours past their
# slice, and one row's mean JCT rose 3.7 times; 4 came out best of 1, 2, 4, 8, 16 and no bound
# (seeds 0-9)
CATCH_UP_SLICES = 4
# the slices' worth an attempt started demoted runs before slicing may stop it. Against the least
# run alone, over seeds 0-9's tiered Alibaba replays: 2 slices, 37% fewer preemptions and mean JCT
# 0.974x (geometric mean; 41 rows better and 13 worse by over 5%); 1, 27% and 0.981x; 4, 46% and
# 0.976x, but 36 worse. Seeds 10-19, not used to choose: 2 slices 34% and 0.968x (43 and 13)
DEMOTED_SLICES = 2


def had_slice_at(policy: Policy) -> float:
    """The service from which a job has had its slice: `slice_after` less a millisecond, so that a
    run stopped the instant its slice ends (stoppable_at: `started_at + slice / gpus`, in floats)
    has had it when queued again."""
    return policy.slice_after - SLICE_ROUNDING


def slicing_tiers(policy: Policy) -> frozenset[int]:
    return frozenset(policy.slice_tiers) if policy.ordering == "multifactor" else frozenset()


def promoted_at(job: PendingJob | RunningJob, policy: Policy) -> float:
    """When a demoted job is promoted back: it has waited `slice_starve` times its run time
    (its service before this attempt over its GPUs) since its submission; never with the guard
    off (0)."""
    if policy.slice_starve <= 0:
        return math.inf
    gpus = job.gpus if isinstance(job.gpus, int) else len(job.gpus)
    ran = job.served / max(1, gpus)
    return job.submitted_at + ran * (1.0 + policy.slice_starve)


def demoted(job: PendingJob, policy: Policy, tiers: frozenset[int], now: float) -> bool:
    """It has had its slice in a slicing tier (`tiers`: slicing_tiers(policy)) and is not yet promoted."""
    return job.served >= had_slice_at(policy) and job.tier in tiers and now < promoted_at(job, policy)


def may_stop(run: RunningJob, policy: Policy, tiers: frozenset[int], now: float) -> bool:
    """A running job a waiting job of its tier that is not demoted may preempt."""
    return in_slicing(run, tiers) and now >= stoppable_at(run, policy)


def in_slicing(run: RunningJob, tiers: frozenset[int]) -> bool:
    """A running job slicing may come to stop: its attempt runs, in a slicing tier."""
    return run.tier in tiers and run.started and not run.stopping


def stoppable_at(run: RunningJob, policy: Policy) -> float:
    """From when slicing may stop the running job: it has had its slice (an attempt started after
    its promotion, a slice of its own), queued again it would be demoted, and it has run
    `slice_min_run` in this attempt (`DEMOTED_SLICES` slices' worth if it started demoted). Fixed
    while the attempt runs, so the index keeps the running jobs in this order (QueueIndex.sliceable)."""
    after, starve, min_run = policy.slice_after, policy.slice_starve, policy.slice_min_run
    gpus, served, started_at = len(run.gpus), run.served, run.started_at
    had_slice = served >= had_slice_at(policy)
    promoted = had_slice and started_at >= promoted_at(run, policy)   # never with the guard off (inf)
    need = after if promoted else max(0.0, after - served)   # started promoted: a slice of its own first
    if not gpus:
        return math.inf if need > 0 else started_at + min_run   # a CPU-only job earns no GPU service
    if had_slice and not promoted:
        min_run = max(min_run, DEMOTED_SLICES * after / gpus)   # started demoted
    at = started_at + max(min_run, need / gpus)
    if starve > 0:
        # and on until, stopped at t and queued with served + gpus·(t - started_at), it would be
        # demoted: t > promoted_at(it then) solves to the time below, `(started_at - promoted_at) /
        # starve` after its start (a second past, so rounding cannot queue it promoted); at most
        # CATCH_UP_SLICES slices
        demoted_from = ((1.0 + starve) * (started_at - served / gpus) - run.submitted_at) / starve + 1.0
        at = max(at, min(demoted_from, started_at + CATCH_UP_SLICES * after / gpus))
    return at


def next_change(running: Iterable[RunningJob], pending: Iterable[PendingJob], policy: Policy,
                now: float, free: int) -> float | None:
    """The next time slicing alone changes a pass's decisions, or None (never): a loop that sleeps
    until something happens wakes then. `free`: the GPUs no running job holds. That is a demoted
    job's promotion, or, in a tier where a job that is not demoted waits, the first time the GPUs
    slicing may stop there, with those free and those on their way back, number as many as the
    smallest such job needs (`room_at`; a demoted job may stop nothing, and fewer GPUs start
    nothing; where lower tiers are preemptible, their running jobs count as free); once they do,
    each further run slicing may stop. Which tiers have such a job, and the free GPUs, change only
    when a job arrives, starts or ends, or at a promotion: each wakes the loop, which asks again."""
    tiers = slicing_tiers(policy)
    if not tiers:
        return None
    running, pending = list(running), list(pending)
    base = free + sum(len(run.gpus) for run in running if run.stopping)
    times: list[float] = []
    for tier in tiers:
        least = min((job.gpus for job in pending if job.tier == tier and not demoted(job, policy, tiers, now)),
                    default=None)
        if least is None:
            continue
        stops = sorted((stoppable_at(run, policy), len(run.gpus)) for run in running
                       if run.tier == tier and in_slicing(run, tiers))
        room = room_at(least, base + preemptible_below(running, tier, policy), stops)
        if room is not None:
            times.append(room if room > now else min((t for t, _ in stops if now < t < math.inf), default=math.inf))
    times += [at for job in pending if job.tier in tiers and job.served >= had_slice_at(policy)
              and (at := promoted_at(job, policy)) > now]
    times = [t for t in times if t < math.inf]
    return min(times, default=None)


def preemptible_below(running: Iterable[RunningJob], tier: int, policy: Policy) -> int:
    """The GPUs of running jobs of preemptible tiers below `tier` (preempt.py may stop them at any time)."""
    if not policy.preempt_tiers:
        return 0
    return sum(len(run.gpus) for run in running
               if run.tier > tier and run.tier in policy.preempt_tiers and not run.stopping)


def room_at(need: int, base: int, stops: Iterable[tuple[float, int]]) -> float | None:
    """When `base` GPUs (free, or on their way back) and those of the runs slicing may stop first
    number `need`: `stops` are the runs' (stoppable_at, GPUs) in order; -inf if `base` is enough
    already, None if they never will. A bound over every pool together: before then, slicing can
    make room for no job of that size, so a pass stops nothing for one."""
    if need <= base:
        return -math.inf
    for at, gpus in stops:
        if at == math.inf:
            return None
        base += gpus
        if base >= need:
            return at
    return None
