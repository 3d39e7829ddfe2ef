"""A stop signal for the commands that run until stopped: a flag, a wake-up and a
callback, never an exception, and the handlers found are put back."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cli.stop_signals import stop_on_signals

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_requests_a_stop_wakes_the_wait_and_tells_without_raising(signum):
    told = []
    before = signal.getsignal(signum)
    with stop_on_signals() as stop:
        stop.tell(lambda: told.append("stop"))
        assert not stop.requested
        started = time.monotonic()
        assert stop.wait(0.05) == [] and time.monotonic() - started >= 0.04   # nothing came: the whole wait
        os.kill(os.getpid(), signum)
        started = time.monotonic()
        assert stop.wait(30) == []                       # woken at once, not after 30 s
        assert time.monotonic() - started < 5
        assert stop.requested and told == ["stop"]
        late = []
        stop.tell(lambda: late.append("stop"))          # asked after the stop came: told at once
        assert late == ["stop"]
    assert signal.getsignal(signum) is before


def test_the_wait_hands_back_the_files_that_became_readable():
    read, write = os.pipe()
    try:
        with stop_on_signals() as stop:
            assert stop.wait(0.01, (read,)) == []
            os.write(write, b"q")
            assert stop.wait(5, (read,)) == [read]
    finally:
        os.close(read)
        os.close(write)


# Why a flag and not a KeyboardInterrupt: one raised while Python runs a string of code (a dataclass
# being made, at any import) makes CPython end the process with SIGINT even after the script caught it.
# Python's own handler is put back first: a shell starts a background job with SIGINT ignored, and a
# Python started so never raises KeyboardInterrupt at all.
CAUGHT = """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
try:
    exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(100000): pass")
except KeyboardInterrupt:
    pass
print("exiting", flush=True)
"""
FLAGGED = """
from cli.stop_signals import stop_on_signals
with stop_on_signals() as stop:
    exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(100000): pass")
    assert stop.requested
print("exiting", flush=True)
"""


@pytest.mark.parametrize("script, code", [(CAUGHT, -signal.SIGINT), (FLAGGED, 0)], ids=["caught", "flagged"])
def test_a_stop_landing_in_code_made_from_a_string_still_exits_0(script, code):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout == "exiting\n", done.stderr
    assert done.returncode == code
