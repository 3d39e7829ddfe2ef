"""Compute on this machine: each attempt a child process in its own process
group, pinned to its GPUs with CUDA_VISIBLE_DEVICES, output to a log file.

A small sh wrapper records the exit status in a file, so an attempt that
outlives a daemon crash can be re-adopted and its result still read. Exits
are watched with pidfds (no polling); kills are group-wide so no process of
the job survives a cancel, a timeout or the end of its main process."""

import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass

from ...models.errors import LaunchFailed
from ...models.job import JobRecord
from ...ports import Exit, Inventory, Launched
from .paths import StatePaths

# Traps make sh wait for the job instead of dying first; traps are reset in
# the child, so the job still gets SIGTERM with its default disposition.
# The status is a write of at most 3 bytes (one write(2)); a reader that finds the
# file empty treats it as "no status yet".
WRAPPER = 'trap : TERM INT HUP; "$@"; rc=$?; printf "%s" "$rc" > "$GQA_EXIT_FILE"; exit "$rc"'


@dataclass
class _Attempt:
    job_id: str
    attempt: int
    pid: int
    pidfd: int
    child: bool                      # ours to waitpid; False when re-adopted after a restart
    kill_at: float | None = None     # SIGKILL the group then, if still alive


class LocalExecutor:
    def __init__(self, paths: StatePaths, inventory: Inventory, *, base_env: dict[str, str] | None = None):
        self.paths = paths
        self._inventory = inventory
        self.base_env = dict(os.environ if base_env is None else base_env)
        self._by_job: dict[str, _Attempt] = {}
        self._by_fd: dict[int, _Attempt] = {}

    # -- Compute port -------------------------------------------------------------
    def inventory(self) -> Inventory:
        return self._inventory

    def launch(self, job: JobRecord, gpus: tuple[int, ...], attempt: int) -> Launched:
        spec = job.spec
        workdir = spec.workdir or os.getcwd()
        checkpoint_dir = self.paths.checkpoint_for(job.id)
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        exit_file = self.paths.exit_for(job.id, attempt)
        env = dict(job.submit_env if job.submit_env is not None else self.base_env)
        env.update(spec.env)
        env.update(job.extra_env)
        env.update({
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in gpus),
            "GQA_JOB_ID": job.id,
            "GQA_ATTEMPT": str(attempt),
            "GQA_CHECKPOINT_DIR": str(checkpoint_dir),
            "GQA_RESUME_FROM": latest_checkpoint(checkpoint_dir),
            "GQA_EXIT_FILE": str(exit_file),
        })
        argv = spec.argv()
        log_path = self.paths.log_for(job.id)
        try:
            with open(log_path, "ab") as log:
                log.write(f"--- gqa: attempt {attempt} of job {job.id} on GPUs "
                          f"{env['CUDA_VISIBLE_DEVICES']} at {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                          f"{shlex.join(argv)}\n".encode())
                log.flush()
                proc = subprocess.Popen(["/bin/sh", "-c", WRAPPER, "gqa-job", *argv], cwd=workdir, env=env,
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True, close_fds=True)
        except FileNotFoundError:
            raise LaunchFailed(f"working directory {workdir} does not exist") from None
        except NotADirectoryError:
            raise LaunchFailed(f"working directory {workdir} is not a directory") from None
        except PermissionError as exc:
            raise LaunchFailed(f"permission denied: {exc.filename or workdir}") from None
        except OSError as exc:
            raise LaunchFailed(str(exc)) from None
        # Popen keeps a handle that would reap the child behind our back; we reap via the pidfd
        proc.returncode = 0
        self._watch(job.id, attempt, proc.pid, child=True)
        return Launched(pid=proc.pid, token=process_token(proc.pid) or "")

    def terminate(self, job: JobRecord, grace: float) -> None:
        running = self._by_job.get(job.id)
        if running is None or running.kill_at is not None:
            return
        _signal_group(running.pid, signal.SIGTERM)
        running.kill_at = time.monotonic() + grace

    def alive(self, job: JobRecord) -> bool:
        if job.pid is None:
            return False
        token = process_token(job.pid)
        return token is not None and token == job.proc_token

    def reap(self, job: JobRecord) -> Exit | None:
        code = _read_exit(self.paths.exit_for(job.id, job.attempts))
        return Exit(job.id, job.attempts, code, None) if code is not None else None

    def cleanup(self, job: JobRecord) -> None:
        if job.pid is not None:
            _signal_group(job.pid, signal.SIGKILL)  # whatever the job left behind in its group
        for attempt_file in (self.paths.exit_for(job.id, job.attempts),):
            try:
                attempt_file.unlink()
            except FileNotFoundError:
                pass

    # -- event-loop side --------------------------------------------------------------
    def adopt(self, job: JobRecord) -> None:
        """Watch an attempt started by an earlier daemon."""
        if job.pid is not None and job.id not in self._by_job:
            self._watch(job.id, job.attempts, job.pid, child=False)

    def fds(self) -> list[int]:
        return list(self._by_fd)

    def collect(self, fd: int) -> Exit | None:
        """The exit of the attempt whose pidfd became readable."""
        running = self._by_fd.pop(fd, None)
        if running is None:
            return None
        # reported once: forget the attempt (cleanup() still kills stray processes of its group)
        self._by_job.pop(running.job_id, None)
        os.close(fd)
        code = sig = None
        if running.child:
            try:
                _, status = os.waitpid(running.pid, os.WNOHANG)
            except ChildProcessError:
                status = None
            if status is not None:
                if os.WIFSIGNALED(status):
                    sig = os.WTERMSIG(status)
                else:
                    code = os.WEXITSTATUS(status)
        else:
            code = _read_exit(self.paths.exit_for(running.job_id, running.attempt))
            if code is None and running.kill_at is not None:
                sig = signal.SIGKILL  # we killed it and the wrapper died with it
        return Exit(running.job_id, running.attempt, code, sig)

    def kill_overdue(self) -> None:
        now = time.monotonic()
        for running in self._by_job.values():
            if running.kill_at is not None and now >= running.kill_at:
                _signal_group(running.pid, signal.SIGKILL)
                running.kill_at = float("inf")

    def next_kill(self) -> float | None:
        """Seconds until the next forced kill, if any."""
        pending = [r.kill_at for r in self._by_job.values() if r.kill_at not in (None, float("inf"))]
        return max(0.0, min(pending) - time.monotonic()) if pending else None

    def watched(self) -> int:
        return len(self._by_job)

    def _watch(self, job_id: str, attempt: int, pid: int, *, child: bool) -> None:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # already gone: a pipe at EOF is readable at once and reports it
            pidfd, write_end = os.pipe()
            os.close(write_end)
        running = _Attempt(job_id, attempt, pid, pidfd, child)
        self._by_job[job_id] = running
        self._by_fd[pidfd] = running


def latest_checkpoint(directory) -> str:
    """The checkpoint `latest` points to (gqa.runtime's layout), or ''."""
    pointer = os.path.join(str(directory), "latest")
    try:
        with open(pointer, encoding="utf-8") as fh:
            name = fh.read().strip()
    except OSError:
        return ""
    path = os.path.join(str(directory), name)
    return path if name and os.path.exists(path) else ""


def process_token(pid: int) -> str | None:
    """The process's start time: with the pid, tells it apart from a later process
    that reuses the pid. None if there is no such (live) process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read_exit(path) -> int | None:
    try:
        with open(path, encoding="ascii") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def discover_gpus() -> list[tuple[int, str]]:
    """(index, type) of the NVIDIA GPUs here, from nvidia-smi; [] when there are none."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        index, _, name = line.partition(",")
        if index.strip().isdigit():
            gpus.append((int(index), gpu_type_name(name.strip())))
    return gpus


def gpu_type_name(product: str) -> str:
    """`NVIDIA A10G` -> `a10g`, `NVIDIA H100 80GB HBM3` -> `h100`."""
    words = product.lower().replace("nvidia", "").replace("tesla", "").replace("geforce", "").split()
    return words[0] if words else "gpu"
