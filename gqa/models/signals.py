"""Slurm's --signal=[B:]SIG[@seconds]: a signal sent to the job that many
seconds before its wall time ends (default 60), to the batch shell only with
`B:`, else to every process of the job. Kept as its canonical text."""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass

from .errors import SpecError

DEFAULT_BEFORE = 60        # Slurm's default when @seconds is left out
MAX_BEFORE = 65535         # Slurm's own ceiling
# what a job may be warned with: never one it cannot catch, never one that stops it
_REFUSED = {"KILL", "STOP"}


@dataclass(frozen=True)
class WarningSignal:
    name: str              # without SIG: USR1
    before: int            # seconds before the wall time ends
    batch_only: bool       # B: the batch shell alone, not the steps it started

    @property
    def number(self) -> int:
        return int(getattr(_signal, "SIG" + self.name))

    def text(self) -> str:
        return f"{'B:' if self.batch_only else ''}{self.name}@{self.before}"


def warning_signal(text: str) -> WarningSignal:
    body = str(text).strip()
    batch_only = body.upper().startswith("B:")
    if batch_only:
        body = body[2:]
    name, at, before_text = body.partition("@")
    name = name.strip().upper().removeprefix("SIG")
    if name.isdigit():
        try:
            name = _signal.Signals(int(name)).name.removeprefix("SIG")
        except ValueError:
            raise SpecError(f"--signal {text!r}: {name} is not a signal number") from None
    if not name or not hasattr(_signal, "SIG" + name) or name in _REFUSED or name.startswith("_"):
        raise SpecError(f"--signal {text!r}: use [B:]SIG[@seconds], e.g. USR1@90 or B:TERM@300 "
                        "(not KILL or STOP)")
    if at:
        if not before_text.strip().isdigit():
            raise SpecError(f"--signal {text!r}: the seconds after @ must be a whole number")
        before = int(before_text)
    else:
        before = DEFAULT_BEFORE
    if not 0 <= before <= MAX_BEFORE:
        raise SpecError(f"--signal {text!r}: at most {MAX_BEFORE} seconds before the limit")
    return WarningSignal(name, before, batch_only)
