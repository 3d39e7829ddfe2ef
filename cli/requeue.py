"""`gqa requeue ID`: stop a running job so it checkpoints, then put it back in
the queue in its old place (like Slurm's `scontrol requeue`)."""

from .options import JobRefs, Output, check_output
from .output import print_json, user_errors


def requeue(refs: JobRefs, output: Output = "table"):
    """SIGTERM a running job, let it checkpoint, and queue it again keeping its place."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        results = backend().control().requeue(refs)
    if fmt == "json":
        print_json([{"id": r.job.id, "action": r.action, "state": r.job.state.value, "detail": r.detail}
                    for r in results])
        return
    for r in results:
        print(f"{r.action} {r.job.id}" + (f" ({r.detail})" if r.detail else ""))
