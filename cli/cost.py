"""`gqa cost [--team T] [--period P]`: spend per team against its budget."""

from typing import Annotated, Optional

import typer

from .app import app
from .options import Output, check_output
from .output import console, print_json, user_errors


@app.command("cost")
def cost(
    team: Annotated[Optional[str], typer.Option("--team", "-A", help="Only this team.")] = None,
    period: Annotated[Optional[str], typer.Option("--period", help="A calendar month, e.g. 2026-11 "
                                                  "(default: this month).")] = None,
    output: Output = "table",
):
    """What each team spent in a month (finished attempts, plus running ones so far) against its budget."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        report = backend().cost().report(period=period, team=team)
    if fmt == "json":
        print_json({"period": report.period, "current": report.current, "total": round(report.total, 2),
                    "teams": [{"team": t.team, "settled": round(t.settled, 2), "running": round(t.running, 2),
                               "total": round(t.total, 2), "budget": t.budget,
                               "used": None if t.used is None else round(t.used, 4)} for t in report.teams]})
        return
    from rich.table import Table

    out = console()
    so_far = " so far" if report.current else ""
    out.print(f"[bold]{report.period}[/]: ${report.total:,.2f} spent{so_far}")
    table = Table(box=None, pad_edge=False)
    for col in ("team", "finished", "running", "total", "budget", "used"):
        table.add_column(col, justify="left" if col == "team" else "right")
    for t in report.teams:
        used = "-" if t.used is None else f"{t.used:.0%}"
        style = "red" if t.used is not None and t.used >= 1 else ("yellow" if t.used is not None and t.used >= 0.8
                                                                  else "")
        table.add_row(t.team, f"${t.settled:,.2f}", f"${t.running:,.2f}", f"${t.total:,.2f}",
                      "-" if t.budget is None else f"${t.budget:,.2f}", f"[{style}]{used}[/]" if style else used)
    out.print(table)
