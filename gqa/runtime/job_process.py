"""A Batch job's command as a child of gqa.runtime.code, which stays to do
what Slurm's node daemon does around a batch script:

- srun, scontrol and squeue come first on the command's PATH
  (slurm_tools.py), in a login shell's too (`#!/bin/bash -l`: the BASH_ENV
  of login_shell.py), and the host-dependent SLURM_* variables the job's
  Batch environment could not know are filled in (the node's name; when
  the job started; the user and group ids it runs as);
- SIGTERM (Batch's stop, before its SIGKILL), SIGINT, SIGHUP, SIGUSR1 and
  SIGUSR2 are passed to the command's process group, as Slurm signals
  every process of a job it stops;
- with GQA_WARN_SIGNAL=[B:]SIG@secs (the spec's limits.signal) the signal
  goes, that many seconds before GQA_WALL_END (epoch seconds; or
  GQA_WALL_SECONDS after the attempt's start), to the job's srun steps
  (`warning_targets`: in a job without steps, every process of the
  command's group but the command, the batch shell, itself; the command
  when it is alone), and with B: to the command alone;
- on a spot instance, the interruption notice (spot_notice.py, read from
  the instance metadata: nothing else tells a Batch job) sends SIGTERM to
  the command's process group and SIGKILL GQA_CHECKPOINT_GRACE seconds
  later (the deployment's compute.checkpoint_grace, as a stop's), and a
  command that then ends other than 0 is held until the instance goes, so
  Batch ends the attempt as the host's loss, which gqa resumes as a reclaim;
- the exit code is the command's (128 + N when a signal ended it), or,
  when it exited 0, the first failed srun step's: a script whose training
  step failed does not succeed because its last line did;
- as the container's first process it reaps the orphans it inherits.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from .login_shell import with_bash_env, write_bash_env
from .slurm_tools import STEP_STATUS_ENV, first_failed_step, install
from .spot_notice import NOTICE_SECONDS, Notice, SpotWatch, hold_for_reclaim, spot_watch

WARN_SIGNAL_ENV = "GQA_WARN_SIGNAL"
WALL_END_ENV = "GQA_WALL_END"
# the same as seconds from the attempt's start, for a Batch environment fixed before the attempt starts
WALL_SECONDS_ENV = "GQA_WALL_SECONDS"
NOT_EXECUTABLE = 127
GRACE_ENV = "GQA_CHECKPOINT_GRACE"     # the job definition's: SIGTERM to SIGKILL, in seconds
DEFAULT_GRACE = 90                     # compute.checkpoint_grace's default
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
HOST_VARIABLES = ("SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURMD_NODENAME", "SLURM_SUBMIT_HOST",
                  "SLURM_TOPOLOGY_ADDR")


@dataclass(frozen=True)
class WarningSignal:
    signum: int
    before: int            # seconds before the wall time ends
    batch_only: bool       # B: the command alone, not its whole process group


def parse_warning(text: str) -> WarningSignal:
    """GQA_WARN_SIGNAL's [B:]SIG@secs (the canonical text of gqa.models.signals)."""
    body = text.strip()
    batch_only = body.upper().startswith("B:")
    name, _, before = body[2 if batch_only else 0:].partition("@")
    name = name.strip().upper().removeprefix("SIG")
    try:
        signum = int(name) if name.isdigit() else int(getattr(signal, "SIG" + name))
        signal.Signals(signum)
    except (AttributeError, ValueError):
        raise ValueError(f"{WARN_SIGNAL_ENV}={text!r}: {name!r} is not a signal") from None
    if not before.strip().isdigit():
        raise ValueError(f"{WARN_SIGNAL_ENV}={text!r}: the seconds after @ must be a whole number")
    return WarningSignal(signum, int(before), batch_only)


def fill_host_variables(env: MutableMapping[str, str], host: str, now: float, here: str) -> None:
    """The SLURM_* variables only the machine the job runs on knows, where nothing set them: its
    name, the submit directory (`here`: the job's copy of it), the start, and the wall time's end
    (GQA_WALL_END, or GQA_WALL_SECONDS after the start), which GQA_WALL_END then holds too."""
    for name in HOST_VARIABLES:
        if not env.get(name, "").strip():
            env[name] = host
    if not env.get("SLURM_SUBMIT_DIR", "").strip():
        env["SLURM_SUBMIT_DIR"] = here
    if not env.get("SLURM_JOB_START_TIME", "").strip():
        env["SLURM_JOB_START_TIME"] = str(int(now))
    seconds = env.get(WALL_SECONDS_ENV, "").strip()
    if not env.get(WALL_END_ENV, "").strip() and seconds.isdigit():
        env[WALL_END_ENV] = str(int(env["SLURM_JOB_START_TIME"]) + int(seconds))
    if not env.get("SLURM_JOB_END_TIME", "").strip() and env.get(WALL_END_ENV, "").strip():
        env["SLURM_JOB_END_TIME"] = env[WALL_END_ENV].strip()


def fill_user_variables(env: MutableMapping[str, str], uid: int, gid: int) -> None:
    """SLURM_JOB_UID and SLURM_JOB_GID: the ids the container runs the job as, where nothing set them."""
    for name, value in (("SLURM_JOB_UID", uid), ("SLURM_JOB_GID", gid)):
        if not env.get(name, "").strip():
            env[name] = str(value)


def warning_delay(env: Mapping[str, str], now: float) -> tuple[WarningSignal, float] | None:
    """The warning signal and how many seconds from now to send it, or None without one."""
    text = env.get(WARN_SIGNAL_ENV, "").strip()
    if not text:
        return None
    try:
        warning = parse_warning(text)
        end = float(env.get(WALL_END_ENV, "").strip())
    except ValueError as exc:
        why = exc if str(exc).startswith(WARN_SIGNAL_ENV) else f"{WALL_END_ENV} is not epoch seconds"
        sys.stderr.write(f"gqa: no warning signal will be sent: {why}\n")
        return None
    return warning, max(0.0, end - warning.before - now)


class Child:
    """The command, started in its own process group, and what reaches it."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []
        self.ended = threading.Event()
        self.interrupted: Notice | None = None      # the spot notice it was stopped for

    def interrupt(self, notice: Notice, grace: float) -> None:
        """A spot interruption notice: SIGTERM to the command's group, SIGKILL `grace` seconds later."""
        if self.process is None or self.ended.is_set():
            return
        self.interrupted = notice
        sys.stderr.write(f"gqa: spot interruption notice: {notice.describe()}; SIGTERM to the job's processes, "
                         f"SIGKILL in {grace:g} s if they have not ended\n")
        sys.stderr.flush()
        self.forward(signal.SIGTERM)
        if not self.ended.wait(grace):
            signal_process(self.process.pid, signal.SIGKILL, group=True)

    def forward(self, signum: int, _frame: object = None) -> None:
        if self.process is None:
            self.pending.append(signum)     # arrived before the command started: it gets it on start
            return
        signal_process(self.process.pid, signum, group=True)

    def warn(self, warning: WarningSignal) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        shell = self.process.pid
        targets = warning_targets(shell, group_members(shell), warning.batch_only, is_srun)
        count = f"{len(targets)} process{'es' if len(targets) > 1 else ''}"
        whom = "the job's command" if targets == [shell] else f"the job's steps ({count})"
        sys.stderr.write(f"gqa: SIG{signal.Signals(warning.signum).name.removeprefix('SIG')} to {whom}, "
                         f"{warning.before} s before the wall time ends\n")
        sys.stderr.flush()
        for pid in targets:
            signal_process(pid, warning.signum, group=False)


def warning_targets(shell: int, members: Sequence[int], batch_only: bool,
                    is_step: Callable[[int], bool]) -> list[int]:
    """Who a warning signal goes to: with B: the batch shell; else the job's srun steps, which
    pass it to their tasks (a `| tee` or `| sort` in the script is no step and is left alone);
    in a job without steps every other process of its group, or the shell when it is alone."""
    if batch_only:
        return [shell]
    others = [pid for pid in members if pid != shell]
    return [pid for pid in others if is_step(pid)] or others or [shell]


def is_srun(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"gqa.runtime.srun" in cmdline.read()
    except OSError:
        return False


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (Linux's /proc)."""
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                members.append(int(name))
    return members


def signal_process(pid: int, signum: int, *, group: bool) -> None:
    """Signal a process or its group; one that is gone or not ours is left alone."""
    try:
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def grace_of(env: Mapping[str, str]) -> float:
    """A spot notice's SIGTERM to SIGKILL: within the notice's two minutes, past which nothing runs."""
    try:
        return min(max(0.0, float(env.get(GRACE_ENV, "").strip())), NOTICE_SECONDS)
    except ValueError:
        return DEFAULT_GRACE


def run(argv: Sequence[str], env: dict[str, str], *, where: str = "",
        watch: SpotWatch | None = None) -> tuple[int, Notice | None]:
    """Run `argv` as a child in `env`: its exit code (see the module's docstring), and the spot
    notice `watch` saw while it ran, if any."""
    child = Child()
    previous = {signum: signal.signal(signum, child.forward) for signum in FORWARDED}
    timer: threading.Timer | None = None
    try:
        try:
            child.process = subprocess.Popen(list(argv), env=env, process_group=0)
        except OSError as exc:
            sys.stderr.write(f"gqa: cannot run {argv[0]!r}{where}: {exc.strerror or exc}\n")
            return NOT_EXECUTABLE, None
        for signum in child.pending:
            child.forward(signum)
        planned = warning_delay(env, time.time())
        if planned is not None:
            timer = threading.Timer(planned[1], child.warn, args=(planned[0],))
            timer.daemon = True
            timer.start()
        if watch is not None:
            grace = grace_of(env)
            threading.Thread(target=watch.run, args=(lambda notice: child.interrupt(notice, grace),),
                             name="gqa-spot-notice", daemon=True).start()
        code = reap(child.process)
    finally:
        child.ended.set()
        if watch is not None:
            watch.stop()
        if timer is not None:
            timer.cancel()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code, child.interrupted


def reap(process: subprocess.Popen[bytes]) -> int:
    """Wait for `process`, reaping every other child that ends meanwhile (a container's first
    process inherits the orphans of the whole job); its exit code, 128 + N for signal N."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:       # reaped elsewhere: nothing left to wait for
            return process.wait()
        if pid == process.pid:
            code = os.waitstatus_to_exitcode(status)
            process.returncode = code
            return 128 - code if code < 0 else code


def run_job(argv: Sequence[str], env: Mapping[str, str] | None = None, *, where: str = "") -> int:
    """The job's command with Slurm's tools and variables; the job's exit code."""
    env = dict(os.environ if env is None else env)
    tools = tempfile.mkdtemp(prefix="gqa-tools-")
    try:
        install(tools)
        status = os.path.join(tools, "steps")
        env["PATH"] = tools + (os.pathsep + env["PATH"] if env.get("PATH") else "")
        with_bash_env(env, write_bash_env(tools))   # a login shell's profile may set PATH anew
        env[STEP_STATUS_ENV] = status
        fill_host_variables(env, socket.gethostname(), time.time(), os.getcwd())
        fill_user_variables(env, os.getuid(), os.getgid())
        sys.stdout.flush()
        sys.stderr.flush()
        code, notice = run(argv, env, where=where, watch=spot_watch(env))
        failed = first_failed_step(status) if code == 0 else None
        if failed is not None:
            code, description = failed
            sys.stderr.write(f"gqa: the job's command exited 0, but a step failed with exit code {code} "
                             f"({description}): the job fails with {code}\n")
        if notice is not None and code != 0:
            hold_for_reclaim(notice, code)
        return code
    finally:
        shutil.rmtree(tools, ignore_errors=True)
