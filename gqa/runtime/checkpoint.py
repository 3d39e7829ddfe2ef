"""Atomic checkpoints: save, find the latest good one, load it, prune old ones."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .context import job
from .layout import parse_name
from .signals import Preemption, install_sigterm_handler, saving
from .storage import CheckpointStorage, LocalStorage, open_storage

DATA_FILE = "data"
STATE_FILE = "state.json"

WriteFn = Callable[[Path], object]


class Checkpointer:
    """Save and resume checkpoints.

    With no `dir`, the location and GQA_RESUME_FROM come from the environment
    (`./checkpoints` outside gqa). With an explicit `dir` (or `storage`), only
    an explicit `resume_from` is used.
    """

    def __init__(
        self,
        dir: str | os.PathLike[str] | None = None,
        keep: int = 3,
        *,
        resume_from: str | os.PathLike[str] | None = None,
        storage: CheckpointStorage | None = None,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep must be 1 or more, got {keep}")
        if dir is not None and storage is not None:
            raise ValueError("pass dir or storage, not both")
        if storage is None and dir is None:
            ctx = job()
            location = ctx.checkpoint_dir if ctx.checkpoint_dir is not None else ctx.checkpoint_uri
            assert location is not None
            storage = open_storage(location)
            if resume_from is None:
                resume_from = ctx.resume_from
        elif storage is None:
            storage = LocalStorage(dir)  # type: ignore[arg-type]
        self.storage: CheckpointStorage = storage
        self.keep = keep
        self.resume_from = None if resume_from is None else os.fspath(resume_from)
        self._saved = False
        self._preemption: Preemption | None = None

    def __repr__(self) -> str:
        return f"Checkpointer({self.storage!r}, keep={self.keep})"

    # Reading

    def latest(self) -> Path | None:
        """Directory of the latest good checkpoint, or None if there is none.

        Until this process saves, a valid GQA_RESUME_FROM wins; after that, the
        `latest` pointer does. A missing or dangling pointer falls back to the
        newest committed checkpoint (every committed one is complete).
        """
        if self.resume_from and not self._saved:
            path = self.storage.fetch(self.resume_from)
            if path is not None:
                return path
            warnings.warn(
                f"ignoring resume_from {self.resume_from!r}: not a checkpoint",
                RuntimeWarning,
                stacklevel=2,
            )
        name = self.storage.read_latest()
        if name is not None:
            path = self.storage.fetch(name)
            if path is not None:
                return path
        for name in sorted(self.storage.names(), key=_order, reverse=True):
            path = self.storage.fetch(name)
            if path is not None:
                return path
        return None

    def load(self) -> bytes | None:
        """Bytes saved with save(bytes) in the latest checkpoint, or None.

        FileNotFoundError if that checkpoint was written another way."""
        path = self.latest()
        return None if path is None else (path / DATA_FILE).read_bytes()

    def load_state(self) -> dict[str, Any] | None:
        """The dict saved with save_state() in the latest checkpoint, or None.

        FileNotFoundError if that checkpoint was written another way."""
        path = self.latest()
        if path is None:
            return None
        return json.loads((path / STATE_FILE).read_text(encoding="utf-8"))

    # Writing

    def save(self, data: bytes | WriteFn, step: int) -> Path:
        """Save a checkpoint for `step` atomically and point `latest` at it.

        `data` is bytes, or a function that writes files into the directory it
        is given. A crash at any moment leaves `latest` on a complete
        checkpoint. Returns the new checkpoint's directory.
        """
        with saving():
            staged = self.storage.stage()
            try:
                if isinstance(data, (bytes, bytearray, memoryview)):
                    (staged / DATA_FILE).write_bytes(data)
                else:
                    data(staged)
                name = self.storage.commit(staged, step)
            except BaseException:
                self.storage.discard(staged)
                raise
            self.storage.write_latest(name)
            self._saved = True
            self.prune()
        path = self.storage.fetch(name)
        assert path is not None
        return path

    def save_state(self, state: Mapping[str, Any], step: int | None = None) -> Path:
        """Save a JSON-able dict; `step` defaults to state["step"]."""
        if step is None:
            step = state.get("step")
            if not isinstance(step, int):
                raise ValueError("pass step= or put an integer 'step' in the state")
        # Serialise before staging, so a bad value fails without touching disk.
        text = json.dumps(dict(state), indent=2, sort_keys=True)
        return self.save(lambda d: (d / STATE_FILE).write_text(text, encoding="utf-8"), step=step)

    def prune(self) -> list[str]:
        """Delete all but the newest `keep` checkpoints, never the one `latest`
        points at. Returns the names deleted."""
        pinned = self.storage.read_latest()
        names = sorted(self.storage.names(), key=_order, reverse=True)
        doomed = [n for n in names[self.keep :] if n != pinned]
        for name in doomed:
            self.storage.delete(name)
        return doomed

    # Preemption

    def on_preempt(self, callback: Callable[[], object] | None = None) -> Preemption:
        """Install the SIGTERM handler (see install_sigterm_handler)."""
        self._preemption = install_sigterm_handler(callback)
        return self._preemption

    @property
    def preempted(self) -> bool:
        """True once SIGTERM arrived after on_preempt(): save, then exit 143."""
        return self._preemption is not None and self._preemption.requested


def _order(name: str) -> tuple[int, int]:
    key = parse_name(name)
    assert key is not None
    return key
