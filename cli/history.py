"""`gqa history`: finished jobs, newest first, after the ones that have run
and not finished (running now, or requeued: back in the queue or waiting to
retry), as Slurm's sacct lists them: when each waited and ran, what it used
and cost, how it ended. One row a job; -o csv for a spreadsheet."""

import csv
import sys
import time
from typing import Annotated, Optional

import typer

from .app import app
from .options import check_output
from .output import cents, fail, gpu_hours_text, money, note, print_json, user_errors

DEFAULT_SINCE = "24h"
FORMATS = ("table", "json", "csv")
Output = Annotated[str, typer.Option("--output", "-o", help="Output format: table, json or csv.",
                                     case_sensitive=False)]
# the last three with the rest make a trace `gqa simulate` replays (gqa/sim/queue_history.py)
CSV_COLUMNS = ("id", "name", "team", "owner", "state", "submitted", "started", "ended", "wait", "elapsed", "gpus",
               "gpu_hours", "cost", "attempts", "exit", "reason", "priority", "wall_time", "gpu_type")


@app.command("history")
def history(
    user: Annotated[Optional[str], typer.Option("--user", "-u", help="Only this user's jobs.",
                                                show_default=False)] = None,
    mine: Annotated[bool, typer.Option("--mine", help="Only my jobs.")] = False,
    team: Annotated[Optional[str], typer.Option("--team", "-A", help="Only this team's jobs.",
                                                show_default=False)] = None,
    state: Annotated[Optional[list[str]], typer.Option(
        "--state", "-s", help="Only jobs that ended so, or run now, or have run and wait to run again: "
        "completed, failed, timed out, cancelled, rejected, running, requeued (repeat it, or separate with "
        "commas).", show_default=False)] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Only jobs of this name, or matching this pattern "
                                                "('train-*').", show_default=False)] = None,
    array: Annotated[Optional[str], typer.Option("--array", help="Only this array's (or sweep's) jobs, by its id.",
                                                 show_default=False)] = None,
    since: Annotated[str, typer.Option("--since", "-S", help="From when: a time back from now (2h, 3d), a date "
                                       "(2026-11-30), a date and time (2026-11-30T14:00, or with its offset: "
                                       "2026-11-30T14:00Z) or a time today (14:00).")] = DEFAULT_SINCE,
    until: Annotated[Optional[str], typer.Option("--until", "-E", help="Until when (default: now), as --since.",
                                                 show_default=False)] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="The newest N jobs; 0 for every one.")] = 100,
    output: Output = "table",
):
    """Finished jobs, latest end first, after the ones running now or requeued: wait, run time, GPU-hours,
    cost, exit."""
    fmt = check_output(output, FORMATS)
    if mine and user:
        fail("--mine and --user both name whose jobs to show; give one")
    if limit < 0:
        fail(f"--limit must be 0 (every job) or more, got {limit}")
    if array is not None:
        _check_array(array)
    with user_errors():
        from gqa.models.times import check_window, time_of
        from gqa.services.history import MAX_LIMIT, HistoryQuery, states_of

        from .output import now   # read when called: tests fix it

        at = now()
        start = time_of(since, at, what="--since")
        end = None if until is None else time_of(until, at, what="--until")
        check_window(start, end, at)
        from .backend import backend

        be = backend()
        owner = _me(be) if mine else user
        query = HistoryQuery(since=start, until=end, owner=owner, team=team, states=states_of(state or ()),
                             group=array, name=name, limit=min(limit, MAX_LIMIT) if limit else MAX_LIMIT)
        service = be.history()
        more = False
        if limit == 0:
            rows = list(service.rows(query))
        else:
            rows, token = [], None
            while len(rows) < limit:   # a page of DynamoDB's index may hold fewer: read on to the limit
                page = service.list(query, token)
                rows += page.rows
                token = page.next
                if token is None:
                    break
            more, rows = token is not None or len(rows) > limit, rows[:limit]
    if fmt == "json":
        from gqa.http.wire import summary_to_dict

        print_json({"since": start, "until": end, "more": more,
                    "jobs": [{**summary_to_dict(r), "status": r.status.value, "exit": r.exit_text} for r in rows]})
    elif fmt == "csv":
        _csv(rows)
    else:
        _table(rows, start, end, at, more)
        if more:
            note(f"(the newest {len(rows):,} shown: --limit 0 for every one, or narrow with --since, --state, "
                 "--user)")


def _check_array(text: str) -> None:
    """An array's (or sweep's) id is its number, as `gqa submit` printed it; anything else would
    list nothing and read as an array with no jobs."""
    import re

    if re.fullmatch(r"[1-9][0-9]*", text):
        return
    task = re.fullmatch(r"([1-9][0-9]*)_[0-9]+", text)
    if task:
        fail(f"--array takes an array's id, and {text} is one of its tasks: --array {task.group(1)}, "
             f"or `gqa status {text}` for the task")
    fail(f"--array takes an array's (or sweep's) id, a number such as 12; {text!r} is none")


def _me(be) -> str:
    from .queue import _me as me

    return me(be)


def _csv(rows) -> None:
    from gqa.models.priority import Priority

    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(CSV_COLUMNS)
    for r in rows:
        out.writerow([r.id, r.name, r.team, r.owner, r.status.value, _iso(r.submitted_at), _iso(r.first_start),
                      _iso(r.ended_at), "" if r.wait is None else round(r.wait, 1), round(r.elapsed, 1), r.gpus,
                      round(r.gpu_hours, 4), round(r.cost, 4), r.attempts, r.exit_text, r.reason,
                      Priority.of_rank(r.tier).value, "" if r.wall_time is None else round(r.wall_time, 1),
                      r.gpu_type or ""])


def _iso(at: float | None) -> str:
    return "" if at is None else time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(at))


def _table(rows, start: float, end: float | None, at: float, more: bool = False) -> None:
    from gqa.models.job import JobState
    from gqa.models.units import format_duration

    from .queue_table import Column, layout, width

    window = f"{_short(start, at)} to {'now' if end is None else _short(end, at)}"
    if not rows:
        sys.stdout.write(f"No jobs finished or running from {window}.\n")
        return
    # at 80 columns the least needed go first: tries, submitted, team, gpus, owner, cost
    columns = [Column("id", most=18), Column("name", keep=5, most=14), Column("team", keep=2, most=10),
               Column("owner", keep=3, most=10), Column("state", keep=8), Column("submitted", keep=1),
               Column("wait", keep=6, right=True), Column("elapsed", keep=6, right=True),
               Column("gpus", keep=2, right=True), Column("gpu-h", keep=5, right=True),
               Column("cost", keep=4, right=True), Column("tries", keep=1, right=True),
               Column("exit", keep=7), Column("reason")]
    cells = [[r.id, r.name, r.team, r.owner, r.status.value, _short(r.submitted_at, at), format_duration(r.wait),
              format_duration(r.elapsed), str(r.gpus), gpu_hours_text(r.gpu_hours), money(r.cost), str(r.attempts),
              r.exit_text, r.reason] for r in rows]
    lines = layout(columns, cells, width())
    finished = sum(r.finished for r in rows)
    running = sum(r.state == JobState.RUNNING for r in rows)
    requeued = len(rows) - finished - running
    counts = f"{finished:,} finished, {running:,} running{f', {requeued:,} requeued' if requeued else ''}"
    # the total is the sum of the costs shown, each to the cent
    totals = f"{gpu_hours_text(sum(r.gpu_hours for r in rows))} GPU-hours, {money(sum(cents(r.cost) for r in rows))}"
    if more:   # the window holds more than the rows listed: their totals are not the window's
        lines.append(f"{counts} among the newest {len(rows):,} of more, from {window}: {totals} for these "
                     f"{len(rows):,} (`gqa cost` totals the window)")
    else:
        lines.append(f"{counts}, from {window}: {totals}")
    sys.stdout.write("\n".join(lines) + "\n")


def _short(at: float, now_: float) -> str:
    """`14:02` today, `11-30 14:02` this year, else the date."""
    local, today = time.localtime(at), time.localtime(now_)
    if local[:3] == today[:3]:
        return time.strftime("%H:%M", local)
    if local.tm_year == today.tm_year:
        return time.strftime("%m-%d %H:%M", local)
    return time.strftime("%Y-%m-%d", local)
