"""Block until jobs end: `gqa submit --wait` and `gqa wait ID...`."""

import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import TextIO

from .output import daemon_down, note, tell_troubles

# On AWS a job exists once the admit function has created it, usually within a
# second of the submission; a job still unknown after this long was refused there.
ADMISSION_WAIT = 300.0
# past this many jobs, the end is told as counts and the jobs that did not succeed
LISTED = 20
TIMED_OUT = 124        # as timeout(1) exits when its command ran past the limit
# a poll's reads take at most a tenth of the wait: the pause after one is at least 9 times as long
# (a 20,000-task array reads in about 0.6 s on a workstation, which a 0.2 s poll made most of a core)
PAUSE_PER_READ = 9.0
HEALTH_EVERY = 30.0     # seconds between asks of what the daemon fails at, while waiting


@dataclass
class Waited:
    """The jobs as last read, and whether the wait gave up at its timeout."""

    jobs: list
    timed_out: bool
    seconds: float
    admitting: tuple[str, ...] = ()    # refs accepted but not admitted yet at the last read (AWS)

    @property
    def code(self) -> int:
        """124 after a timeout; else 0 if every job succeeded, 1 otherwise."""
        from gqa.models.job import JobState

        if self.timed_out:
            return TIMED_OUT
        return 0 if all(j.state == JobState.SUCCEEDED for j in self.jobs) else 1

    def final(self) -> list[dict]:
        return [{"id": j.id, "state": j.state.value, "status": j.status.value, "exit_code": j.exit_code,
                 "reason": j.reason} for j in self.jobs]


def wait_for(ref: str, job_ids: list[str], *, quiet: bool = False,
             poll: float | None = None) -> tuple[int, list[dict]]:
    """Exit code 0 if every job succeeded, 1 otherwise; and each job's final state.
    `ref` names them all (a job id, or the group of an array or sweep): each poll
    is one read of the group (pages of 1,000 on AWS), never one per task."""
    waited = wait_all([ref], wanted=set(job_ids), poll=poll, just_submitted=True)
    if not quiet:
        tell(waited.jobs)
    return waited.code, waited.final()


def wait_all(refs: list[str], *, wanted: set[str] | None = None, poll: float | None = None,
             timeout: float | None = None, just_submitted: bool = False,
             progress: "Progress | None" = None) -> Waited:
    """Read every ref (a job, or an array's or sweep's group) each poll until
    all their jobs have ended (`wanted`: only these ids, all of which must
    appear), or `timeout` seconds pass. A ref whose jobs have all ended is not
    read again: an ended job never changes. Unknown refs raise NotFound at
    once; ids accepted but not admitted yet (AWS: NotAdmitted; any id not
    found yet, `just_submitted`) are waited for up to ADMISSION_WAIT. Polls
    are `poll` seconds apart, or further where the reads are slow (PAUSE_PER_READ)."""
    from gqa.models.errors import NotAdmitted, NotFound

    from .backend import backend

    be = backend()
    queries = be.queries()
    poll = be.poll_interval if poll is None else poll
    since = time.monotonic()
    seen: dict[str, object] = {}                 # job id -> its record as last read
    open_refs = list(dict.fromkeys(refs))
    told_down = told_trouble = False
    next_health = 0.0        # when to ask the daemon again what fails (a full disk: ends not recorded)
    while True:
        not_admitted = []
        read_from = time.monotonic()
        for ref in list(open_refs):
            try:
                # without their transitions, which no poll shows: half the read of a large local array,
                # and on AWS pages of about two thirds the size (a run job's five transitions: 0.5 of 1.3 KB)
                jobs = [j for j in queries.jobs(ref, history=False) if wanted is None or j.id in wanted]
            except NotFound as exc:
                admitting = isinstance(exc, NotAdmitted) or (just_submitted and not be.local)
                if not admitting or time.monotonic() - since > ADMISSION_WAIT:
                    raise
                not_admitted.append(ref)
                continue
            seen.update((j.id, j) for j in jobs)
            if jobs and all(j.state.terminal for j in jobs) and (wanted is None or wanted <= seen.keys()):
                open_refs.remove(ref)
        elapsed = time.monotonic() - since
        pause = max(poll, PAUSE_PER_READ * (time.monotonic() - read_from))
        jobs = list(seen.values())
        if progress is not None:
            progress.show(jobs, elapsed, expected=len(wanted) if wanted else None)
        if not open_refs:
            return Waited(jobs, False, elapsed)
        if not told_down and daemon_down(be):   # else it would wait in silence
            told_down = True
            note("note: the queue daemon is not running; these jobs move only once `gqa local start` runs")
        if not told_trouble and time.monotonic() >= next_health:
            told_trouble, next_health = tell_troubles(be), time.monotonic() + HEALTH_EVERY
        if timeout is not None and elapsed >= timeout:
            return Waited(queue_reasons(be, open_refs, jobs), True, elapsed, tuple(not_admitted))
        time.sleep(pause if timeout is None else max(0.0, min(pause, timeout - elapsed)))


def queue_reasons(be, refs: list[str], jobs: list) -> list:
    """The jobs, those still pending with the reason the queue gives them now (the one `gqa status`
    and `gqa queue` show), not the one their record kept from when they were last held or queued."""
    from gqa.models.job import PENDING
    from gqa.models.records import with_changes

    from .queue_table import queue_listing

    if not any(j.state in PENDING for j in jobs):
        return jobs
    told = {row["id"]: row["reason"] for ref in refs for row in queue_listing(be, ref)["pending"]}
    return [with_changes(j, reason=told[j.id]) if j.state in PENDING and j.id in told else j for j in jobs]


def progress_line(jobs, seconds: float, expected: int | None = None) -> str:
    """`3 of 10 done: 2 completed, 1 failed; 4 running, 3 pending; waited 2m10s`."""
    from gqa.models.job import UserStatus
    from gqa.models.units import format_duration

    done = Counter(j.status for j in jobs if j.state.terminal)
    live = Counter(j.status for j in jobs if not j.state.terminal)
    total = max(expected or 0, len(jobs))
    parts = [f"{sum(done.values())} of {total} done"
             + (": " + ", ".join(f"{done[s]} {s.value}" for s in UserStatus if done[s]) if done else "")]
    if live:     # the furthest along first: running before pending
        parts.append(", ".join(f"{live[s]} {s.value}" for s in reversed(UserStatus) if live[s]))
    if total > len(jobs):
        parts.append(f"{total - len(jobs)} not admitted yet")
    parts.append(f"waited {format_duration(seconds)}")
    return "; ".join(parts)


class Progress:
    """One line on a terminal, rewritten in place each poll; elsewhere (a log,
    a pipe) a plain line each time the counts change, not each poll."""

    def __init__(self, out: TextIO | None = None, *, tty: bool | None = None):
        self.out = out or sys.stderr
        self.tty = self.out.isatty() if tty is None else tty
        self.last = ""

    def show(self, jobs, seconds: float, expected: int | None = None) -> None:
        line = progress_line(jobs, seconds, expected)
        if self.tty:
            self.out.write("\r" + line + "\x1b[K")    # back to the line's start, clear what the last one left
        elif line.rsplit("; waited ", 1)[0] != self.last.rsplit("; waited ", 1)[0]:
            self.out.write(line + "\n")
        self.last = line
        self.out.flush()

    def end(self) -> None:
        if self.tty and self.last:
            self.out.write("\n")
            self.out.flush()


def tell(jobs) -> None:
    """How the jobs ended: one line each, or counts and those that did not succeed past LISTED jobs."""
    from gqa.models.job import JobState

    if len(jobs) <= LISTED:
        for j in jobs:
            note(f"job {j.id} {j.status.value}: {j.reason}")
        return
    counts = Counter(j.status.value for j in jobs)
    note(f"{len(jobs)} jobs ended: " + ", ".join(f"{n} {status}" for status, n in counts.most_common()))
    for j in [j for j in jobs if j.state != JobState.SUCCEEDED][:LISTED]:
        note(f"job {j.id} {j.status.value}: {j.reason}")
