"""`scancel` inside a gqa job, for its own job: `scancel $SLURM_JOB_ID`.

A job has no way to ask the queue to change it (it carries no rights over
jobs), so cancelling itself is done as Slurm's node daemon does it: the
request is left in the attempt's own files (`job_files.ask`), then SIGCONT
and SIGTERM go to every process of the job (the batch shell, its srun steps,
which pass it to their tasks). The local queue reads the request when the
attempt ends and records the job CANCELLED ("cancelled itself"): it does
not run again. On AWS Batch nothing but the exit code reaches the queue, so
there the job ends with the code SIGTERM leaves (143), a failure: `gqa
cancel` from a shell is the cancel that keeps it from running again.

    scancel [-s/--signal SIG [-f/--full]] [-Q] [-v] ID

With -s the signal goes to the job's srun steps only, as in Slurm (the
batch shell too with -f), and nothing is cancelled. Other jobs, and
-u/-n/-t filters, exit 2 naming `gqa cancel`."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from . import job_files
from .job_process import group_members, is_srun, signal_process
from .slurm_job import OwnJob, Refused, read_option, tool_main
from .slurm_tools import STEP_STATUS_ENV

FLAGS = {"-f": "full", "--full": "full", "-Q": "", "--quiet": "", "-v": "", "--verbose": "", "-i": "",
         "--interactive": ""}
VALUED = {"-s": "signal", "--signal": "signal"}
FILTERS = {"-u", "--user", "-n", "--name", "--jobname", "-t", "--state", "-p", "--partition", "-A", "--account",
           "--me", "-b", "--batch", "-w", "--nodelist", "-q", "--qos", "-R", "--reservation"}


def parse(args: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    options: dict[str, str] = {}
    ids: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("-"):
            ids.extend(filter(None, (i.strip() for i in arg.split(","))))
            continue
        if read_option("scancel", arg, rest, FLAGS, VALUED, options):
            continue
        name = arg.partition("=")[0] if arg.startswith("--") else arg[:2]
        if name in FILTERS:
            raise Refused(f"scancel: {name} is not available inside a gqa job, which may cancel only "
                          "itself (scancel $SLURM_JOB_ID): use gqa cancel from a shell")
        else:
            raise Refused(f"scancel: {arg} is not an option gqa's scancel knows inside a job (-s, -f, -Q, -v)")
    return options, ids


def signal_number(text: str) -> int:
    name = text.strip().upper().removeprefix("SIG")
    try:
        number = int(name) if name.isdigit() else int(getattr(signal, "SIG" + name))
        signal.Signals(number)
    except (AttributeError, ValueError):
        raise Refused(f"scancel: {text!r} is not a signal") from None
    return number


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent, process group) of `pid`, from /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[2])
    except (OSError, IndexError, ValueError):
        return None


def _carries(pid: int, name: str, text: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return f"{name}={text}".encode() in environ.read().split(b"\0")
    except OSError:
        return False


def job_group(env: Mapping[str, str], pid: int | None = None, *, tool: str = "scancel",
              instead: str = "gqa cancel") -> int:
    """The process group of the whole job: that of the outermost process above this one that was
    started with this attempt's own $GQA_STEP_STATUS (the local wrapper, or on AWS the job's
    command), so nothing outside the job is signalled, whatever group a task made for itself."""
    status = env.get(STEP_STATUS_ENV, "")
    if not status:
        raise Refused(f"{tool}: this is not a gqa job's process ($GQA_STEP_STATUS is not set): "
                      f"use {instead} from a shell")
    group = None
    pid = os.getpid() if pid is None else pid
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        found = _stat(pid)
        if found is None:
            break
        if _carries(pid, STEP_STATUS_ENV, status):
            group = found[1]
        pid = found[0]
    if group is None:
        raise Refused(f"{tool}: the job's processes cannot be found: use {instead} from a shell")
    return group


def run(args: Sequence[str], env: Mapping[str, str], out: TextIO) -> int:
    options, ids = parse(args)
    job = OwnJob.from_env(env)
    if not ids:
        raise Refused("scancel: no job id: inside a gqa job, scancel $SLURM_JOB_ID cancels the job itself")
    for job_id in ids:
        if not job.is_me(job_id):
            raise Refused(f"scancel: job {job_id}: a gqa job may cancel only itself (job {job.job_id or '?'}): "
                          f"use gqa cancel {job_id} from a shell")
    group = job_group(env)
    if "signal" in options:
        signum = signal_number(options["signal"])
        # Slurm signals the steps alone unless --full; srun passes it on to its tasks
        targets = [p for p in group_members(group) if p != os.getpid() and ("full" in options or is_srun(p))]
        for pid in targets:
            signal_process(pid, signum, group=False)
        return 0
    if not ask_queue(env, job_files.CANCEL, "scancel"):
        return 1
    stop(group)
    return 0


def ask_queue(env: Mapping[str, str], word: str, tool: str) -> bool:
    """Leave the job's request for the local queue, where there is one to read it; False
    (and why, on stderr) where it cannot be left: then the job is not stopped either."""
    folder = job_files.directory(env)
    if folder is None:
        return True
    try:
        job_files.ask(folder, word)
    except OSError as exc:
        sys.stderr.write(f"{tool}: cannot leave the request for the queue in {folder}: "
                         f"{exc.strerror or exc}; the job goes on\n")
        return False
    return True


def stop(group: int) -> None:
    """SIGCONT and SIGTERM to the job's whole process group, as Slurm's node daemon stops a job."""
    # the tool is in the job's group itself: it stays to exit 0, as Slurm's returns at once
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal_process(group, signal.SIGCONT, group=True)
    signal_process(group, signal.SIGTERM, group=True)


def main(args: Sequence[str] | None = None) -> None:
    tool_main(run, args)


if __name__ == "__main__":
    main()
