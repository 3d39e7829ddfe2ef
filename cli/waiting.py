"""Block until jobs end (`gqa submit --wait`)."""

import time

from .output import note


def wait_for(job_ids: list[str], *, quiet: bool = False, poll: float = 0.2) -> tuple[int, list[dict]]:
    """Exit code 0 if every job succeeded, 1 otherwise; and each job's final state."""
    from gqa.models.job import JobState

    from .backend import backend

    store = backend().store
    while True:
        jobs = [store.get(i) for i in job_ids]
        if all(j.state.terminal for j in jobs):
            break
        time.sleep(poll)
    final = [{"id": j.id, "state": j.state.value, "status": j.status.value, "exit_code": j.exit_code,
              "reason": j.reason} for j in jobs]
    if not quiet:
        for j in jobs:
            note(f"job {j.id} {j.status.value}: {j.reason}")
    return (0 if all(j.state == JobState.SUCCEEDED for j in jobs) else 1), final
