"""`gqa top` in a real terminal: the command runs on a pseudo-terminal of
80x24 against a real daemon, and pyte plays the screen it draws on. It must
show the GPUs and their job, the queue's head with reasons and the teams,
redraw when a job is submitted after it started, and on `q`, Ctrl-C or SIGTERM give
the terminal back (the alternate screen left, the cursor shown) and exit 0."""

import os
import signal
import sys
import time

from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")
pyte = pytest.importorskip("pyte")

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

COLUMNS, LINES = 80, 24
LEAVE_ALTERNATE_SCREEN, SHOW_CURSOR = "\x1b[?1049l", "\x1b[?25h"


class Terminal:
    """`gqa top` on a pty, its output fed to a pyte screen as it comes."""

    def __init__(self, queue, *args: str, lines: int = LINES):
        self.screen = pyte.Screen(COLUMNS, lines)
        self.stream = pyte.Stream(self.screen)
        self.raw = ""
        # the pty's size is the terminal's: LINES or COLUMNS inherited (pytest-xdist's workers set
        # 24 and 80) would override it, as they do for a user who exports them
        env = {k: v for k, v in queue.env.items() if k not in ("LINES", "COLUMNS")}
        self.child = pexpect.spawn(sys.executable, ["-m", "cli.main", "top", *args], env=env,
                                   cwd=str(queue.home), dimensions=(lines, COLUMNS), encoding="utf-8",
                                   codec_errors="replace", timeout=10)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def pump(self, seconds: float = 0.1) -> None:
        try:
            chunk = self.child.read_nonblocking(65536, timeout=seconds)
        except pexpect.TIMEOUT:
            return
        except pexpect.EOF:
            return
        self.raw += chunk
        self.stream.feed(chunk)

    def wait_for(self, *texts: str, timeout: float = 10.0) -> str:
        return self.wait_until(lambda screen: all(t in screen for t in texts), f"{texts}", timeout=timeout)

    def wait_until(self, shows, what: str, timeout: float = 10.0) -> str:
        """The screen once `shows(screen)`: a frame may be read half drawn, so what a test asserts
        of a whole frame it waits for."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump()
            if shows(self.text()):
                return self.text()
        raise AssertionError(f"{what} never showed; the screen:\n{self.text()}")

    def ended(self, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            self.pump()
        self.pump()
        self.child.close()
        return self.child.exitstatus


@pytest.fixture
def busy(make_queue):
    """2 GPUs: a 2-GPU training job runs, two more wait for GPUs."""
    queue = make_queue(gpus=2)
    [train] = queue.submit(["sleep", "60"], name="train", team="vision", resources={"gpus": 2})
    # running before the others come: a pass that saw all three would start the high-priority
    # 1-GPU job first, and the 2-GPU one would wait for it (a busy machine's daemon may see them so)
    queue.wait(train, ("RUNNING",))
    queue.submit(["sleep", "60"], name="tune", team="vision", resources={"gpus": 1})
    queue.submit(["sleep", "60"], name="embed", team="nlp", resources={"gpus": 1}, priority="high")
    return queue, train


@pytest.mark.slow
def test_top_draws_the_queue_redraws_it_and_gives_the_terminal_back_on_q(busy):
    queue, train = busy
    term = Terminal(queue, "--interval", "0.3")
    screen = term.wait_for("GPUs  2 of 2 busy", "pending  2", "needs 1 GPU, 0 free", "teams", "vision", "nlp")
    gpu_lines = [line for line in screen.splitlines() if line.lstrip().startswith(("0  ", "1  "))]
    assert len(gpu_lines) >= 2 and all(f" {train} " in line and "train" in line for line in gpu_lines[:2])
    assert screen.index("embed") < screen.index("tune")         # high priority first
    assert len(screen.splitlines()) <= LINES and all(len(line) <= COLUMNS for line in screen.splitlines())

    [late] = queue.submit(["sleep", "60"], name="late-arrival", resources={"gpus": 1})
    term.wait_for("pending  3", "late-arrival")

    term.child.send("q")
    assert term.ended() == 0
    tail = term.raw[term.raw.rindex(LEAVE_ALTERNATE_SCREEN):]    # the alternate screen left, last
    assert SHOW_CURSOR in term.raw[term.raw.rindex("\x1b[?25l"):]  # the cursor shown after it was hidden
    assert "Traceback" not in term.raw and tail


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_quits_cleanly_too(busy, signum):
    queue, _ = busy
    term = Terminal(queue, "--interval", "0.3")
    term.wait_for("GPUs  2 of 2 busy")
    term.child.kill(signum)
    code = term.ended()
    assert code == 0, f"exit {code}, signal {term.child.signalstatus}; the last output: {term.raw[-1500:]!r}"
    assert LEAVE_ALTERNATE_SCREEN in term.raw and "Traceback" not in term.raw
    assert SHOW_CURSOR in term.raw[term.raw.rindex("\x1b[?25l"):]


def test_a_backend_that_fails_is_shown_on_the_frame_and_read_again(tmp_path):
    """A shared box's queue whose daemon is down: the frame says so; once it answers, the queue shows."""
    from types import SimpleNamespace

    from gqa.adapters.local.system import MARKER
    from tests.cli.test_daemon_backend import RouterDaemon

    (tmp_path / MARKER).write_text("")
    home = SimpleNamespace(home=tmp_path, env=dict(os.environ, GQA_HOME=str(tmp_path), PYTHONPATH=str(ROOT)))
    term = Terminal(home, "--interval", "0.3")
    term.wait_for("! the shared queue daemon at", "retrying every 0.3s")
    daemon = RouterDaemon(tmp_path)
    try:
        screen = term.wait_for("GPUs  0 of 2 busy")
        assert "! " not in screen
        term.child.send("q")
        assert term.ended() == 0
    finally:
        daemon.sock.close()


def test_a_tall_terminal_shows_more_of_the_queue_than_the_default_head(make_queue):
    queue = make_queue(gpus=1)
    [filler] = queue.submit(["sleep", "60"], name="filler")
    queue.wait(filler, ("RUNNING",))
    for n in range(30):
        queue.submit(["true"], name=f"sweep-{n:02d}")
    term = Terminal(queue, "--interval", "5", lines=60)

    def head_of(screen):
        return [line for line in screen.splitlines() if "needs 1 GPU, 0 free" in line]

    # "sweep-29" is also in the latest transitions: a frame read half drawn showed it with 10 of the head
    screen = term.wait_until(lambda s: "pending  30" in s and len(head_of(s)) == 30, "30 jobs in the head")
    head = head_of(screen)
    lines = screen.splitlines()
    pending = lines[next(i for i, line in enumerate(lines) if line.startswith("pending")):
                    next(i for i, line in enumerate(lines) if line.startswith("teams"))]
    # the whole queue fits: no "… N more" under it (the events below may still be cut short)
    assert len(head) == 30 and "sweep-29" in head[-1] and not any(line.startswith("… ") for line in pending)
    term.child.send("q")
    assert term.ended() == 0
