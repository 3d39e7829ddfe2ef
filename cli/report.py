"""`gqa report [--since 7d] [--until T] [--team T] [--out DIR]`: what the queue
did over a period, as one self-contained HTML page and its figures as PNGs."""

from typing import Annotated, Optional

import typer

from .app import app
from .options import Output, check_output
from .output import console, fail, money, print_json, user_errors

DEFAULT_SINCE = "7d"
DEFAULT_OUT = "gqa-report"


@app.command("report")
def report(
    since: Annotated[str, typer.Option("--since", "-S", help="Start of the period: a time back from now (7d, "
                                       "12h), a date (2026-11-01), a date and time (2026-11-01T08:00, or with its "
                                       "offset: 2026-11-01T08:00Z) or a time today (14:00).")] = DEFAULT_SINCE,
    until: Annotated[Optional[str], typer.Option("--until", "-E", help="End of the period, as --since "
                                                 "(default: now).", show_default=False)] = None,
    team: Annotated[Optional[str], typer.Option("--team", "-A", help="Only this team's jobs.")] = None,
    out: Annotated[str, typer.Option("--out", help="Directory for report.html and the figures.")] = DEFAULT_OUT,
    output: Output = "table",
):
    """Write a report of a period: queue waits per tier, GPUs per pool, spend per team against budgets,
    outcomes, why jobs waited, and jobs that held GPUs idle. One self-contained HTML file (figures
    embedded) with each figure as a PNG beside it.

    Examples: gqa report | gqa report --since 2026-11-01 --until 2026-12-01 --team vision --out nov
    """
    fmt = check_output(output)
    with user_errors():
        from gqa.models.times import check_window, time_of
        from gqa.reporting import build, write_report

        from .backend import backend

        be = backend()
        now = be.clock.now() if hasattr(be, "clock") else _now()
        start = time_of(since, now, what="--since")
        end = time_of(until, now, what="--until") if until is not None else None
        check_window(start, end, now, what="period")
        end = now if end is None else end
        built = build(report_input(be, start, end, now, team))
        try:
            written = write_report(built, out)
        except OSError as exc:
            fail(f"{exc.filename or out}: {exc.strerror or exc}")   # the file that failed, else the directory
    if fmt == "json":
        from gqa.reporting import as_json

        print_json({"page": str(written.page), "figures": {k: str(v) for k, v in written.figures.items()},
                    "report": as_json(built)})
        return
    _print_summary(built, written)


def report_input(be, start: float, end: float, now: float, team: str | None = None):
    """What a report of [start, end) is made of, read through the backend `be`: the history's
    rows, the pools and the teams' budgets (gqa ui draws its plots from it too)."""
    from gqa.models.errors import SpecError
    from gqa.reporting import ReportInput
    from gqa.services.history import HistoryQuery

    history = getattr(be, "history", None)
    if history is None:
        raise SpecError("this backend does not answer history yet, which a report is made of")
    # the jobs not started yet too: the waits' "still waiting", the outcomes' "running or waiting"
    rows = list(history().rows(HistoryQuery(since=start, until=end, team=team, waiting=True)))
    return ReportInput(rows, since=start, until=end, now=now, pools=_pools(be), budgets=_budgets(be, team),
                       title=f"gqa report{f' for team {team}' if team else ''}")


def _print_summary(built, written) -> None:
    from gqa.models.units import format_count, format_duration

    out = console()
    jobs, noun = format_count(built.jobs, "job").split(" ", 1)
    out.print(f"[bold]{jobs}[/] {noun} from {_date(built.since)} to {_date(built.until)}", soft_wrap=True)
    waits = ", ".join(f"{w.tier} {format_duration(w.overall_p50)}/{format_duration(w.overall_p95)}"
                      for w in built.waits if w.total_started)
    if waits:
        out.print(f"  waits p50/p95: {waits}", soft_wrap=True)
    spent = sum(t.cost for t in built.teams)
    out.print(f"  {sum(t.gpu_hours for t in built.teams):,.1f} GPU-hours, {money(spent)} spent", soft_wrap=True)
    if built.idle_jobs:
        out.print(f"  {format_count(built.idle_jobs, 'job')} held GPUs idle: {built.wasted_gpu_hours:,.1f} GPU-hours",
                  soft_wrap=True)
    out.print(f"report: {written.page} ({len(written.figures)} figures beside it)", soft_wrap=True)


def _pools(be) -> tuple:
    """The inventory's pools with their prices where the store is read here (a personal queue);
    through an API, the GPUs the overview lists (no prices); none where neither answers."""
    from gqa.models.errors import GqaError
    from gqa.reporting import pools_of
    from gqa.scheduling import Gpu

    store = getattr(be, "store", None)
    if store is not None:
        inventory = store.inventory()
        return pools_of(inventory.gpus) if inventory else ()
    overview = getattr(be, "overview", None)
    if overview is None:
        return ()
    try:
        gpus = overview().overview(head=0, events=0).gpus
    except GqaError:
        return ()
    return pools_of(Gpu(g.index, g.type, spot=g.spot) for g in gpus)


def _budgets(be, team: str | None) -> dict[str, float]:
    """Each configured team's monthly budget (`gqa quota`)."""
    return {q.team: q.policy.budget for q in be.quota().show().teams
            if q.policy.budget is not None and team in (None, q.team)}


def _date(ts: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _now() -> float:
    import time

    return time.time()
