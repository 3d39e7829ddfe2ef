"""A FIFO put where gqa expects a file of the job's: the trap a job may set for
a daemon that opens it, waiting until someone opens the other end."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def fifo_opened_late(path: Path, text: str = "", after: float = 2.0) -> Iterator[None]:
    """A FIFO at `path` whose other end opens `after` seconds on (both ends at once, so a
    reader or a writer that waited on it goes on), writes `text` and closes a second later:
    code that waits on it takes `after` seconds and, reading, finds `text`."""
    os.mkfifo(path)

    def open_late() -> None:
        time.sleep(after)
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)   # opens at once on Linux, whoever waits or not
        try:
            os.write(fd, text.encode())
            time.sleep(1.0)
        finally:
            os.close(fd)

    late = threading.Thread(target=open_late, daemon=True)
    late.start()
    try:
        yield
    finally:
        late.join()
