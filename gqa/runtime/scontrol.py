"""`scontrol` inside a gqa job, for what batch scripts ask of it:

    scontrol show hostnames [LIST]     one host a line ($SLURM_JOB_NODELIST by default)
    scontrol show hostlist LIST        the short spelling of a list (hostlistsorted: sorted)
    scontrol show job [ID]             this job, as key=value fields (-o: on one line)
    scontrol requeue $SLURM_JOB_ID     this job ends now and goes back to the queue

A job requeues itself as under Slurm (the self-resubmission idiom: `trap
'scontrol requeue $SLURM_JOB_ID' USR1` with `--signal=B:USR1@300`): the
request is left in the attempt's own files (`job_files.ask`), the job's
processes get SIGTERM as scancel sends it, and the local queue, reading the
request when the attempt ends, puts the job back in the queue (its next
attempt sees SLURM_RESTART_COUNT one higher, and resumes from its last
checkpoint). A job submitted with --no-requeue is refused with Slurm's
words and exit 1. On AWS Batch a job tells the queue nothing but its exit
code, so there it is refused (exit 2) naming `gqa requeue`.

Changing a job otherwise (requeuehold, update, hold, ...) is refused with
the gqa command that does it from a shell: inside a job there are no rights
to change jobs."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TextIO

from . import job_files
from .hostlist import HostListError, compress, expand
from .scancel import ask_queue, job_group, stop
from .slurm_job import OwnJob, Refused, tool_main, timestamp, value

DOES = ("gqa's scontrol does `show hostnames [LIST]`, `show hostlist LIST`, `show job [ID]` and "
        "`requeue $SLURM_JOB_ID` inside a job")
# what Slurm's scontrol changes, and the gqa command that does it from a shell
CHANGES = {"requeuehold": "gqa requeue", "update": "gqa update", "hold": "gqa hold",
           "uhold": "gqa hold", "release": "gqa release", "suspend": "gqa cancel", "resume": "gqa release",
           "top": "gqa update", "notify": "gqa logs", "cancel": "gqa cancel"}
OPTIONS = {"-o", "--oneliner", "-d", "--details", "-Q", "--quiet", "-a", "--all"}




def run(args: Sequence[str], env: Mapping[str, str], out: TextIO, now: float | None = None) -> int:
    oneliner = any(a in ("-o", "--oneliner") for a in args)
    words = [a for a in args if a not in OPTIONS]
    if words and words[0].startswith("-"):
        raise Refused(f"scontrol: {words[0]} is not an option gqa's scontrol knows; {DOES}")
    if not words:
        raise Refused(f"scontrol: {DOES}")
    command, rest = words[0].lower(), words[1:]
    if command == "requeue":
        return requeue(rest, env)
    if command in CHANGES:
        raise Refused(f"scontrol: {command} is not available inside a gqa job: use {CHANGES[command]} "
                      "from a shell")
    if command != "show" or not rest:
        raise Refused(f"scontrol: {' '.join(words)!r} is not something gqa's scontrol does; {DOES}")
    what, items = rest[0].lower(), rest[1:]
    if len(items) > 1:
        raise Refused(f"scontrol: show {what} takes one list or id, got {len(items)}: {' '.join(items)}")
    item = items[0] if items else ""
    try:
        if what in ("hostnames", "hostname"):
            hosts = expand(item or value(env, "SLURM_JOB_NODELIST", "SLURM_NODELIST")
                           or OwnJob.from_env(env).nodelist)
            out.write("".join(f"{host}\n" for host in hosts))
        elif what in ("hostlist", "hostlistsorted"):
            if not item:
                raise Refused(f"scontrol: show {what} needs a list of hosts, e.g. node1,node2")
            hosts = expand(item)
            out.write(compress(sorted(hosts) if what == "hostlistsorted" else hosts) + "\n")
        elif what in ("job", "jobs", "jobid"):
            out.write(show_job(OwnJob.from_env(env), item, oneliner, time.time() if now is None else now,
                               job_files.facts(env)))
        else:
            raise Refused(f"scontrol: show {what} is not something gqa's scontrol does; {DOES}")
    except HostListError as exc:
        raise Refused(f"scontrol: {exc}") from None
    return 0


# slurm_strerror(ESLURM_DISABLED): what slurmctld answers a requeue of a job that may not be requeued
DISABLED = "Requested operation is presently disabled"


def requeue(items: Sequence[str], env: Mapping[str, str]) -> int:
    """`scontrol requeue [JobId=]ID[,ID...]` for the job itself."""
    job = OwnJob.from_env(env)
    ids = [i.strip() for item in items for i in _without_key(item).split(",") if i.strip()]
    if not ids:
        raise Refused("scontrol: requeue needs a job id: inside a gqa job, scontrol requeue $SLURM_JOB_ID "
                      "requeues the job itself")
    for job_id in ids:
        if not job.is_me(job_id):
            raise Refused(f"scontrol: requeue {job_id}: a gqa job may requeue only itself "
                          f"(job {job.job_id or '?'}): use gqa requeue {job_id} from a shell")
    if env.get(job_files.BATCH_ENV):
        raise Refused("scontrol: requeue is not available inside a gqa job on AWS Batch, where a job tells the "
                      f"queue nothing but its exit code: use gqa requeue {ids[0]} from a shell")
    if job_files.facts(env).get("Requeue") == "0":
        sys.stderr.write(f"{DISABLED} for job {ids[0]}\n")
        return 1
    # found before the request is left: a job that is not stopped must not be requeued at its end
    group = job_group(env, tool="scontrol", instead=f"gqa requeue {ids[0]}")
    if not ask_queue(env, job_files.REQUEUE, "scontrol"):
        return 1
    stop(group)
    return 0


def _without_key(item: str) -> str:
    key, eq, rest = item.partition("=")
    return rest if eq and key.lower() in ("jobid", "job") else item


def show_job(job: OwnJob, job_id: str, oneliner: bool, now: float,
             facts: Mapping[str, str] | None = None) -> str:
    if job_id and not job.is_me(job_id):
        raise Refused(f"scontrol: show job {job_id}: a gqa job sees only itself (job {job.job_id or '?'}): "
                      f"use gqa status {job_id} from a shell")
    limit, used = job.time_limit(), job.time_used(now)
    facts = facts or {}
    fields = [
        [f"JobId={job.job_id}", f"JobName={job.name}"],
        [f"UserId={job.user}({os.getuid()})", f"GroupId={os.getgid()}"],
        ["JobState=RUNNING", "Reason=None"],
        [f"Requeue={facts.get('Requeue', '1')}", f"Restarts={job.restarts}", "BatchFlag=1"],
        [f"RunTime={_span(used, '00:00:00')}", f"TimeLimit={_span(limit, 'UNLIMITED')}"],
        [f"StartTime={timestamp(job.start)}", f"EndTime={timestamp(job.end)}"],
        [f"Partition={job.partition or 'gqa'}", f"Account={job.account}"],
        [f"NodeList={job.nodelist}", f"BatchHost={job.nodelist.split(',')[0]}"],
        ["NumNodes=1", f"NumCPUs={job.slurm_cpus}", f"NumTasks={job.tasks}", f"CPUs/Task={job.cpus_per_task or 1}"],
    ]
    # the files, in Slurm's order, where the queue said them (not on AWS, where none is the job's)
    fields += [[f"{key}={facts[key]}"] for key in ("Command",) if facts.get(key)]
    fields.append([f"WorkDir={facts.get('WorkDir') or job.workdir}"])
    fields += [[f"{key}={facts[key]}"] for key in ("StdErr", "StdIn", "StdOut") if facts.get(key)]
    if job.array_job:
        fields[0][1:1] = [f"ArrayJobId={job.array_job}", f"ArrayTaskId={job.array_task}"]
    if oneliner:
        return " ".join(f for line in fields for f in line) + "\n"
    return "".join(("   " if n else "") + " ".join(line) + "\n" for n, line in enumerate(fields)) + "\n"


def _span(seconds: int | None, missing: str) -> str:
    """scontrol's spans always carry two-digit hours: 00:01:05, 1-02:00:00."""
    if seconds is None:
        return missing
    days, rest = divmod(seconds, 86_400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def main(args: Sequence[str] | None = None) -> None:
    tool_main(run, args)


if __name__ == "__main__":
    main()
