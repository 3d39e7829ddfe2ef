"""What `srun` is asked inside a gqa job, and the environment of each task it
starts. Pure: the job's environment is given, nothing is started here.

A gqa job has one node, so a step is N copies of a command on it. Options
that shape a step on one node are honoured; those that only matter to
Slurm's placement (--mpi, --cpu-bind, --gpu-bind, --exclusive, --overlap,
--mem) are accepted and have nothing to do; any other exits 2 naming it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .slurm_job import number, value


class SrunError(Exception):
    """The step cannot start as asked; the message says why, in one line, with its numbers."""


@dataclass
class Options:
    command: list[str] = field(default_factory=list)
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    gpus_per_task: int | None = None
    gpus: int | None = None
    cpus_per_task: int | None = None
    label: bool = False
    unbuffered: bool = False           # -u: a task's output passes straight through, not line by line
    kill_on_bad_exit: bool = False
    name: str = ""
    export: str = "ALL"
    output: str = ""
    error: str = ""
    input: str = ""
    chdir: str = ""
    wait: int = 0                      # seconds after the first task ends before the rest are stopped; 0: never
    notes: list[str] = field(default_factory=list)     # one line each on stderr: what is accepted but not done


# option -> (attribute, takes a value); an attribute of "" is accepted and has nothing to do
_OPTIONS: dict[str, tuple[str, bool]] = {
    "-n": ("ntasks", True), "--ntasks": ("ntasks", True), "--ntasks-per-node": ("ntasks_per_node", True),
    "-N": ("nodes", True), "--nodes": ("nodes", True),
    "--gpus-per-task": ("gpus_per_task", True), "-G": ("gpus", True), "--gpus": ("gpus", True),
    "--gres": ("gres", True), "--gpus-per-node": ("gpus", True),
    "-c": ("cpus_per_task", True), "--cpus-per-task": ("cpus_per_task", True),
    "-l": ("label", False), "--label": ("label", False),
    "-K": ("kill_on_bad_exit", False), "--kill-on-bad-exit": ("kill_on_bad_exit", False),
    "-J": ("name", True), "--job-name": ("name", True), "--export": ("export", True),
    "-o": ("output", True), "--output": ("output", True), "-e": ("error", True), "--error": ("error", True),
    "-i": ("input", True), "--input": ("input", True), "-D": ("chdir", True), "--chdir": ("chdir", True),
    "-W": ("wait", True), "--wait": ("wait", True), "--mpi": ("mpi", True),
    "-u": ("unbuffered", False), "--unbuffered": ("unbuffered", False),
    "--exclusive": ("", False), "--overlap": ("", False),
    "--cpu-bind": ("", True), "--gpu-bind": ("", True), "--mem": ("", True), "--mem-per-cpu": ("", True),
    "--mem-per-gpu": ("", True), "-Q": ("", False), "--quiet": ("", False), "-v": ("", False),
    "--verbose": ("", False),
}
# a value that may be left out: --exclusive[=user], -K/--kill-on-bad-exit[=0|1]
_OPTIONAL_VALUE = {"--exclusive", "--kill-on-bad-exit"}


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
    return opts


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
                     "-n, --ntasks-per-node, -N 1, --gpus-per-task, -G, -c, -l, -K, -J, --export, -o, -e, -i, "
                     "-D, --wait, --mpi, --cpu-bind, --gpu-bind, --exclusive, --overlap, -u")


def _apply(opts: Options, name: str, given: str | None) -> None:
    attribute, _ = _OPTIONS[name]
    text = "" if given is None else given.strip()
    if attribute in ("ntasks", "ntasks_per_node", "cpus_per_task"):
        setattr(opts, attribute, _count(name, text, least=1))
    elif attribute in ("gpus_per_task", "gpus"):
        setattr(opts, attribute, _count(name, text.rpartition(":")[2], least=0))
    elif attribute == "gres":
        kind, _, rest = text.partition(":")
        if kind != "gpu":
            raise SrunError(f"srun: --gres={text}: gqa's steps know gpu[:type]:N only")
        opts.gpus = _count(name, rest.rpartition(":")[2] or "1", least=0)
    elif attribute == "nodes":
        low, _, high = text.partition("-")
        if low.strip() != "1" or (high and not high.strip().isdigit()):
            raise SrunError(f"srun: {name} {text}: a gqa job is one node, so a step runs on 1 node")
    elif attribute == "kill_on_bad_exit":
        opts.kill_on_bad_exit = text not in ("0",)
    elif attribute in ("label", "unbuffered"):
        setattr(opts, attribute, True)
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


def task_environments(opts: Options, env: Mapping[str, str], step: int, host: str) -> list[dict[str, str]]:
    """Each task's environment: the job's (as --export says) with Slurm's step and task variables,
    and with --gpus-per-task its own slice of the job's GPUs."""
    ntasks = step_size(opts, env)
    gpus = job_gpus(env)
    per_task = opts.gpus_per_task
    if per_task is None and opts.gpus is None:
        per_task = number(env, "SLURM_GPUS_PER_TASK")
    slices: list[list[str] | None]
    if per_task is not None:
        if ntasks * per_task > len(gpus):
            raise SrunError(f"srun: {ntasks} tasks with {per_task} GPUs each need {ntasks * per_task} GPUs; the "
                            f"job has {len(gpus)} (CUDA_VISIBLE_DEVICES={','.join(gpus)})")
        slices = [gpus[i * per_task:(i + 1) * per_task] for i in range(ntasks)]
        step_gpus: list[str] | None = gpus[:ntasks * per_task]
    elif opts.gpus is not None:
        if opts.gpus > len(gpus):
            raise SrunError(f"srun: the step asks for {opts.gpus} GPUs; the job has {len(gpus)} "
                            f"(CUDA_VISIBLE_DEVICES={','.join(gpus)})")
        step_gpus = gpus[:opts.gpus]
        slices = [step_gpus] * ntasks
    else:
        step_gpus = gpus or None
        slices = [None] * ntasks
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
