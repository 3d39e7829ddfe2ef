"""`gqa logs ID [-f]`: a job's output, every attempt."""

import sys
import time
from typing import Annotated

import typer

from .options import JobRef
from .output import fail, user_errors


def logs(
    ref: JobRef,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
    tail: Annotated[int, typer.Option("--tail", "-n", help="Only the last N lines (0: all).")] = 0,
):
    """Print a job's log (stdout and stderr of all its attempts)."""
    with user_errors():
        from .backend import backend

        be = backend()
        if not be.local:
            fail("`gqa logs` is not available on the AWS backend yet; the job's output is in CloudWatch Logs "
                 "(log group /aws/batch/job)")
        jobs = be.queries().jobs(ref)
    if len(jobs) != 1:
        fail(f"{ref} is an array of {len(jobs)} jobs; name one, e.g. gqa logs {jobs[0].id}")
    job = jobs[0]
    path = be.paths.log_for(job.id)
    while follow and not path.exists():
        if be.store.get(job.id).state.terminal:
            break
        time.sleep(0.2)
    if not path.exists():
        sys.stderr.write(f"job {job.id} has no output yet ({job.status.value})\n")
        return
    with open(path, "rb") as fh:
        data = fh.read()
        if tail > 0:
            data = b"\n".join(data.splitlines()[-tail:]) + b"\n"
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        while follow:
            chunk = fh.read()
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
                continue
            if be.store.get(job.id).state.terminal:
                sys.stdout.buffer.write(fh.read())
                break
            time.sleep(0.2)
