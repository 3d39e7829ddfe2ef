"""`gqa top`: the GPUs, the queue's head, the teams and the latest events,
redrawn in place every --interval seconds until `q` or Ctrl-C.

The frame is cli/top_frame.py's; this module reads the overview from the
backend, owns the terminal (the alternate screen, the cursor, keys read one
at a time) and gives it back as it found it however the loop ends. A failed
read keeps the last frame, says why on it and tries again next turn."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Annotated, Optional

import typer

from .app import app
from .options import Output, check_output
from .output import fail, print_json, user_errors
from .stop_signals import StopRequest, stop_on_signals

QUIT_KEYS = frozenset("qQ")
HEAD, MOST_ROWS = 20, 200    # pending jobs a frame asks for: the overview's default, the most GET /overview gives
LOCAL_INTERVAL = 2.0     # seconds; on AWS each frame is an API call: the backend's own pace, 5 s
LONGEST_INTERVAL = 86_400.0   # a day: past that a live view is no view (and inf overflows the wait)


@app.command("top")
def top(
    interval: Annotated[Optional[float], typer.Option(
        "--interval", "-n", help="Seconds between frames (default: 2 on this machine, 5 on AWS).",
        show_default=False)] = None,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
    output: Output = "table",
):
    """A live view: every GPU and its job, the next jobs and why they wait, teams, the latest events (q quits)."""
    fmt = check_output(output)
    if interval is not None and not 0 < interval <= LONGEST_INTERVAL:
        fail(f"--interval must be a positive number of seconds up to {LONGEST_INTERVAL:,.0f} (a day), "
             f"got {interval:g}")
    with user_errors():
        from .backend import backend

        be = backend()
        source = be.overview()
        every = interval if interval is not None else max(LOCAL_INTERVAL, be.poll_interval)
        if fmt == "json" or once or not sys.stdout.isatty():
            view = source.overview()
    if fmt == "json":
        from gqa.http.wire import overview_to_dict

        print_json(overview_to_dict(view))
        return
    from rich.console import Console

    if once or not sys.stdout.isatty():
        out = Console(highlight=False)
        for line in _frame(view, out.width, None, None, None):
            out.print(line, soft_wrap=True)
        return
    _live(source, every)


def _frame(view, width, height, error, interval):
    from .top_frame import frame

    return frame(view, width, height, error=error, interval=interval)


def _live(source, interval: float) -> None:
    from rich.console import Console, Group
    from rich.live import Live

    from gqa.models.errors import GqaError

    console = Console(highlight=False)
    view, error = None, None
    # Ctrl-C is how top is left too, not an error: it ends the wait between frames (cli/stop_signals.py)
    with stop_on_signals() as stop, _keys(stop) as keys, \
            Live(console=console, screen=True, auto_refresh=False, transient=True) as live:
        while not stop.requested:
            width, height = console.size
            try:   # as many pending jobs as a tall terminal could show, the default at least
                view, error = source.overview(head=min(MOST_ROWS, max(HEAD, height))), None
            except GqaError as exc:     # the daemon restarting, the API throttled: shown, then tried again
                error = f"{exc} (retrying every {interval:g}s)"
            if stop.requested:
                return
            live.update(Group(*_frame(view, width, height, error, interval)), refresh=True)
            if keys.wait_for_quit(interval):
                return


class _Keys:
    """Keys typed while a frame shows; a terminal in cbreak mode hands them over one by one."""

    def __init__(self, fd: int | None, stop: StopRequest):
        self.fd = fd
        self.stop = stop

    def wait_for_quit(self, seconds: float) -> bool:
        """Wait `seconds` (less when a key or a stop comes); whether to quit."""
        deadline = time.monotonic() + seconds
        while not self.stop.requested:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for fd in self.stop.wait(left, () if self.fd is None else (self.fd,)):
                typed = os.read(fd, 64).decode(errors="replace")
                if not typed or QUIT_KEYS & set(typed):   # end of input quits too
                    return True
        return True


@contextlib.contextmanager
def _keys(stop: StopRequest):
    """stdin in cbreak mode (keys without Enter, unechoed; Ctrl-C still signals), restored on the way out."""
    if not sys.stdin.isatty():
        yield _Keys(None, stop)
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield _Keys(fd, stop)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
