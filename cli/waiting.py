"""Block until jobs end (`gqa submit --wait`)."""

import time
from collections import Counter

from .output import note

# On AWS a job exists once the admit function has created it, usually within a
# second of the submission; a job still unknown after this long was refused there.
ADMISSION_WAIT = 300.0
# past this many jobs, the end is told as counts and the jobs that did not succeed
LISTED = 20


def wait_for(ref: str, job_ids: list[str], *, quiet: bool = False,
             poll: float | None = None) -> tuple[int, list[dict]]:
    """Exit code 0 if every job succeeded, 1 otherwise; and each job's final state.
    `ref` names them all (a job id, or the group of an array or sweep): each poll
    is one read of the group (pages of 1,000 on AWS), never one per task."""
    from gqa.models.errors import NotFound
    from gqa.models.job import JobState

    from .backend import backend

    be = backend()
    queries = be.queries()
    poll = be.poll_interval if poll is None else poll
    since = time.monotonic()
    wanted = set(job_ids)
    while True:
        try:
            jobs = [j for j in queries.jobs(ref) if j.id in wanted]
        except NotFound:
            if be.local or time.monotonic() - since > ADMISSION_WAIT:
                raise
            time.sleep(poll)       # accepted, not yet admitted
            continue
        if len(jobs) == len(wanted) and all(j.state.terminal for j in jobs):
            break
        time.sleep(poll)
    final = [{"id": j.id, "state": j.state.value, "status": j.status.value, "exit_code": j.exit_code,
              "reason": j.reason} for j in jobs]
    if not quiet:
        _tell(jobs)
    return (0 if all(j.state == JobState.SUCCEEDED for j in jobs) else 1), final


def _tell(jobs) -> None:
    from gqa.models.job import JobState

    if len(jobs) <= LISTED:
        for j in jobs:
            note(f"job {j.id} {j.status.value}: {j.reason}")
        return
    counts = Counter(j.status.value for j in jobs)
    note(f"{len(jobs)} jobs ended: " + ", ".join(f"{n} {status}" for status, n in counts.most_common()))
    for j in [j for j in jobs if j.state != JobState.SUCCEEDED][:LISTED]:
        note(f"job {j.id} {j.status.value}: {j.reason}")
