"""`gqa ui` as a real process over a real local queue, read by a real headless
browser (Debian's Chromium): the page shows the jobs once its script's polls
have run, and draws its plots; the server stops cleanly on Ctrl-C, and a port
in use is one line and exit 2."""

import json
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from gqa.reporting.figures import FIGURES

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (`make test` installs it as root "
                                    "with apt-get: apt-get install --no-install-recommends chromium)")


def stopped_queue(make_queue):
    """A queue whose daemon is not running: the page shows it all the same (a home with no
    queue at all is refused: a look never makes one)."""
    from gqa.adapters.local.store import SqliteStore

    q = make_queue(gpus=2, start=False)
    SqliteStore(q.home / "gqa.db").close()
    return q


class Ui:
    """`gqa ui --port 0` started in the queue's home; `url` once it listens."""

    def __init__(self, queue, tmp_path, *args: str):
        self.err_path = tmp_path / f"ui{time.monotonic_ns()}.err"
        self.out_path = tmp_path / f"ui{time.monotonic_ns()}.out"
        with open(self.err_path, "w") as err, open(self.out_path, "w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "cli.main", "ui", *args], env=queue.env,
                                         cwd=str(queue.home), stdout=out, stderr=err)

    @property
    def err(self) -> str:
        return self.err_path.read_text()

    def said(self, timeout: float = 15.0) -> dict:
        """-o json's line on stdout, once it listens."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.out_path.read_text()
            if text.endswith("\n"):
                return json.loads(text)
            assert self.proc.poll() is None, f"gqa ui exited {self.proc.returncode}: {self.err}"
            time.sleep(0.05)
        raise AssertionError(f"gqa ui -o json never said where it listens: {self.err}")

    def url(self, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r"(http://\S+/) \(Ctrl-C", self.err)
            if found:
                return found.group(1)
            assert self.proc.poll() is None, f"gqa ui exited {self.proc.returncode}: {self.err}"
            time.sleep(0.05)
        raise AssertionError(f"gqa ui never said where it listens: {self.err}")

    def interrupt(self, timeout: float = 10.0) -> int:
        self.proc.send_signal(signal.SIGINT)     # what Ctrl-C sends
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def ui(tmp_path):
    started: list[Ui] = []

    def start(queue, *args: str) -> Ui:
        started.append(Ui(queue, tmp_path, *args))
        return started[-1]

    yield start
    for u in started:
        u.kill()


def chromium(url: str, profile, screenshot) -> str:
    """The page's DOM after `--virtual-time-budget` of its timers and fetches, and its screenshot."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--window-size=1280,1600", "--virtual-time-budget=8000",
         "--hide-scrollbars", f"--screenshot={screenshot}", "--dump-dom", url],
        capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def rows(dom: str, table: str) -> list[str]:
    body = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', dom, re.S)
    assert body, f"no table {table} in the page"
    return re.findall(r'<tr data-job="([^"]+)"', body.group(1))


@needs_chromium
@pytest.mark.slow
def test_the_page_shows_the_queue_after_its_polls_and_draws_its_plots(make_queue, ui, tmp_path):
    from PIL import Image

    q = make_queue(gpus=4)
    q.cli("quota", "set", "ml", "--max-gpus", "3", check=True)
    q.cli("quota", "set", "vision", "--budget", "0", check=True)     # unpriced GPUs: its jobs cost nothing
    running = q.submit(["sleep", "60"], resources={"gpus": 2}, team="ml", name="train-a") + \
        q.submit(["sleep", "60"], resources={"gpus": 1}, team="vision", name="eval-b")
    waiting = q.submit(["sleep", "60"], resources={"gpus": 3}, team="ml", name="<b>big-c")   # text, not markup
    q.wait(running, states=("RUNNING",))
    page = ui(q, "--port", "0")
    url = page.url()

    dom = chromium(url, tmp_path / "profile", tmp_path / "page.png")

    assert rows(dom, "running") == running and rows(dom, "pending") == waiting
    assert "&lt;b&gt;big-c" in dom and "<b>" not in dom and "team ml at 2 of 3 GPUs" in dom
    # a budget of $0 with nothing spent reads as gqa cost and gqa top say it
    assert re.search(r"vision</td><td>1</td><td>\$0\.00</td><td>\$0\.00</td><td>0%</td>", dom), dom
    polls = int(re.search(r'id="updated" data-polls="(\d+)"', dom).group(1))
    assert polls >= 2, "the page's script did not poll again"
    loaded = re.findall(r'<img[^>]*data-plot="(\w+)"[^>]*data-loaded="(\d+)x(\d+)"', dom)
    assert sorted(loaded) == sorted((name, "800", "360") for name in FIGURES)

    # the report's figures are drawn: its blue (GPU-hours per team, GPUs allocated per pool, the normal
    # tier's waits) fills bars and lines there, and nothing else on the page has that colour
    image = Image.open(tmp_path / "page.png").convert("RGB")
    counts = {rgb: n for n, rgb in image.getcolors(maxcolors=1 << 22)}
    assert counts.get((0x1f, 0x77, 0xb4), 0) > 3000, "no figure drawn in the screenshot"

    assert page.interrupt() == 0
    assert "stopped" in page.err and "Traceback" not in page.err


@pytest.mark.slow
def test_ctrl_c_stops_it_cleanly_and_a_port_in_use_is_one_line_and_exit_2(make_queue, ui):
    q = stopped_queue(make_queue)
    first = ui(q, "--port", "0", "-o", "json")
    said = first.said()
    port = str(said["port"])
    assert said == {"url": f"http://127.0.0.1:{port}/", "host": "127.0.0.1", "port": int(port),
                    "source": f"the local queue at {q.home}"}
    second = ui(q, "--port", port)
    assert second.proc.wait(30) == 2
    assert second.err == f"gqa: error: port {port} on 127.0.0.1 is in use (another gqa ui?); choose another " \
                         "with --port, or --port 0 for any free one\n"
    assert first.interrupt() == 0
    assert first.err == "gqa ui: stopped\n"


@pytest.mark.slow
def test_ctrl_c_or_sigterm_the_moment_it_says_where_it_listens_is_a_clean_stop(make_queue):
    """A script that reads the address and at once sends Ctrl-C (or SIGTERM) gets exit 0, never click's
    "Aborted!" or death by the signal: from the first word it says about where it listens, a signal is a stop."""
    q = stopped_queue(make_queue)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", "ui", "--host", "0.0.0.0", "--port", "0",
                                 "-o", "json"], env=q.env, cwd=str(q.home), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            said = json.loads(proc.stdout.readline())
            proc.send_signal(signum)             # no pause: inside the window right after the line
            code, err = proc.wait(10), proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        assert said["host"] == "0.0.0.0" and said["port"] > 0
        assert code == 0, err
        assert err.endswith("gqa ui: stopped\n") and "Aborted" not in err and "Traceback" not in err, err


@pytest.mark.slow
def test_serving_beyond_this_machine_warns_that_the_page_has_no_authentication(make_queue, ui):
    q = stopped_queue(make_queue)
    page = ui(q, "--host", "0.0.0.0", "--port", "0")
    page.url()
    assert "warning: the page has no authentication" in page.err
    assert page.interrupt() == 0, page.err
    local = ui(q, "--port", "0")
    local.url()
    assert "warning" not in local.err
    assert local.interrupt() == 0, local.err
