"""The job file or batch script of a `gqa submit` the queue daemon serves,
read here, by the caller's own process and so with the caller's rights, and
sent with the request: the daemon (often root on a shared box) opens no file
for its callers (gqa/models/loader.py's `files_sent`). Standard library only:
the light client (cli/client.py) imports it before anything else of gqa.

A file that cannot be read travels as the message to give, which the daemon
gives where the CLI would (after the options are checked), so a submission
says the same whichever process reads it. Only a regular file is read, opened
non-blocking: a FIFO or a device is refused at once, never waited on."""

import base64
import os
import stat

from gqa.models.limits import MAX_SCRIPT_BYTES

from .stdin_script import file_argument

# a job file's limit (MAX_SPEC_BYTES) is lower: the daemon's loader refuses past either
MOST = MAX_SCRIPT_BYTES


class Unreadable(Exception):
    """The file cannot be read; the message is what `gqa submit` says."""


def sent_files(args: list[str], cwd: str) -> list[dict]:
    """The request's "files": the FILE among `gqa submit`'s arguments (before `--`), as
    {"path", "data" (base64), "executable"}, or {"path", "error"}; none for no FILE or `-`."""
    path = file_argument(args)
    if path is None or path == "-":
        return []
    full = os.path.join(cwd, path)
    try:
        data = read_regular(full, path, MOST)
    except Unreadable as exc:
        return [{"path": path, "error": str(exc)}]
    return [{"path": path, "data": base64.b64encode(data).decode("ascii"),
             "executable": os.access(os.path.normpath(full), os.X_OK)}]


def read_regular(full: str, path: str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the regular file at `full` (`path`: as the user gave it).
    The loader's own read_regular, in the same words, without its imports."""
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
