"""`gqa update ID --time 2h --priority high --gpus 1`: change a pending job's
wall time, priority or GPUs (Slurm's `scontrol update`); an array's id changes
every pending task."""

from typing import Annotated, Optional

import typer

from .app import app
from .hold import print_actions
from .options import JobRef, Output, check_output
from .output import fail, user_errors


@app.command("update")
def update(
    ref: JobRef,
    time: Annotated[Optional[str], typer.Option("--time", "-t", help="New wall-time limit: 90m, 4h, 1d, 1-12:00:00.")]
    = None,
    priority: Annotated[Optional[str], typer.Option("--priority", "-p", help="New tier: high, normal or low.")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", "-G", help="New number of GPUs (0: CPU only).")] = None,
    output: Output = "table",
):
    """Change a queued or held job's wall time, priority or GPUs, within the queue's limits."""
    fmt = check_output(output)
    if time is None and priority is None and gpus is None:
        fail("nothing to update: give --time, --priority or --gpus")
    with user_errors():
        from gqa.models.units import parse_duration

        from .backend import backend

        seconds = parse_duration(time) if time is not None else None
        results = backend().control().update(ref, time=seconds, priority=priority, gpus=gpus)
    print_actions(results, fmt)
