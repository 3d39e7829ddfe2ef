"""`gqa approve ID...`: let jobs that wait for approval into the queue."""

from .context import caller_user
from .options import JobRefs, Output, check_output
from .output import print_json, user_errors


def approve(refs: JobRefs, output: Output = "table"):
    """Approve jobs over the queue's approval thresholds (GPUs, GPU-hours, cost)."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        results = backend().control().approve(refs, caller=caller_user() or _me())
    show(results, fmt)


def show(results, fmt: str) -> None:
    if fmt == "json":
        print_json([{"id": r.job.id, "action": r.action, "state": r.job.state.value, "detail": r.detail}
                    for r in results])
        return
    for r in results:
        print(f"{r.action} {r.job.id}" + (f" ({r.detail})" if r.detail else ""))


def _me() -> str:
    import getpass

    return getpass.getuser()
