"""The small files beside a job's log (log_rotation.py lays the log out):
`<log>.rotations`, the record of the rotations made, and `<log>.rotating`,
a rotation's intent (log_recovery.py), each written aside and renamed into
place, so a reader sees the old file or the new one, never half; and the
names of the log's parts."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rotations:
    """What `<log>.rotations` says: rotations so far, bytes dropped with the
    oldest parts, and the cap they were made under."""

    count: int = 0
    dropped: int = 0
    cap: str = ""
    keep: int = 0
    # newest first, one per kept part and one for the part dropped last: the bytes the rotation that
    # made it cut off the live file's head where it collapsed it (the live file went on from there),
    # 0 where it truncated it (the live file began anew). A follower that had read past a part's end
    # reads on in the next file; the oldest part kept may begin inside a line of the one dropped.
    continued: tuple[int, ...] = ()

    def as_json(self) -> dict:
        return {"count": self.count, "dropped": self.dropped, "cap": self.cap, "keep": self.keep,
                "continued": list(self.continued)}

    @classmethod
    def from_json(cls, raw: dict) -> "Rotations":
        continued = tuple(int(x) for x in raw.get("continued", ()))   # a record before it: all truncated
        return cls(int(raw["count"]), int(raw["dropped"]), str(raw["cap"]), int(raw["keep"]), continued)

    def after(self, cut: int, keep: int, cap: str) -> "Rotations":
        """The record of one more rotation that cut `cut` bytes off the live file's head (0: truncated)."""
        return Rotations(self.count + 1, self.dropped, cap, keep, ((cut,) + self.continued)[:keep + 1])

    def took(self, part: int) -> int:
        """What the rotation that made part `.part` cut off the live file's head by collapsing it; 0 if
        it truncated the live file, or is not known."""
        return self.continued[part - 1] if 0 < part <= len(self.continued) else 0

    def oldest_continues(self) -> bool:
        """Whether the oldest part kept goes on from a part dropped since: that part's rotation collapsed
        the live file at a block boundary, most likely inside a line."""
        return self.count > self.keep and self.took(self.keep + 1) > 0


def rotations_of(path: Path) -> Rotations:
    raw = read_json(sibling(path, "rotations"))
    try:
        return Rotations.from_json(raw) if raw is not None else Rotations()
    except (ValueError, TypeError, KeyError):
        return Rotations()


def record(path: Path, rotations: Rotations, like: os.stat_result) -> None:
    write_json(sibling(path, "rotations"), rotations.as_json(), like)


def read_json(path: Path) -> dict | None:
    """The file's JSON object; None where it is missing, unreadable or not an object."""
    try:
        with open(path, "rb") as fh:
            raw = json.load(fh)
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def write_json(path: Path, value: dict, like: os.stat_result) -> None:
    """Written aside then renamed: a reader sees the old file or the new one."""
    tmp = path.with_name(f"{path.name}.tmp")
    fd = create_like(tmp, like)
    with open(fd, "w", encoding="utf-8") as fh:
        json.dump(value, fh)
    os.replace(tmp, path)


LINE_END_WITHIN = 1 << 20   # bytes of the oldest part looked through for the end of a dropped line


def continued_line(fd: int, rotations: Rotations) -> int:
    """The bytes at the head of the oldest part kept (open at `fd`) that end a line begun in a part
    dropped since, 0 for none: readers pass over them, counted with what was rotated away, rather
    than show half a line after the marker."""
    if not rotations.oldest_continues():
        return 0
    nl = os.pread(fd, LINE_END_WITHIN, 0).find(b"\n")
    return nl + 1 if nl >= 0 else 0


def marker(dropped: int, cap: str) -> bytes:
    return f"--- gqa: {dropped:,} bytes of earlier output rotated away (log cap {cap})\n".encode()


def cut_marker(cut: int, cap: str) -> bytes:
    return f"--- gqa: {cut:,} bytes cut here, written faster than the log could be rotated (log cap {cap})\n".encode()


def sibling(path: Path, suffix: str | int) -> Path:
    return path.with_name(f"{path.name}.{suffix}")


def create_like(path: Path, like: os.stat_result) -> int:
    """A new file at `path` (whatever was there, a link included, is replaced),
    with the owner and mode of `like` where the daemon may give them."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchown(fd, like.st_uid, like.st_gid)
    except PermissionError:   # not root: the file is ours, as the log is
        pass
    os.fchmod(fd, stat.S_IMODE(like.st_mode))
    return fd


def parts(path: Path, rotations: Rotations | None = None) -> list[Path]:
    """The log's files that exist, oldest first: `.K ... .1`, then the live file.
    Probed from `.1` up (the record may be missing), at least as far as the record's K."""
    rotations = rotations_of(path) if rotations is None else rotations
    older, n = [], 1
    while (p := sibling(path, n)).exists() or n <= rotations.keep:
        if p.exists():
            older.append(p)
        n += 1
    return older[::-1] + ([path] if path.exists() else [])
