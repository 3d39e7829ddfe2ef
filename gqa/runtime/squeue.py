"""`squeue` inside a gqa job, for its own job: what scripts ask it, mostly the
time left before the wall time ends (`squeue -h -j $SLURM_JOB_ID -o %L`).

    -h/--noheader  -j/--jobs ID  -o/--format FMT  -u/--user USER  --me  -t/--states  -a  -r

FMT takes Slurm's %[.][width]X fields for i A j u T t L l M D N R C P a Z S e F K
(%.8j: right-aligned in 8 columns, cut to 8). Other jobs are `gqa status`
from a shell: a job sees only itself, and asking for another exits 2."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from .slurm_job import OwnJob, Refused, duration, read_option, timestamp, tool_main

DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
FLAGS = {"-h": "noheader", "--noheader": "noheader", "--me": "me", "-a": "", "--all": "", "-r": "",
         "--array": "", "-l": "", "--long": ""}
VALUED = {"-j": "jobs", "--jobs": "jobs", "-o": "format", "--format": "format", "-u": "user", "--user": "user",
          "-t": "states", "--states": "states", "-n": "name", "--name": "name"}
RUNNING_STATES = {"r", "running", "all"}

Field = Callable[[OwnJob, float], str]
FIELDS: dict[str, tuple[str, Field]] = {
    "i": ("JOBID", lambda j, now: f"{j.array_job}_{j.array_task}" if j.array_job else j.job_id),
    "A": ("JOBID", lambda j, now: j.job_id),
    "j": ("NAME", lambda j, now: j.name),
    "u": ("USER", lambda j, now: j.user),
    "T": ("STATE", lambda j, now: "RUNNING"),
    "t": ("ST", lambda j, now: "R"),
    "L": ("TIME_LEFT", lambda j, now: duration(j.time_left(now))),
    "l": ("TIME_LIMIT", lambda j, now: duration(j.time_limit())),
    "M": ("TIME", lambda j, now: duration(j.time_used(now) or 0)),
    "D": ("NODES", lambda j, now: "1"),
    "N": ("NODELIST", lambda j, now: j.nodelist),
    "R": ("NODELIST(REASON)", lambda j, now: j.nodelist),
    "C": ("CPUS", lambda j, now: str(j.tasks * (j.cpus_per_task or 1))),
    "P": ("PARTITION", lambda j, now: j.partition or "gqa"),
    "a": ("ACCOUNT", lambda j, now: j.account),
    "Z": ("WORK_DIR", lambda j, now: j.workdir),
    "S": ("START_TIME", lambda j, now: timestamp(j.start)),
    "e": ("END_TIME", lambda j, now: timestamp(j.end)),
    "F": ("ARRAY_JOB_ID", lambda j, now: j.array_job or j.job_id),
    "K": ("ARRAY_TASK_ID", lambda j, now: j.array_task or "N/A"),
}
_SPEC = re.compile(r"%(\.?)(\d*)(.)")




def parse(args: Sequence[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if read_option("squeue", arg, rest, FLAGS, VALUED, options):
            continue
        raise Refused(f"squeue: {arg} is not an option gqa's squeue knows inside a job "
                      "(-h, -j, -o, -u, --me, -t, -n)")
    return options


def render(fmt: str, job: OwnJob, now: float, header: bool) -> str:
    """One line of `fmt` for the job, or its header."""
    out, at = [], 0
    for match in _SPEC.finditer(fmt):
        out.append(fmt[at:match.start()])
        at = match.end()
        right, width, letter = match.groups()
        if letter == "%":
            out.append("%")
            continue
        if letter not in FIELDS:
            raise Refused(f"squeue: %{letter} in the format is not a field gqa's squeue fills "
                          f"({' '.join(FIELDS)})")
        title, field = FIELDS[letter]
        text = title if header else field(job, now)
        if width:
            text = text[:int(width)]
            text = text.rjust(int(width)) if right else text.ljust(int(width))
        out.append(text)
    out.append(fmt[at:])
    return "".join(out).replace("\\t", "\t").replace("\\n", "\n") + "\n"


def run(args: Sequence[str], env: Mapping[str, str], out: TextIO, now: float | None = None) -> int:
    options = parse(args)
    job = OwnJob.from_env(env)
    for job_id in filter(None, options.get("jobs", "").split(",")):
        if not job.is_me(job_id.strip()):
            raise Refused(f"squeue: job {job_id.strip()}: a gqa job sees only itself (job {job.job_id or '?'}): "
                          f"use gqa status from a shell")
    users = set(filter(None, options.get("user", "").split(",")))
    if users - {job.user}:
        raise Refused(f"squeue: -u {','.join(sorted(users))}: a gqa job sees only its own user's job "
                      f"({job.user}): use gqa status from a shell")
    fmt = options.get("format", DEFAULT_FORMAT)
    now = time.time() if now is None else now
    if "noheader" not in options:
        out.write(render(fmt, job, now, header=True))
    states = {s.strip().lower() for s in options.get("states", "running").split(",")}
    names = set(filter(None, options.get("name", "").split(",")))
    if states & RUNNING_STATES and (not names or job.name in names):
        out.write(render(fmt, job, now, header=False))
    return 0


def main(args: Sequence[str] | None = None) -> None:
    tool_main(run, args)


if __name__ == "__main__":
    main()
