"""The demo: a temporary queue with 4 virtual GPUs and the scenarios a team
meets in its first hour, checked as they happen. Exit code 0 only if every
check holds, so the demo is also a validation run."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .local_backend import LocalBackend

GPUS = 4
PRICE = 2.0          # per GPU-hour
ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "train.py"

CRASH = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen(['sleep', '300'])  # a worker the crash must not orphan\n"
    "open(sys.argv[1], 'w').write(str(child.pid))\n"
    "print('epoch 1: loading data', flush=True); time.sleep(1.5)\n"
    "raise RuntimeError('CUDA error: device-side assert triggered')\n"
)


@dataclass
class Check:
    what: str
    ok: bool
    detail: str


@dataclass
class Demo:
    home: Path
    backend: LocalBackend
    checks: list[Check] = field(default_factory=list)
    ids: dict[str, list[str]] = field(default_factory=dict)

    def submit(self, label: str, *, command: list[str], **spec) -> list[str]:
        from gqa.models.loader import validate

        raw = {"name": label, "command": command, "workdir": str(self.home)} | spec
        jobs = self.backend.submitter().submit(validate(raw))
        self.ids.setdefault(label, []).extend(j.id for j in jobs)
        return [j.id for j in jobs]

    def check(self, what: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(what, ok, detail))

    def job(self, job_id: str):
        return self.backend.store.get(job_id)

    def wait(self, ids: list[str], states: set[str], live, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            live.update(self.table())
            if all(self.job(i).state.value in states for i in ids):
                return True
            time.sleep(0.1)
        return False

    def table(self):
        from rich.table import Table

        from .output import PRIORITY, STATUS_STYLE

        now = time.time()
        table = Table(title=f"gqa demo: {GPUS} virtual GPUs", title_justify="left")
        for col in ("id", "name", "team", "prio", "status", "gpus", "wait", "run", "attempts"):
            table.add_column(col)
        for job in self.backend.store.list(history=True):
            wait, run = _times(job, now)
            style = STATUS_STYLE.get(job.status.value, "")
            table.add_row(job.id, job.name, job.team, PRIORITY[job.tier], f"[{style}]{job.status.value}[/]",
                          ",".join(map(str, job.assigned)) or "-", _fmt(wait), _fmt(run), str(job.attempts))
        return table


def run_demo(*, keep: bool = False) -> int:
    from rich.console import Console
    from rich.live import Live

    from gqa.adapters.local.paths import StatePaths

    from .local_backend import LocalBackend
    from .local import start_background, stop_daemon

    console = Console(highlight=False)
    home = Path(tempfile.mkdtemp(prefix="gqa-demo-"))
    os.environ["GQA_HOME"] = str(home)
    paths = StatePaths(home)
    paths.ensure()
    # priced as a cloud GPU-hour, so the report's spend per team is money, not zeros
    inventory = {"gpus": [{"index": i, "type": "virtual", "price": PRICE} for i in range(GPUS)],
                 "cpus": os.cpu_count(), "memory": None}
    start_background(paths, inventory, grace=5.0)
    demo = Demo(home, LocalBackend(home))
    started = time.time()
    try:
        with Live(demo.table(), console=console, refresh_per_second=8, transient=False) as live:
            _scenarios(demo, live, console)
            live.update(demo.table())
    finally:
        stop_daemon(paths, timeout=30)
    elapsed = time.time() - started
    page = _report(demo, started, demo.home / "report" if keep else None)
    _summary(demo, console, elapsed)
    if page is not None:
        console.print(f"report of the demo's jobs: {page}")
    if keep:
        console.print(f"state kept in {home} (GQA_HOME={home} gqa queue)")
    else:
        shutil.rmtree(home, ignore_errors=True)
    return 0 if all(c.ok for c in demo.checks) else 1


def _scenarios(demo: Demo, live, console) -> None:
    from gqa.adapters.local.processes import process_token
    from gqa.models.errors import Rejected

    py = sys.executable
    say = live.console.print
    # 1. basics: a job that logs and succeeds, one that crashes, one too big, a long training run
    say("[bold]1.[/] submit: a job that logs and succeeds, one that crashes, one too big, a training run")
    [hello] = demo.submit("hello", team="research",
                          command=["sh", "-c", "echo hello from GPU $CUDA_VISIBLE_DEVICES; sleep 2; echo done"])
    pid_file = demo.home / "crash-child.pid"
    [crash] = demo.submit("crash", command=[py, "-c", CRASH, str(pid_file)], team="research")
    try:
        demo.submit("too-big", command=["true"], resources={"gpus": 8}, team="research")
        demo.check("too big: rejected at submit", False, "was accepted")
    except Rejected as exc:
        say(f"   too-big rejected: {exc}")
        demo.check("too big: rejected at submit", "the queue has 4" in str(exc), str(exc))
    [train] = demo.submit("train", command=[py, str(TRAIN), "--steps", "40", "--step-seconds", "0.2",
                                            "--checkpoint-every", "4"], team="research")
    demo.wait([hello, crash], {"SUCCEEDED", "FAILED"}, live)
    h, c = demo.job(hello), demo.job(crash)
    demo.check("hello: succeeded and logged", h.state.value == "SUCCEEDED" and "hello from GPU" in _log(demo, hello),
               f"{h.state.value}; log: {_log(demo, hello).splitlines()[1:2]}")
    child = int(pid_file.read_text()) if pid_file.exists() else None
    orphan = child is not None and process_token(child) is not None
    tail = _log(demo, crash).strip().splitlines()[-1:]
    demo.check("crash: FAILED with its exit code, GPUs released, no orphan", c.state.value == "FAILED" and
               c.exit_code == 1 and not c.assigned and not orphan,
               f"{c.state.value}, {c.reason}; log tail: {tail}; worker pid {child} "
               f"{'still alive' if orphan else 'gone'}")

    # 2. priorities and fair share: fill the GPUs, then queue low, normal (two teams) and high work
    say("[bold]2.[/] fill the GPUs, queue 2 low jobs, bursts from teams vision and nlp, then one high job")
    fill = demo.submit("fill", command=["sleep", "2.5"], team="research", priority="low", array="0-2")
    demo.wait(fill, {"RUNNING"}, live)
    lows = demo.submit("low", command=["sleep", "1"], team="research", priority="low", array="0-1")
    vision = demo.submit("vision", command=["sleep", "1"], team="vision", array="0-5")
    nlp = demo.submit("nlp", command=["sleep", "1"], team="nlp", array="0-5")
    [high] = demo.submit("urgent", command=["sleep", "1"], team="research", priority="high")

    # 3. requeue the training run mid-way: it checkpoints on SIGTERM and resumes where it stopped
    demo.wait([train], {"RUNNING"}, live)
    while "step 9 " not in _log(demo, train):
        live.update(demo.table())
        time.sleep(0.1)
    say(f"[bold]3.[/] gqa requeue {train}: SIGTERM, it checkpoints, goes back to the queue keeping its place")
    demo.backend.control().requeue([train])
    everything = [hello, crash, train, high, *fill, *lows, *vision, *nlp]
    demo.wait(everything, {"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"}, live, timeout=60)

    first_run = {i: _first_start(demo.job(i)) for i in [high, *lows, *vision, *nlp]}
    demo.check("priority: the high job, submitted last, started before the queued low jobs",
               *_started_first(first_run, high, lows))
    demo.check("fair share: the two teams' bursts interleave", *_interleaved(first_run, vision, nlp))
    log = _log(demo, train)
    resumed = [line for line in log.splitlines() if line.startswith("resumed from step")]
    t = demo.job(train)
    demo.check("requeue: resumed from its checkpoint, not from scratch",
               t.state.value == "SUCCEEDED" and bool(resumed) and t.error_retries == 0 and t.attempts == 2,
               f"{t.state.value} after {t.attempts} attempts; log: {resumed[:1]}")


def _report(demo: Demo, started: float, out: Path | None) -> Path | None:
    """The demo's jobs as `gqa report` writes them (in a directory of its own unless the state is
    kept), checked against the jobs themselves."""
    from gqa.reporting import build, write_report

    from .report import report_input

    now = time.time()
    try:
        built = build(report_input(demo.backend, started - 1, now + 1, now))
        written = write_report(built, out or Path(tempfile.mkdtemp(prefix="gqa-demo-report-")))
    except Exception as exc:   # the report is checked like the rest: a failure is a failed check, not a crash
        demo.check("report: written", False, f"{type(exc).__name__}: {exc}")
        return None
    demo.check("report: counts the demo's jobs, figures embedded",
               *_report_matches(built, demo.backend.store.list(history=True), written.page.read_text()))
    return written.page


def _report_matches(built, jobs, page: str) -> tuple[bool, str]:
    """Whether the report counts what the jobs say: how many ran or ended, how they ended, their
    GPU-hours and what they cost; and whether its page embeds every figure and fetches nothing."""
    from gqa.reporting import FIGURES

    listed = [j for j in jobs if j.state.terminal or j.state.value == "RUNNING"]
    ends = {label: sum(1 for j in listed if j.state.value == state)
            for label, state in (("succeeded", "SUCCEEDED"), ("failed", "FAILED"))}
    outcomes = dict(built.outcomes)
    hours = sum(t.gpu_hours for t in built.teams)
    expected_hours = sum(j.gpu_seconds for j in listed) / 3600
    spend, expected_spend = sum(t.cost for t in built.teams), sum(j.cost for j in listed)
    embedded = page.count("data:image/png;base64,")
    ok = (built.jobs == len(listed) and all(outcomes.get(k) == n for k, n in ends.items())
          and abs(hours - expected_hours) < 1e-6 and expected_spend > 0 and abs(spend - expected_spend) < 1e-6
          and embedded == len(FIGURES) and "http" not in page)
    return ok, (f"{built.jobs} of {len(listed)} jobs, {outcomes.get('succeeded')} succeeded and "
                f"{outcomes.get('failed')} failed (the jobs say {ends['succeeded']} and {ends['failed']}), "
                f"{hours:.4f} of {expected_hours:.4f} GPU-hours, ${spend:.4f} of ${expected_spend:.4f} spent, "
                f"{embedded} of {len(FIGURES)} figures embedded")


def _summary(demo: Demo, console, elapsed: float) -> None:
    from rich.table import Table

    jobs = demo.backend.store.list(history=True)
    table = Table(title="summary", title_justify="left")
    for col in ("id", "name", "team", "state", "wait", "run time", "attempts", "reason"):
        table.add_column(col, overflow="fold")
    waits, busy = [], 0.0
    for job in jobs:
        wait, run = _times(job, job.ended_at or time.time())
        if wait is not None:
            waits.append(wait)
        busy += job.gpu_seconds
        reason = "" if job.state.value == "SUCCEEDED" else job.reason
        table.add_row(job.id, job.name, job.team, job.state.value, _fmt(wait), _fmt(run), str(job.attempts), reason)
    console.print(table)
    span = max((j.ended_at or 0) for j in jobs) - min(j.submitted_at for j in jobs) if jobs else 0
    mean_wait = sum(waits) / len(waits) if waits else 0.0
    console.print(f"jobs {len(jobs)}, GPU utilisation {busy / (GPUS * span):.0%} over {span:.1f}s, "
                  f"mean wait {mean_wait:.2f}s, demo took {elapsed:.1f}s")
    for c in demo.checks:
        mark = "[green]ok  [/]" if c.ok else "[red]FAIL[/]"
        console.print(f"{mark} {c.what}: {c.detail}")


def _times(job, now: float) -> tuple[float | None, float | None]:
    first = _first_start(job)
    wait = (first - job.submitted_at) if first is not None else None
    run, since = 0.0, None
    for t in job.history:
        if t.state.value == "RUNNING":
            since = t.at
        elif since is not None:
            run += t.at - since
            since = None
    if since is not None:
        run += now - since
    return wait, (run if first is not None else None)


def _first_start(job) -> float | None:
    return job.first_start


def _started_first(first_run: dict[str, float | None], high: str, lows: list[str]) -> tuple[bool, str]:
    """Whether the high job started before every queued low job (a job that never started, None, fails it)."""
    high_at, low_ats = first_run[high], [first_run[i] for i in lows]
    if high_at is None:
        return False, "the high job never started"
    started = [t for t in low_ats if t is not None]
    if not started:
        return True, f"high started; none of the {len(lows)} queued low jobs did"
    return all(high_at <= t for t in started), \
        f"high started {_fmt(high_at - min(started))} relative to the first queued low job"


def _interleaved(first_run: dict[str, float | None], vision: list[str], nlp: list[str]) -> tuple[bool, str]:
    """Whether the two bursts alternated as they started (V and N in start order, at least 6 switches)."""
    started = {i: t for i in vision + nlp if (t := first_run[i]) is not None}
    teams = "".join("V" if i in vision else "N" for i in sorted(started, key=started.__getitem__))
    switches = sum(1 for a, b in zip(teams, teams[1:]) if a != b)
    never = len(vision) + len(nlp) - len(started)
    return switches >= 6 and never == 0, f"start order {teams}" + (f"; {never} never started" if never else "")


def _log(demo: Demo, job_id: str) -> str:
    path = demo.backend.paths.log_for(job_id)
    return path.read_text(errors="replace") if path.exists() else ""


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"
