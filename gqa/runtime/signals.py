"""SIGTERM handling: the queue sends SIGTERM, waits a grace period, then SIGKILL.

One handler per process. It either only raises a flag that the training loop
checks at a safe point, or runs a save callback at once; both end with exit
code 143 (128 + SIGTERM). A signal that lands while a checkpoint save is in
progress never interrupts that save: it is acted on right after it.
"""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

EXIT_CODE = 128 + signal.SIGTERM

_active: Preemption | None = None
_save_depth = 0  # saves in progress on the main thread, where handlers run


class Preemption:
    """Handle for an installed SIGTERM handler."""

    def __init__(self, on_preempt: Callable[[], object] | None, exit_code: int) -> None:
        self._on_preempt = on_preempt
        self.exit_code = exit_code
        self._requested = threading.Event()
        self._handling = False
        self._previous: object = None

    @property
    def requested(self) -> bool:
        """True once SIGTERM has arrived: save and call exit() soon."""
        return self._requested.is_set()

    def exit(self) -> NoReturn:
        """Leave with the preemption exit code (143)."""
        sys.stdout.flush()
        sys.stderr.flush()
        sys.exit(self.exit_code)

    def uninstall(self) -> None:
        """Put back the handler that was there before."""
        global _active
        if _active is self:
            # None means a handler not set from Python; the default is closest.
            previous = signal.SIG_DFL if self._previous is None else self._previous
            signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]
            _active = None

    def __enter__(self) -> Preemption:
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._requested.set()
        if self._on_preempt is None or self._handling or _save_depth > 0:
            return  # flag only; a save in progress finishes first (see saving())
        self._act()

    def _act(self) -> NoReturn:
        self._handling = True
        try:
            assert self._on_preempt is not None
            self._on_preempt()
        except Exception:
            # Still leave as preempted: the queue then resumes from the last
            # good checkpoint, which is the best this attempt can offer.
            traceback.print_exc()
        self.exit()


def install_sigterm_handler(
    on_preempt: Callable[[], object] | None = None, *, exit_code: int = EXIT_CODE
) -> Preemption:
    """Handle SIGTERM. Without `on_preempt`, only set `requested`; with it,
    call it (a save) at once and exit. Call from the main thread."""
    global _active
    if _active is not None:
        _active.uninstall()
    preemption = Preemption(on_preempt, exit_code)
    preemption._previous = signal.signal(signal.SIGTERM, preemption._handle)
    _active = preemption
    return preemption


@contextmanager
def saving() -> Iterator[None]:
    """Mark a save in progress: SIGTERM meanwhile only sets the flag. A handler
    with a callback then exits once the save is done (it just saved), or runs
    its callback if the save failed."""
    global _save_depth
    if threading.current_thread() is not threading.main_thread():
        # Handlers run on the main thread, so they cannot cut this save short.
        yield
        return
    _save_depth += 1
    try:
        yield
    except BaseException:
        _save_depth -= 1
        pending = _deferred()
        if pending is not None:
            pending._act()
        raise
    _save_depth -= 1
    pending = _deferred()
    if pending is not None:
        pending.exit()


def _deferred() -> Preemption | None:
    """The handler whose immediate action waited for a save, if any."""
    active = _active
    if (
        _save_depth == 0
        and active is not None
        and active.requested
        and active._on_preempt is not None
        and not active._handling
    ):
        return active
    return None
