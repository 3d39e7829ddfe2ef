"""What the daemon tells of its own failing steps: a step told only once it has failed a while,
forgotten once it works, and the note the CLI prints from it."""

from __future__ import annotations

from daemon.loop import Retry, Troubles
from cli.output import tell_troubles


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_step_is_told_once_it_has_failed_a_while_and_forgotten_once_it_works():
    clock = Clock()
    troubles = Troubles(clock)
    settle = Retry("recording exits", troubles=troubles)
    settle.failed(OSError(28, "No space left on device"), 0.0)
    clock.now += Troubles.SHOWN_AFTER - 1
    assert troubles.told() == []                       # a lock held a moment is no trouble
    settle.failed(OSError(28, "No space left on device"), 0.0)
    clock.now += 2
    assert troubles.told() == [{"step": "recording exits", "since": 1000.0,
                                "error": "OSError: [Errno 28] No space left on device"}]   # since the first
    settle.succeeded()
    assert troubles.told() == []


class Backend:
    def __init__(self, troubles):
        self._troubles = troubles

    def troubles(self):
        return self._troubles


def test_the_cli_says_what_fails_how_long_and_what_waits(capsys, monkeypatch):
    monkeypatch.setattr("cli.output.now", lambda: 1125.0)
    assert tell_troubles(Backend([{"step": "recording exits", "since": 1000.0, "error": "the disk is full"}]))
    assert capsys.readouterr().err == (
        "note: the queue daemon has failed at recording exits for 2m05s (the disk is full): jobs start, and "
        "their ends are recorded, only once it works again\n")
    assert not tell_troubles(Backend([])) and capsys.readouterr().err == ""
    assert not tell_troubles(object())                 # a backend with no daemon to ask (AWS)
