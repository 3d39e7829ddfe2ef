"""A job's log on this machine read as one stream, whatever its size: all
of it or its last lines, then whatever comes since, across rotations
(`gqa logs ID [-f]` on the local backend). The parts are laid out and
rotated as log_rotation.py says."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from .log_records import continued_line, sibling
from .log_rotation import BLOCK, Rotations, as_read, marker, parts, read_from, rotations_as_read
from .storage_errors import storage_errors

TAIL_BLOCK = 64 << 10    # bytes per backwards step when looking for the last lines


class JobLog:
    """One job's log, read as one stream: what is there now (all of it, or
    its last lines), then, with `new()`, whatever came since, across
    rotations. Memory stays at a block whatever the files' sizes."""

    def __init__(self, path: Path | str, block: int = BLOCK):
        self.path = Path(path)
        self.block = block
        self._offset = 0          # bytes of the live file given so far
        self._seen = Rotations()  # the rotations as of the last read
        self._shrunk = False      # the live file was found shorter than the offset once

    def exists(self) -> bool:
        return bool(parts(self.path))

    def start(self, tail: int = 0) -> Iterator[bytes]:
        """What the log holds now: all of it (tail 0), or its last `tail` lines;
        a marker first when output was rotated away before what is shown."""
        self._seen, names = as_read(self.path)
        files = _open_all(names)
        try:
            live = files[-1] if files and files[-1][0] == self.path else None
            end = os.fstat(live[1]).st_size if live else 0
            if tail > 0:
                chunks, whole = _tail(files, self.path, tail, end, min(self.block, TAIL_BLOCK))
            else:
                chunks, whole = None, True
            # the oldest part may begin with the end of a line rotated away: passed over, and counted
            skip = continued_line(files[0][1], self._seen) if files and files[0][0] != self.path else 0
            if whole and self._seen.dropped:
                yield marker(self._seen.dropped + (skip if chunks is None else 0), self._seen.cap)
            if chunks is not None:
                yield from chunks
                self._offset = end
                return
            for i, (name, fd) in enumerate(files):
                limit = end if name == self.path else None
                for data in read_from(fd, skip if i == 0 else 0, limit, self.block):
                    if name == self.path:
                        self._offset += len(data)
                    yield data
        finally:
            for _, fd in files:
                os.close(fd)

    def new(self) -> Iterator[bytes]:
        """What was written since the last read, the parts rotated away meanwhile included."""
        now = rotations_as_read(self.path)
        if now.count != self._seen.count:
            yield from self._rotated(now)   # leaves the offset where the live file goes on
            self._seen, self._shrunk = now, False
        try:
            with storage_errors(self.path):
                fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            if os.fstat(fd).st_size < self._offset:
                # shorter without a rotation recorded: one may be half done (the record is written just
                # after the truncation); wait a read, then take it as truncated by someone else
                if not self._shrunk:
                    self._shrunk = True
                    return
                self._offset, self._shrunk = 0, False
            for data in read_from(fd, self._offset, None, self.block):
                self._offset += len(data)
                yield data
        finally:
            os.close(fd)

    def _rotated(self, now: Rotations) -> Iterator[bytes]:
        """The rest of the file we were reading, now part `.r` after r rotations, then the parts after
        it; the offset left where the live file goes on. A part whose rotation collapsed the live
        file's head holds only its first `now.took(n)` bytes, and the next file goes on with the rest:
        what was read past the part's end is there, at the same distance past its start."""
        r = now.count - self._seen.count
        if r > now.keep:      # the file we were reading is gone, and maybe more
            dropped = now.dropped - self._seen.dropped
            missed = max(0, dropped - self._offset)
            # parts that went on from one another (collapsed) hold the stream whole: what was read past
            # the dropped ones is at the head of the oldest kept part and after it
            first, offset = now.keep, max(0, self._offset - dropped) if now.took(now.keep) else 0
            if missed:
                offset = self._continued_line(now)   # half a line after the marker: passed over
                yield marker(missed + offset, now.cap)
        else:
            first, offset = r, self._offset
        for n in range(first, 0, -1):
            took = now.took(n)
            if took and offset >= took:    # read past its end already: on in the next file
                offset -= took
                continue
            try:
                fd = os.open(sibling(self.path, n), os.O_RDONLY)
            except FileNotFoundError:
                offset = 0
                continue
            try:
                yield from read_from(fd, offset, None, self.block)
            finally:
                os.close(fd)
            offset = 0
        self._offset = offset

    def _continued_line(self, now: Rotations) -> int:
        try:
            fd = os.open(sibling(self.path, now.keep), os.O_RDONLY)
        except FileNotFoundError:
            return 0
        try:
            return continued_line(fd, now)
        finally:
            os.close(fd)


def _open_all(paths: list[Path]) -> list[tuple[Path, int]]:
    """Open every part at once: a rotation renaming them meanwhile moves names, not what is read."""
    opened: list[tuple[Path, int]] = []
    try:
        for p in paths:
            try:
                with storage_errors(p):   # a part this user may not read: one line naming it
                    opened.append((p, os.open(p, os.O_RDONLY)))
            except FileNotFoundError:
                pass
    except BaseException:
        for _, fd in opened:
            os.close(fd)
        raise
    return opened


def _tail(files: list[tuple[Path, int]], live: Path, lines: int, end: int,
          block: int) -> tuple[list[bytes], bool]:
    """The bytes of the last `lines` lines of the files read as one (the live
    file up to `end`), read backwards a block at a time; and whether they
    start at the start of the first file."""
    found: list[bytes] = []   # blocks, last first
    newlines = 0
    for name, fd in reversed(files):
        pos = end if name == live else os.fstat(fd).st_size
        while pos > 0:
            step = min(block, pos)
            pos -= step
            data = os.pread(fd, step, pos)
            found.append(data)
            newlines += data.count(b"\n")
            if newlines > lines:   # one more than asked: the last may only end the last line
                return [_last_lines(b"".join(reversed(found)), lines)], False
    data = b"".join(reversed(found))
    shown = _last_lines(data, lines)
    return [shown], len(shown) == len(data)


def _last_lines(data: bytes, lines: int) -> bytes:
    body = data[:-1] if data.endswith(b"\n") else data
    cut = len(body)
    for _ in range(lines):
        cut = body.rfind(b"\n", 0, cut)
        if cut < 0:
            return data
    return data[cut + 1:]
