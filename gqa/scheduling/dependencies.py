"""The phase of a pass before quotas: jobs that may not start yet whatever
is free, each with its reason, and jobs whose dependency can never be met.

A pending job waits while its owner holds it (`gqa hold`), until its --begin
time, and until its dependency holds (models/dependency.py), given the states
of the jobs it names (`Snapshot.named`; an array id names all its tasks, a
task id one task). A condition on a job that ended the wrong way
(afterok on a failure, afternotok on a success) can never be met: such a job
is listed to be cancelled with the reason. So is one on how a job ended
whose record the history retention deleted (the store keeps a job a waiting
job names; this is for a job named after that); `after` and `afterany` on
such a job are met, since only an ended job is deleted. With `?` (any of), a job waits while
any condition can still be met. A singleton waits for every earlier job of
its name and owner, pending or running, to end.

A verdict is a function of the dependency's text and the states of the jobs
it names, so it is kept between passes with those states and told again
only where one moved (a singleton's, which reads the queue, at every pass):
after its first, a pass over 5,000 jobs each waiting on its own running job tells none."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol
from datetime import datetime, timezone

from ..models.dependency import VERB, Condition, Dependency, counterpart, parsed
from ..models.errors import SpecError
from ..models.job import JobState, TERMINAL, held_by
from .snapshot import PendingJob, Snapshot

MET, WAIT, NEVER = "met", "wait", "never"
# a waiting job's dependency is parsed once (models.dependency.parsed), and its verdict is a function
# of the text and the states of the jobs it names alone (a singleton's aside), which few passes move:
# kept per text with the states it was told from, and told again only where one of them moved
# (copies: a caller may build `named` afresh or change it in place)
KEPT_VERDICTS = 1 << 16
_told: dict[tuple[str, str], tuple[tuple[tuple[str, dict | None], ...], str, str]] = {}
S = JobState
FAILED = frozenset({S.FAILED, S.TIMED_OUT, S.CANCELLED, S.REJECTED})
STARTED = TERMINAL | {S.RUNNING}
# a job the store deleted past the history retention (QueueReads.states_of names it with no states)
GONE = "ended past the history retention and its record is gone"
# how an end reads in a reason: "job 12 failed (afterok)"
ENDED = {S.SUCCEEDED: "succeeded", S.FAILED: "failed", S.TIMED_OUT: "timed out", S.CANCELLED: "was cancelled",
         S.REJECTED: "was rejected"}


@dataclass
class Gate:
    """What the phase decided: the pending jobs that may not start now (`job_id in gate`), each
    with why (`reason`), and the jobs among them whose dependency can never be met (-> why).
    A wait for a --begin time is kept as that time and worded when asked: a pass asks only of the
    jobs it reaches, and wording every such job's clock time at every pass took a forward replay
    of a queue of 2,000 of them over three quarters of its time."""

    now: float = 0.0
    never: dict[str, str] = field(default_factory=dict)
    told: dict[str, str | float] = field(default_factory=dict)   # job id -> its reason, or its --begin time

    def __contains__(self, job_id: object) -> bool:
        return job_id in self.told

    def reason(self, job_id: str) -> str:
        """Why a waiting job waits (KeyError for one that does not)."""
        told = self.told[job_id]
        return begin_reason(told, self.now) if isinstance(told, float) else told

    @property
    def waiting(self) -> dict[str, str]:
        """Every waiting job's reason, in queue order."""
        return {job_id: self.reason(job_id) for job_id in self.told}


class Gated(Protocol):
    """What the gate reads of a job: a pending job's view, or its whole record."""

    @property
    def dependency(self) -> str | None: ...
    @property
    def user_hold(self) -> bool: ...
    @property
    def begin(self) -> float | None: ...


def at_gate(job: Gated, now: float) -> bool:
    """Whether the gate looks at `job` at `now`: a dependency (met or not, the gate tells), its
    owner's hold, or a --begin still ahead. The one test, for a pass and for the reasons a query
    gives (services/queries.py); the index keeps apart every job with a --begin at all (index.gated)."""
    return bool(job.dependency or job.user_hold or (job.begin is not None and job.begin > now))


def gate(snap: Snapshot, jobs: Iterable[PendingJob] | None = None) -> Gate:
    """`jobs`: the pending jobs that have a dependency, a hold or a --begin, where
    the caller keeps them apart (the rest pass the gate untouched)."""
    out = Gate(now=snap.now)
    earliest: dict[tuple[str, str], tuple[int, str]] | None = None   # read once, if a singleton asks
    for job in snap.pending if jobs is None else jobs:
        if not at_gate(job, snap.now):
            continue
        verdict, reason = MET, ""
        if job.dependency:   # an array's tasks share theirs: told once, then kept (dependency_verdict)
            if earliest is None and "singleton" in job.dependency:
                earliest = _earliest_of_name(snap)
            verdict, reason = dependency_verdict(job, snap, earliest)
        if verdict == NEVER:
            out.never[job.id] = out.told[job.id] = reason
        elif job.user_hold:
            out.told[job.id] = held_by("its owner", f": gqa release {job.id}")
        elif job.begin is not None and job.begin > snap.now:
            out.told[job.id] = float(job.begin)
        elif verdict == WAIT:
            out.told[job.id] = reason
    return out


def delay_anchor(jobs: Iterable[tuple[float | None, float | None, str]]) -> tuple[float, bool] | None:
    """From (started_at, ended_at, state) of the jobs one ref names: when an `after` delay counts
    from (the latest start, or the end of one that ended unstarted) and whether any started; None
    while one of them has not started or ended (QueueReads.start_times, both stores)."""
    latest, started, seen = 0.0, False, False
    for started_at, ended_at, state in jobs:
        if JobState(state) not in STARTED:
            return None
        seen = True
        started = started or started_at is not None
        latest = max(latest, float(started_at if started_at is not None else ended_at or 0.0))
    return (latest, started) if seen else None


def begin_reason(begin: float, now: float) -> str:
    return f"waits until {clock_time(begin, now)} (--begin)"


def dependency_verdict(job: PendingJob, snap: Snapshot,
                       earliest: Mapping[tuple[str, str], tuple[int, str]] | None = None) -> tuple[str, str]:
    """MET, WAIT or NEVER for the job's dependency, with the reason for the last two."""
    text = job.dependency
    assert text is not None
    # an aftercorr's verdict is each task's own: it reads the task of the same index
    key = (text, job.id.partition("_")[2] if "aftercorr" in text else "")
    kept = _told.get(key)   # only a dependency with no singleton is kept
    if kept is not None:
        named = snap.named
        for ref, seen in kept[0]:
            if named.get(ref) != seen:
                break
        else:
            return kept[1], kept[2]
    try:
        dependency = parsed(text)
    except SpecError as exc:   # recorded by an earlier version, or by hand: it cannot be told, so never
        return NEVER, f"dependency can never be met: {exc}"
    if dependency.singleton:
        return _told_afresh(dependency, job, snap, _earliest_of_name(snap) if earliest is None else earliest)
    verdict, reason = _told_afresh(dependency, job, snap, {})
    if dependency.delayed:
        return verdict, reason   # a wait some minutes past a start ends with time, and reads start times
    if len(_told) >= KEPT_VERDICTS:
        _told.clear()   # a queue past this many distinct dependencies tells them again, once
    _told[key] = tuple((ref, _copy(snap.named.get(ref))) for ref in dependency.named_by(job.id)), verdict, reason
    return verdict, reason


def _copy(states: Mapping[JobState, int] | None) -> dict | None:
    return None if states is None else dict(states)


def _told_afresh(dependency: Dependency, job: PendingJob, snap: Snapshot,
                 earliest: Mapping[tuple[str, str], tuple[int, str]]) -> tuple[str, str]:
    verdicts = [_condition(c, job, snap, earliest) for c in dependency.conditions]
    kinds = [v for v, _ in verdicts]
    if dependency.any_of:
        if MET in kinds:
            return MET, ""
        if all(k == NEVER for k in kinds):
            return NEVER, "dependency can never be met: " + "; ".join(r for _, r in verdicts)
        return WAIT, " or ".join(r for v, r in verdicts if v == WAIT)
    if NEVER in kinds:
        return NEVER, "dependency can never be met: " + "; ".join(r for v, r in verdicts if v == NEVER)
    if WAIT in kinds:
        return WAIT, "; ".join(r for v, r in verdicts if v == WAIT)
    return MET, ""


def _condition(condition: Condition, job: PendingJob, snap: Snapshot,
               earliest: Mapping[tuple[str, str], tuple[int, str]]) -> tuple[str, str]:
    if condition.kind == "singleton":
        return _singleton(job, snap, earliest)
    unmet, never, timed = [], [], []
    for index, ref in enumerate(condition.jobs):
        kind = condition.kind
        if kind == "aftercorr":
            ref, kind = _corresponding(ref, job.id, snap.named), "afterok"
        verdict, why = _one(kind, ref, snap.named.get(ref))
        if verdict == NEVER:
            never.append(f"{why} ({condition.kind})")
        elif verdict == WAIT:
            unmet.append(ref)
        elif condition.delay(index) and ref in snap.started:
            until, wait = _delayed(ref, snap.started[ref], condition.delay(index), snap.now)
            if until > snap.now:
                timed.append(wait)
    if never:
        return NEVER, "; ".join(never)
    waits = ([f"waits for {_jobs(unmet)} to {VERB[condition.kind]}"] if unmet else []) + timed
    if waits:
        return WAIT, "; ".join(waits)
    return MET, ""


def _corresponding(ref: str, job_id: str, named: Mapping[str, Mapping[JobState, int]]) -> str:
    """What an aftercorr from `job_id` on `ref` waits for: the task of the same index in array
    `ref`; where it has none (a shorter array, or `job_id` is no task), the whole of `ref`, as
    Slurm does. A task not recorded is told from one not admitted yet once all of `ref` ended."""
    task = counterpart(ref, job_id)
    if task is None or task in named:
        return task or ref
    whole = named.get(ref)
    if whole is not None and all(s in TERMINAL for s, n in whole.items() if n):
        return ref
    return task   # not recorded yet: it waits


def _delayed(ref: str, anchor: tuple[float, bool], minutes: int, now: float) -> tuple[float, str]:
    """When an `after` some minutes past `ref`'s start (or cancel) is met, and how that reads."""
    at, started = anchor
    until = at + minutes * 60
    how = "started" if started else "ended"
    return until, (f"waits for job {ref}, {how} {_span(now - at)} ago, + {minutes}m: "
                   f"starts in {_span(until - now, up=True)} at the earliest")


def _span(seconds: float, up: bool = False) -> str:
    """'45s', '7m', '2h05m': minutes rounded down (how long ago) or up (how long to wait)."""
    s = max(0, int(-(-seconds // 1) if up else seconds))
    if s < 60:
        return f"{s}s"
    m = -(-s // 60) if up else s // 60
    return f"{m}m" if m < 60 else f"{m // 60}h{m % 60:02d}m"


def delay_ends(snap: Snapshot) -> list[float]:
    """When the `after` delays (after:12+10) of the pending jobs run out, those still ahead: a
    dispatcher that sleeps until something happens wakes then."""
    out: list[float] = []
    for text in {job.dependency for job in snap.pending if job.dependency and "+" in job.dependency}:
        try:
            dependency = parsed(text)
        except SpecError:
            continue
        for condition in dependency.conditions:
            for index, ref in enumerate(condition.jobs):
                if condition.delay(index) and ref in snap.started:
                    until = snap.started[ref][0] + condition.delay(index) * 60
                    if until > snap.now:
                        out.append(until)
    return out


def _one(kind: str, ref: str, states: Mapping[JobState, int] | None) -> tuple[str, str]:
    """One named job (or all of an array's tasks) against one condition."""
    if states is None:
        return WAIT, ""   # not recorded yet (an array still being admitted): it may still come
    total = sum(states.values())
    if not total:
        # recorded once and deleted past the history retention: only an ended job is, so it started
        # and ended, but how is lost; Slurm lifts such a dependency, which would run an afterok job
        # whose parent may have failed, so the ones that ask how it ended are cancelled
        if kind in ("after", "afterany"):
            return MET, ""
        return NEVER, f"job {ref} {GONE}, so how it ended is not known"
    ended = sum(n for s, n in states.items() if s in TERMINAL)
    failed = {s: n for s, n in states.items() if s in FAILED and n}
    if kind == "after":
        return (MET, "") if sum(n for s, n in states.items() if s in STARTED) == total else (WAIT, "")
    if kind == "afterany":
        return (MET, "") if ended == total else (WAIT, "")
    if kind == "afterok":
        if failed:
            return NEVER, _ended_text(ref, failed, total)
        return (MET, "") if states.get(S.SUCCEEDED, 0) == total else (WAIT, "")
    # afternotok: met once all ended and one failed; never when all ended and none did
    if ended < total:
        return WAIT, ""
    if failed:
        return MET, ""
    return NEVER, _ended_text(ref, {S.SUCCEEDED: total}, total)


def _ended_text(ref: str, ends: Mapping[JobState, int], total: int) -> str:
    if total == 1:
        return f"job {ref} {ENDED[next(iter(ends))]}"
    parts = ", ".join(f"{n} {ENDED[s]}" for s, n in sorted(ends.items()))
    return f"array {ref}: of its {total} tasks {parts}"


def _singleton(job: PendingJob, snap: Snapshot,
               earliest: Mapping[tuple[str, str], tuple[int, str]]) -> tuple[str, str]:
    key = (job.name, job.user)
    running = sorted(r.id for r in snap.running if (r.name, r.user) == key)
    first = earliest.get(key)
    ahead = [first[1]] if first is not None and first[0] < job.seq else []
    blocking = running + ahead
    if blocking:
        return WAIT, f"singleton: waits for {_jobs(blocking)} (same name and owner) to end"
    return MET, ""


def _earliest_of_name(snap: Snapshot) -> dict[tuple[str, str], tuple[int, str]]:
    """Per (name, owner), the pending job submitted first: a singleton goes after it."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for job in snap.pending:
        key = (job.name, job.user)
        if key not in out or (job.seq, job.id) < out[key]:
            out[key] = (job.seq, job.id)
    return out


def _jobs(ids: list[str]) -> str:
    if len(ids) == 1:
        return f"job {ids[0]}"
    shown = ids[:5] + ([f"{len(ids) - 5} more"] if len(ids) > 5 else [])
    return f"jobs {', '.join(shown[:-1])} and {shown[-1]}"


def clock_time(at: float, now: float) -> str:
    """'14:05 UTC' today, 'Dec 3 14:05 UTC' another day (the queue's clock is UTC everywhere);
    '14:05:30 UTC' off the minute: a --begin of now+30s is not "14:05" once that has passed.
    Not from how far off it is: a listing worded an hour ahead is still read a minute ahead."""
    when = datetime.fromtimestamp(round(at), timezone.utc)
    today = datetime.fromtimestamp(now, timezone.utc).date() == when.date()
    clock = "%H:%M:%S" if when.second else "%H:%M"
    return when.strftime(f"{clock} UTC") if today else f"{when:%b} {when.day} {when.strftime(clock)} UTC"
