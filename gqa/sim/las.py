"""Tiresias-style discretised 2D-LAS (Gu et al., NSDI'19): a preemptive
scheduler that knows nothing of run times or wall times, only the service
each job has had. It is not the production pass, so it is its own small
event-driven replay over the same Workload, giving the same SimResult.

- Attained service: GPUs x seconds of work done (a resume's reload is not
  service), since the job arrived or was last promoted. Counting the reload
  would demote a gang wider than THRESHOLD / RESTART GPUs (55 at the
  defaults) before it does any new work, and such jobs, promoted in turn,
  could preempt each other forever with no work done. Under THRESHOLD
  GPU-seconds a job is in the first queue, from there on in the second
  (K = 2 queues, as Tiresias runs by default; 3,250 GPU-seconds, about 0.9
  GPU-hour, is the first queue's limit in the authors' public simulator).
  Within a queue: submit time, then arrival order (FIFO).
- At every event (an arrival, an end, a job crossing the threshold, a
  promotion) the waiting jobs are taken in priority order: each starts on
  free GPUs, or on GPUs taken from the lowest-priority running jobs below it
  when that makes room (gang: all its GPUs at once); otherwise it is skipped.
- Starvation guard (Tiresias' PROMOTEKNOB): a job in the second queue that
  has waited STARVE times as long as it ran since its last promotion goes
  back to the first queue with its attained service forgotten.
- Checkpoint on preemption, as Tiresias assumes: a preempted job keeps all
  its work, and pays RESTART seconds on the GPUs each time it resumes.
- A job whose wall time is shorter than its run is killed once it has done
  its wall time of work (the scheduler never reads it: the job's own limit).
- With `tiers` (the `las-tiers` policy) it honours the jobs' priority tiers as
  a priority-class scheduler does: each tier has its own two queues, a higher
  tier's jobs come before every job of a lower tier and may preempt them at
  once, whatever service either has had; demotion and promotion stay within
  the tier. Without it every job is in one tier, as Tiresias has it.

GPUs are counted, not placed: one pool of identical GPUs."""

import heapq
import math
from bisect import bisect_left, insort
from collections import Counter
from dataclasses import dataclass

from .engine import Outcome, SimResult
from .sorted_ints import SortedInts
from .workload import Workload

THRESHOLD = 3250.0   # GPU-seconds of attained service in the first queue
# waited / ran since the last promotion, past which a job is promoted. The authors'
# simulator offers 0.5 to 1000 (and none by default); on the first 35,000 ITP jobs
# at 95% load 8 paid 1.7x the preemptions of 16 for a 7% longer mean JCT, and 32
# (0.64x the preemptions) lets a starved job wait twice as long again
STARVE = 16.0
RESTART = 60.0       # seconds a resumed job spends on its GPUs before doing new work

END, DEMOTE, PROMOTE = 0, 1, 2   # event kinds; at one moment ends come first
LEVEL_SHIFT = 40    # a key's level bits sit above its index's
INDEX_MASK = (1 << LEVEL_SHIFT) - 1
STALE_KEPT = 4096    # stale events the heap may hold before they are dropped (once they are half of it)


@dataclass(slots=True)
class _Job:
    index: int
    gpus: int
    submit: float
    seq: int
    left: float                 # work still to do, seconds
    first: int = 0              # its first queue's level: 2 x its tier where tiers are honoured, else 0
    queue: int = 0              # 0 or 1: its level is first + queue
    served: float = 0.0         # seconds of work done since arrival or the last promotion
    waited: float = 0.0         # seconds waiting since the last promotion, once it has run
    since: float = 0.0          # when it last started or stopped
    overhead: float = 0.0       # of the running attempt
    stint: int = 0              # bumped at every start and stop: older events are stale
    queued: int = 0             # its events in the heap of this stint
    ends_at: float = 0.0        # when the running attempt ends, if not stopped first
    running: bool = False
    # its rank, lowest first: its level, then its index (the jobs are indexed in submit,
    # seq order), in one int. Kept, not built at each look, and an int, not a tuple: under
    # overload the waiting and running lists compare keys hundreds of millions of times
    key: int = 0

    def level(self) -> int:
        return self.first + self.queue

    def __post_init__(self) -> None:
        self.rank()

    def rank(self) -> None:
        self.key = self.level() << LEVEL_SHIFT | self.index


def simulate_las(work: Workload, gpus: int, *, name: str = "las", threshold: float = THRESHOLD,
                 starve: float = STARVE, restart: float = RESTART, price: float = 0.0,
                 pool: str = "gpu", tiers: bool = False) -> SimResult:
    """`gpus`: the cluster's GPU count; `price`: per GPU-hour, for the cost;
    `starve` 0 turns the starvation guard off; `tiers`: honour the jobs' tiers
    (module docstring)."""
    return _Las(work, gpus, name, threshold, starve, restart, price, pool, tiers).run()


class _Las:
    def __init__(self, work: Workload, gpus: int, name: str, threshold: float, starve: float, restart: float,
                 price: float, pool: str, tiers: bool = False):
        self.sim = sorted(work.jobs, key=lambda j: (j.submit, j.seq))
        self.total, self.free = gpus, gpus
        self.threshold, self.starve, self.restart, self.price, self.pool = threshold, starve, restart, price, pool
        self.jobs = [_Job(i, j.gpus, j.submit, j.seq, min(j.duration, j.wall_time), 2 * j.tier if tiers else 0)
                     for i, j in enumerate(self.sim)]
        levels = 2 + max((j.first for j in self.jobs), default=0)   # two queues per tier
        self.out = [Outcome(j.id, j.team, j.gpus, j.submit, j.duration, j.wall_time, tier=j.tier) for j in self.sim]
        self.result = SimResult(policy=name, gpus=gpus, outcomes=self.out)
        if self.sim:
            self.result.arrival_window = (self.sim[0].submit, self.sim[-1].submit)
        self.arrivals_from, self.arrivals_to = self.result.arrival_window
        # GPU-seconds held, all attempts, and those between the first and last arrival: the books, once it is over
        self.booked = self.in_window = 0.0
        # keys, in priority order: with tens of thousands waiting, a list's insert moves them all
        self.pending = SortedInts()
        self.running: list[int] = []     # keys, in priority order
        self.sizes: Counter[int] = Counter()           # GPU counts of waiting jobs
        self.running_gpus = [0] * levels               # per level (tier x 2 + queue)
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind, job, stint)
        self.stale = 0   # events in the heap of an earlier stint: dropped in one go once they are half of it

    # -- the loop ----------------------------------------------------------------
    def run(self) -> SimResult:
        i, n, events = 0, len(self.jobs), self.events
        while i < n or events:
            now = self.jobs[i].submit if i < n else math.inf
            if events and events[0][0] <= now:
                now = events[0][0]
            # a pass runs only where something may start: a pass that could start
            # nothing would preempt nothing either (fewer passes, same decisions)
            changed = False
            while events and events[0][0] == now:
                _, kind, index, stint = heapq.heappop(events)
                job = self.jobs[index]
                if job.stint != stint:
                    self.stale -= 1
                    continue
                job.queued -= 1
                if kind == END:
                    self._finish(job, now)
                    changed = True
                elif kind == DEMOTE:
                    self._demote(job)
                    self._push(job.ends_at, END, job)
                    changed = changed or (bool(self.pending) and self.pending.first() < job.key)
                else:
                    self._promote(job, now)
                    changed = changed or self._may_start(job)
            while i < n and self.jobs[i].submit == now:
                self._wait(self.jobs[i], now)
                changed = changed or self._may_start(self.jobs[i])
                i += 1
            if changed and self.pending:
                self._pass(now)
            if self.stale > STALE_KEPT and 2 * self.stale > len(events):
                self._drop_stale()
        if self.sim:
            self.result.gpu_seconds_by_pool[self.pool] = self.booked
            self.result.gpu_seconds_in_window = self.in_window
            for out in self.out:
                out.gpu_type = self.pool
        return self.result

    def _drop_stale(self) -> None:
        """The heap without its stale events: a preempted job's end stays in it until its time, so
        under heavy preemption most of a heap is stale and every push and pop pays for it. The live
        events keep their order (each is a distinct tuple), so nothing else changes."""
        jobs = self.jobs
        self.events[:] = [event for event in self.events if jobs[event[2]].stint == event[3]]
        heapq.heapify(self.events)
        self.stale = 0

    def _push(self, at: float, kind: int, job: _Job) -> None:
        heapq.heappush(self.events, (at, kind, job.index, job.stint))
        job.queued += 1

    def _next_stint(self, job: _Job) -> None:
        """A start or a stop: the job's events in the heap are stale."""
        job.stint += 1
        self.stale += job.queued
        job.queued = 0

    def _may_start(self, job: _Job) -> bool:
        """A waiting job fits what is free, or is above some running job."""
        return job.gpus <= self.free or (bool(self.running) and self.running[-1] > job.key)

    def _pass(self, now: float) -> None:
        """The waiting jobs in priority order: start each that fits, making room by
        preempting running jobs of lower priority where that is enough."""
        self.result.passes += 1
        pending, running, jobs = self.pending, self.running, self.jobs
        buckets = pending.buckets
        no_room = math.inf   # the smallest gang found no room below it: later jobs have less
        at, first = 0, 0     # where the walk goes on: buckets[at][first]
        while at < len(buckets):
            bucket = buckets[at]
            for i in range(first, len(bucket)):
                key = bucket[i]
                job = jobs[key & INDEX_MASK]
                need = job.gpus
                if need <= self.free:
                    preempted = False
                    break
                below = bool(running) and running[-1] > key   # some running job has a lower priority
                if below and need < no_room and self._room_below(key, need):
                    for victim in self._victims(key, need):
                        self._stop(victim, now)   # waits again, behind this job
                        self.out[victim.index].preemptions += 1
                    no_room = math.inf   # what it left free may make room for others
                    preempted = True
                    break
                if below:
                    if need < no_room:
                        no_room = need
                elif self.free == 0 or self.free < min(self.sizes):
                    return   # nothing after it may preempt, and nothing waiting fits what is free
            else:
                at, first = at + 1, 0
                continue
            if preempted:   # its victims wait again after it, and may have split a bucket: found again
                pending.remove(key)
                at, first = pending.after(key)
            else:
                at, first = pending.take(at, i)
            self._start(job, now)

    def _room_below(self, key: int, need: int) -> bool:
        """Free GPUs plus those of running jobs below `key` hold `need`: first the
        levels' totals (cheap), then the jobs themselves."""
        if self.free + sum(self.running_gpus[key >> LEVEL_SHIFT:]) < need:
            return False
        if self.free + sum(self.running_gpus[(key >> LEVEL_SHIFT) + 1:]) >= need:
            return True   # every job of a later level is below it
        held = self.free
        for other in reversed(self.running):
            if other <= key:
                return False
            held += self.jobs[other & INDEX_MASK].gpus
            if held >= need:
                return True
        return False

    def _victims(self, key: int, need: int) -> list[_Job]:
        """The lowest-priority running jobs that make room, less any whose GPUs turn out not to be needed."""
        chosen, held = [], self.free
        for other in reversed(self.running):
            if held >= need:
                break
            chosen.append(self.jobs[other & INDEX_MASK])
            held += chosen[-1].gpus
        kept = []
        for victim in reversed(chosen):   # the highest priority first: spared if the rest make room
            if held - victim.gpus >= need:
                held -= victim.gpus
            else:
                kept.append(victim)
        return kept

    # -- transitions ---------------------------------------------------------------
    def _wait(self, job: _Job, now: float) -> None:
        job.since = now
        self.pending.add(job.key)
        self.sizes[job.gpus] += 1
        if job.queue and self.starve > 0:
            self._push(now + max(0.0, self.starve * job.served - job.waited), PROMOTE, job)

    def _start(self, job: _Job, now: float) -> None:
        self.sizes[job.gpus] -= 1
        if not self.sizes[job.gpus]:
            del self.sizes[job.gpus]
        if job.served > 0:
            job.waited += now - job.since
        out = self.out[job.index]
        job.overhead = self.restart if out.attempts else 0.0
        out.attempts += 1
        if out.start is None:
            out.start = now
        job.running, job.since = True, now
        self._next_stint(job)
        self.free -= job.gpus
        self.running_gpus[job.level()] += job.gpus
        insort(self.running, job.key)
        # its end, or first its demotion, which pushes its end: under overload most attempts are
        # stopped after their demotion, and an end pushed for them would only be stale
        job.ends_at = now + job.overhead + job.left
        crosses = now + job.overhead + self.threshold / job.gpus - job.served if job.queue == 0 else math.inf
        if crosses < job.ends_at:
            self._push(crosses, DEMOTE, job)
        else:
            self._push(job.ends_at, END, job)

    def _stop(self, job: _Job, now: float) -> None:
        """Ends the running attempt (its work kept), and books it; the job waits again."""
        self._off(job, now)
        job.left -= max(0.0, now - job.since - job.overhead)
        job.since = now
        self._next_stint(job)
        self._wait(job, now)

    def _off(self, job: _Job, now: float) -> None:
        del self.running[bisect_left(self.running, job.key)]
        self.free += job.gpus
        self.running_gpus[job.level()] -= job.gpus
        elapsed = now - job.since
        job.served += max(0.0, elapsed - job.overhead)
        job.running = False
        out = self.out[job.index]
        out.gpu_seconds += job.gpus * elapsed
        out.cost += job.gpus * elapsed / 3600 * self.price
        self.booked += job.gpus * elapsed
        # (conditionals, not min and max: a stop's books run millions of times under overload)
        began = job.since if job.since > self.arrivals_from else self.arrivals_from
        ended = now if now < self.arrivals_to else self.arrivals_to
        if ended > began:
            self.in_window += job.gpus * (ended - began)

    def _finish(self, job: _Job, now: float) -> None:
        self._off(job, now)
        self._next_stint(job)
        out = self.out[job.index]
        out.end = now
        out.timed_out = out.duration > out.wall_time

    def _demote(self, job: _Job) -> None:
        """A running job's attained service reached the threshold: the second queue."""
        del self.running[bisect_left(self.running, job.key)]
        self.running_gpus[job.level()] -= job.gpus
        job.queue = 1
        job.rank()
        self.running_gpus[job.level()] += job.gpus
        insort(self.running, job.key)

    def _promote(self, job: _Job, now: float) -> None:
        """Waited too long: back to the first queue, its attained service forgotten."""
        self.pending.remove(job.key)
        job.queue, job.served, job.waited = 0, 0.0, 0.0
        job.rank()
        job.since = now
        self.pending.add(job.key)
