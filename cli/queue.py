"""`gqa queue`: pending jobs in the order they will start, and what runs."""

from typing import Annotated, Optional

import typer

from .app import app
from .options import Output, check_output
from .output import PRIORITY, ago, fail, now, print_json, user_errors

# what --state takes: the words `gqa status` shows for jobs still in the queue
STATES = ("pending", "awaiting approval", "held", "retrying", "starting", "running")


@app.command("queue")
def queue(
    group: Annotated[Optional[str], typer.Argument(help="Only this array or sweep, or this job.",
                                                   show_default=False)] = None,
    array: Annotated[bool, typer.Option("--array", "-r", help="One row per array task (otherwise an array's "
                                        "pending tasks alike are one row, as squeue shows them).")] = False,
    user: Annotated[Optional[str], typer.Option("--user", "-u", help="Only this user's jobs.",
                                                show_default=False)] = None,
    team: Annotated[Optional[str], typer.Option("--team", help="Only this team's jobs.", show_default=False)] = None,
    state: Annotated[Optional[str], typer.Option(
        "--state", help=f"Only jobs in these states, comma-separated: {', '.join(STATES)}.",
        show_default=False)] = None,
    mine: Annotated[bool, typer.Option("--mine", help="Only my jobs.")] = False,
    explain: Annotated[bool, typer.Option("--explain", "-x", help="Show each pending job's priority factors.")] = False,
    output: Output = "table",
):
    """Pending jobs in predicted start order (with the reason each waits, and its ETA) and running jobs."""
    fmt = check_output(output)
    states = _states(state)
    if mine and user:
        fail("--mine and --user both name whose jobs to show; give one")
    with user_errors():
        from .backend import backend

        be = backend()
        owner = _me(be) if mine else user
        view = be.queries().queue(group=group)
        daemon = not be.local or be.daemon_pid()
    pending = [e for e in view.pending if _kept(e.job, owner, team, states)]
    running = [j for j in view.running if _kept(j, owner, team, states)]
    if fmt == "json":
        print_json({
            "gpus": {"total": view.total_gpus, "free": view.free_gpus},
            "weights": _weights(view.weights),
            "pending": [_pending_dict(e, view.weights) for e in pending],
            "running": [{"id": j.id, "name": j.name, "team": j.team, "owner": j.owner, "gpus": list(j.assigned),
                         "started_at": j.started_at, "attempt": j.attempts, "state": j.state.value,
                         "reason": j.reason, "time_limit": j.attempt_wall_time,
                         "time_left": _left(j, now())}
                        for j in running],
        })
        return
    from .queue_table import width

    lines = [f"GPUs: {view.total_gpus - view.free_gpus} of {view.total_gpus} in use"
             + ("" if daemon else "  (daemon not running: `gqa local start`)")]
    lines += _running(running, width())
    if explain:
        import textwrap

        w = view.weights
        lines += textwrap.wrap(f"score = {w.fair_share:g} x fair share + {w.age:g} x age + {w.size:g} x size + "
                               f"{w.duration:g} x duration + nice", width())
        lines += textwrap.wrap("(each factor in [0, 1]; nice is -nice/10,000 of Slurm's --nice; tiers are strict)",
                               width())
    lines += _pending(pending, array, explain, width())
    import sys

    sys.stdout.write("\n".join(lines) + "\n")


def _running(jobs: list, total: int) -> list[str]:
    from gqa.models.units import format_duration

    from .queue_table import ID_MAX, NAME_MAX, Column, cut_ids, layout

    at = now()
    columns = [Column("id", most=ID_MAX), Column("name", 3, NAME_MAX), Column("team", 4), Column("owner", 6),
               Column("gpus", 5), Column("elapsed", 7), Column("limit", 2), Column("left", 8),
               Column("attempt", 1), Column("note")]
    rows = []
    for j in jobs:
        # a launched attempt Batch has not started yet: what it waits for, in minutes, not a run time
        starting = j.state.value == "STARTING"
        rows.append([cut_ids(j.id, ID_MAX), j.name, j.team, j.owner, ",".join(map(str, j.assigned)) or "-",
                     "-" if starting else ago(j.started_at, at), format_duration(j.attempt_wall_time),
                     "-" if starting else format_duration(_left(j, at)), str(j.attempts),
                     j.reason if starting else ""])
    if not any(r[-1] for r in rows):
        columns, rows = columns[:-1], [r[:-1] for r in rows]
    return [f"running ({len(jobs)})"] + layout(columns, rows, total)


def _pending(entries: list, expand: bool, explain: bool, total: int) -> list[str]:
    from gqa.models.units import format_duration

    from .queue_table import ID_MAX, NAME_MAX, Column, Row, collapse, cut_ids, eta_text, layout

    rows = [Row([e]) for e in entries] if expand else collapse(entries)
    at = now()
    columns = [Column("pos", 8, right=True), Column("id", most=ID_MAX), Column("name", 3, NAME_MAX),
               Column("team", 4), Column("owner", 6), Column("prio", 1), Column("gpus", 5),
               Column("limit", 5), Column("waiting", 2), Column("eta", 7)]
    if explain:
        columns += [Column(name, 8) for name in ("fairshare", "age", "size", "duration", "nice", "score")]
    columns.append(Column("reason"))
    cells = []
    for row in rows:
        e, j = row.first, row.first.job
        line = [str(e.position or "-"), cut_ids(row.id, ID_MAX), j.name, j.team, j.owner, PRIORITY[j.tier],
                str(j.gpus), format_duration(j.attempt_wall_time), ago(j.submitted_at, at), eta_text(e.eta, at)]
        if explain:
            f = e.factors
            line += [f"{f.fair_share:.3f}", f"{f.age:.3f}", f"{f.size:.3f}", f"{f.duration:.3f}",
                     f"{f.nice:+.3f}", f"{f.score:.3f}"] if f else ["-"] * 6
        line.append(e.reason)
        cells.append(line)
    rows_text = f"{len(rows)} row" + ("s" if len(rows) > 1 else "")
    title = f"pending ({len(entries)})" + ("" if len(rows) == len(entries) else
                                           f", {rows_text}: `gqa queue --array` shows every task")
    return [title] + layout(columns, cells, total)


def _states(text: str | None) -> set[str] | None:
    if text is None:
        return None
    words = {w.strip().lower().replace("-", " ").replace("_", " ") for w in text.split(",") if w.strip()}
    unknown = sorted(words - set(STATES))
    if unknown or not words:
        fail(f"--state {text!r}: {', '.join(unknown) or 'no state'} is not one of {', '.join(STATES)}")
    return words


def _me(be) -> str:
    """Who is asking: on AWS and on a shared box, the caller the API sees; else this process's user."""
    if not be.local:
        return str(be.whoami()["owner"])
    import getpass

    from .context import caller_user

    return caller_user() or getpass.getuser()


def _kept(job, owner: str | None, team: str | None, states: set[str] | None) -> bool:
    return ((owner is None or job.owner == owner) and (team is None or job.team == team)
            and (states is None or job.status.value in states))


def _left(job, at: float) -> float | None:
    """A running attempt's time left before its wall time: limit - elapsed."""
    limit = job.attempt_wall_time
    if limit is None or job.started_at is None or job.state.value != "RUNNING":
        return None
    return max(0.0, job.started_at + limit - at)


def _weights(w) -> dict:
    return {"fair_share": w.fair_share, "age": w.age, "size": w.size, "duration": w.duration}


def _pending_dict(entry, weights) -> dict:
    j = entry.job
    data = {"position": entry.position, "id": j.id, "name": j.name, "team": j.team, "owner": j.owner,
            "priority": PRIORITY[j.tier], "gpus": j.gpus, "gpu_type": j.gpu_type, "state": j.state.value,
            "status": j.status.value, "submitted_at": j.submitted_at, "time_limit": j.attempt_wall_time,
            "eta": entry.eta, "reason": entry.reason}
    if entry.factors is not None:
        f = entry.factors
        data["factors"] = {"fair_share": f.fair_share, "age": f.age, "size": f.size, "duration": f.duration,
                           "nice": f.nice, "score": f.score}
        data["weighted"] = {"fair_share": weights.fair_share * f.fair_share, "age": weights.age * f.age,
                            "size": weights.size * f.size, "duration": weights.duration * f.duration,
                            "nice": f.nice}
    return data
