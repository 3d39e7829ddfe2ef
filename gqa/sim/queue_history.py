"""gqa's own history as a trace: what `gqa history -o csv` writes, one job a row.

    gqa history --since 30d --limit 0 -o csv > history.csv
    gqa simulate history.csv --gpus 8

A finished job that ran on GPUs becomes a job: submitted when it was, running as long as its attempts
ran together (`elapsed`), on its GPUs of its type, with its wall time, priority, team, owner and
name; its first start and its end are what happened (the `as it ran` row). Left out and counted:
jobs still running at the export, jobs that never started (cancelled or rejected waiting), CPU-only
jobs, and runs of 0 seconds. Times are ISO-8601 with the zone the export wrote. A finished row that
started before it was submitted, ended before it started, or ran a negative time (`elapsed`) is
refused with its line.

Exports put together (`cat`, or several queues' histories) read as one: a repeated header is skipped,
a job that exports of overlapping periods repeat (its id and submit time) is read once, as it stood
last, and a job whose id another job has (one from another queue) is replayed as its own, its id
marked with a ' as often as it takes, so the replay and the `as it ran` row hold the same jobs."""

import csv
import io
from collections import Counter
from dataclasses import replace
from pathlib import Path

from ..models.units import format_count
from .trace_fields import (PRIORITIES, Trace, TraceError, TraceJob, limits_note, number, run_seconds, text_of,
                           timestamp)

# what a row must have: `gqa history -o csv`'s columns (cli/history.py, CSV_COLUMNS), of which these
NEEDED = ("id", "state", "submitted", "started", "ended", "elapsed", "gpus")


def is_queue_history(first_line: str) -> bool:
    """Whether a file's first line is `gqa history -o csv`'s header."""
    return set(NEEDED) <= {name.strip() for name in first_line.strip().split(",")}


def load_queue_history(path: str | Path) -> Trace:
    path = Path(path)
    reader = csv.DictReader(io.StringIO(text_of(path.read_bytes(), str(path))))
    read: dict[tuple[str, float], TraceJob | str] = {}   # each job once, by its id and submit time
    repeats = 0
    try:
        for row in reader:
            line = reader.line_num
            if list(row.values()) == reader.fieldnames:   # the next export's header
                continue
            if None in row or any(row.get(c) is None for c in NEEDED):
                raise TraceError(f"{path}: line {line}: not as many fields as the header has")
            try:
                key = ((row["id"] or "").strip(), _time((row["submitted"] or "").strip() or None, "submitted"))
                job = _job(row)
            except ValueError as exc:
                raise TraceError(f"{path}: line {line}: {exc}") from None
            if key in read:   # running in one export, ended in the next: the row that ended is kept
                repeats += 1
                if job == "running" and read[key] != "running":
                    continue
            read[key] = job
    except csv.Error as exc:
        raise TraceError(f"{path}: line {reader.line_num + 1}: {exc}") from None
    left_out = Counter(job for job in read.values() if isinstance(job, str))
    jobs, renamed = own_ids([job for job in read.values() if isinstance(job, TraceJob)])
    jobs.sort(key=lambda j: j.submit_time)
    left = [f"{n} {what}" for n, what in ((left_out["running"], "running at the export"),
                                         (left_out["never"], "that never started"),
                                         (left_out["cpu"], "that asked no GPU"), (left_out["zero"], "that ran 0 s"))
            if n]
    if repeats:
        left.append(f"{format_count(repeats, 'row')} repeated (exports of overlapping periods: each read once, "
                    "as it stood last)")
    notes = [f"gqa history: {len(jobs)} finished jobs that ran on GPUs"
             + (f"; left out: {', '.join(left)}" if left else ""), limits_note(jobs, "unlimited")]
    if renamed:
        notes.append(f"{format_count(renamed, 'job')} with the id of an earlier one submitted at another time "
                     "(several queues' histories put together?): each replayed as its own, its id marked with a '")
    return Trace(name=path.name, format="queue-history", jobs=jobs, notes=notes)


def own_ids(jobs: list[TraceJob]) -> tuple[list[TraceJob], int]:
    """The jobs, each with an id of its own: a replay and its `as it ran` row know a job by its id.
    And how many were renamed."""
    seen: set[str] = set()
    out, renamed = [], 0
    for job in jobs:
        job_id = job.id
        while job_id in seen:
            job_id += "'"
        seen.add(job_id)
        renamed += job_id != job.id
        out.append(job if job_id == job.id else replace(job, id=job_id))
    return out, renamed


def _job(row: dict) -> TraceJob | str:
    """The row's job, or why it is left out: running, never (started), cpu, zero (seconds run)."""
    def text(name: str) -> str | None:
        value = (row.get(name) or "").strip()
        return value or None

    if text("ended") is None:
        return "running"
    if text("started") is None:
        return "never"
    submitted, started, ended = (_time(text(name), name) for name in ("submitted", "started", "ended"))
    for later, earlier, at, since in (("started", "submitted", started, submitted),
                                      ("ended", "started", ended, started)):
        if at < since:
            raise ValueError(f"{later} {text(later)} is before {earlier} {text(earlier)}")
    gpus = number(text("gpus"), "gpus")
    if gpus != int(gpus) or gpus < 0:
        raise ValueError(f"gpus must be a whole number, got {text('gpus')!r}")
    if gpus == 0:
        return "cpu"
    elapsed = run_seconds(number(text("elapsed"), "elapsed"), "elapsed")
    if elapsed < 0:
        raise ValueError(f"elapsed must be 0 or more, got {text('elapsed')!r}")
    if elapsed == 0:
        return "zero"
    wall = run_seconds(number(text("wall_time"), "wall_time"), "wall_time") if text("wall_time") else None
    if wall is not None and wall <= 0:   # the export writes none as an empty cell
        raise ValueError(f"wall_time must be positive, got {text('wall_time')!r}")
    priority = text("priority")
    if priority is not None and priority not in PRIORITIES:
        raise ValueError(f"priority must be high, normal or low, got {priority!r}")
    job_id = text("id")
    if job_id is None:
        raise ValueError("id is empty")
    return TraceJob(id=job_id, submit_time=submitted, duration=elapsed, gpus=int(gpus),
                    team=text("team"), priority=priority, wall_time=wall,
                    user=text("owner"), name=text("name"), started=started, ended=ended, gpu_type=text("gpu_type"))


def _time(text: str | None, what: str) -> float:
    try:
        return timestamp(text)
    except ValueError:
        raise ValueError(f"{what} is not an ISO-8601 time: {text!r}") from None
