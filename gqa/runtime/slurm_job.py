"""The job as Slurm's commands show it from inside: what the SLURM_* environment
says about it (gqa sets those variables as Slurm does), for `scontrol show job`
and `squeue`. A job sees only itself: other jobs are `gqa status` from a shell."""

from __future__ import annotations

import getpass
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO


def value(env: Mapping[str, str], *names: str) -> str:
    """The first of `names` set to something: gqa sets a variable it has no value for to ""."""
    for name in names:
        text = env.get(name, "").strip()
        if text:
            return text
    return ""


def number(env: Mapping[str, str], *names: str) -> int | None:
    text = value(env, *names)
    try:
        return int(float(text)) if text else None
    except ValueError:
        return None


def hostname(env: Mapping[str, str]) -> str:
    return value(env, "SLURMD_NODENAME") or socket.gethostname()


def duration(seconds: int | None) -> str:
    """Slurm's way to write a span: [days-]hours:minutes:seconds, minutes:seconds under an hour."""
    if seconds is None:
        return "UNLIMITED"
    seconds = max(0, seconds)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def timestamp(epoch: int | None) -> str:
    return "Unknown" if epoch is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


@dataclass(frozen=True)
class OwnJob:
    job_id: str
    name: str
    user: str
    nodelist: str
    tasks: int
    cpus_per_task: int | None
    start: int | None            # epoch seconds
    end: int | None              # epoch seconds the wall time ends; None: no limit
    workdir: str
    partition: str
    account: str
    array_job: str
    array_task: str
    cpus: int | None = None      # the CPUs the attempt may use on its node
    restarts: int = 0            # how many times it was requeued or retried

    @property
    def slurm_cpus(self) -> int:
        """The job's CPUs as Slurm counts them (NumCPUs): at least one a task."""
        return self.cpus or self.tasks * (self.cpus_per_task or 1)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OwnJob:
        env = os.environ if env is None else env
        return cls(
            job_id=value(env, "SLURM_JOB_ID", "SLURM_JOBID", "GQA_JOB_ID"),
            name=value(env, "SLURM_JOB_NAME"),
            user=value(env, "SLURM_JOB_USER", "USER") or getpass.getuser(),
            nodelist=value(env, "SLURM_JOB_NODELIST", "SLURM_NODELIST") or hostname(env),
            tasks=number(env, "SLURM_NTASKS", "SLURM_NPROCS") or 1,
            cpus_per_task=number(env, "SLURM_CPUS_PER_TASK"),
            start=number(env, "SLURM_JOB_START_TIME"),
            end=number(env, "SLURM_JOB_END_TIME", "GQA_WALL_END"),
            workdir=value(env, "SLURM_SUBMIT_DIR") or os.getcwd(),
            partition=value(env, "SLURM_JOB_PARTITION"),
            account=value(env, "SLURM_JOB_ACCOUNT"),
            array_job=value(env, "SLURM_ARRAY_JOB_ID"),
            array_task=value(env, "SLURM_ARRAY_TASK_ID"),
            cpus=number(env, "SLURM_CPUS_ON_NODE", "SLURM_JOB_CPUS_PER_NODE"),
            restarts=number(env, "SLURM_RESTART_COUNT") or 0,
        )

    def time_left(self, now: float) -> int | None:
        return None if self.end is None else max(0, int(self.end - now))

    def time_used(self, now: float) -> int | None:
        return None if self.start is None else max(0, int(now - self.start))

    def time_limit(self) -> int | None:
        return None if self.end is None or self.start is None else max(0, self.end - self.start)

    def is_me(self, job_id: str) -> bool:
        """`job_id` names this job: its id, or its array task as JOB_TASK."""
        own = {self.job_id}
        if self.array_job and self.array_task:
            own.add(f"{self.array_job}_{self.array_task}")
        return job_id in own


class Refused(Exception):
    """What was asked cannot be done or answered inside a gqa job; the message says why, in one line."""


def read_option(tool: str, arg: str, rest: list[str], flags: Mapping[str, str | None],
                valued: Mapping[str, str | None], options: dict[str, str]) -> bool:
    """One Slurm-style option of `tool` (`-x`, `-xVALUE`, `-x VALUE`, `--name`, `--name=VALUE`,
    `--name VALUE`) into `options` (a flag as "yes"; a name mapped to None is read and dropped);
    a value is taken from `rest`. False where `arg` is none of them."""
    name, eq, attached = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
    if name in flags and not attached:
        key = flags[name]
        if key:
            options[key] = "yes"
        return True
    if name in valued:
        if not attached and not eq:
            if not rest:
                raise Refused(f"{tool}: {name} needs a value")
            attached = rest.pop(0)
        key = valued[name]
        if key:
            options[key] = attached
        return True
    return False


def tool_main(run: Callable[[Sequence[str], Mapping[str, str], TextIO], int], args: Sequence[str] | None) -> None:
    """scontrol's and squeue's entry point: their answer on stdout, a refusal on stderr with exit 2."""
    try:
        code = run(sys.argv[1:] if args is None else args, os.environ, sys.stdout)
    except Refused as exc:
        sys.stderr.write(f"{exc}\n")
        code = 2
    sys.stdout.flush()
    sys.exit(code)
