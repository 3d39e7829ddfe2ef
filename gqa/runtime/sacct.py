"""`sacct` inside a gqa job, for its own job: what batch scripts ask of it,
mostly a last line such as `sacct -j $SLURM_JOB_ID --format=JobID,Elapsed,MaxRSS,State`.

    -j/--jobs ID  -o/--format FIELDS  -n/--noheader  -P/--parsable2  -p/--parsable  -X/--allocations  -b/--brief

FIELDS are Slurm's names (any case, `Name%W` for a width). The job is
running while it asks, so its State is RUNNING, its End Unknown and its
ExitCode 0:0. What gqa does not measure (MaxRSS, AveCPU, ...) is empty, as
sacct leaves a value it lacks. Only the job's own line is listed, not its
steps. Other jobs are `gqa history` from a shell: asking for one exits 2."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from .slurm_job import OwnJob, Refused, read_option, timestamp, tool_main, value

DEFAULT_FIELDS = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
BRIEF_FIELDS = "JobID,State,ExitCode"
FLAGS = {"-n": "noheader", "--noheader": "noheader", "-P": "parsable2", "--parsable2": "parsable2",
         "-p": "parsable", "--parsable": "parsable", "-X": "", "--allocations": "", "-b": "brief", "--brief": "brief",
         "-a": "", "--allusers": "", "-D": "", "--duplicates": "", "-L": "", "--allclusters": ""}
VALUED = {"-j": "jobs", "--jobs": "jobs", "-o": "format", "--format": "format", "-S": "", "--starttime": "",
          "-E": "", "--endtime": "", "--units": "", "-u": "user", "--user": "user"}

Field = Callable[[OwnJob, Mapping[str, str], float], str]


def _span(seconds: int | None) -> str:
    """sacct's spans: [days-]HH:MM:SS."""
    if seconds is None:
        return "UNLIMITED"
    days, rest = divmod(max(0, seconds), 86_400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _cpus(job: OwnJob) -> int:
    return job.tasks * (job.cpus_per_task or 1)


def _gpus(env: Mapping[str, str]) -> int:
    visible = value(env, "CUDA_VISIBLE_DEVICES")
    return len([g for g in visible.split(",") if g.strip()]) if visible else 0


def _tres(job: OwnJob, env: Mapping[str, str]) -> str:
    gpus = _gpus(env)
    return f"cpu={_cpus(job)}" + (f",gres/gpu={gpus}" if gpus else "") + ",node=1"


def _cpu_time(job: OwnJob, now: float) -> str:
    used = job.time_used(now)
    return "" if used is None else _span(used * _cpus(job))


# name (lower case) -> (title, default width, value)
FIELDS: dict[str, tuple[str, int, Field]] = {
    "jobid": ("JobID", 12, lambda j, e, now: f"{j.array_job}_{j.array_task}" if j.array_job else j.job_id),
    "jobidraw": ("JobIDRaw", 12, lambda j, e, now: j.job_id),
    "jobname": ("JobName", 10, lambda j, e, now: j.name),
    "user": ("User", 9, lambda j, e, now: j.user),
    "uid": ("UID", 6, lambda j, e, now: str(os.getuid())),
    "group": ("Group", 9, lambda j, e, now: ""),
    "account": ("Account", 10, lambda j, e, now: j.account),
    "partition": ("Partition", 10, lambda j, e, now: j.partition or "gqa"),
    "state": ("State", 10, lambda j, e, now: "RUNNING"),
    "exitcode": ("ExitCode", 8, lambda j, e, now: "0:0"),
    "derivedexitcode": ("DerivedExitCode", 15, lambda j, e, now: "0:0"),
    "elapsed": ("Elapsed", 10, lambda j, e, now: _span(j.time_used(now) or 0)),
    "elapsedraw": ("ElapsedRaw", 10, lambda j, e, now: str(j.time_used(now) or 0)),
    "timelimit": ("Timelimit", 10, lambda j, e, now: _span(j.time_limit())),
    "start": ("Start", 19, lambda j, e, now: timestamp(j.start)),
    "end": ("End", 19, lambda j, e, now: "Unknown"),
    "nodelist": ("NodeList", 15, lambda j, e, now: j.nodelist),
    "nnodes": ("NNodes", 8, lambda j, e, now: "1"),
    "ntasks": ("NTasks", 8, lambda j, e, now: str(j.tasks)),
    "alloccpus": ("AllocCPUS", 10, lambda j, e, now: str(_cpus(j))),
    "ncpus": ("NCPUS", 10, lambda j, e, now: str(_cpus(j))),
    "reqcpus": ("ReqCPUS", 8, lambda j, e, now: str(_cpus(j))),
    "cputime": ("CPUTime", 10, lambda j, e, now: _cpu_time(j, now)),
    "alloctres": ("AllocTRES", 10, lambda j, e, now: _tres(j, e)),
    "reqtres": ("ReqTRES", 10, lambda j, e, now: _tres(j, e)),
    "workdir": ("WorkDir", 10, lambda j, e, now: j.workdir),
}
_UNKNOWN_WIDTH = 10


def parse(args: Sequence[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if read_option("sacct", arg, rest, FLAGS, VALUED, options):
            continue
        raise Refused(f"sacct: {arg} is not an option gqa's sacct knows inside a job "
                      "(-j, -o, -n, -P, -p, -X, -b)")
    return options


def columns(fmt: str) -> list[tuple[str, str, int]]:
    """(name, title, width) of each field of `fmt`: Slurm's names, any case, `Name%W` for a width."""
    out = []
    for item in filter(None, (part.strip() for part in fmt.split(","))):
        name, _, width = item.partition("%")
        known = FIELDS.get(name.lower())
        title = known[0] if known else name
        if width and not width.lstrip("-").isdigit():
            raise Refused(f"sacct: {item}: the width after % must be a number")
        out.append((name.lower(), title, int(width) if width else (known[1] if known else _UNKNOWN_WIDTH)))
    if not out:
        raise Refused("sacct: --format names no field")
    return out


def _cell(text: str, width: int) -> str:
    """sacct's fixed columns: right-aligned, a value too long cut with a + at its end."""
    size = abs(width)
    if len(text) > size:
        text = text[:size - 1] + "+"
    return text.ljust(size) if width < 0 else text.rjust(size)


def run(args: Sequence[str], env: Mapping[str, str], out: TextIO, now: float | None = None) -> int:
    options = parse(args)
    job = OwnJob.from_env(env)
    for job_id in filter(None, (i.strip() for i in options.get("jobs", "").split(","))):
        if not job.is_me(job_id.split(".")[0]):
            raise Refused(f"sacct: job {job_id}: a gqa job sees only itself (job {job.job_id or '?'}): "
                          f"use gqa history from a shell")
    users = set(filter(None, options.get("user", "").split(",")))
    if users - {job.user}:
        raise Refused(f"sacct: -u {','.join(sorted(users))}: a gqa job sees only its own user's job "
                      f"({job.user}): use gqa history from a shell")
    fields = columns(options.get("format", BRIEF_FIELDS if "brief" in options else DEFAULT_FIELDS))
    now = time.time() if now is None else now
    values = [FIELDS[name][2](job, env, now) if name in FIELDS else "" for name, _, _ in fields]
    if "parsable2" in options or "parsable" in options:
        end = "|" if "parsable" in options and "parsable2" not in options else ""
        if "noheader" not in options:
            out.write("|".join(title for _, title, _ in fields) + end + "\n")
        out.write("|".join(values) + end + "\n")
        return 0
    if "noheader" not in options:
        out.write(" ".join(_cell(title, w) for _, title, w in fields) + " \n")
        out.write(" ".join("-" * abs(w) for _, _, w in fields) + " \n")
    out.write(" ".join(_cell(text, w) for text, (_, _, w) in zip(values, fields)) + " \n")
    return 0


def main(args: Sequence[str] | None = None) -> None:
    tool_main(run, args)


if __name__ == "__main__":
    main()
