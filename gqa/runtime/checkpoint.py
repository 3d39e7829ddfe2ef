"""Atomic checkpoints: save, find the newest complete one, load it, prune old ones.

Which checkpoint a job resumes from is one rule (`resume_order`): the newest
by step, then serial, of the committed checkpoints in its storage, the
`latest` pointer and `resume_from`. GQA_RESUME_FROM is set once per attempt,
so it only says where the attempt started: a checkpoint saved since, by this
process or another of the same attempt (a restarted worker, the script's next
stage), is newer and wins. `latest` never moves to an older step than the
newest; `rewind()` is how a job goes back on purpose.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .context import job
from .layout import Choose, check_step, parse_name
from .signals import Preemption, install_sigterm_handler, saving
from .storage import CheckpointStorage, GuardedPointer, LocalStorage, open_storage

DATA_FILE = "data"
STATE_FILE = "state.json"

WriteFn = Callable[[Path], object]


class Checkpointer:
    """Save and resume checkpoints.

    With no `dir`, the location and GQA_RESUME_FROM come from the environment
    (`./checkpoints` outside gqa). With an explicit `dir` (or `storage`), only
    an explicit `resume_from` is used. `resume_from` (a name, a path, or a URI
    the storage can fetch) is where the attempt started: it is loaded while
    the storage holds nothing newer.
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
        self._warned_older = False
        self._preemption: Preemption | None = None

    def __repr__(self) -> str:
        return f"Checkpointer({self.storage!r}, keep={self.keep})"

    # Reading

    def latest(self) -> Path | None:
        """Directory of the newest complete checkpoint, or None if there is none.

        Tried newest first (`resume_order`): the storage's committed
        checkpoints, its `latest` pointer and `resume_from`. A save cut short
        is never committed, so never listed; a candidate that cannot be
        fetched (deleted meanwhile) is passed over for the next one.
        """
        resume = self.resume_from or None   # "" as the queue sets it: no checkpoint yet
        if resume is not None and _key_of(resume) is None:
            _warn_not_a_checkpoint(resume)
            resume = None
        for ref in resume_order(self.storage.names(), self.storage.read_latest(), resume):
            path = self.storage.fetch(ref)
            if path is not None:
                return path
            if ref == resume:
                _warn_not_a_checkpoint(resume)
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
        checkpoint. A step older than the newest checkpoint is saved but
        leaves `latest` (and what a resume loads) on the newest, with a
        warning; `rewind()` goes back on purpose. Returns the new checkpoint's
        directory.
        """
        check_step(step)
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
            seen: list[str] = []

            def newest_of(current: str | None, names: list[str]) -> str | None:
                # the newest committed, this save on a tie; also repairs a pointer left behind by a
                # crash, or by an earlier gqa that let it move back
                seen[:] = [name, *(n for n in names if n != name)]
                newest = max(seen, key=_order)
                return None if newest == current else newest

            newest = point_at_newest(self.storage, newest_of)
            if newest != name:
                self._warn_older(name, newest, step)
            # the checkpoint just saved survives this prune even if older than `keep` allows,
            # so the path returned exists
            self._prune(seen, pinned={newest, name})
        path = self.storage.fetch(name)
        assert path is not None
        return path

    def save_state(self, state: Mapping[str, Any], step: int | None = None) -> Path:
        """Save a JSON-able dict; `step` defaults to state["step"]."""
        if step is None:
            step = state.get("step")
            if isinstance(step, bool) or not isinstance(step, int):
                raise ValueError("pass step= or put an integer 'step' in the state")
        # Serialise before staging, so a bad value fails without touching disk.
        odd = _key_not_text(state)
        if odd is not None:
            raise TypeError(f"state keys must be strings, as JSON has them: {odd[0]!r} ({type(odd[0]).__name__}) "
                            "would come back as a string or not at all")
        text = json.dumps(dict(state), indent=2, sort_keys=True)
        return self.save(lambda d: (d / STATE_FILE).write_text(text, encoding="utf-8"), step=step)

    def prune(self) -> list[str]:
        """Delete all but the newest `keep` checkpoints, never the one `latest`
        points at. Returns the names deleted."""
        return self._prune(self.storage.names(), pinned={self.storage.read_latest()})

    def _prune(self, names: Iterable[str], pinned: set[str | None]) -> list[str]:
        ordered = sorted(set(names), key=_order, reverse=True)
        doomed = [n for n in ordered[self.keep :] if n not in pinned]
        for name in doomed:
            self.storage.delete(name)
        return doomed

    def rewind(self, step: int) -> list[str]:
        """Go back to `step` on purpose: delete every checkpoint of a later
        step and point `latest` at the newest one left, so this and every
        later resume (other processes, later attempts) starts there.

        Deleted oldest first: a kill part way leaves the newest in place, and
        a resume where the job was, as if it had not begun. Only this
        storage is touched; a `resume_from` elsewhere (a copy fetched from
        another store) that is newer than `step` still wins in other
        processes. Returns the names deleted.
        """
        if step < 0:
            raise ValueError(f"step must be 0 or more, got {step}")
        names = sorted(self.storage.names(), key=_order)
        doomed = [n for n in names if _order(n)[0] > step]
        with saving():
            for name in doomed:
                self.storage.delete(name)
            left = [n for n in names if n not in doomed]
            if left:
                self.storage.write_latest(left[-1])   # back on purpose: no newest-wins here
        key = None if self.resume_from is None else _key_of(self.resume_from)
        if key is not None and key[0] > step:
            self.resume_from = None   # where this attempt started is past the point gone back to
        return doomed

    def _warn_older(self, name: str, newest: str, step: int) -> None:
        if self._warned_older:   # once: a loop saving every step would repeat it each time
            return
        self._warned_older = True
        warnings.warn(
            f"saved {name}, older than {newest}: `latest` stays on {newest} "
            f"(rewind({step}) goes back to {name} on purpose)",
            RuntimeWarning,
            stacklevel=3,
        )

    # Preemption

    def on_preempt(self, callback: Callable[[], object] | None = None) -> Preemption:
        """Install the SIGTERM handler (see install_sigterm_handler)."""
        self._preemption = install_sigterm_handler(callback)
        return self._preemption

    @property
    def preempted(self) -> bool:
        """True once SIGTERM arrived after on_preempt(): save, then exit 143."""
        return self._preemption is not None and self._preemption.requested


def resume_order(names: Iterable[str], pointer: str | None, resume_from: str | None) -> list[str]:
    """The candidates a resume tries, newest first: the storage's committed
    checkpoint `names`, its `latest` `pointer` and `resume_from`, ordered by
    (step, serial); on a tie the storage's own copy comes first. Refs that
    name no checkpoint are left out."""
    keyed: dict[str, tuple[int, int, int]] = {}
    for rank, refs in enumerate(([*names, pointer], [resume_from])):
        for ref in refs:
            key = None if ref is None else _key_of(ref)
            if ref is not None and key is not None and ref not in keyed:
                keyed[ref] = (key[0], key[1], -rank)
    return sorted(keyed, key=keyed.__getitem__, reverse=True)


def point_at_newest(storage: CheckpointStorage, choose: Choose) -> str:
    """Move `latest` as `choose(current, names)` says (None: it is right) and return what it
    names. A storage that cannot guard the move (GuardedPointer) gets it re-checked after each
    write: two processes saving at once may each write, in either order, and the one whose
    write came last then sees whether a newer checkpoint was committed meanwhile."""
    if isinstance(storage, GuardedPointer):
        moved = storage.update_latest(choose)
        assert moved is not None
        return moved
    while True:
        current = storage.read_latest()
        chosen = choose(current, storage.names())
        if chosen is None:
            assert current is not None
            return current
        storage.write_latest(chosen)


def _key_not_text(value: object, depth: int = 0) -> tuple[object] | None:
    """The first dict key in `value` that is not a string (JSON's keys are), in a 1-tuple
    (the key may be None); None where every key is a string."""
    if depth > 100:
        return None   # json.dumps says what is wrong with a structure this deep
    items: Iterable[object] = ()
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                return (key,)
        items = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    for item in items:
        found = _key_not_text(item, depth + 1)
        if found is not None:
            return found
    return None


def _key_of(ref: str) -> tuple[int, int] | None:
    """(step, serial) of a checkpoint name, path or URI; None if it names none."""
    return parse_name(ref.rstrip("/").rsplit("/", 1)[-1])


def _warn_not_a_checkpoint(ref: str) -> None:
    warnings.warn(f"ignoring resume_from {ref!r}: not a checkpoint", RuntimeWarning, stacklevel=3)


def _order(name: str) -> tuple[int, int]:
    key = parse_name(name)
    assert key is not None
    return key
