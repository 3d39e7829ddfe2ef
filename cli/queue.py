"""`gqa queue`: pending jobs in the order they will start, and what runs."""

from typing import Annotated, Optional

import typer

from .app import app
from .options import Output, check_output
from .output import PRIORITY, ago, daemon_down, fail, now, print_json, tell_troubles, user_errors

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

        from .queue_table import queue_listing

        be = backend()
        owner = _me(be) if mine else user
        listing = queue_listing(be, group)
        if group is not None and not listing["pending"] and not listing["running"]:
            _check_named(be, group)
        daemon = not daemon_down(be)
        tell_troubles(be)
    if not daemon:
        from .queue_table import without_daemon

        listing["pending"] = without_daemon(listing["pending"])
    pending = [r for r in listing["pending"] if _kept(r, owner, team, states)]
    running = [r for r in listing["running"] if _kept(r, owner, team, states)]
    at = now()
    if fmt == "json":
        print_json({
            "gpus": {"total": listing["total_gpus"], "free": listing["free_gpus"],
                     "outside": listing.get("outside_gpus", 0)},
            "weights": listing["weights"],
            "pending": [_pending_dict(r, listing["weights"], at) for r in pending],
            "running": [{"id": r["id"], "name": r["name"], "team": r["team"], "owner": r["owner"], "gpus": r["gpus"],
                         "started_at": r["started_at"], "attempt": r["attempt"], "state": r["state"],
                         "reason": r["reason"], "time_limit": r["time_limit"], "time_left": _left(r, at)}
                        for r in running],
        })
        return
    from .queue_table import outside_text, width

    total, free = listing["total_gpus"], listing["free_gpus"]
    outside = listing.get("outside_gpus", 0)   # none in a listing kept by an older daemon
    lines = [f"GPUs: {total - free} of {total} in use" + (f", and {outside_text(outside)}" if outside else "")
             + ("" if daemon else "  (daemon not running: `gqa local start`)")]
    lines += _running(running, width(), at)
    if explain:
        import textwrap

        w = listing["weights"] or dict.fromkeys(("fair_share", "age", "size", "duration"), 0.0)
        lines += textwrap.wrap(f"score = {w['fair_share']:g} x fair share + {w['age']:g} x age + "
                               f"{w['size']:g} x size + {w['duration']:g} x duration + nice", width())
        lines += textwrap.wrap("(each factor in [0, 1]; nice is -nice/10,000 of Slurm's --nice; tiers are strict; "
                               "in a time-sliced tier a job that has had its slice scores below the rest)", width())
    lines += _pending(pending, array, explain, width(), at)
    import sys

    sys.stdout.write("\n".join(lines) + "\n")


def _running(rows: list, total: int, at: float) -> list[str]:
    from gqa.models.units import format_duration

    from .queue_table import ID_MAX, NAME_MAX, Column, cut_ids, layout

    columns = [Column("id", most=ID_MAX), Column("name", 3, NAME_MAX), Column("team", 4), Column("owner", 6),
               Column("on gpus", 5), Column("elapsed", 7), Column("limit", 2), Column("left", 8),
               Column("attempt", 1), Column("note")]
    cells = []
    for r in rows:
        # a launched attempt Batch has not started yet: what it waits for, in minutes, not a run time
        starting = r["state"] == "STARTING"
        cells.append([cut_ids(r["id"], ID_MAX), r["name"], r["team"], r["owner"], ",".join(map(str, r["gpus"])) or "-",
                      "-" if starting else ago(r["started_at"], at), format_duration(r["time_limit"]),
                      "-" if starting else format_duration(_left(r, at)), str(r["attempt"]),
                      r["reason"] if starting else ""])
    if not any(c[-1] for c in cells):
        columns, cells = columns[:-1], [c[:-1] for c in cells]
    return [f"running ({len(rows)})"] + layout(columns, cells, total)


def _pending(entries: list, expand: bool, explain: bool, total: int, at: float) -> list[str]:
    from gqa.models.units import format_duration

    from .queue_table import ID_MAX, NAME_MAX, Column, Memo, Row, collapse, cut_ids, eta_text, layout, own_id

    rows = [Row([e]) for e in entries] if expand else collapse(entries)
    columns = [Column("pos", 8, right=True), Column("id", most=ID_MAX), Column("name", 3, NAME_MAX),
               Column("team", 4), Column("owner", 6), Column("prio", 1), Column("gpus", 5),
               Column("limit", 5), Column("waiting", 2), Column("eta", 7)]
    if explain:
        columns += [Column(name, 8) for name in ("fairshare", "age", "size", "duration", "nice", "score")]
    columns.append(Column("reason"))
    if explain:
        from gqa.http.queue_listing import factors_of
    cells = []
    # many rows share a time limit, a submission time, an ETA: each text is made once
    limits, ages, etas = Memo(format_duration), Memo(format_duration), Memo(lambda t: eta_text(t, at))
    for row in rows:
        e = row.first
        line = [str(e["position"] or "-"), cut_ids(row.id, ID_MAX), e["name"], e["team"], e["owner"],
                PRIORITY[e["tier"]], str(e["gpus"]), limits[e["time_limit"]], ages[round(at - e["submitted_at"])],
                etas[e["eta"]]]
        if explain:
            f = factors_of(e["factors"])
            line += [f"{f['fair_share']:.3f}", f"{f['age']:.3f}", f"{f['size']:.3f}", f"{f['duration']:.3f}",
                     f"{f['nice']:+.3f}", f"{f['score']:.3f}"] if f else ["-"] * 6
        reason = live_reason(e, at)
        line.append(own_id(reason, e["id"], e["group"]) if len(row.entries) > 1 else reason)
        cells.append(line)
    rows_text = f"{len(rows)} row" + ("s" if len(rows) > 1 else "")
    title = f"pending ({len(entries)})" + ("" if len(rows) == len(entries) else
                                           f", {rows_text}: `gqa queue --array` shows every task")
    return [title] + layout(columns, cells, total)


def live_reason(row: dict, at: float) -> str:
    """A pending job's reason; a retry's wait told as of now."""
    back_at = row.get("back_at")
    if back_at is None:
        return row["reason"]
    from gqa.models.units import format_duration

    return f"{row['reason']}; back in the queue in {format_duration(max(0.0, back_at - at))}"


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


def _check_named(be, group: str) -> None:
    """NotFound ("no job or array 99999", as `gqa status` says) where `group` names no job at all; one that
    has finished is no mistake, only out of the queue. Asked only where the queue holds none of it."""
    be.queries().jobs(group, history=False)


def _kept(row: dict, owner: str | None, team: str | None, states: set[str] | None) -> bool:
    return ((owner is None or row["owner"] == owner) and (team is None or row["team"] == team)
            and (states is None or row["status"] in states))


def _left(row: dict, at: float) -> float | None:
    """A running attempt's time left before its wall time: limit - elapsed."""
    limit, started = row["time_limit"], row["started_at"]
    if limit is None or started is None or row["state"] != "RUNNING":
        return None
    return max(0.0, started + limit - at)


def _pending_dict(row: dict, weights: dict | None, at: float) -> dict:
    data = {"position": row["position"], "id": row["id"], "name": row["name"], "team": row["team"],
            "owner": row["owner"], "priority": PRIORITY[row["tier"]], "gpus": row["gpus"],
            "gpu_type": row["gpu_type"], "state": row["state"], "status": row["status"],
            "submitted_at": row["submitted_at"], "time_limit": row["time_limit"], "eta": row["eta"],
            "reason": live_reason(row, at)}
    from gqa.http.queue_listing import factors_of

    f = factors_of(row["factors"])
    if f is not None:
        data["factors"] = f
        if weights is not None:
            data["weighted"] = {"fair_share": weights["fair_share"] * f["fair_share"],
                                "age": weights["age"] * f["age"], "size": weights["size"] * f["size"],
                                "duration": weights["duration"] * f["duration"], "nice": f["nice"],
                                "service": f.get("service", 0.0)}
    return data
