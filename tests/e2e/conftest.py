"""A real daemon in a temporary GQA_HOME, real child processes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class LocalQueue:
    """Drives one daemon: submit through the services or the real CLI, wait, inspect."""

    def __init__(self, home: Path, gpus: int, grace: float, types: tuple[str, ...] = ()):
        self.home, self.gpus, self.grace = home, gpus, grace
        self.types = types      # the GPUs' types in order; "virtual" for the rest
        self.env = dict(os.environ, GQA_HOME=str(home), PYTHONPATH=str(ROOT))
        self._backend = None
        self.pid = None

    # -- daemon ------------------------------------------------------------------
    def start(self, options: tuple[str, ...] = ()) -> int:
        """`options`: more of the daemon's arguments (e.g. --notices-file PATH)."""
        from cli.local import start_background
        from gqa.adapters.local.paths import StatePaths

        types = list(self.types) + ["virtual"] * self.gpus
        inventory = {"gpus": [{"index": i, "type": types[i]} for i in range(self.gpus)], "cpus": None,
                     "memory": None}
        old = os.environ.get("GQA_HOME")
        os.environ["GQA_HOME"] = str(self.home)
        try:
            self.pid = start_background(StatePaths(self.home), inventory, self.grace, options)
        finally:
            _restore("GQA_HOME", old)
        return self.pid

    def stop(self, keep_jobs: bool = False) -> None:
        from cli.local import stop_daemon
        from gqa.adapters.local.paths import StatePaths

        assert stop_daemon(StatePaths(self.home), keep_jobs=keep_jobs, timeout=30)

    def crash(self) -> None:
        """kill -9 the daemon, as a crash or an OOM kill would."""
        os.kill(self.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.02)

    # -- jobs ----------------------------------------------------------------------
    @property
    def backend(self):
        if self._backend is None:
            from cli.backend import LocalBackend

            self._backend = LocalBackend(self.home)
        return self._backend

    def submit(self, command: list[str], **spec) -> list[str]:
        from gqa.models.loader import validate

        raw = {"command": command, "workdir": str(self.home)} | spec
        return [j.id for j in self.backend.submitter().submit(validate(raw))]

    def job(self, job_id: str):
        return self.backend.store.get(job_id)

    def wait(self, ids, states=("SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"), timeout: float = 20.0):
        ids = [ids] if isinstance(ids, str) else list(ids)
        deadline = time.monotonic() + timeout
        while True:
            jobs = [self.job(i) for i in ids]
            if all(j.state.value in states for j in jobs):
                return jobs if len(jobs) > 1 else jobs[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {states}: " +
                                     ", ".join(f"{j.id}={j.state.value} ({j.reason})" for j in jobs))
            time.sleep(0.05)

    def wait_log(self, job_id: str, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.log(job_id)
            if text in log:
                return log
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never appeared in the log of {job_id}:\n{self.log(job_id)}")

    def log(self, job_id: str) -> str:
        path = self.home / "logs" / f"{job_id}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def cli(self, *args: str, check: bool = False, input: str | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "cli.main", *args], env=self.env, cwd=str(self.home),
                              capture_output=True, text=True, timeout=60, input=input)
        if check and proc.returncode != 0:
            raise AssertionError(f"gqa {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return proc

    def cli_json(self, *args: str):
        return json.loads(self.cli(*args, "-o", "json", check=True).stdout)


def _alive(pid: int) -> bool:
    from gqa.adapters.local.processes import process_token

    return process_token(pid) is not None


def _restore(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def pid_alive(pid: int) -> bool:
    return _alive(pid)


@pytest.fixture
def make_queue(tmp_path):
    queues: list[LocalQueue] = []

    def make(gpus: int = 4, grace: float = 2.0, start: bool = True, types: tuple[str, ...] = ()) -> LocalQueue:
        q = LocalQueue(tmp_path / f"gqa{len(queues)}", gpus, grace, types)
        q.home.mkdir()
        queues.append(q)
        if start:
            q.start()
        return q

    yield make
    for q in queues:
        from cli.local import stop_daemon
        from gqa.adapters.local.paths import StatePaths

        stop_daemon(StatePaths(q.home), timeout=30)


@pytest.fixture
def queue(make_queue) -> LocalQueue:
    return make_queue()


def next_end(executor, timeout: float = 15.0):
    """The Exit collect() reports for the next attempt of `executor` to end (an AssertionError
    if none ends within `timeout`)."""
    import select

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for fd in select.select(executor.fds(), [], [], 0.05)[0]:
            out = executor.collect(fd)
            if out is not None:
                return out
    raise AssertionError("the attempt never ended")
