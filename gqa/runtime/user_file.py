"""Reading a small file that a job's user controls, from a process that may
have more rights than that user (a shared box's root daemon): the file lies
in a directory the user may write, so whatever it names may have been
replaced by a link to a file only root may read, a FIFO that would block the
reader until someone writes to it, or a device that never ends. Only a
regular file is read, through no link, without waiting, and only its first
bytes."""

from __future__ import annotations

import errno
import os
import stat


def read_text(path: str | os.PathLike[str], *, limit: int) -> str:
    """Up to `limit` bytes of the regular file at `path`, as text. Raises OSError
    (its strerror says why) for a link, a FIFO, a device or a directory."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file", os.fspath(path))
        return os.read(fd, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


def why_unread(exc: OSError) -> str:
    """Why read_text refused, in a few words (O_NOFOLLOW says ELOOP for a link)."""
    if exc.errno == errno.ELOOP:
        return "it is a symbolic link"
    return exc.strerror or str(exc)
