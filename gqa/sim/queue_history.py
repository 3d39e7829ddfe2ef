"""gqa's own history as a trace: what `gqa history -o csv` writes, one job a row.

    gqa history --since 30d --limit 0 -o csv > history.csv
    gqa simulate history.csv --gpus 8

A finished job that ran on GPUs becomes a job: submitted when it was, running as long as its attempts
ran together (`elapsed`), on its GPUs of its type, with its wall time, priority, team, owner and
name; its first start and its end are what happened (the `as it ran` row). Left out and counted:
jobs still running at the export, jobs that never started (cancelled or rejected waiting), CPU-only
jobs, and runs of 0 seconds. Times are ISO-8601 with the zone the export wrote."""

import csv
import io
from pathlib import Path

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
    jobs: list[TraceJob] = []
    running = never = cpu_only = zero = 0
    try:
        for row in reader:
            line = reader.line_num
            if None in row or any(row.get(c) is None for c in NEEDED):
                raise TraceError(f"{path}: line {line}: not as many fields as the header has")
            try:
                job = _job(row)
            except ValueError as exc:
                raise TraceError(f"{path}: line {line}: {exc}") from None
            if isinstance(job, TraceJob):
                jobs.append(job)
            else:
                running += job == "running"
                never += job == "never"
                cpu_only += job == "cpu"
                zero += job == "zero"
    except csv.Error as exc:
        raise TraceError(f"{path}: line {reader.line_num + 1}: {exc}") from None
    jobs.sort(key=lambda j: j.submit_time)
    left = [f"{n} {what}" for n, what in ((running, "running at the export"), (never, "that never started"),
                                         (cpu_only, "that asked no GPU"), (zero, "that ran 0 s")) if n]
    notes = [f"gqa history: {len(jobs)} finished jobs that ran on GPUs"
             + (f"; left out: {', '.join(left)}" if left else ""), limits_note(jobs, "unlimited")]
    return Trace(name=path.name, format="queue-history", jobs=jobs, notes=notes)


def _job(row: dict) -> TraceJob | str:
    """The row's job, or why it is left out: running, never (started), cpu, zero (seconds run)."""
    def text(name: str) -> str | None:
        value = (row.get(name) or "").strip()
        return value or None

    if text("ended") is None:
        return "running"
    if text("started") is None:
        return "never"
    gpus = number(text("gpus"), "gpus")
    if gpus != int(gpus) or gpus < 0:
        raise ValueError(f"gpus must be a whole number, got {text('gpus')!r}")
    if gpus == 0:
        return "cpu"
    elapsed = run_seconds(number(text("elapsed"), "elapsed"), "elapsed")
    if elapsed <= 0:
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
    return TraceJob(id=job_id, submit_time=_time(text("submitted"), "submitted"), duration=elapsed, gpus=int(gpus),
                    team=text("team"), priority=priority, wall_time=wall,
                    user=text("owner"), name=text("name"), started=_time(text("started"), "started"),
                    ended=_time(text("ended"), "ended"), gpu_type=text("gpu_type"))


def _time(text: str | None, what: str) -> float:
    try:
        return timestamp(text)
    except ValueError:
        raise ValueError(f"{what} is not an ISO-8601 time: {text!r}") from None
