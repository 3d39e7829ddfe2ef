"""sbatch's input environment variables: each the same as one sbatch option,
read as that option on an #SBATCH line is (gqa/models/sbatch.py's table, so
honoured, noted or refused alike), after a script's #SBATCH lines and before
`gqa submit`'s own flags, as sbatch ranks them: the command line over the
environment over the script. Read for a batch script only, from the
environment of the shell that ran `gqa submit`."""

from __future__ import annotations

from collections.abc import Mapping

from .sbatch import SBATCH, read_variable
from .sbatch_request import Request

# sbatch's man page, INPUT ENVIRONMENT VARIABLES: the variable and the option it stands for
VARIABLES: dict[str, str] = {
    "SBATCH_ACCOUNT": "--account",
    "SBATCH_ACCTG_FREQ": "--acctg-freq",
    "SBATCH_ARRAY_INX": "--array",
    "SBATCH_BATCH": "--batch",
    "SBATCH_CLUSTERS": "--clusters",
    "SLURM_CLUSTERS": "--clusters",
    "SBATCH_CONSTRAINT": "--constraint",
    "SBATCH_CONTAINER": "--container",
    "SBATCH_CORE_SPEC": "--core-spec",
    "SBATCH_CPUS_PER_GPU": "--cpus-per-gpu",
    "SBATCH_DEBUG": "--verbose",
    "SBATCH_DELAY_BOOT": "--delay-boot",
    "SBATCH_DISTRIBUTION": "--distribution",
    "SBATCH_ERROR": "--error",
    "SBATCH_EXCLUSIVE": "--exclusive",
    "SBATCH_EXPORT": "--export",
    "SBATCH_GET_USER_ENV": "--get-user-env",
    "SBATCH_GPU_BIND": "--gpu-bind",
    "SBATCH_GPU_FREQ": "--gpu-freq",
    "SBATCH_GPUS": "--gpus",
    "SBATCH_GPUS_PER_NODE": "--gpus-per-node",
    "SBATCH_GPUS_PER_TASK": "--gpus-per-task",
    "SBATCH_GRES": "--gres",
    "SBATCH_GRES_FLAGS": "--gres-flags",
    "SBATCH_HINT": "--hint",
    "SLURM_HINT": "--hint",
    "SBATCH_IGNORE_PBS": "--ignore-pbs",
    "SBATCH_INPUT": "--input",
    "SBATCH_JOB_NAME": "--job-name",
    "SBATCH_MEM_BIND": "--mem-bind",
    "SBATCH_MEM_PER_CPU": "--mem-per-cpu",
    "SBATCH_MEM_PER_GPU": "--mem-per-gpu",
    "SBATCH_MEM_PER_NODE": "--mem",
    "SBATCH_NETWORK": "--network",
    "SBATCH_NO_KILL": "--no-kill",
    "SBATCH_NO_REQUEUE": "--no-requeue",
    "SBATCH_OPEN_MODE": "--open-mode",
    "SBATCH_OUTPUT": "--output",
    "SBATCH_OVERCOMMIT": "--overcommit",
    "SBATCH_PARTITION": "--partition",
    "SBATCH_POWER": "--power",
    "SBATCH_PROFILE": "--profile",
    "SBATCH_QOS": "--qos",
    "SBATCH_REQ_SWITCH": "--switches",
    "SBATCH_REQUEUE": "--requeue",
    "SBATCH_RESERVATION": "--reservation",
    "SBATCH_SIGNAL": "--signal",
    "SBATCH_SPREAD_JOB": "--spread-job",
    "SBATCH_THREAD_SPEC": "--thread-spec",
    "SBATCH_THREADS_PER_CORE": "--threads-per-core",
    "SBATCH_TIMELIMIT": "--time",
    "SBATCH_USE_MIN_NODES": "--use-min-nodes",
    "SBATCH_WAIT": "--wait",
    "SBATCH_WAIT_ALL_NODES": "--wait-all-nodes",
    "SBATCH_WAIT4SWITCH": "--switches",
    "SBATCH_WCKEY": "--wckey",
}

# Slurm takes one memory option; one the script chose stays over the environment's other one
# (sbatch applies a script's option the environment did not set, and it clears the others)
_ONE_MEMORY = ("mem", "mem_per_cpu", "mem_per_gpu")
_MEMORY = {"--mem": "mem", "--mem-per-cpu": "mem_per_cpu", "--mem-per-gpu": "mem_per_gpu"}


def read_environment(environment: Mapping[str, str], request: Request) -> None:
    """The input environment variables set in `environment`, into `request` after the
    script's directives (which they override), in the man page's order."""
    script_memory = {name for name in _ONE_MEMORY if name in request.slurm}
    for variable, long in VARIABLES.items():
        text = environment.get(variable)
        if text is None:
            continue
        own = _MEMORY.get(long)
        if own is not None and script_memory - {own}:
            if request.warn is not None:
                request.warn(f"{variable}={text} has no effect here: the script asks for its memory another "
                             "way, and sbatch keeps that")
            continue
        read_variable(variable, SBATCH[long], text, request)
