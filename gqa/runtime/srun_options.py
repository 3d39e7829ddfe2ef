"""What `srun` is asked inside a gqa job, and the environment of each task it
starts. Pure: the job's environment is given, nothing is started here.

A gqa job has one node, so a step is N copies of a command on it. Options
that shape a step on one node are honoured; those that only matter to
Slurm's placement across nodes are accepted and have nothing to do (--mpi,
--cpu-bind, --mem), or say so on stderr (--hint, -m, --network, ...); any
other exits 2 naming it."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .hostlist import HostListError, expand
from .slurm_job import hostname, number, value


class SrunError(Exception):
    """The step cannot start as asked; the message says why, in one line, with its numbers. `code`
    is srun's exit: 2 for what gqa's srun does not take, Slurm's own where Slurm refuses the step."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Options:
    command: list[str] = field(default_factory=list)
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    gpus_per_task: int | None = None
    gpus: int | None = None
    ntasks_per_gpu: int | None = None
    cpus_per_task: int | None = None
    cpus_per_gpu: int | None = None
    gpu_bind: str | None = None        # None: SLURM_GPU_BIND's, if the job has one
    overlap: bool = False              # the step shares GPUs that other steps hold
    time_limit: int | None = None      # seconds the step's tasks may run; None: as long as the job
    label: bool = False
    unbuffered: bool = False           # -u: a task's output passes straight through, not line by line
    kill_on_bad_exit: bool = False
    name: str = ""
    export: str = "ALL"
    output: str = ""
    error: str = ""
    open_mode: str = "truncate"        # how -o/-e files are opened: truncate or append
    input: str = ""
    chdir: str = ""
    wait: int = 0                      # seconds after the first task ends before the rest are stopped; 0: never
    nodelist: str = ""
    jobid: str = ""
    notes: list[str] = field(default_factory=list)     # one line each on stderr: what is accepted but not done


class _Option(NamedTuple):
    attribute: str          # "" when it has nothing to do
    takes_value: bool
    note: str = ""          # said on stderr when given: what it would do on many nodes, and why not here


_ONE_NODE = "the step's tasks share the job's one node"
_OPTIONS: dict[str, _Option] = {
    "-n": _Option("ntasks", True), "--ntasks": _Option("ntasks", True),
    "--ntasks-per-node": _Option("ntasks_per_node", True), "--ntasks-per-gpu": _Option("ntasks_per_gpu", True),
    "-N": _Option("nodes", True), "--nodes": _Option("nodes", True),
    "-w": _Option("nodelist", True), "--nodelist": _Option("nodelist", True), "--jobid": _Option("jobid", True),
    "--gpus-per-task": _Option("gpus_per_task", True), "-G": _Option("gpus", True), "--gpus": _Option("gpus", True),
    "--gres": _Option("gres", True), "--gpus-per-node": _Option("gpus", True),
    "-c": _Option("cpus_per_task", True), "--cpus-per-task": _Option("cpus_per_task", True),
    "--cpus-per-gpu": _Option("cpus_per_gpu", True),
    "-t": _Option("time_limit", True), "--time": _Option("time_limit", True),
    "-l": _Option("label", False), "--label": _Option("label", False),
    "-K": _Option("kill_on_bad_exit", False), "--kill-on-bad-exit": _Option("kill_on_bad_exit", False),
    "-J": _Option("name", True), "--job-name": _Option("name", True), "--export": _Option("export", True),
    "-o": _Option("output", True), "--output": _Option("output", True),
    "-e": _Option("error", True), "--error": _Option("error", True), "--open-mode": _Option("open_mode", True),
    "-i": _Option("input", True), "--input": _Option("input", True),
    "-D": _Option("chdir", True), "--chdir": _Option("chdir", True),
    "-W": _Option("wait", True), "--wait": _Option("wait", True), "--mpi": _Option("mpi", True),
    "-u": _Option("unbuffered", False), "--unbuffered": _Option("unbuffered", False),
    "--gpu-bind": _Option("gpu_bind", True), "--overlap": _Option("overlap", False),
    # every step takes only the GPUs it asks for (step_gpus.py), as with Slurm's --exact and --exclusive
    "--exclusive": _Option("", False), "--exact": _Option("", False),
    "--cpu-bind": _Option("", True), "--cpu_bind": _Option("", True), "--mem": _Option("", True),
    "--mem-per-cpu": _Option("", True), "--mem-per-gpu": _Option("", True),
    "-Q": _Option("", False), "--quiet": _Option("", False), "-v": _Option("", False), "--verbose": _Option("", False),
    "--hint": _Option("", True, f"a placement hint; {_ONE_NODE}"),
    "--threads-per-core": _Option("", True, f"a placement hint; {_ONE_NODE}"),
    "-m": _Option("", True, f"lays tasks out across nodes; {_ONE_NODE}"),
    "--distribution": _Option("", True, f"lays tasks out across nodes; {_ONE_NODE}"),
    "--accel-bind": _Option("", True, "binds tasks to accelerators near their CPUs; each task sees its own GPUs"),
    "--network": _Option("", True, f"chooses the network between nodes; {_ONE_NODE}"),
}
# a value that may be left out: --exclusive[=user], -K/--kill-on-bad-exit[=0|1]
_OPTIONAL_VALUE = {"--exclusive", "--kill-on-bad-exit"}
_LOCAL_HOSTS = ("localhost",)
# Slurm's time forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def parse(args: Sequence[str], env: Mapping[str, str]) -> Options:
    """srun's options up to the command (the first word that is not an option, or after --)."""
    opts = Options()
    rest = list(args)
    while rest and rest[0].startswith("-") and rest[0] != "-":
        arg = rest.pop(0)
        if arg == "--":
            break
        for name, given in _split(arg, rest):
            _apply(opts, name, given)
    opts.command = rest
    if not opts.command:
        raise SrunError("srun: no command to run (srun [options] COMMAND [ARGS...])")
    _check_job(opts, env)
    return opts


def _check_job(opts: Options, env: Mapping[str, str]) -> None:
    """-w and --jobid may name this job and its one node only; Slurm's words and exit code."""
    job = value(env, "SLURM_JOB_ID", "GQA_JOB_ID")
    if opts.jobid and job and opts.jobid.partition(".")[0].strip() != job:
        raise SrunError(f"srun: error: Unable to confirm allocation for job {opts.jobid}: Invalid job id "
                        f"specified (this job is {job})", code=1)
    if opts.nodelist:
        try:
            hosts = expand(opts.nodelist)
        except HostListError as exc:
            raise SrunError(f"srun: -w {opts.nodelist}: {exc}") from None
        here = {*_LOCAL_HOSTS, hostname(env), hostname(env).split(".")[0], socket.gethostname(),
                socket.gethostname().split(".")[0]}
        others = [host for host in hosts if host not in here]
        if others:
            raise SrunError(f"srun: error: Unable to create step for job {job}: Requested node configuration is "
                            f"not available ({','.join(others)} is not this job's node {hostname(env)})", code=1)


def _split(arg: str, rest: list[str]) -> list[tuple[str, str | None]]:
    """One word of options as (option, value) pairs: --opt=v, --opt v, -n4, -n 4, -lK."""
    if arg.startswith("--"):
        name, eq, attached = arg.partition("=")
        if name not in _OPTIONS:
            raise _unknown(name)
        if _OPTIONS[name][1] and not eq:
            if name in _OPTIONAL_VALUE:
                return [(name, None)]
            if not rest:
                raise SrunError(f"srun: {name} needs a value")
            return [(name, rest.pop(0))]
        if eq and not _OPTIONS[name][1] and name not in _OPTIONAL_VALUE:
            raise SrunError(f"srun: {name} takes no value, got {arg}")
        return [(name, attached if eq else None)]
    pairs: list[tuple[str, str | None]] = []
    for at in range(1, len(arg)):
        name = "-" + arg[at]
        if name not in _OPTIONS:
            raise _unknown(name)
        if _OPTIONS[name][1]:
            attached = arg[at + 1:]
            if not attached:
                if not rest:
                    raise SrunError(f"srun: {name} needs a value")
                attached = rest.pop(0)
            pairs.append((name, attached))
            break
        pairs.append((name, None))
    return pairs


def _unknown(name: str) -> SrunError:
    return SrunError(f"srun: {name} is not an option gqa's srun knows: a gqa job is one node, whose steps take "
                     "-n, --ntasks-per-node, -N 1, -w, --gpus-per-task, -G, --ntasks-per-gpu, -c, --cpus-per-gpu, "
                     "-t, -l, -K, -J, --export, -o, -e, --open-mode, -i, -D, --wait, --mpi, --cpu-bind, "
                     "--gpu-bind, --exclusive, --exact, --overlap, -u")


def _apply(opts: Options, name: str, given: str | None) -> None:
    attribute, _, note = _OPTIONS[name]
    text = "" if given is None else given.strip()
    if note:
        opts.notes.append(f"srun: {name}{'=' + text if text else ''}: {note}")
    if attribute in ("ntasks", "ntasks_per_node", "ntasks_per_gpu", "cpus_per_task", "cpus_per_gpu"):
        setattr(opts, attribute, _count(name, text, least=1))
    elif attribute in ("gpus_per_task", "gpus"):
        setattr(opts, attribute, _count(name, text.rpartition(":")[2], least=0))
    elif attribute == "gres":
        kind, _, rest = text.partition(":")
        if kind == "none":          # Slurm's way to ask for no GPUs at all
            opts.gpus = 0
        elif kind != "gpu":
            raise SrunError(f"srun: --gres={text}: gqa's steps know gpu[:type]:N and none only")
        else:
            opts.gpus = _count(name, rest.rpartition(":")[2] or "1", least=0)
    elif attribute == "nodes":
        low, _, high = text.partition("-")
        if low.strip() != "1" or (high and not high.strip().isdigit()):
            raise SrunError(f"srun: {name} {text}: a gqa job is one node, so a step runs on 1 node")
    elif attribute == "kill_on_bad_exit":
        opts.kill_on_bad_exit = text not in ("0",)
    elif attribute in ("label", "unbuffered", "overlap"):
        setattr(opts, attribute, True)
    elif attribute == "time_limit":
        opts.time_limit = _time_limit(name, text)
    elif attribute == "open_mode":
        if text not in ("append", "truncate"):
            raise SrunError(f"srun: {name}={text}: takes append or truncate")
        opts.open_mode = text
    elif attribute == "gpu_bind":
        opts.gpu_bind = text
    elif attribute == "wait":
        opts.wait = _count(name, text, least=0)
    elif attribute == "export":
        opts.export = text or "ALL"
    elif attribute == "mpi":
        if text.lower() not in ("none", ""):
            opts.notes.append(f"srun: --mpi={text}: gqa starts the tasks without a PMI server; each task has "
                              "SLURM_PROCID and SLURM_NTASKS, and an MPI program that needs PMI starts alone")
    elif attribute:
        setattr(opts, attribute, given or "")


def _time_limit(name: str, text: str) -> int | None:
    """Seconds from Slurm's time forms (a bare number is minutes); None for 0, UNLIMITED or INFINITE."""
    if text.upper() in ("UNLIMITED", "INFINITE", "-1"):
        return None
    match = _TIME.fullmatch(text)
    if not match:
        raise SrunError(f"srun: {name} {text}: not a time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS)")
    days, first, second, third = (int(part) if part else 0 for part in match.groups())
    if match.group(1):              # D-HH[:MM[:SS]]
        seconds = days * 86_400 + first * 3_600 + second * 60 + third
    elif match.group(4):            # HH:MM:SS
        seconds = first * 3_600 + second * 60 + third
    else:                           # MM[:SS]
        seconds = first * 60 + second
    return seconds or None


def _count(name: str, text: str, *, least: int) -> int:
    if not text.isdigit() or int(text) < least:
        raise SrunError(f"srun: {name} takes a whole number of {least} or more, got {text!r}")
    return int(text)


# -- the step's tasks ------------------------------------------------------------------------------------
def job_gpus(env: Mapping[str, str]) -> list[str]:
    """The job's GPUs as CUDA numbers them: CUDA_VISIBLE_DEVICES, or, where nothing set it (a
    container that sees only its own GPUs), 0..N-1 for SLURM_GPUS_ON_NODE or NVIDIA_VISIBLE_DEVICES."""
    if "CUDA_VISIBLE_DEVICES" in env:
        return [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    count = number(env, "SLURM_GPUS_ON_NODE")
    if count is None:
        nvidia = value(env, "NVIDIA_VISIBLE_DEVICES")
        count = 0 if nvidia.lower() in ("", "all", "none", "void") else len(nvidia.split(","))
    return [str(n) for n in range(count)]


def step_size(opts: Options, env: Mapping[str, str]) -> int:
    if opts.ntasks is not None:
        if opts.ntasks_per_node is not None and opts.ntasks > opts.ntasks_per_node:
            raise SrunError(f"srun: -n {opts.ntasks} with --ntasks-per-node={opts.ntasks_per_node} needs "
                            f"{-(-opts.ntasks // opts.ntasks_per_node)} nodes; a gqa job is one node")
        return opts.ntasks
    if opts.ntasks_per_node is not None:
        return opts.ntasks_per_node
    return number(env, "SLURM_NTASKS", "SLURM_NPROCS") or 1


def step_gpu_count(opts: Options, env: Mapping[str, str], ntasks: int) -> int | None:
    """How many of the job's GPUs the step asks for, by its options or the job's
    SLURM_GPUS_PER_TASK; None when it asks for none (it then sees all the job's, as in Slurm)."""
    per_task = _gpus_per_task(opts, env)
    if per_task is not None:
        wanted = ntasks * per_task
    elif opts.gpus is not None:
        wanted = opts.gpus
    elif opts.ntasks_per_gpu is not None:
        wanted = -(-ntasks // opts.ntasks_per_gpu)
    else:
        return None
    have = len(job_gpus(env))
    if wanted > have:
        job = value(env, "SLURM_JOB_ID", "GQA_JOB_ID")
        raise SrunError(f"srun: error: Step requested gres=gpu:{wanted} is more than the job's gres=gpu:{have}\n"
                        f"srun: error: Unable to create step for job {job}: Invalid generic resource (gres) "
                        "specification", code=1)
    return wanted


def _gpus_per_task(opts: Options, env: Mapping[str, str]) -> int | None:
    """--gpus-per-task, or the job's unless the step says otherwise; Slurm refuses it with --ntasks-per-gpu."""
    if opts.gpus_per_task is not None:
        if opts.ntasks_per_gpu is not None:
            raise SrunError("srun: fatal: --gpus-per-task is mutually exclusive with --ntasks-per-gpu and "
                            "SLURM_NTASKS_PER_GPU", code=1)
        return opts.gpus_per_task
    inherited = None if opts.gpus is not None else number(env, "SLURM_GPUS_PER_TASK")
    if inherited is not None and opts.ntasks_per_gpu is not None:
        raise SrunError("srun: fatal: SLURM_GPUS_PER_TASK is mutually exclusive with --ntasks-per-gpu and "
                        "SLURM_NTASKS_PER_GPU", code=1)
    return inherited


def binds_no_gpu(opts: Options, env: Mapping[str, str]) -> bool:
    """--gpu-bind=none (or the job's SLURM_GPU_BIND): every task sees all of the step's GPUs."""
    bind = value(env, "SLURM_GPU_BIND") if opts.gpu_bind is None else opts.gpu_bind
    return "none" in (part.strip().lower() for part in bind.split(","))


def task_environments(opts: Options, env: Mapping[str, str], step: int, host: str,
                      held: Sequence[str] | None = None) -> list[dict[str, str]]:
    """Each task's environment: the job's (as --export says) with Slurm's step and task variables,
    the step's GPUs (`held`: those it was given; else the job's first it asks for), and with
    --gpus-per-task or --ntasks-per-gpu each task its own share of them, unless --gpu-bind=none."""
    ntasks = step_size(opts, env)
    wanted = step_gpu_count(opts, env, ntasks)
    per_task = _gpus_per_task(opts, env)
    step_gpus: list[str] | None
    if wanted is None:
        step_gpus = job_gpus(env) or None
        slices: list[list[str] | None] = [None] * ntasks
    else:
        step_gpus = list(held) if held is not None else job_gpus(env)[:wanted]
        if binds_no_gpu(opts, env) or (per_task is None and opts.ntasks_per_gpu is None):
            slices = [step_gpus] * ntasks
        elif per_task is not None:
            slices = [step_gpus[i * per_task:(i + 1) * per_task] for i in range(ntasks)]
        else:
            share = opts.ntasks_per_gpu or 1
            slices = [step_gpus[min(i // share, len(step_gpus) - 1):][:1] for i in range(ntasks)]
    base = exported(opts.export, env)
    common = {
        "SLURM_STEP_ID": str(step), "SLURM_STEPID": str(step), "SLURM_NODEID": "0",
        "SLURM_STEP_NUM_TASKS": str(ntasks), "SLURM_NTASKS": str(ntasks), "SLURM_NPROCS": str(ntasks),
        "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NODELIST": host, "SLURM_STEP_TASKS_PER_NODE": str(ntasks),
        "SLURMD_NODENAME": host, "SLURM_GTIDS": ",".join(map(str, range(ntasks))),
    }
    if opts.cpus_per_task is not None:
        common["SLURM_CPUS_PER_TASK"] = str(opts.cpus_per_task)
    if per_task is not None:
        common["SLURM_GPUS_PER_TASK"] = str(per_task)
    if step_gpus is not None:
        common["SLURM_STEP_GPUS"] = ",".join(step_gpus)
    envs = []
    for task in range(ntasks):
        task_env = {**base, **common, "SLURM_PROCID": str(task), "SLURM_LOCALID": str(task)}
        own = slices[task]
        if own is not None:
            task_env["CUDA_VISIBLE_DEVICES"] = ",".join(own)
        envs.append(task_env)
    return envs


def exported(export: str, env: Mapping[str, str]) -> dict[str, str]:
    """--export: ALL (the default), NONE, or [ALL,]NAME[=value],...; without ALL only the names
    given pass, with Slurm's SLURM_* and gqa's GQA_* variables and CUDA_VISIBLE_DEVICES."""
    items = [item.strip() for item in export.split(",") if item.strip()]
    keep_all = any(item.upper() == "ALL" for item in items)
    if keep_all:
        chosen = dict(env)
    else:
        chosen = {k: v for k, v in env.items()
                  if k.startswith(("SLURM_", "SLURMD_", "GQA_")) or k == "CUDA_VISIBLE_DEVICES"}
    for item in items:
        if item.upper() in ("ALL", "NONE"):
            continue
        name, eq, given = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise SrunError(f"srun: --export={export}: {name!r} is not a variable name")
        if eq:
            chosen[name] = given
        elif name in env:
            chosen[name] = env[name]
    return chosen
