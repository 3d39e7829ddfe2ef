"""What a Slurm job finds in its environment and in its file names, for one
attempt of a gqa job on one node: the SLURM_* variables (`slurm_env`), the
thread counts that follow its CPUs, and sbatch's `%` filename patterns
(`expand_pattern`).

Job numbers. Slurm's job id is an integer, unique per job and per array
task, kept across requeues; scripts do arithmetic on it (the DDP idiom
`MASTER_PORT=$((10000 + SLURM_JOB_ID % 10000))`). gqa's ids are "12" for a
job and "12_3" for task 3 of array 12, so:
- a job alone: SLURM_JOB_ID is its own number, 12 (what `gqa submit` said);
- an array task: 1,000,000,000 + the task's sequence number in the queue
  (every job of a queue has its own, kept across attempts), so it never
  equals a job's number, and the tasks of an array have consecutive ones;
  SLURM_ARRAY_JOB_ID is the array's number (12), SLURM_ARRAY_TASK_ID the
  index (3), so `%A_%a` names files as under Slurm.
GQA_JOB_ID keeps gqa's own id ("12_3").

Values that depend on the machine the attempt runs on (host name, GPU
indices, the start time, the submit directory) are left out when no host is given: on AWS the
job's runtime fills them in. The array's span (SLURM_ARRAY_TASK_MIN, _MAX,
_COUNT, _STEP) is put in each task's extra environment when the array is
expanded (`array_env`), so no task needs the array's text again."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .job import JobRecord, group_of
from .priority import Priority

ARRAY_TASK_BASE = 1_000_000_000
NOT_AN_ARRAY = 4294967294     # what sbatch puts for %a in a job that is no array (its NO_VAL)
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
MiB = 1024 * 1024
_PATTERN = re.compile(r"%(\d*)([%AabJjNnstux])")


def slurm_job_id(job: JobRecord) -> int:
    """The integer a Slurm script reads as SLURM_JOB_ID (see the module's docstring)."""
    if job.array_index is None:
        return int(group_of(job.id))
    return ARRAY_TASK_BASE + job.seq


def array_env(indices: Sequence[int]) -> dict[str, str]:
    """The span of an array, as each of its tasks reads it. The step is the
    indices' common difference (1 for a list without one, as Slurm says)."""
    if not indices:
        return {}
    ordered = sorted(indices)
    steps = {b - a for a, b in zip(ordered, ordered[1:])}
    step = steps.pop() if len(steps) == 1 else 1
    return {"SLURM_ARRAY_TASK_MIN": str(ordered[0]), "SLURM_ARRAY_TASK_MAX": str(ordered[-1]),
            "SLURM_ARRAY_TASK_COUNT": str(len(ordered)), "SLURM_ARRAY_TASK_STEP": str(step)}


def cpus_per_task(job: JobRecord) -> int | None:
    """The CPUs each of the job's tasks has (resources.cpus is the whole job's), None when it asks for none."""
    if not job.cpus:
        return None
    return max(1, job.cpus // max(1, job.spec.resources.tasks))


def slurm_env(job: JobRecord, attempt: int, *, devices: Sequence[int] | None = None, host: str | None = None,
              started_at: float | None = None, cpus_on_node: int | None = None, cluster: str = "gqa",
              partition: str | None = None, uid: int | None = None, gid: int | None = None) -> dict[str, str]:
    """The SLURM_* variables of one attempt, and OMP/MKL thread counts.
    `devices`: the GPU indices the attempt sees (None: the backend exposes
    them itself, only their count is known); `host`: the machine's name
    (None: host-dependent values are left out); `started_at`: the attempt's
    start (epoch seconds); `cpus_on_node`: the CPUs the attempt may use
    (default: those it asked for); `uid` and `gid`: the user and group ids
    the attempt runs as (None: left out, for the machine to fill in)."""
    spec = job.spec
    resources = spec.resources
    job_id = str(slurm_job_id(job))
    tasks = resources.tasks
    env = {
        "SLURM_JOB_ID": job_id,
        "SLURM_JOBID": job_id,
        "SLURM_JOB_NAME": job.name,
        "SLURM_JOB_USER": job.owner,
        "SLURM_JOB_ACCOUNT": job.team,
        "SLURM_JOB_PARTITION": partition or (job.gpu_type.split(",")[0] if job.gpu_type else "default"),
        "SLURM_JOB_QOS": _qos(job.tier),
        "SLURM_CLUSTER_NAME": cluster,
        "SLURM_NTASKS": str(tasks),
        "SLURM_NPROCS": str(tasks),
        "SLURM_NTASKS_PER_NODE": str(tasks),
        "SLURM_TASKS_PER_NODE": str(tasks),
        "SLURM_NNODES": "1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_GPUS_ON_NODE": str(len(devices) if devices is not None else job.gpus),
    }
    if attempt > 1:   # Slurm sets it only once the job is requeued: scripts test it to resume
        env["SLURM_RESTART_COUNT"] = str(attempt - 1)
    if job.array_index is not None:
        env["SLURM_ARRAY_JOB_ID"] = group_of(job.id)
        env["SLURM_ARRAY_TASK_ID"] = str(job.array_index)
    per_task = cpus_per_task(job)
    if per_task is not None:
        env["SLURM_CPUS_PER_TASK"] = str(per_task)
        env.update({name: str(per_task) for name in THREAD_VARS})
    node_cpus = cpus_on_node or job.cpus
    if node_cpus:
        env["SLURM_CPUS_ON_NODE"] = env["SLURM_JOB_CPUS_PER_NODE"] = str(node_cpus)
    if resources.gpus_per_task is not None:
        env["SLURM_GPUS_PER_TASK"] = str(resources.gpus_per_task)
    if resources.gpus_option == "--gpus":   # one node: the job's GPUs are its GPUs per node
        env["SLURM_GPUS"] = str(job.gpus)
    elif resources.gpus_option == "--gpus-per-node":
        env["SLURM_GPUS_PER_NODE"] = str(job.gpus)
    env.update(memory_env(job))
    if uid is not None:
        env["SLURM_JOB_UID"] = str(uid)
    if gid is not None:
        env["SLURM_JOB_GID"] = str(gid)
    if devices is not None and devices:
        env["SLURM_JOB_GPUS"] = ",".join(str(d) for d in devices)
    if host is not None:   # the submit directory too: on AWS the container has its own
        if spec.submit_dir or spec.workdir:
            env["SLURM_SUBMIT_DIR"] = spec.submit_dir or spec.workdir or ""
        env.update({"SLURM_JOB_NODELIST": host, "SLURM_NODELIST": host, "SLURMD_NODENAME": host,
                    "SLURM_SUBMIT_HOST": host, "SLURM_TOPOLOGY_ADDR": host})
    if started_at is not None:
        env["SLURM_JOB_START_TIME"] = str(int(started_at))
        limit = job.attempt_wall_time   # a --time-min attempt ends when its granted wall time does
        if limit:
            env["SLURM_JOB_END_TIME"] = str(int(started_at + limit))
    return env


def memory_env(job: JobRecord) -> dict[str, str]:
    """The job's memory in MiB, in the one variable its sbatch option names, as Slurm sets
    them: SLURM_MEM_PER_CPU for --mem-per-cpu (the memory over the CPUs it was multiplied
    by: those asked for, else one per task), SLURM_MEM_PER_GPU for --mem-per-gpu, and
    SLURM_MEM_PER_NODE for --mem or a spec's own `resources.memory`; none without memory."""
    if not job.memory:
        return {}
    resources = job.spec.resources
    if resources.memory_option == "--mem-per-cpu":
        return {"SLURM_MEM_PER_CPU": _mib(job.memory, job.cpus or resources.tasks or 1)}
    if resources.memory_option == "--mem-per-gpu":
        return {"SLURM_MEM_PER_GPU": _mib(job.memory, max(job.gpus, 1))}
    return {"SLURM_MEM_PER_NODE": _mib(job.memory, 1)}


def attempt_env(base: Mapping[str, str], slurm: Mapping[str, str], job_env: Mapping[str, str]) -> dict[str, str]:
    """The order an attempt's environment is built in: the base (the
    submitter's environment), then Slurm's variables and thread counts, then
    the job's own env, which wins over them (OMP_NUM_THREADS=1 in a spec
    stays 1). gqa's GQA_* and CUDA_VISIBLE_DEVICES go on top, by the caller."""
    env = {k: v for k, v in base.items() if not k.startswith(("SLURM_", "SLURMD_"))}   # not an outer job's
    env.update(slurm)
    env.update(job_env)
    return env


def expand_pattern(pattern: str, *, job_id: int, name: str, user: str, array_job_id: int | None = None,
                   array_task: int | None = None, host: str = "localhost") -> str:
    """sbatch's filename pattern for the batch step on one node: %j job id,
    %J the same (the batch step has no step number), %A the array's number
    (the job id outside an array), %a the task index (4294967294 outside an
    array, as sbatch), %b the index modulo 10, %x the name, %u the user, %N
    the host, %n and %t 0 (the first node, the first task), %s "batch", %%
    a percent. A number after % zero-pads a number to that width (at most
    10): %4a is 0007. A pattern holding a backslash is taken literally,
    without its backslashes, as sbatch does."""
    if "\\" in pattern:
        return pattern.replace("\\", "")
    array = array_job_id if array_job_id is not None else job_id
    task = array_task if array_task is not None else NOT_AN_ARRAY
    numbers = {"j": job_id, "J": job_id, "A": array, "a": task, "b": task % 10, "n": 0, "t": 0}
    texts = {"x": name, "u": user, "N": host.split(".")[0], "s": "batch", "%": "%"}

    def one(match: re.Match) -> str:
        width, letter = match.group(1), match.group(2)
        if letter in numbers:
            return str(numbers[letter]).zfill(min(int(width), 10) if width else 0)
        if letter == "%":
            return "%" + width if width else "%"
        return texts[letter]
    return _PATTERN.sub(one, pattern)


def job_pattern(pattern: str, job: JobRecord, host: str) -> str:
    """`pattern` expanded for one of gqa's jobs."""
    in_array = job.array_index is not None
    return expand_pattern(pattern, job_id=slurm_job_id(job), name=job.name, user=job.owner, host=host,
                          array_job_id=int(group_of(job.id)) if in_array else None,
                          array_task=job.array_index)


def _mib(memory: int, shares: int) -> str:
    """One share of `memory` bytes, in whole MiB rounded up (Slurm's unit), exact in integers."""
    return str(-(-memory // (MiB * shares)))


def _qos(tier: int) -> str:
    try:
        return Priority.of_rank(tier).value
    except ValueError:
        return "normal"
