"""The chaos harness: a real daemon in its own GQA_HOME, killed, starved and
locked out while real jobs run, and the four invariants checked once the
queue has drained: nothing lost, nothing run twice, nothing stuck, no
traceback anywhere.

Every process a test starts (daemons, jobs, whatever jobs leave behind)
carries CHAOS_TAG=<uuid> in its environment; teardown stops the daemons and
kills every process still carrying the tag, so a failed test leaves nothing
running. Mounts and users are undone by their own fixtures."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.chaos import job as chaos_job


ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("job.py")
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "REJECTED")
UNFINISHED = ("SUBMITTED", "QUEUED", "STARTING", "RUNNING", "RETRY_WAIT", "HELD", "PENDING_APPROVAL")
FIGURES: list[dict] = []   # one row per scenario, moved to its test's report (conftest.py)
FIGURE_PROPERTY = "chaos figures"   # the name of those rows among the report's user_properties


def gqa_executable() -> list[str]:
    """The light client as users run it: the venv's `gqa` script, else the same entry point."""
    script = Path(sys.executable).with_name("gqa")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from cli.client import run; sys.argv[0] = 'gqa'; run()"]


def one_line_error(proc: subprocess.CompletedProcess) -> bool:
    """A refusal as the CLI promises it: non-zero, one `gqa: error:` line (a "busy; retrying" note, or
    one that it waits for a slow daemon, may precede)."""
    notes = ("is busy; retrying", "gqa: waiting for the queue daemon")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not any(n in ln for n in notes)]
    return proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("gqa: error: ")


@dataclass
class Figures:
    scenario: str
    jobs: int = 0
    kills: int = 0
    lost: int = 0
    twice: int = 0
    stuck: int = 0
    tracebacks: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class Runs:
    """The runs file, read."""
    starts: dict[str, list[tuple[int, int, float]]]   # job -> [(attempt, pid, time)]
    ends: dict[str, list[tuple[int, float]]]           # job -> [(attempt, time)]
    overlaps: list[str]
    census: dict[str, int]

    @classmethod
    def read(cls, path: Path) -> "Runs":
        starts, ends, overlaps, census = defaultdict(list), defaultdict(list), [], {}
        text = path.read_text() if path.exists() else ""
        for line in text.splitlines():
            parts = line.split()
            if parts[0] == "start":
                starts[parts[1]].append((int(parts[2]), int(parts[3]), float(parts[5])))
            elif parts[0] == "end":
                ends[parts[1]].append((int(parts[2]), float(parts[3])))
            elif parts[0] == "overlap":
                overlaps.append(line)
            elif parts[0] == "census":
                census[parts[1]] = int(parts[2])
        return cls(dict(starts), dict(ends), overlaps, census)


class Chaos:
    """One queue under test. `start()` a daemon (optionally with a fault),
    `submit()` jobs, break things, `drain()`, then `check()` the invariants."""

    def __init__(self, base: Path, *, gpus: int = 4, grace: float = 1.0, home: Path | None = None):
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.home = home or base / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.work = base / "work"
        self.work.mkdir(exist_ok=True)
        self.runs = base / "runs.txt"
        self.gpus, self.grace = gpus, grace
        self.tag = uuid.uuid4().hex
        self.env = dict(os.environ, GQA_HOME=str(self.home), PYTHONPATH=str(ROOT), CHAOS_TAG=self.tag)
        self.env.pop("GQA_FAULT_AT", None)
        self.env.pop("GQA_BACKEND", None)
        self.daemons: list[int] = []
        self.kills = 0
        self.stderr: list[tuple[str, str]] = []   # (command, stderr) of every CLI command run
        self._backend = None

    # -- the daemon ----------------------------------------------------------------
    def inventory(self) -> dict:
        return {"gpus": [{"index": i, "type": "virtual", "price": 0.0} for i in range(self.gpus)],
                "cpus": None, "memory": None}

    def start(self, fault: str | None = None, **env: str) -> int:
        """A daemon as `gqa local start --detach` starts it, with GQA_FAULT_AT=fault and `env` in its environment."""
        from cli.local import start_background
        from gqa.adapters.local.paths import StatePaths

        wanted = dict(env, GQA_HOME=str(self.home), CHAOS_TAG=self.tag, GQA_FAULT_AT=fault)
        saved = {k: os.environ.get(k) for k in wanted}
        try:
            for key, value in wanted.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            pid = start_background(StatePaths(self.home), self.inventory(), self.grace)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        self.daemons.append(pid)
        return pid

    def wait_dead(self, pid: int, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not alive(pid):
                return True
            time.sleep(0.02)
        return False

    def died_of_fault(self, pid: int, timeout: float = 20.0) -> None:
        assert self.wait_dead(pid, timeout), f"the daemon {pid} never reached its fault in {timeout:g}s"
        self.kills += 1

    def stop(self, timeout: float = 20.0) -> bool:
        from cli.local import stop_daemon
        from gqa.adapters.local.paths import StatePaths

        return stop_daemon(StatePaths(self.home), timeout=timeout)

    def daemon_log(self) -> str:
        path = self.home / "daemon.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- jobs ------------------------------------------------------------------------
    @property
    def backend(self):
        if self._backend is None:
            from cli.backend import LocalBackend

            self._backend = LocalBackend(self.home)
        return self._backend

    def job_command(self, mode: str = "run", *args: str) -> list[str]:
        return [sys.executable, str(JOB), mode, str(self.runs), *args]

    def submit(self, n: int = 1, seconds: float = 0.3, mode: str = "run", env: dict | None = None) -> list[str]:
        """n jobs through the services (straight to SQLite, the doorbell rings the daemon)."""
        from gqa.models.loader import validate

        ids = []
        for i in range(n):
            args = (f"{seconds}",) if mode in ("run", "escape") else ()
            raw = {"name": f"chaos{i}", "command": self.job_command(mode, *args), "workdir": str(self.work),
                   "env": dict(env or {})}
            ids += [j.id for j in self.backend.submitter().submit(validate(raw))]
        return ids

    def jobs(self) -> dict[str, object]:
        from gqa.adapters.local.store import SqliteStore

        store = SqliteStore(self.home / "gqa.db")
        try:
            return {j.id: j for j in store.list()}
        finally:
            store.close()

    # -- commands ------------------------------------------------------------------------
    def cli(self, *args: str, light: bool = False, timeout: float = 60, env: dict | None = None
            ) -> subprocess.CompletedProcess:
        """`gqa ARGS` as a user runs it (light: through the installed client)."""
        argv = [*gqa_executable(), *args] if light else [sys.executable, "-m", "cli.main", *args]
        proc = subprocess.run(argv, env=dict(self.env, **(env or {})), cwd=str(self.work), capture_output=True,
                              text=True, timeout=timeout)
        self.stderr.append((" ".join(args), proc.stderr))
        return proc

    def popen(self, *args: str, env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen([*gqa_executable(), *args], env=dict(self.env, **(env or {})), cwd=str(self.work),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def collect(self, name: str, proc: subprocess.Popen, timeout: float = 120) -> subprocess.CompletedProcess:
        out, err = proc.communicate(timeout=timeout)
        self.stderr.append((name, err))
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    # -- waiting and checking --------------------------------------------------------------
    def drain(self, timeout: float = 30.0) -> dict[str, object]:
        """Wait until no job is left unfinished; the stuck ones are reported by check()."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.jobs()
            if all(j.state.value in FINAL for j in jobs.values()) or time.monotonic() > deadline:
                return jobs
            time.sleep(0.1)

    def check(self, scenario: str, submitted: list[str], *, once: bool = True, drain: float = 30.0,
              cancelled: list[str] = (), **extra) -> Figures:
        """The four invariants, once the queue has drained (or `drain` seconds have passed).
        once: every job started exactly once (the daemon was only killed: kill -9 does not
        kill jobs, they are re-adopted); otherwise a later start is allowed only after a run
        that was interrupted (no end line) and never while it was alive."""
        jobs = self.drain(drain)
        runs = Runs.read(self.runs)
        figures = Figures(scenario, jobs=len(submitted), kills=self.kills,
                          extra=dict(extra, recovered=recoveries(self.daemon_log())))
        problems: list[str] = []

        # 0 lost: exactly the submitted set, every one SUCCEEDED
        if set(jobs) != set(submitted):
            problems.append(f"jobs recorded {sorted(jobs)} != submitted {sorted(submitted)}")
        expected = {i: "CANCELLED" if i in cancelled else "SUCCEEDED" for i in submitted}
        lost = [i for i in submitted if i not in jobs or (jobs[i].state.value != expected[i]
                                                          and jobs[i].state.value in FINAL)]
        figures.lost = len(lost)
        problems += [f"job {i} lost: {jobs[i].state.value} ({jobs[i].reason})" if i in jobs else f"job {i} missing"
                     for i in lost]

        # 0 run twice
        twice = run_twice([i for i in submitted if i not in cancelled], runs, once=once)
        twice.update(run_twice(list(cancelled), runs, once=once, ended=False))
        figures.twice = len(twice)
        problems += [p for found in twice.values() for p in found]

        # 0 stuck: nothing unfinished, no GPU held
        stuck = [j for j in jobs.values() if j.state.value in UNFINISHED]
        figures.stuck = len(stuck)
        problems += [f"job {j.id} stuck {j.state.value} ({j.reason})" for j in stuck]
        queue = self.cli("queue", "-o", "json")
        if queue.returncode == 0:
            view = json.loads(queue.stdout)
            if view["gpus"]["free"] != view["gpus"]["total"] or view["running"]:
                figures.stuck += 1
                problems.append(f"GPUs still held after the queue drained: {view['gpus']}, {view['running']}")
        else:
            problems.append(f"gqa queue failed after the drain: {queue.stderr}")

        # 0 tracebacks
        said = [("daemon log", self.daemon_log())] + self.stderr
        bad = [name for name, text in said if "Traceback" in text]
        figures.tracebacks = len(bad)
        problems += [f"traceback in {name}" for name in bad]
        if bad:
            problems.append(self.daemon_log()[-3000:])
        FIGURES.append(asdict(figures))
        assert not problems, "\n".join(problems)
        return figures

    # -- teardown ------------------------------------------------------------------------------
    def close(self) -> None:
        from cli.local import stop_daemon
        from gqa.adapters.local.paths import StatePaths

        with contextlib.suppress(Exception):
            stop_daemon(StatePaths(self.home), timeout=15)
        for pid in self.daemons:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        kill_tagged("CHAOS_TAG", self.tag)
        if self._backend is not None:
            with contextlib.suppress(Exception):
                self._backend.store.close()


def run_twice(submitted: list[str], runs: Runs, *, once: bool, ended: bool = True) -> dict[str, list[str]]:
    """Jobs that ran twice, with what shows it. ended: each job should have ended (one end line).
    once: one start per job; otherwise a later start is allowed only after a run that was
    interrupted (no end line), and never while that run was alive (job.py's overlap lines)."""
    found: dict[str, list[str]] = defaultdict(list)
    for job_id in submitted:
        starts, ends = runs.starts.get(job_id, []), runs.ends.get(job_id, [])
        if len(ends) > 1 or (ended and not ends):
            found[job_id].append(f"job {job_id}: {len(ends)} end lines; starts {starts}")
        if once and len(starts) > 1:
            found[job_id].append(f"job {job_id} started {len(starts)} times: {starts}")
        attempts = [a for a, _, _ in starts]
        if len(set(attempts)) != len(attempts):
            found[job_id].append(f"job {job_id}: one attempt started twice: {starts}")
        finished = {a for a, _ in ends}
        for a, _, _ in starts[:-1]:
            if a in finished:
                found[job_id].append(f"job {job_id}: attempt {a} ended, then the job started again: {starts}")
    for line in runs.overlaps:
        found[line.split()[1]].append(f"two runs at once: {line}")
    return dict(found)


def recoveries(log: str) -> dict[str, int]:
    """What the daemons' recover() counted, over every start in the log."""
    import ast

    total: dict[str, int] = defaultdict(int)
    for line in log.splitlines():
        if ", recovered {" in line:
            for key, n in ast.literal_eval(line[line.index("recovered {") + len("recovered "):]).items():
                total[key] += n
    return dict(total)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def tagged(name: str, value: str, **also: str) -> list[int]:
    """Live processes (not this one) whose environment carries name=value (and each of `also`)."""
    return chaos_job.tagged(**{name: value, **also})


def kill_tagged(name: str, value: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = tagged(name, value)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
