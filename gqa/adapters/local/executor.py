"""Compute on this machine: each attempt a child process in its own process
group, pinned to its GPUs with CUDA_VISIBLE_DEVICES, output to a log file.

Exactly once, by construction: a launch starts a small sh wrapper
(processes.py) that waits on a gate (its stdin, a pipe only the daemon
holds) before it runs anything.
The supervisor records the launch (pid and start time), then release()
opens the gate. If the daemon dies before that, the pipe closes, the read
ends without "go" and the wrapper exits without running the job: a restart
finds either a recorded attempt to re-adopt or nothing at all, never an
unrecorded copy.

The wrapper records the exit status on a descriptor the daemon opened (the
exit file), so an attempt that outlives a daemon crash can still be
settled, and the file's modification time says when the job ended. The
file is removed only after the result is committed (forget()). On a shared
box the file is the job's user's (the wrapper runs as them), so what it
says is taken only once the attempt's process is gone as the daemon itself
tells (its pidfd, its pid and start time): a status written while the
process runs ends nothing, and the time is kept between when the daemon last
saw the process running and when it saw it gone.

Every process an attempt starts lives in its cell (containment/: a cgroup,
or a subreaper and a marker) and is killed when the attempt ends. Exits are
watched with pidfds (no polling).

What a Slurm script expects of its node: the SLURM_* variables and thread
counts (models/slurm_env.py), srun and scontrol first on PATH
(slurm_commands.py), an attempt that asks for N CPUs pinned to N cores no
other attempt holds (cpu_pinning.py), --output/--error/--input files
(job_streams.py), and --signal's warning before the wall time ends, sent
from the daemon's loop (kill_overdue) to the batch shell or the steps."""

from __future__ import annotations

import errno
import logging
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ...models.errors import BackendUnavailable, LaunchFailed, NotFound
from ...models.job import JobRecord
from ...models.outcome import ExitKind
from ...models.signals import WarningSignal, warning_signal
from ...models.slurm_env import attempt_env, slurm_env
from ...ports import Exit, Inventory, Launched
from ...runtime import job_files, user_file
from ...runtime.layout import POINTER
from ...runtime.login_shell import with_bash_env
from ...runtime.slurm_tools import STEP_STATUS_ENV, first_failed_step
from ..clock import boot_clock
from .cpu_pinning import choose_cores, pin, pinned_cores, usable_cores
from .job_streams import Streams, open_streams, streams_of
from .paths import StatePaths
from .processes import (NEVER_RAN, STATUS_ROOM, WRAPPER, WRAPPER_STREAMS, group_members, process_token, read_exit,
                        signal_group, signal_group_of, warn)
from .slurm_commands import Installer, bash_env_of, install_slurm_commands
from .storage_errors import translate

_log = logging.getLogger("gqa.executor")   # `log` is an attempt's log descriptor below

# a launch that failed for these reasons failed for the machine, not the job: retried, not failed
MACHINE_ERRORS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EMFILE, errno.ENFILE, errno.EAGAIN,
                            errno.ENOMEM, errno.EIO})


@dataclass
class _Attempt:
    job_id: str
    attempt: int
    pid: int
    pidfd: int
    child: bool                      # ours to waitpid; False when re-adopted after a restart
    token: str | None = None         # its start time: a re-adopted wrapper is signalled only while it is this one
    kill_at: float | None = None     # SIGKILL the group then, if still alive
    gate: int | None = None          # write end of the gate while the attempt is held back
    abandoned: bool = False          # never released: its end is no attempt's end
    log: str | None = None
    cores: frozenset[int] = field(default_factory=frozenset)   # pinned to these; none: not pinned
    warning: WarningSignal | None = None   # Slurm's --signal, sent once at warn_at (on time.monotonic)
    warn_at: float | None = None
    draining: bool = False           # stopped, its wrapper gone, its group still in its grace: not reported yet
    # on the wall clock, as the exit file's time: when the daemon last saw the process running, and first saw
    # it gone; the end the file gives is kept between them (the job's user may write the file)
    seen_alive: float = 0.0
    seen_gone: float | None = None


class LocalExecutor:
    """`containment` (containment/) keeps every process of an attempt in
    one cell; without one only the process group is killed. `as_owner`
    runs each job as the Unix user who owns it (a daemon run by root for
    every user of the machine). `slurm_installer` writes the Slurm commands
    (tests give their own; by default gqa.runtime's)."""

    holds_launches = True   # an attempt waits at its gate until release()
    launch_is_start = True  # a released process runs at once

    def __init__(self, paths: StatePaths, inventory: Inventory, *, base_env: dict[str, str] | None = None,
                 containment=None, as_owner: bool = False, slurm_installer: Installer | None = None,
                 host: str | None = None):
        self.paths = paths
        self._inventory = inventory
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.containment = containment
        self.as_owner = as_owner
        self._by_job: dict[str, _Attempt] = {}
        # the start tokens of the attempts this executor launched or adopted, by job, until forgotten: this
        # boot's, so began() may read them after the process is gone (its end not settled yet)
        self._tokens: dict[str, str] = {}
        self._by_fd: dict[int, _Attempt] = {}
        self.host = host or socket.gethostname()
        self._usable = usable_cores()
        self._slurm_installer = slurm_installer
        self._slurm_bin: Path | None = None
        self._slurm_installed = False
        self._next_look = 0.0   # on time.monotonic: when kill_overdue() next notes which processes still run
        if as_owner:   # each job's user writes its own exit file there, and may list nothing
            paths.exits.mkdir(parents=True, exist_ok=True)
            os.chmod(paths.exits, 0o711)

    # -- Compute port -------------------------------------------------------------
    def inventory(self) -> Inventory:
        return self._inventory

    def launch(self, job: JobRecord, gpus: tuple[int, ...], attempt: int) -> Launched:
        spec = job.spec
        workdir = spec.workdir or os.getcwd()
        account = self._account(job)
        argv = spec.argv()
        identity = {} if account is None else account.popen_identity()
        streams = streams_of(job, workdir, self.host) if (spec.output or spec.error or spec.input) else Streams()
        cores, crowded = self._cores_for(job)
        umask = job_umask(job)
        cell = None
        log = None
        try:   # the queue's own files: a failure here is the machine's (full disk...), retried later
            checkpoint_dir = self._private_dir(self.paths.checkpoint_for(job.id), account)
            exit_file = self.paths.exit_for(job.id, attempt)
            # made now, the job's user's where it runs as one (a directory only root may list), and its
            # status's bytes reserved: the wrapper writes over them, so its one record of the exit needs no
            # space a job that fills the disk could have taken (the daemon's own record may fail then)
            reserve = self._open_private(exit_file, account, append=False)
            try:
                os.write(reserve, STATUS_ROOM)
            finally:
                os.close(reserve)
            # the attempt's own directory, the job's user's: srun records failed steps there
            files = self._private_dir(_files_of(exit_file), account)
            self._note_facts(files, job, workdir, streams, account)
            if spec.script is not None:   # the script as submitted, run as Slurm runs its spool's copy
                argv = spec.argv(script=self._keep_script(files / SCRIPT, spec.script.text, account))
            for name, path in ((OUT, streams.output), (ERR, streams.error)):
                if path:
                    self._fifo(files / name, account)
            if streams.output or streams.error:   # its writers are the tees: the wrapper waits on it for them
                self._fifo(files / DONE, account)
            log = self._open_private(self.paths.log_for(job.id), account)
            os.write(log, f"--- gqa: attempt {attempt} of job {job.id} on {_where(gpus)} at "
                          f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {shlex.join(argv)}\n".encode())
            if crowded:
                os.write(log, f"--- gqa: {crowded}\n".encode())
            resume, unread = latest_checkpoint(checkpoint_dir)
            if unread:
                os.write(log, f"--- gqa: {unread}\n".encode())
            if self.containment is not None:
                cell = self.containment.prepare(job.id, attempt, cpus=spec.resources.cpus,
                                                memory=spec.resources.memory)
        except OSError as exc:
            if log is not None:
                os.close(log)
            self._discard(job, attempt, None, cell)
            raise translate(exc, exc.filename or self.paths.home) or BackendUnavailable(str(exc)) from None
        try:   # the job's own files: one it cannot open is its own error
            if streams.any and not os.path.isdir(workdir):   # said as such, not as a file it cannot write there
                raise LaunchFailed(_why_not_started(FileNotFoundError() if not os.path.exists(workdir)
                                                    else NotADirectoryError(), workdir))
            open_streams(streams, attempt, identity, umask)
        except LaunchFailed:
            os.close(log)
            self._discard(job, attempt, None, cell)
            raise
        for said in (crowded, unread):
            if said:
                _log.warning("job %s: %s", job.id, said)
        env = self._environment(job, gpus, attempt, checkpoint_dir, resume, cell, cores)
        env["SLURM_UMASK"] = f"{umask:04o}"
        if streams.any:
            wrapper = ["/bin/sh", "-c", WRAPPER_STREAMS, "gqa-job", str(exit_file), *streams.wrapper_args(), *argv]
        else:
            wrapper = ["/bin/sh", "-c", WRAPPER, "gqa-job", str(exit_file), *argv]
        gate_r, gate_w = os.pipe()
        try:
            proc = subprocess.Popen(wrapper, cwd=workdir, env=env, stdin=gate_r, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True, umask=umask,
                                    **identity)
        except (ValueError, OSError) as exc:   # ValueError: an embedded NUL
            self._discard(job, attempt, gate_w, cell)
            if isinstance(exc, OSError) and exc.errno in MACHINE_ERRORS:
                raise   # the machine's fault, not the job's: the supervisor retries later
            raise LaunchFailed(_why_not_started(exc, workdir)) from None
        finally:
            os.close(gate_r)
            os.close(log)
        # Popen keeps a handle that would reap the child behind our back; we reap via the pidfd
        proc.returncode = 0
        if cores:   # before its gate opens: everything it starts inherits them
            pin(proc.pid, cores)
        running = self._watch(job.id, attempt, proc.pid, child=True)
        running.gate, running.log, running.cores = gate_w, str(self.paths.log_for(job.id)), cores
        running.token = process_token(proc.pid) or ""
        self._tokens[job.id] = running.token
        self._schedule_warning(running, job, time.time())   # started now, on the daemon's clock
        if cell is not None and self.as_owner:
            try:
                self.containment.place(cell, proc.pid)
            except OSError:
                running.abandoned = True
                self._close_gate(running)   # it must not run uncontained: it exits at the gate
                raise
        return Launched(pid=proc.pid, token=running.token)

    def _environment(self, job: JobRecord, gpus: tuple[int, ...], attempt: int, checkpoint_dir, resume: str,
                     cell, cores: frozenset[int]) -> dict:
        base = job.submit_env if job.submit_env is not None else self.base_env
        account = self._account(job)   # who the job runs as: the daemon's user unless it runs jobs as their owners
        slurm = slurm_env(job, attempt, devices=gpus, host=self.host, started_at=time.time(),
                          cpus_on_node=len(cores) or len(self._usable),
                          uid=os.getuid() if account is None else account.uid,
                          gid=os.getgid() if account is None else account.gid)
        env = attempt_env(base, slurm, job.spec.env)
        env.update(job.extra_env)
        commands = self._slurm_commands()
        if commands is not None:
            env["PATH"] = f"{commands}{os.pathsep}{env.get('PATH') or os.defpath}"
            with_bash_env(env, bash_env_of(commands))   # a login shell's profile may set PATH anew
        env.update({
            STEP_STATUS_ENV: str(_files_of(self.paths.exit_for(job.id, attempt)) / STEPS),
            "CUDA_VISIBLE_DEVICES": _gpus(gpus),
            # gqa's indexes are nvidia-smi's and NVML's, in PCI bus order; CUDA's own default is fastest first
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "GQA_JOB_ID": job.id,
            "GQA_ATTEMPT": str(attempt),
            "GQA_CHECKPOINT_DIR": str(checkpoint_dir),
            "GQA_RESUME_FROM": resume,
        })
        if cell is not None:
            # a wrapper run as the job's user may not write to the cgroup: the daemon places it (launch())
            env.update({k: v for k, v in cell.env.items() if k != "GQA_CGROUP_PROCS" or not self.as_owner})
        return env

    def release(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            running = self._by_job.get(job_id)
            if running is not None and running.gate is not None:
                try:
                    os.write(running.gate, b"go\n")
                except OSError:   # it died while held back: its end reports it
                    pass
                self._close_gate(running)

    def abandon(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            running = self._by_job.get(job_id)
            if running is not None and running.gate is not None:
                running.abandoned = True
                self._close_gate(running)   # EOF: the wrapper exits without running the job

    def terminate(self, job: JobRecord, grace: float) -> None:
        running = self._by_job.get(job.id)
        if running is None and self.alive(job):   # started by an earlier daemon and not watched yet
            running = self.adopt(job)
        if running is None or running.kill_at is not None:
            return
        self._signal(running, signal.SIGTERM)
        running.kill_at = time.monotonic() + grace

    def alive(self, job: JobRecord) -> bool:
        if job.pid is None:
            return False
        token = process_token(job.pid)
        return token is not None and token == job.proc_token

    def ended(self, job: JobRecord) -> bool:
        """Its wrapper has exited (its pidfd, or its pid and start time no longer a live process), its end
        not settled yet (its exit file stands until then). What the exit file says is not asked: the job's
        user may write it while the job runs, and a stop must still reach the job."""
        if job.pid is None:   # not launched, or its launch not recorded
            return False
        running = self._by_job.get(job.id)
        if running is not None and running.attempt == job.attempts:
            if running.gate is not None:   # held back: it has not run
                return False
            seen = time.time()
            if _readable(running.pidfd):
                return True
            running.seen_alive = seen
            return False
        # collected and not settled, or not watched yet: gone unless its recorded process still runs
        return not self.alive(job) and self.paths.exit_for(job.id, job.attempts).exists()

    def reap(self, job: JobRecord) -> Exit | None:
        exit_file = self.paths.exit_for(job.id, job.attempts)
        code, ended_at = read_exit(exit_file)
        if code is None:
            # no status, yet it asked to be requeued or cancelled: it ended as it asked
            asked = _own_request(exit_file)
            return None if asked is None else Exit(job.id, job.attempts, None, None, *asked)
        return self._exit(job.id, job.attempts, code, None, ended_at)

    def cleanup(self, job: JobRecord) -> None:
        if job.pid is not None:
            # whatever the job left behind in its group, while its wrapper stands: once gone, its pid may be
            # another's (the cell below holds what it left; a wrapper of ours was cleared as it was reaped)
            signal_group_of(job.pid, job.proc_token, signal.SIGKILL)
        if self.containment is not None and job.attempts:
            self.containment.kill(self.containment.cell(job.id, job.attempts))

    def forget(self, job: JobRecord) -> None:
        self._tokens.pop(job.id, None)
        exit_file = self.paths.exit_for(job.id, job.attempts)
        try:
            exit_file.unlink()
        except FileNotFoundError:
            pass
        _remove_files(exit_file)
        if self.containment is not None and job.attempts:
            self.containment.release(self.containment.cell(job.id, job.attempts))

    # -- event-loop side --------------------------------------------------------------
    def adopt(self, job: JobRecord) -> _Attempt | None:
        """Watch an attempt started by an earlier daemon."""
        if job.pid is None:
            return None
        if job.id not in self._by_job:
            running = self._watch(job.id, job.attempts, job.pid, child=False)
            running.log, running.token = str(self.paths.log_for(job.id)), job.proc_token
            if job.proc_token:
                self._tokens[job.id] = job.proc_token
            if job.cpus:   # its cores stay taken: new attempts are pinned beside it
                running.cores = pinned_cores(job.pid, self._usable)
            if job.started_at is not None and not (_files_of(self.paths.exit_for(job.id, job.attempts)) /
                                                   WARNED).exists():
                # where the boot clock puts its start: the recorded one may predate a step of the wall clock
                now = time.time()
                self._schedule_warning(running, job, self.began([job], now).get(job.id, job.started_at), now)
        return self._by_job[job.id]

    def began(self, jobs: Iterable[JobRecord], now: float) -> dict[str, float]:
        """AttemptClock: an attempt began when its wrapper did, a start the kernel
        keeps on the boot clock (the process's token, in clock ticks since boot): one this executor
        launched or adopted, ended or not, or one whose process still runs."""
        ticks, since_boot = os.sysconf("SC_CLK_TCK"), boot_clock()
        out = {}
        for job in jobs:
            if job.pid is None or not job.proc_token or not job.proc_token.isdigit():
                continue
            if self._tokens.get(job.id) == job.proc_token or process_token(job.pid) == job.proc_token:
                out[job.id] = now - (since_boot - int(job.proc_token) / ticks)
        return out

    def fds(self) -> list[int]:
        return list(self._by_fd)

    def running_logs(self) -> list[str]:
        """The log files of the attempts running now (to cap them)."""
        return [r.log for r in self._by_job.values() if r.log and not r.abandoned]

    def collect(self, fd: int) -> Exit | None:
        """The exit of the attempt whose pidfd became readable (None for one that never ran)."""
        running = self._by_fd.pop(fd, None)
        if running is None:
            return None
        if running.seen_gone is None:
            running.seen_gone = time.time()
        if self._drains(running):
            # a stopped job's processes keep their grace after its batch shell ends, as under Slurm: the
            # attempt ends when they are gone or the grace runs out (kill_overdue() hands its pidfd back)
            running.draining = True
            return None
        # reported once: forget the attempt (cleanup() still kills stray processes of its cell)
        if self._by_job.get(running.job_id) is running:
            del self._by_job[running.job_id]
        os.close(fd)
        self._close_gate(running)
        code = sig = None
        if running.child:
            # what it left in its group, while the unreaped wrapper keeps its pid from being another's
            signal_group(running.pid, signal.SIGKILL)
            try:
                _, status = os.waitpid(running.pid, os.WNOHANG)
            except ChildProcessError:
                status = None
            if status is not None:
                if os.WIFSIGNALED(status):
                    sig = os.WTERMSIG(status)
                else:
                    code = os.WEXITSTATUS(status)
        if running.abandoned:
            if self.containment is not None:
                self.containment.release(self.containment.cell(running.job_id, running.attempt))
            return None
        recorded, written_at = read_exit(self.paths.exit_for(running.job_id, running.attempt))
        ended_at = _seen_end(written_at, running)
        if running.child and code == NEVER_RAN and recorded is None:
            # released, yet it never ran the job: it could not enter its cell (the machine's fault)
            return Exit(running.job_id, running.attempt, None, None, ExitKind.CAPACITY,
                        "its process could not enter its cgroup", ended_at=ended_at)
        if not running.child:   # the status our own child's wait gave is its own; an adopted one's, the file's
            code = recorded
            if code is None and running.kill_at is not None:
                sig = signal.SIGKILL  # we killed it and the wrapper died with it
        return self._exit(running.job_id, running.attempt, code, sig, ended_at)

    def reap_strays(self) -> int:
        """Reap zombies of processes that escaped their job and ended (they
        re-parent to a subreaper daemon), never a wrapper's: its status is ours."""
        if self.containment is None:
            return 0
        return self.containment.reap_strays({r.pid for r in self._by_job.values() if r.child} |
                                            {r.pid for r in self._by_fd.values() if r.child})

    def close(self) -> None:
        """At the daemon's stop: the containment's empty root goes."""
        if self.containment is not None:
            self.containment.close()

    def kill_overdue(self) -> None:
        """Kill what outlived its grace, and send the warning signals that are due; note which
        processes still run (called at each turn of the daemon's loop)."""
        self._note_running()
        self._warn_due(time.monotonic())
        now = time.monotonic()
        for running in self._by_job.values():
            if running.kill_at is not None and now >= running.kill_at:
                self._signal(running, signal.SIGKILL)
                if self.containment is not None:
                    self.containment.kill(self.containment.cell(running.job_id, running.attempt))
                running.kill_at = float("inf")
            if running.draining and (running.kill_at == float("inf") or not group_members(running.pid)):
                running.draining = False
                self._by_fd[running.pidfd] = running   # readable: collect() reports the end now

    def next_kill(self) -> float | None:
        """Seconds until the next forced kill or warning signal, if any."""
        pending = [r.kill_at - time.monotonic() for r in self._by_job.values()
                   if r.kill_at is not None and r.kill_at != float("inf")]
        pending += [r.warn_at - time.monotonic() for r in self._by_job.values() if r.warn_at is not None]
        pending += [DRAIN_POLL for r in self._by_job.values() if r.draining]   # a group's end wakes nothing
        return max(0.0, min(pending)) if pending else None

    def watched(self) -> int:
        return sum(1 for r in self._by_job.values() if not r.abandoned)

    # -- the parts ------------------------------------------------------------------------
    def _note_running(self) -> None:
        """Stamp each watched process that still runs as seen running now, at most every LOOK_EVERY:
        the earliest end its exit file may give (one poll over every pidfd)."""
        if time.monotonic() < self._next_look or not self._by_fd:
            return
        self._next_look = time.monotonic() + LOOK_EVERY
        seen = time.time()   # before the poll: each process not ended by then ran at least until now
        poller = select.poll()
        for fd in self._by_fd:
            poller.register(fd, select.POLLIN)
        ended = {fd for fd, _ in poller.poll(0)}
        for fd, running in self._by_fd.items():
            if fd not in ended and running.gate is None:
                running.seen_alive = seen

    def _exit(self, job_id: str, attempt: int, code: int | None, sig: int | None, ended_at: float | None) -> Exit:
        exit_file = self.paths.exit_for(job_id, attempt)
        asked = _own_request(exit_file)
        if asked is not None:   # its code is the stop it asked for (or an exit 0 before the stop came)
            return Exit(job_id, attempt, code, sig, *asked, ended_at=ended_at)
        if self.containment is not None and (sig == signal.SIGKILL or code == 128 + signal.SIGKILL):
            if self.containment.oom_killed(self.containment.cell(job_id, attempt)):
                return Exit(job_id, attempt, code, sig, ExitKind.OOM, "the kernel's out-of-memory killer",
                            ended_at=ended_at)
        detail = _failed_step(exit_file) if code else ""
        return Exit(job_id, attempt, code, sig, ExitKind.STEP if detail else ExitKind.APP, detail, ended_at=ended_at)

    def _cores_for(self, job: JobRecord) -> tuple[frozenset[int], str]:
        """The cores to pin a job that asks for CPUs to (none for one that asks for none), and why
        they are not all free, if they are not."""
        if not job.cpus:
            return frozenset(), ""
        taken = [r.cores for r in self._by_job.values() if r.cores and not r.abandoned]
        return choose_cores(job.cpus, self._usable, taken)

    def _slurm_commands(self) -> Path | None:
        """srun and scontrol's directory, installed at the first launch."""
        if not self._slurm_installed:
            self._slurm_installed = True
            self._slurm_bin = install_slurm_commands(self.paths.home / "slurm-bin", shared=self.as_owner,
                                                     installer=self._slurm_installer)
        return self._slurm_bin

    def _schedule_warning(self, running: _Attempt, job: JobRecord, started_at: float,
                          now: float | None = None) -> None:
        """Slurm's --signal: `before` seconds before the wall time ends (at once when that is sooner).
        Kept on the monotonic clock, which a step of the wall clock (`now`'s) does not move."""
        text, limit = job.spec.limits.signal, job.attempt_wall_time   # a --time-min attempt: the granted one
        if text is None or not limit:
            return
        running.warning = warning_signal(text)
        due = max(started_at, started_at + limit - running.warning.before)
        running.warn_at = time.monotonic() + (due - (time.time() if now is None else now))

    def _warn_due(self, now: float) -> None:
        for running in self._by_job.values():
            if running.warn_at is None or running.warn_at > now or running.gate is not None or running.abandoned:
                continue
            warning, running.warn_at = running.warning, None
            if warning is None or running.kill_at is not None or _readable(running.pidfd):   # stopping, or ended
                continue
            sent = warn(running.pid, warning.number, warning.batch_only)
            if not sent:   # released a moment ago: its batch shell is not there yet
                running.warning, running.warn_at = warning, now + WARN_RETRY
                continue
            _log.info("job %s: warning signal SIG%s sent to %s", running.job_id, warning.name,
                      ", ".join(map(str, sent)))
            try:   # once per attempt, a restarted daemon included
                (_files_of(self.paths.exit_for(running.job_id, running.attempt)) / WARNED).touch()
            except OSError:
                pass

    @staticmethod
    def _signal(running: _Attempt, sig: int) -> None:
        """`sig` to the attempt's group: our own child's pid is ours until reaped; a
        re-adopted wrapper's only while it is still the process we adopted, or, once
        it is gone, while its group lives on (the kernel gives no process a pid still
        in use as a group's id)."""
        if running.child:
            signal_group(running.pid, sig)
        elif not signal_group_of(running.pid, running.token, sig) and running.draining:
            signal_group(running.pid, sig)

    @staticmethod
    def _drains(running: _Attempt) -> bool:
        """Whether an attempt whose wrapper has exited waits for the rest of its group:
        only one being stopped, within its grace, while something of its group lives."""
        if running.abandoned or running.kill_at is None or running.kill_at == float("inf"):
            return False
        return time.monotonic() < running.kill_at and bool(group_members(running.pid))

    def _discard(self, job: JobRecord, attempt: int, gate_w: int | None, cell) -> None:
        """Undo what a launch that did not start made."""
        if gate_w is not None:
            os.close(gate_w)
        exit_file = self.paths.exit_for(job.id, attempt)
        try:
            exit_file.unlink()
        except OSError:
            pass
        _remove_files(exit_file)
        if cell is not None:
            self.containment.release(cell)

    def _account(self, job: JobRecord):
        if not self.as_owner:
            return None
        from .accounts import Account

        try:
            return Account.for_user(job.owner)
        except NotFound as exc:   # the job's owner has no account here: it can never run as them
            raise LaunchFailed(f"{exc}; a job runs as the user who submitted it") from None

    @staticmethod
    def _open_private(path, account, *, append: bool = True) -> int:
        """A descriptor on `path`, created private to the job's user (O_APPEND
        for a log: rotation truncates it in place under the writer)."""
        if account is None:
            flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
            return os.open(path, flags, 0o600)
        from .accounts import own_file

        with own_file(path, account, mode=0o600) as fh:
            if not append:
                os.ftruncate(fh.fileno(), 0)
            return os.dup(fh.fileno())

    def _note_facts(self, files: Path, job: JobRecord, workdir: str, streams: Streams, account) -> None:
        """What `scontrol show job` tells of the attempt that its environment does not, as
        Slurm tells it: absolute paths, the patterns expanded, stderr with stdout when not
        apart, gqa's log where the job names no --output (its stdout goes there); when it was
        submitted and could first start (--begin), in epoch seconds."""
        spec = job.spec
        stdout = streams.output or str(self.paths.log_for(job.id))
        values = {"Command": spec.script.path if spec.script is not None else shlex.join(spec.argv()),
                  "WorkDir": os.path.abspath(workdir), "StdOut": stdout, "StdErr": streams.error or stdout,
                  "StdIn": streams.input or "/dev/null", "Requeue": "1" if spec.requeue else "0",
                  "SubmitTime": str(int(job.submitted_at)),
                  "EligibleTime": str(int(max(job.submitted_at, job.begin or 0)))}
        fd = self._open_private(files / job_files.FACTS, account, append=False)
        try:
            job_files.write_facts(fd, values)
        finally:
            os.close(fd)

    @classmethod
    def _keep_script(cls, path: Path, text: str, account) -> str:
        """The job's copy of its batch script, only its user's, executable as the file was."""
        fd = cls._open_private(path, account, append=False)
        try:
            os.fchmod(fd, 0o700)
            view = memoryview(text.encode("utf-8", "surrogatepass"))
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        return str(path)

    @staticmethod
    def _private_dir(path, account):
        if account is None:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            return path
        from .accounts import own_dir

        own_dir(path, account, mode=0o700)
        return path

    @staticmethod
    def _fifo(path: Path, account) -> None:
        """A fifo for a stream the wrapper tees, the job's user's."""
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        os.mkfifo(path, 0o600)
        if account is not None:
            os.chown(path, account.uid, account.gid, follow_symlinks=False)

    @staticmethod
    def _close_gate(running: _Attempt) -> None:
        if running.gate is not None:
            os.close(running.gate)
            running.gate = None

    def _watch(self, job_id: str, attempt: int, pid: int, *, child: bool) -> _Attempt:
        seen = time.time()
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # already gone: a pipe at EOF is readable at once and reports it
            pidfd, write_end = os.pipe()
            os.close(write_end)
        running = _Attempt(job_id, attempt, pid, pidfd, child)
        if not _readable(pidfd):   # running when first watched: its end comes after this
            running.seen_alive = seen
        self._by_job[job_id] = running
        self._by_fd[pidfd] = running
        return running


# an attempt's files beside its exit file, in "<exit file>.d" (processes.py's
# wrapper reads them there): srun's failed steps, the fifos of --output and
# --error, the mark that its warning signal was sent
STEPS, OUT, ERR, WARNED, DONE = "steps", "out", "err", "warned", "done"
SCRIPT = "slurm_script"   # the batch script's copy, named as in Slurm's spool
WARN_RETRY = 0.1   # seconds until a warning that found no process is tried again
DEFAULT_UMASK = 0o022   # a login shell's usual umask, which sbatch passes on as SLURM_UMASK
DRAIN_POLL = 0.1   # seconds between looks at a stopped attempt's group after its wrapper ended
LOOK_EVERY = 1.0   # seconds at least between two notes of which watched processes still run
MAX_POINTER = 256   # bytes of a checkpoint's `latest` pointer read: it holds one checkpoint's name


def job_umask(job: JobRecord) -> int:
    """The umask a job's processes run with, as Slurm's are: SLURM_UMASK where the
    job's own env sets it, else 022 (not the daemon's 077, which would make every
    file a job writes its user's alone)."""
    text = job.spec.env.get("SLURM_UMASK", "")
    try:
        value = int(text, 8)
    except ValueError:
        return DEFAULT_UMASK
    return value if 0 <= value <= 0o777 else DEFAULT_UMASK


def _readable(fd: int) -> bool:
    """A pidfd reads readable once its process has exited (a closed pipe, at once)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _seen_end(written_at: float | None, running: _Attempt) -> float | None:
    """When the attempt ended: the exit file's time (kept while the daemon could not look: paused,
    busy), no earlier than the daemon last saw its process running nor later than it saw it gone.
    The file is the job's user's on a shared box, its time theirs to set."""
    if written_at is None:
        return None
    gone = running.seen_gone if running.seen_gone is not None else time.time()
    return max(running.seen_alive, min(written_at, gone))


def _files_of(exit_file: Path) -> Path:
    return exit_file.with_name(exit_file.name + ".d")


def _remove_files(exit_file: Path) -> None:
    try:
        os.rmdir(_files_of(exit_file))      # most often empty: no step failed, no --output
    except FileNotFoundError:
        pass
    except OSError:
        shutil.rmtree(_files_of(exit_file), ignore_errors=True)


def _failed_step(exit_file: Path) -> str:
    """The first failed srun step of the attempt, as its reason, or ''."""
    failed = first_failed_step(_files_of(exit_file) / STEPS)
    if failed is None:
        return ""
    code, step = failed
    number, _, command = (step or "step").partition(": ")
    return f"srun {number} ({command}) failed with exit code {code}" if command else \
        f"srun {number} failed with exit code {code}"


# what a job may ask of the queue from inside, as the exit kind and the words its reason gives
OWN_REQUESTS = {job_files.REQUEUE: (ExitKind.SELF_REQUEUE, "scontrol requeue $SLURM_JOB_ID"),
                job_files.CANCEL: (ExitKind.SELF_CANCEL, "scancel $SLURM_JOB_ID")}


def _own_request(exit_file: Path) -> tuple[ExitKind, str] | None:
    """What the attempt asked of the queue from inside (job_files.ask), or None."""
    word = job_files.asked(_files_of(exit_file))
    return None if word is None else OWN_REQUESTS[word]


def latest_checkpoint(directory) -> tuple[str, str]:
    """The checkpoint `latest` points to (gqa.runtime's layout), or '', and why the pointer
    could not be read ('' when it was, or there is none). The directory is the job's user's
    and a shared box's daemon reads it as root: the pointer is read as user_file reads, a
    short name at most, so a link to a root-only file or a FIFO gives no resume point."""
    pointer = os.path.join(str(directory), POINTER)
    try:
        name = user_file.read_text(pointer, limit=MAX_POINTER).strip()
    except FileNotFoundError:
        return "", ""
    except OSError as exc:
        return "", f"checkpoint pointer {pointer} not read ({user_file.why_unread(exc)}): no GQA_RESUME_FROM"
    if not name or "/" in name or name in (".", ".."):
        # a checkpoint is an entry of the directory (ckpt-3): a path elsewhere (../x, /root/y) would have
        # root tell the job whether a file it may not see exists
        return "", (f"checkpoint pointer {pointer} names {name[:80]!r}, not an entry of its directory: "
                    "no GQA_RESUME_FROM")
    path = os.path.join(str(directory), name)
    return (path if os.path.lexists(path) else ""), ""    # lexists: root follows no link of the job's


def _gpus(gpus: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in gpus)


def _where(gpus: tuple[int, ...]) -> str:
    return f"GPUs {_gpus(gpus)}" if gpus else "no GPU (CPU only)"


def _why_not_started(exc: Exception, workdir: str) -> str:
    """Why the job's own launch cannot work, in the user's words."""
    if isinstance(exc, ValueError):
        return f"its command, environment or directory holds a NUL byte ({exc})"
    if isinstance(exc, FileNotFoundError):
        return f"working directory {workdir} does not exist"
    if isinstance(exc, NotADirectoryError):
        return f"working directory {workdir} is not a directory"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or workdir}"
    return str(exc)
