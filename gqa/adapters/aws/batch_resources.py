"""What a Batch job asks of its instance (the SubmitJob's resourceRequirements),
and the pool a job that holds no GPU slot goes to.

- A GPU job: GPU, its slot count; VCPU, its cpus or `cpus_per_gpu` per GPU;
  MEMORY, its memory or `memory_per_gpu` per GPU.
- A CPU-only job (resources.gpus 0): VCPU and MEMORY only, no GPU
  requirement: its cpus or one vCPU (Slurm's one CPU per task), its memory or
  `memory_per_gpu / cpus_per_gpu` per vCPU (3.5 GiB with the defaults). It
  holds no GPU slot, so the dispatcher's inventory never holds it back; Batch
  keeps it RUNNABLE until an instance has room. It runs in the cheapest
  on-demand pool (the lowest price per GPU-hour, then the first listed): GPU
  instances are all gqa's compute environments hold, a job that asks for no
  GPU has not said it tolerates a spot reclaim, and the cheapest pool wastes
  the least on the GPUs it leaves idle. Without an on-demand pool, the
  cheapest pool.
- An exclusive job (resources.exclusive): a whole instance. It asks for every
  vCPU of its pool's largest instance type (the most vCPUs among
  instance_types), so no other container, which needs at least one vCPU, fits
  beside it; its GPUs are what it asked for. Batch then places it on an
  instance of that size; a pool that lists no instance types cannot size one,
  and the launch fails saying so.
"""

from __future__ import annotations

import math

from ...models.errors import LaunchFailed
from ...models.gpu_instances import instance_shape
from ...models.job import JobRecord
from .resources import Pool

MiB = 1024 * 1024


def cpu_pool(pools: tuple[Pool, ...]) -> Pool:
    """Where a CPU-only job runs: the cheapest on-demand pool, else the cheapest."""
    candidates = [p for p in pools if not p.spot] or list(pools)
    if not candidates:
        raise LaunchFailed("no pool to run a CPU-only job in")
    return min(candidates, key=lambda p: p.price)   # min keeps the first of equal prices


def whole_instance_vcpus(pool: Pool) -> int:
    shapes = [shape for shape in map(instance_shape, pool.instance_types) if shape is not None]
    if not shapes:
        raise LaunchFailed(f"an exclusive job takes a whole instance, and pool {pool.name} lists no instance "
                           "types to size one by")
    return max(vcpus for vcpus, _ in shapes)


def requirements(job: JobRecord, gpus: int, pool: Pool, *, cpus_per_gpu: int, memory_per_gpu: int) -> list[dict]:
    """The resourceRequirements of one attempt on `gpus` GPU slots of `pool` (memory_per_gpu in MiB)."""
    if gpus:
        cpus = job.cpus or cpus_per_gpu * gpus
        memory = math.ceil(job.memory / MiB) if job.memory else memory_per_gpu * gpus
    else:
        cpus = job.cpus or 1
        memory = math.ceil(job.memory / MiB) if job.memory else memory_per_gpu // cpus_per_gpu * cpus
    if job.exclusive:
        whole = whole_instance_vcpus(pool)
        if cpus > whole:
            raise LaunchFailed(f"asks for {cpus} vCPUs; the largest instances of pool {pool.name} have {whole}")
        cpus = whole
    out = [{"type": "GPU", "value": str(gpus)}] if gpus else []
    return out + [{"type": "VCPU", "value": str(cpus)}, {"type": "MEMORY", "value": str(memory)}]
