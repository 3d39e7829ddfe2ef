"""`scontrol` inside a gqa job, for what batch scripts ask of it:

    scontrol show hostnames [LIST]     one host a line ($SLURM_JOB_NODELIST by default)
    scontrol show hostlist LIST        the short spelling of a list (hostlistsorted: sorted)
    scontrol show job [ID]             this job as Slurm prints it (-o: on one line; jobid=ID too)
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

import grp
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TextIO

from . import job_files
from .hostlist import HostListError, compress, expand
from .scancel import ask_queue, job_group, stop
from .slurm_job import OwnJob, Refused, number, tool_main, timestamp, value

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
    what, eq, named = what.partition("=")      # `show jobid=ID`, `show job=ID`, as Slurm reads them
    if eq:
        items = [named, *items]
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
                               job_files.facts(env), env))
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


# what slurmctld's priority/basic, Slurm's default, gives the first job it is told of: gqa orders jobs
# by tier and fair share, and has no number of the kind
PRIORITY = 4294901759


def show_job(job: OwnJob, job_id: str, oneliner: bool, now: float,
             facts: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None) -> str:
    """The job as Slurm 22.05's `scontrol show job` prints a running batch job: its lines and
    fields in Slurm's order, with Slurm's values for what a gqa job has no meaning for."""
    if job_id and not job.is_me(job_id):
        raise Refused(f"scontrol: show job {job_id}: a gqa job sees only itself (job {job.job_id or '?'}): "
                      f"use gqa status {job_id} from a shell")
    limit, used = job.time_limit(), job.time_used(now)
    facts, env = facts or {}, env or {}
    submitted = number(facts, "SubmitTime")
    eligible = timestamp(number(facts, "EligibleTime") or submitted)
    memory = memory_option(job, env)
    fields = [
        [f"JobId={job.job_id}", f"JobName={job.name}"],
        [f"UserId={job.user}({os.getuid()})", f"GroupId={_group(os.getgid())}", "MCS_label=N/A"],
        [f"Priority={PRIORITY}", "Nice=0", f"Account={job.account or '(null)'}", f"QOS={qos(env)}"],
        ["JobState=RUNNING", "Reason=None", "Dependency=(null)"],
        [f"Requeue={facts.get('Requeue', '1')}", f"Restarts={job.restarts}", "BatchFlag=1", "Reboot=0",
         "ExitCode=0:0"],
        [f"RunTime={_span(used, '00:00:00')}", f"TimeLimit={_span(limit, 'UNLIMITED')}", "TimeMin=N/A"],
        [f"SubmitTime={timestamp(submitted)}", f"EligibleTime={eligible}"],
        [f"AccrueTime={eligible}"],
        [f"StartTime={timestamp(job.start)}", f"EndTime={timestamp(job.end)}", "Deadline=N/A"],
        ["SuspendTime=None", "SecsPreSuspend=0", f"LastSchedEval={timestamp(job.start)}", "Scheduler=Main"],
        [f"Partition={job.partition or 'gqa'}"],
        ["ReqNodeList=(null)", "ExcNodeList=(null)"],
        [f"NodeList={job.nodelist}"],
        [f"BatchHost={job.nodelist.split(',')[0]}"],
        ["NumNodes=1", f"NumCPUs={job.slurm_cpus}", f"NumTasks={job.tasks}", f"CPUs/Task={job.cpus_per_task or 1}",
         "ReqB:S:C:T=0:0:*:*"],
        [f"TRES={tres(job, env)}"],
        ["Socks/Node=*", "NtasksPerN:B:S:C=0:0:*:*", "CoreSpec=*"],
        [f"MinCPUsNode={job.cpus_per_task or 1}", memory, "MinTmpDiskNode=0"],
        ["Features=(null)", "DelayBoot=00:00:00"],
        ["OverSubscribe=OK", "Contiguous=0", "Licenses=(null)", "Network=(null)"],
    ]
    # the files, in Slurm's order, where the queue said them (not on AWS, where none is the job's)
    fields += [[f"{key}={facts[key]}"] for key in ("Command",) if facts.get(key)]
    fields.append([f"WorkDir={facts.get('WorkDir') or job.workdir}"])
    fields += [[f"{key}={facts[key]}"] for key in ("StdErr", "StdIn", "StdOut") if facts.get(key)]
    fields.append(["Power="])
    if gpus(env):   # --gpus is the job's GPUs, --gpus-per-node and --gres the node's (one node: the same)
        fields.append([f"{'TresPerJob' if value(env, 'SLURM_GPUS') else 'TresPerNode'}={tres_per_node(env)}"])
    if job.array_job:
        fields[0][1:1] = [f"ArrayJobId={job.array_job}", f"ArrayTaskId={job.array_task}"]
    if oneliner:
        return " ".join(f for line in fields for f in line) + " \n"
    return "".join(("   " if n else "") + " ".join(line) + "\n" for n, line in enumerate(fields)) + "   \n\n"


def qos(env: Mapping[str, str]) -> str:
    """The job's tier, which gqa calls its QOS (SLURM_JOB_QOS); Slurm's default QOS without one."""
    return value(env, "SLURM_JOB_QOS") or "normal"


def gpus(env: Mapping[str, str]) -> int:
    """The job's GPUs: SLURM_GPUS_ON_NODE (a step's CUDA_VISIBLE_DEVICES may be fewer), else those visible."""
    count = number(env, "SLURM_GPUS_ON_NODE")
    if count is not None:
        return count
    visible = value(env, "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")
    return len([g for g in visible.split(",") if g.strip()])


def memory_mib(job: OwnJob, env: Mapping[str, str]) -> int:
    """The job's memory in MiB, from the one SLURM_MEM_PER_* variable its option set; 0 without."""
    per_node, per_cpu, per_gpu = (number(env, f"SLURM_MEM_PER_{what}") for what in ("NODE", "CPU", "GPU"))
    if per_node:
        return per_node
    if per_cpu:
        return per_cpu * job.slurm_cpus
    return (per_gpu or 0) * max(gpus(env), 1)


def memory_option(job: OwnJob, env: Mapping[str, str]) -> str:
    """MinMemoryCPU for --mem-per-cpu, else MinMemoryNode, as scontrol prints them (4G, 1000M)."""
    per_cpu = number(env, "SLURM_MEM_PER_CPU")
    if per_cpu and not number(env, "SLURM_MEM_PER_NODE"):
        return f"MinMemoryCPU={mebibytes(per_cpu)}"
    return f"MinMemoryNode={mebibytes(memory_mib(job, env))}"


def mebibytes(mib: int) -> str:
    """Slurm's exact units: 1000M, 4G, 2T (0 stays 0)."""
    if not mib:
        return "0"
    unit = 0
    while mib % 1024 == 0 and unit < 3:
        mib, unit = mib // 1024, unit + 1
    return f"{mib}{'MGTP'[unit]}"


def tres(job: OwnJob, env: Mapping[str, str], *, by_name: bool = False) -> str:
    """The job's trackable resources as Slurm writes them: cpu=8,mem=64G,node=1,billing=8,gres/gpu=2
    (billing is the CPUs, Slurm's without TRESBillingWeights); `by_name`: sorted, as sacct prints them."""
    mib, count = memory_mib(job, env), gpus(env)
    parts = [f"cpu={job.slurm_cpus}", *([f"mem={mebibytes(mib)}"] if mib else []), "node=1",
             f"billing={job.slurm_cpus}", *([f"gres/gpu={count}"] if count else [])]
    return ",".join(sorted(parts) if by_name else parts)


def tres_per_node(env: Mapping[str, str]) -> str:
    """squeue's %b and scontrol's TresPerNode: gres:gpu:N, N/A without GPUs."""
    count = gpus(env)
    return f"gres:gpu:{count}" if count else "N/A"


def _group(gid: int) -> str:
    try:
        return f"{grp.getgrgid(gid).gr_name}({gid})"
    except KeyError:
        return f"{gid}({gid})"


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
