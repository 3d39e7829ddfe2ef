"""`gqa cancel ID...`: stop jobs, queued or running (whole arrays by their id)."""

import sys

from .app import app
from .options import JobRefs, Output, check_output
from .output import SUMMARISED_OVER, print_results, summarised, until_the_daemon_runs, user_errors

__all__ = ["SUMMARISED_OVER", "cancel"]


@app.command("cancel")
def cancel(refs: JobRefs, output: Output = "table"):
    """Cancel jobs. Running ones get SIGTERM, a grace period, then SIGKILL, group-wide."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        be = backend()
        results = be.control().cancel(refs)
        until_the_daemon_runs(be, results)
    if fmt == "json":              # every job, however many
        print_results(results, fmt)
        return
    sys.stdout.write("".join(f"{line}\n" for line in summarised(results)))
