"""`gqa approve ID...`: let jobs that wait for approval into the queue."""

from .app import app
from .context import caller_user
from .options import JobRefs, Output, check_output
from .output import print_results, user_errors


@app.command("approve")
def approve(refs: JobRefs, output: Output = "table"):
    """Approve jobs over the queue's approval thresholds (GPUs, GPU-hours, cost)."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        results = backend().control().approve(refs, caller=caller_user() or _me())
    print_results(results, fmt)


def _me() -> str:
    import getpass

    return getpass.getuser()
