"""Phase 1 of a pass: what the running jobs hold, and what is free.

CPUs are counted with `cpus_counted` (a CPU-only job that names none takes
one). A running exclusive job holds the whole machine: nothing is free beside
it, GPUs, CPUs or memory."""

from collections import defaultdict
from dataclasses import dataclass, field

from .inventory import tables
from .snapshot import PendingJob, Snapshot


@dataclass
class Ledger:
    free: dict[int, str]                       # free GPU index -> type
    cpus_free: int | None
    memory_free: int | None
    total_gpus: int
    team: dict[str, int] = field(default_factory=lambda: defaultdict(int))   # GPUs held (CPU-only jobs: 0)
    user: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    group: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    jobs: int = 0                              # running, and started in this pass
    exclusive: str | None = None               # the job that has the machine to itself

    def take(self, job: PendingJob, gpus: tuple[int, ...]) -> None:
        for index in gpus:
            del self.free[index]
        if self.cpus_free is not None:
            self.cpus_free -= job.cpus_counted
        if self.memory_free is not None and job.memory:
            self.memory_free -= job.memory
        self.team[job.team] += job.gpus
        self.user[(job.team, job.user)] += job.gpus
        if job.group:
            self.group[job.group] += 1
        self.jobs += 1
        if job.exclusive:
            self.hold_machine(job.id)

    def hold_machine(self, job_id: str) -> None:
        self.exclusive = job_id
        self.free.clear()
        if self.cpus_free is not None:
            self.cpus_free = 0
        if self.memory_free is not None:
            self.memory_free = 0


def account(snap: Snapshot) -> Ledger:
    ledger = Ledger(free=dict(tables(snap.gpus).type_of), cpus_free=snap.cpus,
                    memory_free=snap.memory, total_gpus=len(snap.gpus), jobs=len(snap.running))
    free = ledger.free
    for run in snap.running:
        for index in run.gpus:
            free.pop(index, None)
        if ledger.cpus_free is not None:
            ledger.cpus_free -= run.cpus_counted
        if ledger.memory_free is not None and run.memory:
            ledger.memory_free -= run.memory
        ledger.team[run.team] += len(run.gpus)
        ledger.user[(run.team, run.user)] += len(run.gpus)
        if run.group:
            ledger.group[run.group] += 1
    exclusive = next((run.id for run in snap.running if run.exclusive), None)
    if exclusive is not None:
        ledger.hold_machine(exclusive)
    return ledger
