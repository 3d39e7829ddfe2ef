"""Where checkpoints live. A checkpoint is a directory of files named ckpt-<step>.

`CheckpointStorage` is the seam: `LocalStorage` is a directory on a local or
shared filesystem; `gqa.runtime.s3.S3Storage` is an S3 prefix
(GQA_CHECKPOINT_URI=s3://...), behind the same Protocol.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from pathlib import Path
from typing import Protocol, runtime_checkable

from . import staging
from .layout import POINTER, Choose, check_step, parse_name

# a rename onto a name another process has just committed (or a file of that name)
_TAKEN = {errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR}



class CheckpointStorage(Protocol):
    """What `Checkpointer` needs from a place that holds checkpoints."""

    def stage(self) -> Path:
        """A new, empty local directory to write one checkpoint into."""
        ...

    def commit(self, staged: Path, step: int) -> str:
        """Publish a fully written staged directory; return its name.

        Readers see either nothing or the whole checkpoint, never part of it.
        """
        ...

    def discard(self, staged: Path) -> None:
        """Remove a staged directory that will not be committed."""
        ...

    def read_latest(self) -> str | None:
        """The name the `latest` pointer holds, or None."""
        ...

    def write_latest(self, name: str) -> None:
        """Point `latest` at a committed checkpoint, atomically."""
        ...

    def names(self) -> list[str]:
        """Names of all committed checkpoints, in no particular order."""
        ...

    def delete(self, name: str) -> None:
        """Remove a committed checkpoint."""
        ...

    def fetch(self, ref: str) -> Path | None:
        """A local directory with the files of checkpoint `ref` (a name or a
        full location), or None if `ref` is not a committed checkpoint."""
        ...


@runtime_checkable
class GuardedPointer(Protocol):
    """A storage that moves `latest` with no other process's move between its
    read and its write (a lock, a conditional write). Storages without it get
    the move re-checked after it is made."""

    def update_latest(self, choose: Choose) -> str | None:
        """Point `latest` at `choose(current, names)` (None: leave it); what it names after."""
        ...


def open_storage(location: str | os.PathLike[str]) -> CheckpointStorage:
    """Storage for a directory path or a URI."""
    text = os.fspath(location)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        if scheme == "s3":
            from .s3 import S3Storage  # imports boto3 only when it first talks to S3

            return S3Storage(text)
        raise NotImplementedError(f"no checkpoint storage for {scheme}:// locations yet")
    return LocalStorage(text)


class LocalStorage:
    """Checkpoints in a directory. A rename is the commit; `latest` is a small
    file replaced with os.replace, so both steps are atomic on POSIX. Several
    processes may save at once: each stages in a room of its own, swept only
    once that process is dead (`staging`), and moves of `latest` are serialised."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._swept = False

    def __repr__(self) -> str:
        return f"LocalStorage({str(self.root)!r})"

    def stage(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        if not self._swept:
            staging.sweep(self.root)
            self._swept = True
        # Inside root, so the commit is a rename within one filesystem.
        staged = staging.room(self.root) / secrets.token_hex(4)
        staged.mkdir()
        return staged

    def commit(self, staged: Path, step: int) -> str:
        check_step(step)
        _fsync_tree(staged)
        # Saving the same step twice (e.g. right after a resume, or two processes at once) gets a
        # serial suffix rather than replacing a checkpoint `latest` may point at; a name another
        # process took between the look and the rename is passed over the same way.
        serial = 0
        while True:
            name = f"ckpt-{step}" if serial == 0 else f"ckpt-{step}.{serial}"
            target = self.root / name
            serial += 1
            if os.path.lexists(target):
                continue
            try:
                os.rename(staged, target)
            except OSError as exc:
                if exc.errno in _TAKEN:
                    continue
                raise
            break
        _fsync_dir(self.root)
        return name

    def discard(self, staged: Path) -> None:
        shutil.rmtree(staged, ignore_errors=True)

    def read_latest(self) -> str | None:
        try:
            name = (self.root / POINTER).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return name or None

    def write_latest(self, name: str) -> None:
        tmp = staging.room(self.root) / f"{POINTER}-{secrets.token_hex(4)}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(name + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.root / POINTER)
        _fsync_dir(self.root)

    def update_latest(self, choose: Choose) -> str | None:
        """Point `latest` at what `choose(current, names)` picks (None: leave it), with no
        other process's move between the read and the write; what `latest` names after."""
        self.root.mkdir(parents=True, exist_ok=True)
        with staging.PointerLock(self.root):
            current = self.read_latest()
            chosen = choose(current, self.names())
            if chosen is None or chosen == current:
                return current
            self.write_latest(chosen)
            return chosen

    def names(self) -> list[str]:
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        return [e.name for e in entries if parse_name(e.name) is not None and e.is_dir()]

    def delete(self, name: str) -> None:
        if parse_name(name) is None:
            raise ValueError(f"not a checkpoint name: {name!r}")
        # Rename first (atomic), then delete: a kill mid-delete leaves a dead process's room that
        # a later sweep removes, never a half-empty "committed" checkpoint.
        doomed = staging.room(self.root) / f"deleting-{secrets.token_hex(4)}"
        try:
            os.rename(self.root / name, doomed)
        except FileNotFoundError:
            return
        shutil.rmtree(doomed, ignore_errors=True)

    def fetch(self, ref: str) -> Path | None:
        path = Path(ref)
        if not path.is_absolute() and len(path.parts) == 1:
            path = self.root / path
        # Only committed names count: a staging dir or any other folder is not
        # a checkpoint, however it got into GQA_RESUME_FROM; nor is an empty one,
        # which has nothing to resume from
        if parse_name(path.name) is None or not path.is_dir():
            return None
        try:
            with os.scandir(path) as files:
                if next(files, None) is None:
                    return None
        except OSError:
            return None
        return path


def _fsync_tree(root: Path) -> None:
    # Data must be on disk before the rename makes it visible, or a power
    # loss could leave a committed checkpoint with empty files.
    for dirpath, _dirnames, filenames in os.walk(root):
        for filename in filenames:
            path = os.path.join(dirpath, filename)
            if os.path.islink(path):
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
