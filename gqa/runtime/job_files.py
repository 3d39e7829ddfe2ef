"""The files a local attempt shares with the queue in its private directory
(the one that holds $GQA_STEP_STATUS): what the job asked of the queue from
inside, and what the queue knew of the job when it launched it.

A job carries no rights over the queue, so `scontrol requeue $SLURM_JOB_ID`
and `scancel $SLURM_JOB_ID` leave a request here (`ask`) and stop the job's
processes; the queue reads it when it collects the attempt's end (`asked`)
and settles the attempt as a requeue or a cancel. The directory is the
job's user's: the reader trusts no more than a fixed word, follows no link
and opens nothing but a regular file, so a job can only ever say "requeue"
or "cancel" about itself. A cancel wins over a requeue, asked in either
order, as under Slurm (a requeued job is pending, and a cancel ends it).

The facts file (`write_facts`, `facts`) holds what `scontrol show job`
tells that the environment does not: the command, the --output, --error and
--input files, the working directory, whether the job may be requeued."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from . import user_file
from .slurm_tools import STEP_STATUS_ENV

REQUEST = "request"      # the job's own request, one word a line
FACTS = "job"            # key=value lines, written by the queue at launch
REQUEUE, CANCEL = "requeue", "cancel"
WORDS = (CANCEL, REQUEUE)   # in precedence order
MAX_READ = 4096          # bytes of a job-written file ever read
BATCH_ENV = "AWS_BATCH_JOB_ID"   # set in every AWS Batch container (spot_notice.BATCH_ENV)


def directory(env: Mapping[str, str]) -> Path | None:
    """The attempt's private directory, or None outside a local gqa attempt (on AWS
    the step file lies in a scratch directory no one reads after the job)."""
    status = env.get(STEP_STATUS_ENV, "")
    if not status or env.get(BATCH_ENV):
        return None
    return Path(status).parent


def ask(folder: Path, word: str) -> None:
    """Record the job's request `word` (one append of one line, once per word, so a
    trap that fires twice leaves the same file). Raises OSError."""
    if word not in WORDS:
        raise ValueError(f"{word!r} is no request a job may make")
    if word in _words(folder, REQUEST):
        return
    fd = os.open(folder / REQUEST, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                 | os.O_NONBLOCK, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{folder / REQUEST} is not a regular file")
        os.write(fd, f"{word}\n".encode())
    finally:
        os.close(fd)


def asked(folder: Path) -> str | None:
    """The job's request (CANCEL or REQUEUE), or None: anything else in the file is no request."""
    words = _words(folder, REQUEST)
    return next((word for word in WORDS if word in words), None)


def write_facts(fd: int, values: Mapping[str, str]) -> None:
    """The facts as key=value lines on `fd` (a value's line breaks become spaces)."""
    text = "".join(f"{key}={' '.join(str(value).splitlines())}\n" for key, value in values.items())
    view = memoryview(text.encode("utf-8", "surrogateescape"))
    while view:
        view = view[os.write(fd, view):]


def facts(env: Mapping[str, str]) -> dict[str, str]:
    """The facts the queue wrote for this attempt; {} where there are none."""
    folder = directory(env)
    text = _read(folder, FACTS, limit=64 * 1024) if folder is not None else ""
    found = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            found[key] = value
    return found


def _words(folder: Path, name: str) -> set[str]:
    """The lines of `folder/name` that are exactly one of WORDS."""
    return {line for line in _read(folder, name, limit=MAX_READ).split("\n") if line in WORDS}


def _read(folder: Path, name: str, *, limit: int) -> str:
    """Up to `limit` bytes of `folder/name` as text, '' for anything but a regular file
    (a link is not followed, a fifo not waited on)."""
    try:
        return user_file.read_text(folder / name, limit=limit)
    except OSError:
        return ""
