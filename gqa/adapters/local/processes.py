"""An attempt's process on this machine: the sh wrapper that holds it at a
gate until its launch is recorded and then records its exit status (the
executor's exactly-once launch, see executor.py), the token that tells the
process apart from a later one with the same pid, and signals to its group."""

from __future__ import annotations

import os

# Traps make sh wait for the job instead of dying first; traps are reset in
# the child, so the job still gets SIGTERM with its default disposition.
# $1 is the exit file (an argument, not an environment variable the job
# would inherit). The status is one write of at most 3 bytes; a reader that
# finds the file empty treats it as "no status yet".
# A wrapper given GQA_CGROUP_PROCS moves itself into its cell first (in parallel
# with the daemon recording the launch: a cgroup migration costs a fraction
# of a millisecond); one run as another user is placed by the daemon.
WRAPPER = (
    'trap : TERM INT HUP; '
    '[ -z "$GQA_CGROUP_PROCS" ] || echo $$ > "$GQA_CGROUP_PROCS" || exit 125; unset GQA_CGROUP_PROCS; '
    'read -r gate || gate=; exec </dev/null; [ "$gate" = go ] || exit 125; '
    'f=$1; shift; "$@"; rc=$?; printf "%s" "$rc" > "$f"; exit "$rc"'
)
NEVER_RAN = 125  # the wrapper's code when the gate closed without "go"


def read_exit(path) -> tuple[int | None, float | None]:
    """The status the wrapper wrote and when (the file's modification time),
    or (None, None) when it wrote none."""
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
            if not text:
                return None, None
            return int(text), os.fstat(fh.fileno()).st_mtime
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
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
