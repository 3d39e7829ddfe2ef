"""`gqa queue`: pending jobs in the order they will start, and what runs."""

from typing import Annotated, Optional

import typer

from .app import app
from .options import Output, check_output
from .output import PRIORITY, ago, console, print_json, user_errors


@app.command("queue")
def queue(
    group: Annotated[Optional[str], typer.Argument(help="Only this array or sweep.", show_default=False)] = None,
    explain: Annotated[bool, typer.Option("--explain", "-x", help="Show each pending job's priority factors.")] = False,
    output: Output = "table",
):
    """Pending jobs in start order (with the reason each waits) and running jobs."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        be = backend()
        view = be.queries().queue(group=group)
        daemon = not be.local or be.daemon_pid()
    if fmt == "json":
        print_json({
            "gpus": {"total": view.total_gpus, "free": view.free_gpus},
            "weights": _weights(view.weights),
            "pending": [_pending_dict(e, view.weights) for e in view.pending],
            "running": [{"id": j.id, "name": j.name, "team": j.team, "owner": j.owner, "gpus": list(j.assigned),
                         "started_at": j.started_at, "attempt": j.attempts, "state": j.state.value,
                         "reason": j.reason}
                        for j in view.running],
        })
        return
    from rich.table import Table

    out = console()
    out.print(f"[bold]GPUs[/]: {view.total_gpus - view.free_gpus} of {view.total_gpus} in use"
              + ("" if daemon else "  [yellow](daemon not running: `gqa local start`)[/]"))
    running = Table(title=f"running ({len(view.running)})", title_justify="left", box=None, pad_edge=False)
    for col in ("id", "name", "team", "owner", "gpus", "elapsed", "attempt"):
        running.add_column(col)
    for j in view.running:
        # a launched attempt Batch has not started yet: what it waits for, in minutes, not a run time
        elapsed = j.reason if j.state.value == "STARTING" else ago(j.started_at)
        running.add_row(j.id, j.name, j.team, j.owner, ",".join(map(str, j.assigned)), elapsed, str(j.attempts))
    out.print(running)
    pending = Table(title=f"pending ({len(view.pending)})", title_justify="left", box=None, pad_edge=False)
    cols = ["pos", "id", "name", "team", "owner", "prio", "gpus", "waiting", "eta", "reason"]
    if explain:
        cols[-1:-1] = ["fairshare", "age", "size", "duration", "nice", "score"]
        w = view.weights
        out.print(f"score = {w.fair_share:g} x fair share + {w.age:g} x age + {w.size:g} x size + "
                  f"{w.duration:g} x duration + nice (each factor in [0, 1]; nice is -nice/10,000 of Slurm's "
                  "--nice; tiers are strict)")
    for col in cols:
        pending.add_column(col, overflow="fold")
    for e in view.pending:
        j = e.job
        row = [str(e.position or "-"), j.id, j.name, j.team, j.owner, PRIORITY[j.tier], str(j.gpus),
               ago(j.submitted_at), _eta(e.eta), e.reason]
        if explain:
            f = e.factors
            row[-1:-1] = [f"{f.fair_share:.3f}", f"{f.age:.3f}", f"{f.size:.3f}", f"{f.duration:.3f}",
                          f"{f.nice:+.3f}", f"{f.score:.3f}"] if f else ["-"] * 6
        pending.add_row(*row)
    out.print(pending)


def _eta(eta: float | None) -> str:
    import time

    from gqa.models.units import format_duration

    if eta is None:
        return "-"
    wait = eta - time.time()
    return "now" if wait <= 1 else f"in {format_duration(wait)}"


def _weights(w) -> dict:
    return {"fair_share": w.fair_share, "age": w.age, "size": w.size, "duration": w.duration}


def _pending_dict(entry, weights) -> dict:
    j = entry.job
    data = {"position": entry.position, "id": j.id, "name": j.name, "team": j.team, "owner": j.owner,
            "priority": PRIORITY[j.tier], "gpus": j.gpus, "gpu_type": j.gpu_type, "state": j.state.value,
            "submitted_at": j.submitted_at, "eta": entry.eta, "reason": entry.reason}
    if entry.factors is not None:
        f = entry.factors
        data["factors"] = {"fair_share": f.fair_share, "age": f.age, "size": f.size, "duration": f.duration,
                           "nice": f.nice, "score": f.score}
        data["weighted"] = {"fair_share": weights.fair_share * f.fair_share, "age": weights.age * f.age,
                            "size": weights.size * f.size, "duration": weights.duration * f.duration,
                            "nice": f.nice}
    return data
