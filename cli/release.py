"""`gqa release ID...`: let held jobs start again, in their old place in the
queue (Slurm's `scontrol release`); whole arrays by their id."""

from .app import app
from .hold import print_actions
from .options import JobRefs, Output, check_output
from .output import user_errors


@app.command("release")
def release(refs: JobRefs, output: Output = "table"):
    """Release jobs held with gqa hold (or submitted with --hold)."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        results = backend().control().release(refs)
    print_actions(results, fmt)
