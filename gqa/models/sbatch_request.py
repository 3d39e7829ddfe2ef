"""What one script's #SBATCH / #GQA lines ask for while they are read
(gqa/models/sbatch.py reads them), and the Slurm quantities that depend on
each other settled once all are read, as sbatch settles them: GPUs per task
times tasks, CPUs per task or per GPU, memory per CPU or per GPU."""

from __future__ import annotations

from typing import Any, Callable

from . import sbatch_values as values
from .errors import SpecError
from .nested import merge


class Request:
    """What one script's directives ask for, as they are read: the spec fields
    set outright, and the Slurm quantities that depend on each other (GPUs per
    task times tasks, memory per CPU times CPUs), settled once all are read."""

    def __init__(self, *, now: float | None, warn: Callable[[str], None] | None, source: str | None):
        self.now, self.warn, self.source = now, warn, source
        self.raw: dict[str, Any] = {}
        self.slurm: dict[str, tuple[Any, int]] = {}    # name -> (value, line it was set on)
        self.line = 0
        self.variable: str | None = None               # sbatch's input environment variable being read

    def put(self, fragment: dict[str, Any]) -> None:
        merge(self.raw, fragment)

    def keep(self, name: str, value: Any) -> None:
        self.slurm[name] = (value, self.line)

    def note(self, text: str) -> None:
        if self.warn is not None:
            self.warn(text if self.variable else f"{self.source or 'script'}:{self.line}: {text}")

    def error(self, message: str, line: int | None = None) -> SpecError:
        if self.variable:                                # not the script's: the message names the variable
            return SpecError(message)
        return SpecError(message, line=line or self.line, source=self.source)

    def given(self, resources: dict[str, Any]) -> None:
        """The command line's resources, which win over the directives' before
        the quantities are settled, as sbatch's own options do: `gqa submit
        -n 4 train.sh` with `#SBATCH -c 2` is 8 CPUs."""
        if resources.get("tasks") is not None:
            self.slurm.pop("ntasks_per_node", None)
            self.keep("ntasks", resources["tasks"])
        if resources.get("gpus") is not None:
            asked = self.slurm.get("gpus")
            gpu_type = resources.get("gpu_type") or (asked[0][0] if asked else None)
            self.keep("gpus", (gpu_type, resources["gpus"]))
        if resources.get("cpus") is not None:
            for name in ("cpus_per_task", "cpus_per_gpu"):
                self.slurm.pop(name, None)
            self.keep("cpus", resources["cpus"])
        if resources.get("memory") is not None:
            for name in ("mem", "mem_per_cpu", "mem_per_gpu"):
                self.slurm.pop(name, None)

    def finish(self) -> dict[str, Any]:
        """The raw spec: the fields set outright and the quantities settled."""
        settle(self)
        return self.raw


def settle(request: Request) -> None:
    """The quantities that depend on each other, as Slurm reads them together."""
    got = request.slurm

    def value(name: str) -> Any:
        return got[name][0] if name in got else None

    def both(a: str, b: str, why: str) -> None:
        if a in got and b in got:
            later = max(got[a][1], got[b][1])
            raise request.error(f"--{a.replace('_', '-')} and --{b.replace('_', '-')} together: {why}", later)

    both("mem", "mem_per_cpu", "Slurm takes one of --mem, --mem-per-cpu, --mem-per-gpu")
    both("mem", "mem_per_gpu", "Slurm takes one of --mem, --mem-per-cpu, --mem-per-gpu")
    both("mem_per_cpu", "mem_per_gpu", "Slurm takes one of --mem, --mem-per-cpu, --mem-per-gpu")
    both("cpus_per_task", "cpus_per_gpu", "Slurm takes one of them")
    resources: dict[str, Any] = {}
    per_task = value("gpus_per_task")
    gpu_type, gpus = value("gpus") or (None, None)
    if per_task is not None:
        gpu_type = gpu_type or per_task[0]
        resources["gpus_per_task"] = per_task[1]
    tasks = value("ntasks")
    if tasks is None and value("ntasks_per_node") is not None:
        tasks = value("ntasks_per_node")
    elif tasks is not None and value("ntasks_per_node") is not None and tasks > value("ntasks_per_node"):
        raise request.error(f"gqa runs a job on one machine; --ntasks {tasks} at --ntasks-per-node "
                            f"{value('ntasks_per_node')} would need more", got["ntasks"][1])
    if gpus is None and per_task is not None:
        gpus = per_task[1] * (tasks or 1)
    if tasks is None and value("ntasks_per_gpu") is not None:
        tasks = value("ntasks_per_gpu") * (1 if gpus is None else gpus)
    if tasks is not None:
        resources["tasks"] = tasks
    if gpus is not None:
        resources.update(values.gpu_fields(gpu_type, gpus))
    if value("gpus_option") is not None:
        resources["gpus_option"] = value("gpus_option")
    cpus = value("cpus")
    if value("cpus_per_task") is not None:
        cpus = value("cpus_per_task") * (tasks or 1)
    elif value("cpus_per_gpu") is not None:
        cpus = value("cpus_per_gpu") * (1 if gpus is None else gpus)
    if cpus is not None:
        resources["cpus"] = cpus
    memory = value("mem")
    if value("mem_per_cpu") is not None:
        memory = value("mem_per_cpu") * (cpus or tasks or 1)
        resources["memory_option"] = "--mem-per-cpu"   # names SLURM_MEM_PER_CPU, as Slurm sets it
    elif value("mem_per_gpu") is not None:
        memory = value("mem_per_gpu") * (1 if gpus is None else max(gpus, 1))
        resources["memory_option"] = "--mem-per-gpu"
    if memory is not None:
        resources["memory"] = f"{memory}B"
    request.put({"resources": resources} if resources else {})
    if value("mail_type"):
        request.put({"notify": {"events": value("mail_type"), "to": value("mail_user")}})
        if "array" in request.raw and "array_tasks" not in value("mail_type"):
            request.line = got["mail_type"][1]
            request.note("#SBATCH --mail-type: an array's tasks are told of only with ARRAY_TASKS (gqa sends "
                         "no notice for the array as a whole)")
    elif "mail_user" in got and "mail_type" not in got:
        request.line = got["mail_user"][1]
        request.note("#SBATCH --mail-user without --mail-type sends nothing, as in Slurm")


def asks_for_gpus(request: Request) -> bool:
    """Whether the directives name GPUs at all: a Slurm job that does not has none."""
    return any(name in request.slurm for name in ("gpus", "gpus_per_task")) or \
        "gpu_type" in request.raw.get("resources", {})
