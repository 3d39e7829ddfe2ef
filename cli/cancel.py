"""`gqa cancel ID...`: stop jobs, queued or running (whole arrays by their id)."""

from .options import JobRefs, Output, check_output
from .output import print_results, user_errors


def cancel(refs: JobRefs, output: Output = "table"):
    """Cancel jobs. Running ones get SIGTERM, a grace period, then SIGKILL, group-wide."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        results = backend().control().cancel(refs)
    print_results(results, fmt)
