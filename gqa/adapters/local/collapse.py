"""Cutting the head off a file in place, atomically against its writers:
fallocate(2) with FALLOC_FL_COLLAPSE_RANGE (ext4 and XFS). log_rotation.py
cuts a live log this way, so a job's O_APPEND writes that come while the log
is rotated stay in it: the collapse and each write take the inode's lock,
and a write lands either before the collapse (and moves with the rest) or
after it, at the new end.

Python's os.posix_fallocate takes no flags: libc's fallocate is called
through ctypes. Where there is none, or the file system refuses (tmpfs,
btrfs, NFS, overlay: EOPNOTSUPP; a length it will not take: EINVAL), the
caller is told so and cuts the file its own way."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import math
import os

FALLOC_FL_COLLAPSE_RANGE = 0x08


def _libc_fallocate():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        call = libc.fallocate
    except (OSError, AttributeError):     # no libc by that name, or one without fallocate
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    call.restype = ctypes.c_int
    return call


_LIBC_FALLOCATE = _libc_fallocate()


def fallocate(fd: int, mode: int, offset: int, length: int) -> None:
    """libc's fallocate(fd, mode, offset, len); OSError as the kernel answers."""
    if _LIBC_FALLOCATE is None:
        raise OSError(errno.ENOSYS, "fallocate is not available here")
    if _LIBC_FALLOCATE(fd, mode, offset, length) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def granularity(fd: int) -> int:
    """The bytes a collapse's length must be a multiple of: the file system's
    block (fallocate(2)), taken as st_blksize and f_frsize both, so one that
    differs from the other (a cluster, a preferred I/O size) is met too."""
    blksize = os.fstat(fd).st_blksize
    frsize = os.fstatvfs(fd).f_frsize
    return math.lcm(max(blksize, 1), max(frsize, 1))


def collapse_head(fd: int, length: int) -> bool:
    """Remove the file's first `length` bytes, shifting the rest down; whether
    it was done. False where it could not be (no fallocate, a file system
    that refuses, a length it will not take): the file is as it was, those
    refusals being the kernel's checks before it moves anything. Any other
    error (EIO, ENOSPC) is raised: the file may have changed."""
    if length <= 0:
        return False
    try:
        fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, length)
    except OSError as exc:
        if exc.errno in REFUSED:
            return False
        raise
    return True


# no support for the call or the flag, a length or file it will not take, an append-only or busy file
REFUSED = frozenset({errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL, errno.EPERM,
                     errno.ETXTBSY, errno.ENODEV, errno.ESPIPE, errno.EBADF})
