"""Drivers for the queues that local_queue.py measures side by side.

Every driver offers the same few operations, so one measurement function
runs unchanged on gqa, Slurm and task-spooler:

    start() / stop()          bring the queue up for the run, tear it down (stop is always called)
    submit_argv(argv)         the CLI command that queues one 1-GPU job running argv
    submit_many(n)            queue n trivial jobs the fastest way the queue offers; (how, seconds)
    wait_idle()               block until nothing is queued or running; when the last job ended
    job_id(stdout)            the job id a submit command printed

Drivers never install anything: a peer that is missing or not running is
skipped with a message saying how to set it up (see benchmarks/README.md).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path


class Unavailable(Exception):
    """The queue cannot be measured here; the message says how to set it up."""


def run(argv: list[str], env: dict | None = None, check: bool = True, timeout: float = 60) -> str:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return proc.stdout


def shell_loop(n: int, argv: list[str]) -> str:
    """A /bin/sh loop running argv n times, as a user's script would (no harness overhead per call)."""
    return f'i=0; while [ $i -lt {n} ]; do {shlex.join(argv)} || exit 1; i=$((i+1)); done'


# -- gqa -----------------------------------------------------------------------------

TERMINAL = ("SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED", "REJECTED")


def gqa_command() -> str:
    """The `gqa` next to this interpreter (a virtual environment), else the one on PATH."""
    beside = Path(sys.executable).parent / "gqa"
    found = str(beside) if beside.exists() else shutil.which("gqa")
    if not found:
        raise SystemExit("gqa is not installed for this interpreter: pip install -e . first")
    return found


class Gqa:
    name = "gqa"

    def __init__(self, home: Path, gpus: int):
        self.home, self.gpus = home, gpus
        self.cli = gqa_command()
        self.env = dict(os.environ, GQA_HOME=str(home))
        self.label = f"gqa ({gpus} virtual GPUs)"
        self.note = ""
        if self.env.pop("PYTHONDONTWRITEBYTECODE", None):
            # measure gqa as installed (with bytecode), without writing into the source tree
            self.env["PYTHONPYCACHEPREFIX"] = str(home.parent / "pycache")
            self.note = "PYTHONDONTWRITEBYTECODE is set here; gqa ran with bytecode in a private PYTHONPYCACHEPREFIX"
        sources = [Path(p) for name in ("gqa", "cli")
                   for p in importlib.util.find_spec(name).submodule_search_locations]
        run([sys.executable, "-m", "compileall", "-q", *map(str, sources)], env=self.env, check=False, timeout=300)

    def start(self) -> None:
        run([self.cli, "local", "start", "--gpus", str(self.gpus), "--detach"], env=self.env)

    def stop(self) -> None:
        run([self.cli, "local", "stop"], env=self.env, check=False)

    def submit_argv(self, argv: list[str]) -> list[str]:
        return [self.cli, "submit", "--gpus", "1", "--", *argv]

    def submit_many(self, n: int) -> tuple[str, float]:
        t0 = time.perf_counter()
        run([self.cli, "submit", "--array", f"0-{n - 1}", "--gpus", "1", "--", "true"], env=self.env)
        return "array", time.perf_counter() - t0

    def job_id(self, stdout: str) -> str:
        return stdout.split()[0]

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.home / 'gqa.db'}?mode=ro", uri=True, timeout=30)

    def wait_idle(self, timeout: float = 600) -> float:
        marks = ", ".join("?" for _ in TERMINAL)
        deadline = time.monotonic() + timeout
        with self._db() as db:
            while db.execute(f"SELECT COUNT(*) FROM jobs WHERE state NOT IN ({marks})", TERMINAL).fetchone()[0]:
                if time.monotonic() > deadline:
                    raise TimeoutError("gqa: jobs still pending after %gs" % timeout)
                time.sleep(0.02)
            return db.execute("SELECT MAX(ended_at) FROM jobs").fetchone()[0] or time.time()

    def records(self) -> list:
        """Every job with its history, through gqa's own store API."""
        from gqa.adapters.local.store import SqliteStore

        store = SqliteStore(self.home / "gqa.db")
        try:
            return store.list(None, history=True)
        finally:
            store.close()


class GqaAt(Gqa):
    """gqa as it was at another revision of this repository (`--against REV`),
    so a change is measured side by side with its baseline in one run. The
    revision's sources get an interpreter of their own: a bare virtual
    environment whose path holds those sources, then this environment's
    packages (without this checkout's editable install, which would win)."""

    def __init__(self, home: Path, gpus: int, rev: str, workdir: Path):
        import sysconfig

        tag = rev.replace("/", "_")
        source, venv = workdir / f"src-{tag}", workdir / f"venv-{tag}"
        source.mkdir(parents=True)
        repo = Path(__file__).resolve().parents[1]
        try:
            archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", rev],
                                     capture_output=True, check=True, timeout=120).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise Unavailable(f"cannot read revision {rev} of this repository: {exc}") from None
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True, timeout=120)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        python = venv / "bin" / "python"
        packages = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip()
        ours = sysconfig.get_paths()["purelib"]
        Path(packages, "gqa-baseline.pth").write_text(f"{source}\n{ours}\n")
        self.cli = str(venv / "bin" / "gqa")
        Path(self.cli).write_text(f"#!{python}\nfrom cli.client import run\nrun()\n")
        os.chmod(self.cli, 0o755)
        self.home, self.gpus = home, gpus
        self.env = dict(os.environ, GQA_HOME=str(home))
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env.pop("PYTHONPATH", None)
        self.env["PYTHONSAFEPATH"] = "1"   # `python -m` run from this checkout must not import it from the cwd
        self.env["PYTHONPYCACHEPREFIX"] = str(workdir / f"pycache-{tag}")
        self.name = f"gqa@{rev}"
        self.label = f"gqa at {rev} ({gpus} virtual GPUs)"
        self.note = ""
        run([str(python), "-m", "compileall", "-q", str(source)], env=self.env, check=False, timeout=300)


# -- task-spooler --------------------------------------------------------------------

class TaskSpooler:
    """A private tsp server (its own socket in the run's temporary directory) with one slot per GPU.
    tsp 1.0.1 has no GPU option and no arrays: n jobs are n `tsp` calls."""

    name = "tsp"
    HOW = "install Debian's task-spooler package (command `tsp`); the benchmark starts its own server"

    def __init__(self, workdir: Path, slots: int):
        if not shutil.which("tsp"):
            raise Unavailable(f"tsp not found: {self.HOW}")
        self.slots = slots
        workdir.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, TS_SOCKET=str(workdir / "tsp.sock"), TMPDIR=str(workdir))
        self.label = f"tsp -S {slots}"
        self.last = None

    def start(self) -> None:
        try:
            run(["tsp", "-S", str(self.slots)], env=self.env, timeout=10)
            run(["tsp", "-l"], env=self.env, timeout=10)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"tsp server did not start ({exc}); {self.HOW}") from None

    def stop(self) -> None:
        run(["tsp", "-K"], env=self.env, check=False, timeout=10)

    def submit_argv(self, argv: list[str]) -> list[str]:
        return ["tsp", *argv]

    def submit_many(self, n: int) -> tuple[str, float]:
        t0 = time.perf_counter()
        out = run(["sh", "-c", shell_loop(n, ["tsp", "true"])], env=self.env, timeout=600)
        elapsed = time.perf_counter() - t0
        self.job_id(out.split()[-1])
        return "one by one (shell loop)", elapsed

    def job_id(self, stdout: str) -> str:
        self.last = stdout.strip()
        return self.last

    def wait_idle(self, timeout: float = 600) -> float:
        if self.last is not None:  # block in tsp itself rather than polling
            run(["tsp", "-w", self.last], env=self.env, check=False, timeout=timeout)
        deadline = time.monotonic() + timeout
        while True:
            states = [line.split()[1] for line in run(["tsp", "-l"], env=self.env).splitlines()[1:] if line.split()]
            if not any(s in ("running", "queued", "allocating") for s in states):
                end = time.time()
                run(["tsp", "-C"], env=self.env, check=False)  # keep the list (and -l) short
                return end
            if time.monotonic() > deadline:
                raise TimeoutError("tsp: jobs still pending after %gs" % timeout)
            time.sleep(0.005)


# -- Slurm ---------------------------------------------------------------------------

class Slurm:
    """An already running single-node Slurm with GPUs as GRES (gpu:1 per job)."""

    name = "slurm"
    env = None
    HOW = ("set up single-node Slurm with fake GPUs (GresTypes=gpu, Gres=gpu:4 on the node, gres.conf "
           "File= character devices), multifactor priority; see benchmarks/README.md")

    def __init__(self, workdir: Path, gpus: int):
        missing = [c for c in ("sbatch", "squeue", "scontrol", "sinfo", "scancel") if not shutil.which(c)]
        if missing:
            raise Unavailable(f"{', '.join(missing)} not found: {self.HOW}")
        try:
            ping = run(["scontrol", "ping"], check=False, timeout=10)
            gres = run(["sinfo", "-h", "-o", "%G"], timeout=10)
            queued = run(["squeue", "-h", "-o", "%i"], timeout=10).split()
            config = run(["scontrol", "show", "config"], timeout=10)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
            raise Unavailable(f"Slurm is not responding ({exc}); {self.HOW}") from None
        if "UP" not in ping:
            raise Unavailable(f"slurmctld is not up ({ping.strip() or 'no answer'}); {self.HOW}")
        if "gpu" not in gres:
            raise Unavailable(f"no node offers gres gpu ({gres.strip() or 'none'}); {self.HOW}")
        if queued:
            raise Unavailable(f"the Slurm queue is not empty ({len(queued)} jobs); run on an idle cluster")
        params = next((line.split("=", 1)[1].strip() for line in config.splitlines()
                       if line.startswith("SchedulerParameters")), "")
        tuned = "batch_sched_delay=0" in params
        self.profile = "tuned" if tuned else "default"
        self.label = f"slurm ({self.profile})"
        self.params = params
        self.workdir, self.ids = workdir, []
        workdir.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        pass  # the cluster is the administrator's; we only add and remove our jobs

    def stop(self) -> None:
        if self.ids:  # never leave our jobs behind, even after an error
            run(["scancel", *sorted(set(self.ids))], check=False, timeout=30)

    def submit_argv(self, argv: list[str]) -> list[str]:
        return ["sbatch", "--parsable", "--gres=gpu:1", "-o", "/dev/null", "-D", str(self.workdir),
                "--wrap", shlex.join(argv)]

    def submit_many(self, n: int) -> tuple[str, float]:
        t0 = time.perf_counter()
        out = run(["sbatch", "--parsable", f"--array=0-{n - 1}", "--gres=gpu:1", "-o", "/dev/null",
                   "-D", str(self.workdir), "--wrap", "true"])
        elapsed = time.perf_counter() - t0
        self.job_id(out)
        return "array", elapsed

    def job_id(self, stdout: str) -> str:
        job = stdout.strip().split(";")[0]
        self.ids.append(job)
        return job

    def wait_idle(self, timeout: float = 1800) -> float:
        deadline = time.monotonic() + timeout
        while self.ids and run(["squeue", "-h", "-o", "%i", "-j", ",".join(self.ids)], check=False).strip():
            if time.monotonic() > deadline:
                raise TimeoutError("slurm: jobs still pending after %gs" % timeout)
            time.sleep(0.05)
        self.ids.clear()
        return time.time()


def peers(which: str, workdir: Path, gpus: int, say) -> tuple[list, dict]:
    """The peer drivers asked for, and {name: why} for those skipped (a peer that is not here)."""
    names = ["slurm", "tsp"] if which == "auto" else [] if which == "none" else which.split(",")
    out, skipped = [], {}
    for name in names:
        try:
            if name == "slurm":
                out.append(Slurm(workdir / "slurm", gpus))
            elif name == "tsp":
                out.append(TaskSpooler(workdir / "tsp", gpus))
            elif name.startswith("gqa@"):
                out.append(GqaAt(workdir / name.replace("/", "_"), gpus, name[len("gqa@"):], workdir))
            else:
                raise SystemExit(f"unknown peer {name!r}: auto, none, slurm, tsp or a comma list")
        except Unavailable as exc:
            say(f"skipping {name}: {exc}")
            skipped[name] = str(exc)
    return out, skipped
