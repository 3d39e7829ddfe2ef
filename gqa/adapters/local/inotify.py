"""Linux's inotify through libc: which of the watched files were written since
the last read. The log cap's watch (log_watch.py) uses it to learn that a
job's log grew without looking at logs nobody writes. Where there is no
inotify (another kernel, a libc without it, the instances used up) `open()`
raises OSError and the caller looks at its files on a timer instead."""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from dataclasses import dataclass, field

IN_MODIFY = 0x00000002
IN_ONESHOT = 0x80000000         # the watch goes once it has fired
IN_Q_OVERFLOW = 0x00004000      # events were dropped: any watched file may have been written
IN_IGNORED = 0x00008000         # the watch is gone (its file deleted, or the watch removed)
IN_DONT_FOLLOW = 0x02000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (of the name that follows; none for a file's watch)
_READ = 64 << 10


@dataclass
class Events:
    written: set[int] = field(default_factory=set)   # watches whose file was written
    gone: set[int] = field(default_factory=set)      # watches the kernel dropped
    overflowed: bool = False                          # some were lost: take every file as written


class Inotify:
    def __init__(self, fd: int, libc: ctypes.CDLL):
        self._fd, self._libc = fd, libc

    @classmethod
    def open(cls) -> Inotify:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            init = libc.inotify_init1
        except (OSError, AttributeError) as exc:
            raise OSError(errno.ENOSYS, f"no inotify here: {exc}") from None
        fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return cls(fd, libc)

    def fileno(self) -> int:
        return self._fd

    def add(self, path: str) -> int:
        """Watch `path` (not a link's target) for its next write, once; the watch's descriptor."""
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), ctypes.c_uint32(IN_MODIFY | IN_ONESHOT |
                                                                                        IN_DONT_FOLLOW))
        if wd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return wd

    def remove(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self._fd, wd)   # one the kernel dropped already: EINVAL, nothing to do

    def read(self) -> Events:
        """Every event queued now, without blocking."""
        events = Events()
        while True:
            try:
                data = os.read(self._fd, _READ)
            except BlockingIOError:
                return events
            if not data:
                return events
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, at)
                at += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    events.overflowed = True
                elif mask & IN_IGNORED:
                    events.gone.add(wd)
                elif mask & IN_MODIFY:
                    events.written.add(wd)

    def close(self) -> None:
        os.close(self._fd)
