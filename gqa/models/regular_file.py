"""Reading a job file or batch script: only a regular file, opened
non-blocking, so a FIFO with no writer or a device never holds the reader
(a daemon serving every user must not wait on one). Standard library only:
the light client reads the caller's file with it before anything else of
gqa is imported, and the loader with it too, in the same words."""

import os
import stat


class Unreadable(Exception):
    """The file cannot be read; the message names it as the user gave it."""


def read_regular(full: str, path: str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the regular file at `full` (`path`: as the user gave it).
    Anything else (a FIFO, a device, a socket, a directory) is refused without waiting."""
    try:
        looked = os.stat(full).st_mode
        if not stat.S_ISREG(looked):   # a device is never even opened
            raise _not_a_file(path, looked)
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (FileNotFoundError, ValueError):  # ValueError: a NUL in the path
        raise Unreadable(f"no such file: {path}") from None
    except OSError as exc:
        raise Unreadable(f"cannot read {path}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):   # swapped between the two looks
            raise _not_a_file(path, mode)
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise Unreadable(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def _not_a_file(path: str, mode: int) -> Unreadable:
    if stat.S_ISDIR(mode):
        return Unreadable(f"{path} is a directory, not a job file or script")
    return Unreadable(f"{path} is not a regular file")
