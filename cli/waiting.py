"""Block until jobs end (`gqa submit --wait`)."""

import time

from .output import note

# On AWS a job exists once the admit function has created it, usually within a
# second of the submission; a job still unknown after this long was refused there.
ADMISSION_WAIT = 300.0


def wait_for(job_ids: list[str], *, quiet: bool = False, poll: float | None = None) -> tuple[int, list[dict]]:
    """Exit code 0 if every job succeeded, 1 otherwise; and each job's final state."""
    from gqa.models.errors import NotFound
    from gqa.models.job import JobState

    from .backend import backend

    be = backend()
    queries = be.queries()
    poll = be.poll_interval if poll is None else poll
    since = time.monotonic()
    while True:
        try:
            jobs = [queries.jobs(i)[0] for i in job_ids]
        except NotFound:
            if be.local or time.monotonic() - since > ADMISSION_WAIT:
                raise
            time.sleep(poll)       # accepted, not yet admitted
            continue
        if all(j.state.terminal for j in jobs):
            break
        time.sleep(poll)
    final = [{"id": j.id, "state": j.state.value, "status": j.status.value, "exit_code": j.exit_code,
              "reason": j.reason} for j in jobs]
    if not quiet:
        for j in jobs:
            note(f"job {j.id} {j.status.value}: {j.reason}")
    return (0 if all(j.state == JobState.SUCCEEDED for j in jobs) else 1), final
