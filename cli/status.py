"""`gqa status ID`: a job's state, attempts, exit and history with reasons."""

from collections import Counter

from .app import app
from .options import JobRef, Output, check_output
from .output import (PRIORITY, STATUS_STYLE, ago, console, daemon_down, exit_words, gpu_use, job_dict, money, note,
                     now, print_json, tell_troubles, user_errors, when)


@app.command("status")
def status(ref: JobRef, output: Output = "table"):
    """Where a job stands and why; for an array or sweep, every task."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        from gqa.models.job import PENDING
        from gqa.models.records import with_changes

        from .queue import live_reason
        from .queue_table import queue_listing

        be = backend()
        jobs, admitting = be.queries().jobs_and_admitting(ref)
        # a pending job's reason, position and ETA are the queue's own: the very listing `gqa queue` reads
        # (the daemon's kept view while current: a 100,000-task array's positions without a pass)
        standing = {row["id"]: row for row in queue_listing(be, ref)["pending"]} if any(
            j.state in PENDING for j in jobs) else {}
        down = bool(standing) and daemon_down(be)
        tell_troubles(be)
    if down:   # "starting now" is what a pass would do: none runs until a daemon does
        from .queue_table import without_daemon

        note("note: the queue daemon is not running; pending jobs start once `gqa local start` runs")
        standing = {row["id"]: row for row in without_daemon(list(standing.values()))}
    at = now()      # a retry's "back in the queue in 3s" told as of now, as `gqa queue` tells it
    jobs = [with_changes(j, reason=live_reason(standing[j.id], at)) if j.id in standing else j for j in jobs]
    if fmt == "json":
        if len(jobs) == 1 and jobs[0].id == ref:
            print_json(_with_standing(job_dict(jobs[0], history=True), standing.get(ref)))
        else:
            print_json({"group": ref, "counts": dict(Counter(j.state.value for j in jobs)), "admitting": admitting,
                        "jobs": [_with_standing(job_dict(j, history=True), standing.get(j.id)) for j in jobs]})
        return
    out = console()
    if len(jobs) == 1 and jobs[0].id == ref:
        _one(out, jobs[0], standing.get(ref))
    else:
        _group(out, ref, jobs, admitting)


def _with_standing(data: dict, entry: dict | None) -> dict:
    if entry is not None:
        data.update(position=entry["position"], eta=entry["eta"])
    return data


def _one(out, job, entry: dict | None = None) -> None:
    from gqa.models.units import format_duration

    style = STATUS_STYLE.get(job.status.value, "")
    out.print(f"[bold]job {job.id}[/] {job.name}: [{style}]{job.status.value}[/] ({job.state.value})")
    out.print(f"  reason     {job.reason}")
    if entry is not None and entry["position"] is not None:
        from .queue_table import eta_text

        out.print(f"  position   {entry['position']} in the queue's start order; eta {eta_text(entry['eta'])}")
    out.print(f"  team       {job.team}   owner {job.owner}   priority {PRIORITY[job.tier]}")
    gpus = f"{job.gpus}" + (f" x {job.gpu_type}" if job.gpu_type else "")
    if job.assigned:
        gpus += f" (GPUs {','.join(map(str, job.assigned))})"
    out.print(f"  gpus       {gpus}")
    retries = f"{job.error_retries} error retries, {job.interruptions} interruptions"
    out.print(f"  attempts   {job.attempts} ({retries})")
    if job.exit_code is not None or job.signal is not None:
        out.print(f"  exit       {exit_words(job.exit_code, job.signal)}")
    out.print(f"  submitted  {when(job.submitted_at)} ({ago(job.submitted_at)} ago)")
    if job.gpu_seconds:
        out.print(f"  used       {job.gpu_seconds / 3600:.3f} GPU-hours" + (f", {money(job.cost)}" if job.cost else "")
                  + (" so far" if job.state.value == "RUNNING" else ""))   # the running attempt counted to now
    if job.gpu_util is not None or job.gpu_memory is not None:
        out.print(f"  gpu use    {gpu_use(job.gpu_util, job.gpu_memory)}")
    out.print("  history")
    previous = None
    for t in job.history:
        delta = f"+{format_duration(t.at - previous)}" if previous is not None else ""
        out.print(f"    {when(t.at)} {delta:>8}  {t.state.value:<16} {t.reason}")
        previous = t.at


def _group(out, ref, jobs, admitting: int = 0) -> None:
    """The summary, then a row a task, laid out as `gqa queue` lays out its rows (plain text, not
    rich's table, which took about a minute for a 100,000-task array: it measures every cell)."""
    import sys

    from .queue_table import ID_MAX, NAME_MAX, Column, cut_ids, layout, width

    counts = Counter(j.status.value for j in jobs)
    out.print(f"[bold]{ref}[/]: {len(jobs)} jobs - " + ", ".join(f"{n} {s}" for s, n in counts.most_common()))
    if admitting:
        out.print(f"  and {admitting} more still being admitted ({len(jobs)} of {len(jobs) + admitting} written "
                  "so far, a chunk at a time)")
    columns = [Column("id", most=ID_MAX), Column("name", 3, NAME_MAX), Column("status", 8),
               Column("attempts", 1, right=True), Column("exit", 2, right=True), Column("reason")]
    cells = [[cut_ids(j.id, ID_MAX), j.name, j.status.value, str(j.attempts),
              "-" if j.exit_code is None else str(j.exit_code), j.reason] for j in jobs]
    sys.stdout.write("\n".join(layout(columns, cells, width())) + "\n")
