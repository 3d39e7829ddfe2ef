"""`squeue` inside a gqa job, for its own job: what scripts ask it, mostly the
time left before the wall time ends (`squeue -h -j $SLURM_JOB_ID -o %L`).

    -h/--noheader  -j/--jobs ID  -o/--format FMT  -O/--Format FIELDS  -u/--user USER  --me  -t/--states  -a  -r

FMT takes Slurm's %[.][width]X fields for i A j u T t L l M D N R C P a q Q r b V Z S e F K
(%.8j: right-aligned in 8 columns, cut to 8). FIELDS are Slurm's names, any
case, each NAME[:[.][width][suffix]] as squeue reads them: 20 columns, cut,
by default; `.` right-aligns; a suffix follows the column (JobID:|,State:|
for fields split by |; no width: no padding). Other jobs are `gqa status`
from a shell: a job sees only itself, and asking for another exits 2."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from . import job_files
from .scontrol import PRIORITY, gpus, mebibytes, memory_mib, qos, tres, tres_per_node
from .slurm_job import OwnJob, Refused, duration, read_option, timestamp, tool_main, value

DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
FLAGS = {"-h": "noheader", "--noheader": "noheader", "--me": "me", "-a": "", "--all": "", "-r": "",
         "--array": "", "-l": "", "--long": ""}
VALUED = {"-j": "jobs", "--jobs": "jobs", "-o": "format", "--format": "format", "-O": "Format",
          "--Format": "Format", "-u": "user", "--user": "user", "-t": "states", "--states": "states",
          "-n": "name", "--name": "name"}
RUNNING_STATES = {"r", "running", "all"}
LONG_WIDTH = 20      # a --Format field's columns without a width
Field = Callable[[OwnJob, Mapping[str, str], float], str]


def _end(job: OwnJob, now: float) -> str:
    """A running job's end: NONE without a time limit, as squeue prints it."""
    return "NONE" if job.end is None else timestamp(job.end)


def _fact(key: str, missing: str = "") -> Field:
    return lambda j, env, now: job_files.facts(env).get(key) or missing


def _submitted(j: OwnJob, env: Mapping[str, str], now: float) -> str:
    facts = job_files.facts(env)
    return timestamp(int(facts["SubmitTime"])) if facts.get("SubmitTime", "").isdigit() else "Unknown"


# --Format's name (lower case) -> (title, value), as Slurm 22.05's squeue prints them
NAMED: dict[str, tuple[str, Field]] = {
    "jobarrayid": ("JOBID", lambda j, env, now: f"{j.array_job}_{j.array_task}" if j.array_job else j.job_id),
    "jobid": ("JOBID", lambda j, env, now: j.job_id),
    "arrayjobid": ("ARRAY_JOB_ID", lambda j, env, now: j.array_job or j.job_id),
    "arraytaskid": ("ARRAY_TASK_ID", lambda j, env, now: j.array_task or "N/A"),
    "name": ("NAME", lambda j, env, now: j.name),
    "username": ("USER", lambda j, env, now: j.user),
    "state": ("STATE", lambda j, env, now: "RUNNING"),
    "statecompact": ("ST", lambda j, env, now: "R"),
    "timeleft": ("TIME_LEFT", lambda j, env, now: duration(j.time_left(now))),
    "timelimit": ("TIME_LIMIT", lambda j, env, now: duration(j.time_limit())),
    "timeused": ("TIME", lambda j, env, now: duration(j.time_used(now) or 0)),
    "numnodes": ("NODES", lambda j, env, now: "1"),
    "nodelist": ("NODELIST", lambda j, env, now: j.nodelist),
    "reasonlist": ("NODELIST(REASON)", lambda j, env, now: j.nodelist),
    "batchhost": ("EXEC_HOST", lambda j, env, now: j.nodelist.split(",")[0]),
    "numcpus": ("CPUS", lambda j, env, now: str(j.tasks * (j.cpus_per_task or 1))),
    "numtasks": ("TASKS", lambda j, env, now: str(j.tasks)),
    "cpus-per-task": ("CPUS_PER_TASK", lambda j, env, now: str(j.cpus_per_task or 1)),
    "minmemory": ("MIN_MEMORY", lambda j, env, now: mebibytes(memory_mib(j, env))),
    "partition": ("PARTITION", lambda j, env, now: j.partition or "gqa"),
    "account": ("ACCOUNT", lambda j, env, now: j.account or "(null)"),
    "qos": ("QOS", lambda j, env, now: qos(env)),
    "priority": ("PRIORITY", lambda j, env, now: f"{PRIORITY / 0xFFFFFFFF:.14f}"),
    "prioritylong": ("PRIORITY", lambda j, env, now: str(PRIORITY)),
    "reason": ("REASON", lambda j, env, now: "None"),
    "tres-per-node": ("TRES_PER_NODE", lambda j, env, now: tres_per_node(env)),
    "gres": ("TRES_PER_NODE", lambda j, env, now: tres_per_node(env)),
    "tres-per-job": ("TRES_PER_JOB", lambda j, env, now: f"gres:gpu:{gpus(env)}" if value(env, "SLURM_GPUS")
                     else "N/A"),
    "tres-alloc": ("TRES_ALLOC", lambda j, env, now: tres(j, env)),
    "workdir": ("WORK_DIR", lambda j, env, now: job_files.facts(env).get("WorkDir") or j.workdir),
    "command": ("COMMAND", _fact("Command")),
    "stdout": ("STDOUT", _fact("StdOut")),
    "stderr": ("STDERR", _fact("StdErr")),
    "stdin": ("STDIN", _fact("StdIn")),
    "requeue": ("REQUEUE", _fact("Requeue", "1")),
    "restartcnt": ("RESTART_COUNT", lambda j, env, now: str(j.restarts)),
    "starttime": ("START_TIME", lambda j, env, now: timestamp(j.start)),
    "endtime": ("END_TIME", lambda j, env, now: _end(j, now)),
    "submittime": ("SUBMIT_TIME", _submitted),
    "eligibletime": ("ELIGIBLE_TIME", lambda j, env, now: timestamp(int(t)) if (
        t := job_files.facts(env).get("EligibleTime", "")).isdigit() else _submitted(j, env, now)),
    "dependency": ("DEPENDENCY", lambda j, env, now: "(null)"),
    "exit_code": ("EXIT_CODE", lambda j, env, now: "0"),
    "nice": ("NICE", lambda j, env, now: "0"),
}
# the format's letters, and the --Format name each stands for
LETTERS = {"i": "jobarrayid", "A": "jobid", "j": "name", "u": "username", "T": "state", "t": "statecompact",
           "L": "timeleft", "l": "timelimit", "M": "timeused", "D": "numnodes", "N": "nodelist", "R": "reasonlist",
           "C": "numcpus", "P": "partition", "a": "account", "q": "qos", "Q": "prioritylong", "r": "reason",
           "b": "tres-per-node", "V": "submittime", "Z": "workdir", "S": "starttime", "e": "endtime",
           "F": "arrayjobid", "K": "arraytaskid"}
_SPEC = re.compile(r"%(\.?)(\d*)(.)")


def parse(args: Sequence[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if read_option("squeue", arg, rest, FLAGS, VALUED, options):
            continue
        raise Refused(f"squeue: {arg} is not an option gqa's squeue knows inside a job "
                      "(-h, -j, -o, -O, -u, --me, -t, -n)")
    if "format" in options and "Format" in options:
        raise Refused("squeue: -o (--format) is incompatible with -O (--Format)")
    return options


def _column(text: str, width: int, right: bool) -> str:
    """Slurm's column: cut to `width`, then padded to it (0: as it is)."""
    if not width:
        return text
    text = text[:width]
    return text.rjust(width) if right else text.ljust(width)


def render(fmt: str, job: OwnJob, env: Mapping[str, str], now: float, header: bool) -> str:
    """One line of `fmt` for the job, or its header."""
    out, at = [], 0
    for match in _SPEC.finditer(fmt):
        out.append(fmt[at:match.start()])
        at = match.end()
        right, width, letter = match.groups()
        if letter == "%":
            out.append("%")
            continue
        if letter not in LETTERS:
            raise Refused(f"squeue: %{letter} in the format is not a field gqa's squeue fills "
                          f"({' '.join(LETTERS)})")
        title, field = NAMED[LETTERS[letter]]
        out.append(_column(title if header else field(job, env, now), int(width or 0), bool(right)))
    out.append(fmt[at:])
    return "".join(out).replace("\\t", "\t").replace("\\n", "\n") + "\n"


def render_long(fields: str, job: OwnJob, env: Mapping[str, str], now: float, header: bool) -> str:
    """One line of --Format `fields` (NAME[:[.][width][suffix]], split by commas), or its header."""
    out = []
    for item in filter(None, fields.split(",")):
        name, colon, spec = item.partition(":")
        if name.lower() not in NAMED:
            raise Refused(f"squeue: {name} in --Format is not a field gqa's squeue fills "
                          f"({','.join(NAMED)})")
        right = spec.startswith(".")
        spec = spec[right:]
        digits = len(spec) - len(spec.lstrip("0123456789"))
        width, suffix = (int(spec[:digits] or 0), spec[digits:]) if colon else (LONG_WIDTH, "")
        title, field = NAMED[name.lower()]
        out.append(_column(title if header else field(job, env, now), width, right) + suffix)
    return "".join(out) + "\n"


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

    def line(header: bool) -> str:
        if "Format" in options:
            return render_long(options["Format"], job, env, now, header)
        return render(fmt, job, env, now, header)

    if "noheader" not in options:
        out.write(line(header=True))
    states = {s.strip().lower() for s in options.get("states", "running").split(",")}
    names = set(filter(None, options.get("name", "").split(",")))
    if states & RUNNING_STATES and (not names or job.name in names):
        out.write(line(header=False))
    return 0


def main(args: Sequence[str] | None = None) -> None:
    tool_main(run, args)


if __name__ == "__main__":
    main()
