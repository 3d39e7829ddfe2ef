"""An attempt's process on this machine: the sh wrapper that holds it at a
gate until its launch is recorded and then records its exit status (the
executor's exactly-once launch, see executor.py), the token that tells the
process apart from a later one with the same pid, signals to its group, and
the batch shell and steps a warning signal goes to."""

from __future__ import annotations

import errno
import os
import signal

from ...runtime.job_process import is_srun

# Traps make sh wait for the job instead of dying first; traps are reset in
# the child, so the job still gets SIGTERM with its default disposition.
# SIGTERM reaches the wrapper only when gqa stops the attempt (stop=1): then the
# job's processes have their grace, which the daemon keeps (executor.py).
# $1 is the exit file (an argument, not an environment variable the job
# would inherit), made at launch holding STATUS_ROOM's blanks. The status is
# one write of 4 bytes over them, in place (`1<>`: no truncation), so it needs
# no new space on a full disk; a reader that finds only blanks (or nothing,
# a file of an earlier version) treats it as "no status yet".
# A wrapper given GQA_CGROUP_PROCS moves itself into its cell first (in parallel
# with the daemon recording the launch: a cgroup migration costs a fraction
# of a millisecond); one run as another user is placed by the daemon.
# A batch script that ends 0 after one of its srun steps failed ends with the
# first failed step's code, as under Slurm ("$1.d/steps": srun's record, one
# "<code> <step>" line per failed step that no retry took back).
_GATE = (
    "stop=; trap 'stop=1' TERM; trap : INT HUP; "
    '[ -z "$GQA_CGROUP_PROCS" ] || echo $$ > "$GQA_CGROUP_PROCS" || exit 125; unset GQA_CGROUP_PROCS; '
    'read -r gate || gate=; exec </dev/null; [ "$gate" = go ] || exit 125; '
)
_STEPS_AND_STATUS = (
    '[ "$rc" != 0 ] || ! [ -s "$f.d/steps" ] || { read -r s d < "$f.d/steps"; '
    'case $s in ""|*[!0-9]*|0) s=1;; esac; rc=$s; '
    'printf -- "--- gqa: the script ended 0 after a failed step (%s, exit code %s): the job ends %s\\n" '
    '"$d" "$s" "$s"; }; '
    'printf "%-3s\\n" "$rc" 1<>"$f"; exit "$rc"'
)
WRAPPER = _GATE + 'f=$1; shift; "$@"; rc=$?; ' + _STEPS_AND_STATUS
# With Slurm's --output, --error or --input ($2, $3, $4: paths, or empty):
# stdout (and stderr, without --error) goes through a fifo ("$1.d/out",
# "$1.d/err", made by the daemon) to a tee that appends it to the file and
# copies it to gqa's log (fd 3 keeps the log for the wrapper). The tees
# ignore the signals a job is stopped or warned with, so a job that catches
# SIGTERM can still print. Each tee also holds the write end of "$1.d/done"
# (fd 4), and nothing else does once the job starts: when the job has ended,
# a `cat` of its read end (fd 5) returns as the last tee exits, or after 5 s
# (a process the job left keeps a fifo open), when the tees are killed. The
# wait is a plain child of the wrapper: nothing of the wrapper's outlives it.
# An attempt being stopped ($stop) leaves its tees running: its processes may
# still print while they checkpoint within their grace, and the tees end with
# them (or with the group's SIGKILL when the grace runs out).
_TEE_IGNORES = "HUP INT QUIT TERM USR1 USR2 ALRM"
WRAPPER_STREAMS = _GATE + (
    'f=$1; o=$2; e=$3; i=$4; shift 4; t=; u=; exec 3>&1; '
    '[ -z "$o$e" ] || exec 4<>"$f.d/done" 5<"$f.d/done"; '
    f'if [ -n "$e" ]; then (trap "" {_TEE_IGNORES}; exec tee -a -- "$e" <"$f.d/err" 5<&-) 2>&3 & u=$!; '
    'exec 2>"$f.d/err"; fi; '
    f'if [ -n "$o" ]; then (trap "" {_TEE_IGNORES}; exec tee -a -- "$o" <"$f.d/out" 5<&-) 2>&3 & t=$!; '
    'exec >"$f.d/out"; [ -n "$e" ] || exec 2>&1; fi; '
    '[ -z "$o$e" ] || exec 4>&-; '
    'if [ -n "$i" ]; then "$@" <"$i" 3>&- 5<&-; else "$@" 3>&- 5<&-; fi; rc=$?; '
    'exec >&3 2>&3 3>&-; '
    'if [ -n "$t$u" ] && [ -z "$stop" ]; then timeout -s KILL 5 cat <&5 >/dev/null 2>&1; exec 5<&-; '
    '{ kill -9 $t $u; wait $t $u; } 2>/dev/null; fi; '
) + _STEPS_AND_STATUS
NEVER_RAN = 125  # the wrapper's code when the gate closed without "go"
STATUS_ROOM = b"   \n"   # an exit file's bytes before the status is written over them ("%-3s\n")
EXIT_READ = 16   # bytes of an exit file read: the wrapper's status is one short line


def read_exit(path) -> tuple[int | None, float | None]:
    """The status the wrapper wrote and when (the file's modification time),
    or (None, None) when it wrote none. Its first line only, of its first few
    bytes: on a shared box the file is the job's user's, who may have grown it
    (the daemon reads it as root). Taken only once the attempt's process is
    gone (executor.py): the user may write it while the job runs."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(EXIT_READ)
            text = head.split(b"\n", 1)[0].strip()
            if not text:
                return None, None
            return int(text.decode("ascii")), os.fstat(fh.fileno()).st_mtime
    except (OSError, ValueError):
        return None, None


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


def signal_group(pgid: int, sig: int) -> None:
    """`sig` to a group whose leader's pid cannot be another's now (the daemon's own
    child, not reaped yet); else signal_group_of."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


PIDFD_SIGNAL_PROCESS_GROUP = 4   # linux/pidfd.h (Linux 6.9): the process group led by the pidfd's process


def signal_group_of(pid: int, token: str | None, sig: int) -> bool:
    """`sig` to the process group `pid` leads, only while `pid` is still the process
    `token` names: a job's ended process leaves its pid to anyone (after a reboot, a
    shell, tmux or sshd), whose group must never be signalled. The pidfd holds the
    process checked, so where the kernel signals a group through it nothing that
    took the pid since is reached; elsewhere the group is signalled by its number
    right after the check. True if the group was signalled."""
    if not token:
        return False
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:   # no such process (ESRCH), or not a process's main thread (EINVAL)
        return False
    try:
        if process_token(pid) != token:
            return False
        try:
            signal.pidfd_send_signal(pidfd, sig, None, PIDFD_SIGNAL_PROCESS_GROUP)
            return True
        except OSError as exc:
            if exc.errno != errno.EINVAL:   # gone meanwhile (ESRCH), or not ours to signal (EPERM)
                return False
        try:   # a kernel before 6.9
            os.killpg(pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    finally:
        os.close(pidfd)


def _stat_fields(pid: int | str) -> list[str] | None:
    """/proc/<pid>/stat after the command name: state, ppid, pgrp, ..., starttime at 19."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()


def _all_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _live() -> list[tuple[int, str, str, int]]:
    """Every live process as (pid, ppid, pgrp, start time), from one pass over /proc."""
    found = []
    for pid in _all_pids():
        fields = _stat_fields(pid)
        if fields is not None and fields[0] not in ("Z", "X"):
            found.append((pid, fields[1], fields[2], int(fields[19])))
    return found


def children(pid: int, live: list[tuple[int, str, str, int]] | None = None) -> list[int]:
    """The live children of `pid`, oldest first."""
    return [p for _, p in sorted((start, p) for p, ppid, _, start in (live or _live()) if ppid == str(pid))]


def group_members(pgid: int, live: list[tuple[int, str, str, int]] | None = None) -> list[int]:
    """The live processes of process group `pgid`."""
    return [p for p, _, pgrp, _ in (live or _live()) if pgrp == str(pgid)]


def warn(wrapper: int, sig: int, batch_only: bool) -> list[int]:
    """Slurm's --signal to an attempt whose wrapper is `wrapper`: with B:,
    to the batch shell alone (the wrapper's newest child: its tees start
    before it); else, as on AWS (runtime.job_process.warning_targets), to the
    job's srun steps, which pass it to their tasks (a `| tee` in the script is
    no step and is left alone, as under Slurm); in a job without steps every
    other process of its group (a job that is one process gets it itself).
    Returns the pids signalled."""
    live = _live()
    kids = children(wrapper, live)
    shell = kids[-1:] if kids else []
    if batch_only:
        targets = shell
    else:
        others = [p for p in group_members(wrapper, live) if p != wrapper and p not in kids]
        targets = [p for p in others if is_srun(p)] or others or shell
    sent = []
    for pid in targets:
        try:
            os.kill(pid, sig)
            sent.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return sent
