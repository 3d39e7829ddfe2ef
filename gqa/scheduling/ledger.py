"""Phase 1 of a pass: what the running jobs hold, and what is free.

CPUs are counted with `cpus_counted` (a CPU-only job that names none takes
one). A running exclusive job holds the whole machine: nothing is free beside
it, GPUs, CPUs or memory."""

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .snapshot import PendingJob, Snapshot

if TYPE_CHECKING:   # the index imports nothing from here: a type only
    from .index import QueueIndex


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


def account(snap: Snapshot, index: "QueueIndex") -> Ledger:
    """From the index's running books: O(teams + users + free GPUs), whatever runs."""
    ledger = Ledger(free=dict(index.free),
                    cpus_free=None if snap.cpus is None else snap.cpus - index.cpus_used,
                    memory_free=None if snap.memory is None else snap.memory - index.memory_used,
                    total_gpus=len(snap.gpus), jobs=len(index.running),
                    team=defaultdict(int, index.team_gpus), user=defaultdict(int, index.user_gpus),
                    group=defaultdict(int, index.group_jobs))
    if index.exclusive:   # the first one started holds the machine
        ledger.hold_machine(next(iter(index.exclusive)))
    return ledger
