"""`gqa cost [--team T] [--period P] [--jobs N]`: spend and GPU-hours per team
against its budget, and the costliest jobs."""

import math
from typing import Annotated, Optional

import typer

from .app import app
from .options import Output, check_output
from .output import budget_used, cents, console, fail, gpu_hours_text, money, print_json, user_errors


@app.command("cost")
def cost(
    team: Annotated[Optional[str], typer.Option("--team", "-A", help="Only this team.")] = None,
    period: Annotated[Optional[str], typer.Option("--period", help="A calendar month, e.g. 2026-11 "
                                                  "(default: this month).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", help="Also list the N costliest jobs of the month, with their "
                                      "GPU-hours and money.")] = 0,
    output: Output = "table",
):
    """What each team spent in a month (finished attempts, plus running ones so far) against its budget,
    and the GPU-hours of the jobs that ran."""
    fmt = check_output(output)
    if not 0 <= jobs <= 1000:
        fail(f"--jobs takes 0 to 1000 jobs, got {jobs}")
    with user_errors():
        from .backend import backend

        report = backend().cost().report(period=period, team=team, gpu_hours=True, jobs=jobs)
    if fmt == "json":
        print_json({"period": report.period, "current": report.current, "total": cents(report.total),
                    "teams": [{"team": t.team, "gpu_hours": round(report.gpu_hours.get(t.team, 0.0), 3),
                               "settled": cents(t.settled), "running": cents(t.running),
                               "total": _total(t.settled, t.running), "budget": t.budget,
                               # spent against a budget of 0: no fraction JSON can hold (as gqa report writes it)
                               "used": None if t.used is None or math.isinf(t.used) else round(t.used, 4)}
                              for t in report.teams],
                    "jobs": [{"id": j.id, "name": j.name, "team": j.team, "owner": j.owner, "status": j.status,
                              "gpus": j.gpus, "gpu_hours": round(j.gpu_hours, 3), "cost": cents(j.cost),
                              "gpu_util": j.gpu_util} for j in report.jobs]})
        return
    from rich.table import Table

    out = console()
    so_far = " so far" if report.current else ""
    hours = sum(report.gpu_hours.values())
    out.print(f"[bold]{report.period}[/]: {money(report.total)} spent{so_far}, {gpu_hours_text(hours)} GPU-hours")
    table = Table(box=None, pad_edge=False)
    for col in ("team", "GPU-hours", "finished", "running", "total", "budget", "used"):
        table.add_column(col, justify="left" if col == "team" else "right")
    for t in report.teams:
        used, level = budget_used(t.total, t.budget)
        style = {"over": "red", "near": "yellow"}.get(level, "")
        table.add_row(t.team, gpu_hours_text(report.gpu_hours.get(t.team, 0.0)), money(t.settled),
                      money(t.running), money(_total(t.settled, t.running)),
                      "-" if t.budget is None else money(t.budget),
                      f"[{style}]{used}[/]" if style else used)
    out.print(table)
    if jobs:
        out.print()
        out.print(f"[bold]the {len(report.jobs)} costliest jobs[/]" if report.jobs else "no job ran this month")
        if report.jobs:
            listed = Table(box=None, pad_edge=False)
            for col in ("job", "name", "team", "owner", "status", "GPUs", "GPU-hours", "cost", "util"):
                listed.add_column(col, justify="right" if col in ("GPUs", "GPU-hours", "cost", "util") else "left")
            for j in report.jobs:
                listed.add_row(j.id, j.name, j.team, j.owner, j.status, str(j.gpus), gpu_hours_text(j.gpu_hours),
                               money(j.cost), "-" if j.gpu_util is None else f"{j.gpu_util:.0f}%")
            out.print(listed)


def _total(settled: float, running: float) -> float:
    """A team's total as shown: the sum of its parts as shown."""
    return cents(cents(settled) + cents(running))
