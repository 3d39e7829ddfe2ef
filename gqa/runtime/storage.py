"""Where checkpoints live. A checkpoint is a directory of files named ckpt-<step>.

`CheckpointStorage` is the seam: `LocalStorage` is a directory on a local or
shared filesystem; `gqa.runtime.s3.S3Storage` is an S3 prefix
(GQA_CHECKPOINT_URI=s3://...), behind the same Protocol.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Protocol

from .layout import POINTER, parse_name

STAGING_PREFIX = ".tmp-"
# Marks staging entries made by this process, so a sweep removes only the
# leftovers of earlier, killed attempts.
_PROCESS_TOKEN = secrets.token_hex(4)


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
    file replaced with os.replace, so both steps are atomic on POSIX."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._swept = False

    def __repr__(self) -> str:
        return f"LocalStorage({str(self.root)!r})"

    def stage(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        if not self._swept:
            self._sweep()
            self._swept = True
        # Inside root, so the commit is a rename within one filesystem.
        staged = self.root / f"{STAGING_PREFIX}{_PROCESS_TOKEN}-{secrets.token_hex(4)}"
        staged.mkdir()
        return staged

    def commit(self, staged: Path, step: int) -> str:
        if step < 0:
            raise ValueError(f"step must be 0 or more, got {step}")
        _fsync_tree(staged)
        # Saving the same step twice (e.g. right after a resume) gets a serial
        # suffix rather than replacing a checkpoint `latest` may point at.
        serial = 0
        while True:
            name = f"ckpt-{step}" if serial == 0 else f"ckpt-{step}.{serial}"
            target = self.root / name
            if not os.path.lexists(target):
                break
            serial += 1
        os.rename(staged, target)
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
        tmp = self.root / f"{STAGING_PREFIX}{_PROCESS_TOKEN}-{POINTER}-{secrets.token_hex(4)}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(name + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.root / POINTER)
        _fsync_dir(self.root)

    def names(self) -> list[str]:
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        return [e.name for e in entries if parse_name(e.name) is not None and e.is_dir()]

    def delete(self, name: str) -> None:
        if parse_name(name) is None:
            raise ValueError(f"not a checkpoint name: {name!r}")
        # Rename first (atomic), then delete: a kill mid-delete leaves a staging
        # leftover that the next sweep removes, never a half-empty "committed" checkpoint.
        doomed = self.root / f"{STAGING_PREFIX}{_PROCESS_TOKEN}-deleting-{secrets.token_hex(4)}"
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
        # a checkpoint, however it got into GQA_RESUME_FROM.
        if parse_name(path.name) is None or not path.is_dir():
            return None
        return path

    def _sweep(self) -> None:
        """Remove staging leftovers of saves that were killed half way."""
        mine = f"{STAGING_PREFIX}{_PROCESS_TOKEN}-"
        for entry in os.scandir(self.root):
            if entry.name.startswith(STAGING_PREFIX) and not entry.name.startswith(mine):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    Path(entry.path).unlink(missing_ok=True)


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
