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

from gqa.models.limits import MAX_SCRIPT_BYTES
from gqa.models.regular_file import Unreadable, read_regular

from .stdin_script import file_argument

# a job file's limit (MAX_SPEC_BYTES) is lower: the daemon's loader refuses past either
MOST = MAX_SCRIPT_BYTES


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
