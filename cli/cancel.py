"""`gqa cancel ID...`: stop jobs, queued or running (whole arrays by their id)."""

from .options import JobRefs, Output, check_output
from .output import print_json, user_errors


def cancel(refs: JobRefs, output: Output = "table"):
    """Cancel jobs. Running ones get SIGTERM, a grace period, then SIGKILL, group-wide."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        results = backend().control().cancel(refs)
    if fmt == "json":
        print_json([{"id": r.job.id, "action": r.action, "state": r.job.state.value, "detail": r.detail}
                    for r in results])
        return
    for r in results:
        print(f"{r.action} {r.job.id}" + (f" ({r.detail})" if r.detail else ""))
