"""Locks that hold across every process of a test run on this machine (the
workers of `pytest -n`): for tests that change what the whole machine shares."""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def host_lock(name: str) -> Iterator[None]:
    """Held by one process at a time, e.g. host_lock("unix-users") around the
    tests that add and remove Unix users: useradd and userdel refuse to run
    while another holds /etc/passwd, and two tests may play the same user."""
    with open(Path(tempfile.gettempdir()) / f"gqa-tests-{name}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
