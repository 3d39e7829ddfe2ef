"""`gqa logs ID [-f]`: a job's output, every attempt.

Locally the daemon writes one file per job (capped and rotated, see
gqa.adapters.local.log_rotation), read here from its end or its last offset;
one attempt of it (--attempt) is read page by page, as the shared daemon
serves it (gqa.adapters.local.log_pages). A remote
backend (AWS) hands out pages instead: a backend with `log_pages()` returns
an object whose `.page(ref, attempt=, token=)` answers a LogPage (the
LogService itself, or a client of the API's GET /jobs/{id}/logs), and
follow_pages() prints them."""

import collections
import sys
import time
from typing import Annotated, Any, BinaryIO, Callable, TextIO

import typer

from .app import app
from .options import JobRef
from .output import daemon_down, fail, note, user_errors

POLL_INTERVAL = 2.0   # seconds between polls once caught up: a line shows within this, and a poll costs API calls


@app.command("logs")
def logs(
    ref: JobRef,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
    tail: Annotated[int, typer.Option("--tail", "-n", help="Only the last N lines (0: all).")] = 0,
    attempt: Annotated[int | None, typer.Option("--attempt", help="Only this attempt (1 = the first).",
                                                show_default=False)] = None,
    index: Annotated[int | None, typer.Option("--index", "-i", help="An array's task: `gqa logs 34 --index 7` "
                                              "is `gqa logs 34_7`.", show_default=False)] = None,
):
    """Print a job's log (stdout and stderr of all its attempts); an array's task as GROUP_INDEX (34_7)."""
    if tail < 0:
        fail(f"--tail takes a number of lines, 0 or more, not {tail}")
    if index is not None:
        if "_" in ref or index < 0:
            fail(f"--index names a task of an array by its index (0 or more), given the array's id: "
                 f"gqa logs {ref.partition('_')[0]} --index {max(index, 0)}, not {ref} --index {index}")
        ref = f"{ref}_{index}"
    with user_errors():
        from .backend import backend

        be = backend()
        pages = getattr(be, "log_pages", None)
        if pages is not None:
            raise typer.Exit(follow_pages(pages(), ref, attempt=attempt, follow=follow, tail=tail))
        if not be.local:
            fail("this backend cannot show a job's output")
        if attempt is not None:   # its part of the one log, found by the line heading each attempt
            raise typer.Exit(follow_pages(be.logs(), ref, attempt=attempt, follow=follow, tail=tail,
                                          interval=be.poll_interval))
        jobs = be.queries().jobs(ref, history=False)
    if len(jobs) != 1:
        from gqa.services.logs import name_one

        fail(name_one(ref, jobs))
    with user_errors():   # a log part this user may not read is one line, as every storage fault
        code = follow_file(be, jobs[0], follow=follow, tail=tail)
    raise typer.Exit(code)


def follow_file(be, job, *, follow: bool, tail: int, out: BinaryIO | None = None) -> int:
    """Print a local job's log file (its rotated parts first): all of it or its
    last `tail` lines, then with `follow` what comes, until the job ends.
    Reads from the end and from the last offset: a log of any size costs a
    block of memory. Returns the exit status: 0, or 130 after Ctrl-C."""
    from gqa.adapters.local.log_stream import JobLog
    from gqa.models.job import JobState

    out = out or sys.stdout.buffer
    log = JobLog(be.paths.log_for(job.id))
    if follow and daemon_down(be) and not job.state.terminal:
        note("note: the queue daemon is not running; the job moves only once `gqa local start` runs")
    elif follow and job.state == JobState.HELD and not log.exists():
        note(f"note: job {job.id} is held; its output comes once it is released (gqa release {job.id}) and runs")
    try:
        while follow and not log.exists():
            job = be.store.get(job.id)
            if job.state.terminal:
                break
            time.sleep(be.poll_interval)
        if not log.exists():
            note(_no_output(job))
            return 0
        last = _write(out, log.start(tail))
        while follow:
            if wrote := _write(out, log.new()):
                last = wrote
                continue
            if be.store.get(job.id).state.terminal:
                last = _write(out, log.new()) or last
                break
            time.sleep(be.poll_interval)
        if last and not last.endswith(b"\n"):
            out.write(b"\n")     # a last line still being written when we stopped reading
    except KeyboardInterrupt:
        return 130
    finally:
        out.flush()
    return 0


def _no_output(job) -> str:
    """Why a job's log is not there: not started yet, or ended without ever running."""
    if not job.state.terminal:
        return f"job {job.id} has no output yet ({job.status.value})"
    if not job.attempts:
        return f"job {job.id} has no output: it ended {job.status.value} before it ever ran ({job.reason})"
    return f"job {job.id} has no output: its {job.attempts} attempt(s) wrote nothing, or the log was removed"


def _write(out: BinaryIO, chunks) -> bytes:
    """Write the chunks as they come; the last one written (b"" if none)."""
    last = b""
    for data in chunks:
        out.write(data)
        last = data
    if last:
        out.flush()
    return last


def follow_pages(pager: Any, ref: str, *, attempt: int | None = None, follow: bool = False, tail: int = 0,
                 interval: float = POLL_INTERVAL, sleep: Callable[[float], None] | None = None,
                 out: TextIO | None = None) -> int:
    """Print a job's output page by page: what is there now, then with
    `follow` poll every `interval` seconds until the backend says done. A
    job that has not started yet is waited for with `follow`, reported
    without. Returns the exit status: 0, or 130 after Ctrl-C."""
    from gqa.models.errors import NotStarted

    out = out or sys.stdout
    sleep = time.sleep if sleep is None else sleep
    # --tail: the last lines of what is there now
    held: collections.deque[str] | None = collections.deque(maxlen=tail) if tail > 0 else None
    token: str | None = None
    told_waiting = False
    try:
        while True:
            try:
                page = pager.page(ref, attempt=attempt, token=token)
            except NotStarted as exc:
                if not follow:
                    note(str(exc))
                    return 0
                if not told_waiting:
                    note(f"{exc}; waiting for it to start")
                    told_waiting = True
                sleep(interval)
                continue
            token = page.token
            if held is not None:
                held.extend(page.lines)
            else:
                _print(out, page.lines)
            if page.done:
                break
            if page.lines:
                continue   # more may be there already
            if held is not None:   # caught up: the tail is known
                _print(out, held)
                held = None
            if not follow:
                break
            sleep(interval)
        if held is not None:
            _print(out, held)
    except KeyboardInterrupt:
        out.flush()
        return 130
    return 0


def _print(out: TextIO, lines) -> None:
    if lines:
        out.write("".join(f"{line}\n" for line in lines))
        out.flush()
