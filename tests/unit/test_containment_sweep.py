"""The /proc sweep that kills a cell's processes where no cgroup holds them,
with `os.kill` recorded instead of sent: what it signals, and in which order."""

import os
import signal

from gqa.adapters.local.containment import processes


def test_every_process_found_is_stopped_before_any_is_killed(monkeypatch):
    """A shell that `wait`s for its children would end with status 0 if its
    children died before it: the job would look finished rather than killed."""
    sent: list[tuple[int, int]] = []
    looks = iter([{300: 100, 200: 100, 100: 100}, {}, {}])     # children first, as the walk finds them
    monkeypatch.setattr(processes.os, "kill", lambda pid, signum: sent.append((pid, signum)))
    monkeypatch.setattr(processes.os, "waitpid", lambda pid, flags: (0, 0))

    processes._sweep(lambda: dict(next(looks)))

    stops = [i for i, (_, signum) in enumerate(sent) if signum == signal.SIGSTOP]
    kills = [i for i, (_, signum) in enumerate(sent) if signum == signal.SIGKILL]
    assert {sent[i][0] for i in stops} == {sent[i][0] for i in kills} == {100, 200, 300}
    assert max(stops) < min(kills), sent


def test_the_sweep_never_signals_itself(monkeypatch):
    sent: list[int] = []
    looks = iter([{os.getpid(): 1, 7: 7}, {}, {}])
    monkeypatch.setattr(processes.os, "kill", lambda pid, signum: sent.append(pid))
    monkeypatch.setattr(processes.os, "waitpid", lambda pid, flags: (0, 0))

    processes._sweep(lambda: dict(next(looks)))

    assert os.getpid() not in sent and 7 in sent
