"""`gqa requeue ID`: stop a running job so it checkpoints, then put it back in
the queue in its old place (like Slurm's `scontrol requeue`)."""

from .app import app
from .options import JobRefs, Output, check_output
from .output import print_results, until_the_daemon_runs, user_errors


@app.command("requeue")
def requeue(refs: JobRefs, output: Output = "table"):
    """SIGTERM a running job, let it checkpoint, and queue it again keeping its place."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        be = backend()
        results = be.control().requeue(refs)
        until_the_daemon_runs(be, results)
    print_results(results, fmt)
