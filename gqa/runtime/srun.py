"""`srun` inside a gqa job: a step is N copies of a command on the job's one
node, each with SLURM_PROCID, SLURM_LOCALID and the step's variables
(srun_options.py), and with --gpus-per-task its own share of the step's GPUs.

- A step that asks for GPUs holds them while it runs: steps that run at once
  get distinct GPUs of the job's, and one that asks for more than are free
  waits for them (step_gpus.py), as Slurm allocates a step's GRES.
- -t stops the step's tasks at its time limit as Slurm's does: SIGTERM, and
  SIGKILL once KillWait has passed.

- SIGTERM, SIGINT, SIGUSR1 and SIGUSR2 sent to srun reach every task. Each
  task leads its own process group, so a signal to the job's whole group
  reaches a task once, through srun, and srun's forwarding reaches the
  task's own children; a task dies with srun if srun is killed outright.
- The exit code is Slurm's: 128 + N for the highest signal N that ended a
  task, or else the highest exit code of the tasks. As in Slurm, the other
  tasks run on unless -K asked to stop them, or --wait=S seconds pass after
  the first task ended. A command that cannot be run exits as Slurm's task
  does, with its errno: 2 when it is not found, 13 when it may not be run.
- A failed step, or one that could not start, appends its line to
  $GQA_STEP_STATUS, so the job fails with it even if the script goes on
  and exits 0, unless the same command ran again after it and succeeded
  (a retry; slurm_tools.py).
- -o/-e/-i take Slurm's file patterns (%t task, %j job, %s step, ...), or
  `none`, or one task's number. Output passes line by line, so the lines of
  tasks that write at once never mix (-l prefixes each with its task; -u
  passes output straight through instead).
"""

from __future__ import annotations

import errno
import math
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from .slurm_job import hostname, value
from .slurm_tools import failed_so_far, forgive_retried, next_step_id, record_failed_step
from . import step_gpus
from .srun_options import Options, SrunError, job_gpus, parse, step_gpu_count, step_size, task_environments

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
KILL_WAIT = 30.0          # seconds between SIGTERM and SIGKILL when a step is stopped (Slurm's KillWait)
NOT_FOUND = errno.ENOENT       # Slurm's task exits with execve's errno
LINE_LIMIT = 64 * 1024    # bytes of a line without its end that srun holds before passing them on
PUMP_WAIT = 2.0           # seconds srun waits, once every task ended, for their labelled output to drain
_PR_SET_PDEATHSIG = 1
NOT_AN_ARRAY = 4294967294     # what Slurm puts for %a outside an array
_PATTERN = re.compile(r"%(\d*)([%AabJjNnstux])")


# -- file patterns ---------------------------------------------------------------------------------------
def expand_pattern(pattern: str, task: int, step: int, env: Mapping[str, str], host: str) -> str:
    """Slurm's filename pattern for one task of a step: %t the task, %n the node (0), %N the
    host, %j the job, %J job.step, %s the step, %u the user, %x the job's name, %A and %a the
    array's job and task (4294967294 outside an array), %b the task index modulo 10, %% a
    percent; %3t pads a number to 3 digits. Any other % stays as written, as in sbatch's."""
    job = value(env, "SLURM_JOB_ID", "GQA_JOB_ID")
    array_task = value(env, "SLURM_ARRAY_TASK_ID") or str(NOT_AN_ARRAY)
    numbers = {"t": str(task), "n": "0", "j": job, "s": str(step), "A": value(env, "SLURM_ARRAY_JOB_ID") or job,
               "a": array_task, "b": str(int(array_task) % 10) if array_task.isdigit() else ""}
    texts = {"N": host.split(".")[0], "J": f"{job}.{step}", "u": value(env, "SLURM_JOB_USER", "USER"),
             "x": value(env, "SLURM_JOB_NAME")}

    def fill(match: re.Match[str]) -> str:
        width, letter = match.groups()
        if letter == "%":
            return "%" + width
        if letter in numbers:
            text = numbers[letter]
            return text.zfill(min(int(width), 10)) if width and text.isdigit() else text
        return texts[letter]

    return _PATTERN.sub(fill, pattern)


class Streams:
    """Where each task's stdin, stdout and stderr go; closes what it opened."""

    def __init__(self, opts: Options, ntasks: int, step: int, env: Mapping[str, str], host: str) -> None:
        self.opened: dict[str, IO[bytes]] = {}
        self.stdin = [self._place(opts.input, t, step, env, host, "rb") for t in range(ntasks)]
        written = "ab" if opts.open_mode == "append" else "wb"
        self.stdout = [self._place(opts.output, t, step, env, host, written) for t in range(ntasks)]
        error = opts.error or opts.output      # Slurm: without -e, stderr goes where stdout goes
        self.stderr = [self._place(error, t, step, env, host, written) for t in range(ntasks)]

    def _place(self, pattern: str, task: int, step: int, env: Mapping[str, str], host: str,
               mode: str) -> Any:
        if not pattern or pattern == "all":
            return None
        if pattern == "none":
            return subprocess.DEVNULL
        if pattern.isdigit():
            return None if int(pattern) == task else subprocess.DEVNULL
        path = expand_pattern(pattern, task, step, env, host)
        if path not in self.opened:      # tasks whose pattern names one file share it
            try:
                self.opened[path] = open(path, mode)
            except OSError as exc:
                raise SrunError(f"srun: cannot open {path}: {exc.strerror or exc}") from None
        return self.opened[path]

    def close(self) -> None:
        for handle in self.opened.values():
            handle.close()


# -- the tasks -------------------------------------------------------------------------------------------
def _die_with_parent() -> Any:
    """A preexec function that makes a task die when srun does (Linux), or None."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:        # srun died before the line above took effect
            os._exit(1)

    return preexec


def _pump(source: IO[bytes], target: IO[bytes], prefix: bytes, lock: threading.Lock) -> None:
    """Copy a task's output line by line; once the reader is gone (a closed pipe), read on and
    drop it, so the task is never blocked on a full pipe."""
    writable = True
    for line in iter(lambda: source.readline(LINE_LIMIT), b""):
        if writable:
            with lock:
                try:
                    target.write(prefix + line)
                    target.flush()
                except (BrokenPipeError, ValueError):
                    writable = False
    source.close()


class Step:
    def __init__(self, opts: Options, envs: list[dict[str, str]], streams: Streams, step: int, host: str) -> None:
        self.opts, self.envs, self.streams, self.step, self.host = opts, envs, streams, step, host
        self.tasks: list[subprocess.Popen[bytes]] = []
        self.ended: queue.Queue[tuple[int, int]] = queue.Queue()
        self.signalled: int | None = None
        self.pumps: list[threading.Thread] = []
        self.started = time.monotonic()

    def forward(self, signum: int, _frame: object = None) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT) and len(self.tasks) < len(self.envs):
            self.signalled = signum   # the tasks not started yet never start
        for task in self.tasks:
            if task.returncode is None:
                try:
                    os.killpg(task.pid, signum)
                except (ProcessLookupError, PermissionError):
                    pass

    def start(self) -> None:
        argv = list(self.opts.command)
        if "/" not in argv[0]:
            found = shutil.which(argv[0], path=os.environ.get("PATH"))
            if found is None:
                raise StepFailed(NOT_FOUND, f"srun: {argv[0]}: command not found")
            argv[0] = found
        preexec = _die_with_parent()
        for task, env in enumerate(self.envs):
            if self.signalled is not None:
                break
            out, err = (self._through(self.streams.stdout[task]), self._through(self.streams.stderr[task]))
            try:
                process = subprocess.Popen(
                    argv, env=env, cwd=self.opts.chdir or None, stdin=self.streams.stdin[task], stdout=out,
                    stderr=err, process_group=0, preexec_fn=preexec)
            except OSError as exc:
                self.forward(signal.SIGKILL)
                code = exc.errno if exc.errno and 0 < exc.errno < 128 else errno.EACCES
                raise StepFailed(code, f"srun: cannot run {self.opts.command[0]}: {exc.strerror or exc}") from None
            self.tasks.append(process)
        # threads only once every task is forked: a fork while other threads run may inherit a held lock
        lock = threading.Lock()
        width = len(str(len(self.envs) - 1))
        for task, process in enumerate(self.tasks):
            prefix = f"{task:>{width}}: ".encode() if self.opts.label else b""
            for pipe, target, terminal in ((process.stdout, self.streams.stdout[task], sys.stdout),
                                           (process.stderr, self.streams.stderr[task], sys.stderr)):
                if pipe is not None:
                    terminal.flush()
                    sink = terminal.buffer if target is None else target
                    pump = threading.Thread(target=_pump, args=(pipe, sink, prefix, lock), daemon=True)
                    pump.start()
                    self.pumps.append(pump)
            threading.Thread(target=self._await, args=(task, process), daemon=True).start()

    def _through(self, target: Any) -> Any:
        """A task writes into a pipe that srun copies out line by line (labelled with -l), so the
        lines of tasks that write at once never mix, as in Slurm; with -u (and no -l) straight to
        `target`."""
        if target is subprocess.DEVNULL or (self.opts.unbuffered and not self.opts.label):
            return target
        return subprocess.PIPE

    def _await(self, task: int, process: subprocess.Popen[bytes]) -> None:
        self.ended.put((task, process.wait()))

    def wait(self) -> int:
        """Wait for every task; the step's exit code."""
        failed = timed_out = False
        highest_signal = highest_exit = 0
        first_end: float | None = None
        limit = None if self.opts.time_limit is None else self.started + self.opts.time_limit
        deadline: float | None = limit
        killed_at: float | None = None
        pending = len(self.tasks)
        while pending:
            timeout = 1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic()))
            try:
                task, code = self.ended.get(timeout=timeout)
            except queue.Empty:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    if killed_at is None:
                        timed_out = limit is not None and now >= limit
                        if timed_out:
                            self._cancelled_at_time_limit()
                        else:
                            self._say(f"terminating the step's {pending} remaining tasks")
                        self.forward(signal.SIGTERM)
                        killed_at, deadline = now, now + KILL_WAIT
                    else:
                        self.forward(signal.SIGKILL)
                        deadline = None
                continue
            pending -= 1
            if first_end is None:
                first_end = time.monotonic()
                if self.opts.wait and pending and killed_at is None:
                    deadline = min(first_end + self.opts.wait, deadline or math.inf)
            if code:
                self._say(f"task {task}: " + (f"Killed by signal {-code}" if code < 0
                                              else f"Exited with exit code {code}"))
                # Slurm's rule: the highest signal wins over any exit code, else the highest exit code
                if code < 0:
                    highest_signal = max(highest_signal, -code)
                else:
                    highest_exit = max(highest_exit, code)
                if not failed:
                    failed = True
                    if self.opts.kill_on_bad_exit and pending and killed_at is None:
                        deadline = time.monotonic()
        # the last labelled lines, though not past a moment: a task's own child may hold its pipe open
        until = time.monotonic() + PUMP_WAIT
        for pump in self.pumps:
            pump.join(max(0.0, until - time.monotonic()))
        if timed_out:
            sys.stderr.write(f"srun: Force Terminated StepId={value(os.environ, 'SLURM_JOB_ID', 'GQA_JOB_ID')}"
                             f".{self.step}\n")
        if highest_signal:
            return 128 + highest_signal
        if not failed and self.signalled is not None:
            return 128 + self.signalled      # stopped before every task had started
        return highest_exit

    def _cancelled_at_time_limit(self) -> None:
        job = value(os.environ, "SLURM_JOB_ID", "GQA_JOB_ID")
        at = time.strftime("%Y-%m-%dT%H:%M:%S")
        sys.stderr.write(f"slurmstepd-{self.host}: error: *** STEP {job}.{self.step} ON {self.host} CANCELLED "
                         f"AT {at} DUE TO TIME LIMIT ***\n")
        sys.stderr.flush()

    def _say(self, text: str) -> None:
        sys.stderr.write(f"srun: error: {self.host}: {text}\n")
        sys.stderr.flush()


class StepFailed(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def run(args: Sequence[str]) -> int:
    """Run one step; its exit code. A step that fails, or cannot start, leaves its line."""
    env = dict(os.environ)
    step = next_step_id(env)
    earlier = failed_so_far(env)
    described = f"step {step}: srun {shlex.join(args)}"
    held: list[str] | None = None
    try:
        opts = parse(args, env)
        for note in opts.notes:
            sys.stderr.write(note + "\n")
        host = hostname(env)
        held = _hold_gpus(opts, env)
        envs = task_environments(opts, env, step, host, held)
        streams = Streams(opts, len(envs), step, env, host)
    except SrunError as exc:
        sys.stderr.write(f"{exc}\n")
        if held:
            step_gpus.release(env)
        record_failed_step(exc.code, described, env)
        return exc.code
    runner = Step(opts, envs, streams, step, host)
    previous = {signum: signal.signal(signum, runner.forward) for signum in FORWARDED}
    try:
        runner.start()
        code = runner.wait()
    except StepFailed as exc:
        sys.stderr.write(f"{exc}\n")
        code = exc.code
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        streams.close()
        if held:
            step_gpus.release(env)
    try:
        sys.stdout.flush()
    except BrokenPipeError:      # whoever read srun's output has gone; the step's code still counts
        pass
    if code:
        record_failed_step(code, described, env)
    else:
        forgive_retried(described, earlier, env)
    return code


def _hold_gpus(opts: Options, env: Mapping[str, str]) -> list[str] | None:
    """The GPUs the step asks for, held until it ends (waiting while other steps hold them);
    None when it asks for none. With --overlap it shares the job's first, held or not."""
    wanted = step_gpu_count(opts, env, step_size(opts, env))
    if wanted is None:
        return None
    if opts.overlap:
        return job_gpus(env)[:wanted]
    return step_gpus.acquire(env, job_gpus(env), wanted)


def main(args: Sequence[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if args is None else args))


if __name__ == "__main__":
    main()
