"""A daemon killed in the middle of a log's rotation, for real: a forked
child runs the rotation and leaves with os._exit at a chosen step, so none
of the rotation's cleanup runs."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from gqa.adapters.local import collapse, log_records, log_recovery, log_rotation
from gqa.adapters.local.log_rotation import LogLimits, rotate_if_needed

REACHED, MISSED = 0, 3


def die_after(name: str, target, *, nth: int = 1, partway=None, when=lambda *args: True):
    """Replace `target.name` with a call that runs the original (or `partway`,
    a step of it) and then kills the process, at its nth call that `when` picks."""
    real, calls = getattr(target, name), []

    def step(*args, **kwargs):
        if when(*args):
            calls.append(1)
        if not when(*args) or len(calls) < nth:
            return real(*args, **kwargs)
        (partway or real)(*args, **kwargs)
        os._exit(REACHED)

    setattr(target, name, step)


def refuse_collapse() -> None:
    """The file system refuses to collapse a file's head (tmpfs, btrfs, NFS): rotation truncates."""
    def refused(fd, mode, offset, length):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    collapse.fallocate = refused


def collapses(directory: Path) -> bool:
    """Whether the file system under `directory` collapses a file's head: tried on a scratch file."""
    scratch = directory / "collapse-probe"
    with open(scratch, "wb+") as fh:
        fh.write(b"x" * (3 << 16))
        fh.flush()
        try:
            done = collapse.collapse_head(fh.fileno(), collapse.granularity(fh.fileno()))
        except OSError:
            done = False
    scratch.unlink()
    return done


def unlink_oldest_only(path, keep):
    os.unlink(log_records.sibling(path, keep))


CRASHES = {
    "during the long copy": lambda: die_after("_copy", log_rotation),
    "after writing its intent": lambda: die_after("intend", log_recovery),
    "having dropped the oldest part only": lambda: die_after("_shift", log_rotation, partway=unlink_oldest_only),
    "having shifted the parts": lambda: die_after("_shift", log_rotation),
    "having put the copy at .1": lambda: die_after("replace", os, when=lambda src, dst: str(dst).endswith(".log.1")),
    "after the catch-up copy": lambda: die_after("_copy", log_rotation, nth=2),
    "having cut the live file": lambda: die_after("ftruncate", os),
    "having written its record": lambda: die_after("record", log_rotation),
}

# a log of more than a block, where the file system collapses the live file's head (collapse.py)
COLLAPSE_CRASHES = {
    "having cut the copy back to a block": lambda: die_after("collapse_head", collapse, partway=lambda fd, n: None),
    "having collapsed the live file": lambda: die_after("collapse_head", collapse),
}


def crash(path: Path, limits: LogLimits, how) -> None:
    pid = os.fork()
    if pid == 0:   # the daemon, killed at the step
        try:
            how()
            rotate_if_needed(path, limits)
        finally:
            os._exit(MISSED)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == REACHED, "the rotation never reached the step"
