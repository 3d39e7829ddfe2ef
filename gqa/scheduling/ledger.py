"""Phase 1 of a pass: what the running jobs hold, and what is free."""

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
    team: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    user: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    group: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def take(self, job: PendingJob, gpus: tuple[int, ...]) -> None:
        for index in gpus:
            del self.free[index]
        if self.cpus_free is not None and job.cpus:
            self.cpus_free -= job.cpus
        if self.memory_free is not None and job.memory:
            self.memory_free -= job.memory
        self.team[job.team] += job.gpus
        self.user[(job.team, job.user)] += job.gpus
        if job.group:
            self.group[job.group] += 1


def account(snap: Snapshot) -> Ledger:
    ledger = Ledger(free=dict(tables(snap.gpus).type_of), cpus_free=snap.cpus,
                    memory_free=snap.memory, total_gpus=len(snap.gpus))
    free = ledger.free
    for run in snap.running:
        for index in run.gpus:
            free.pop(index, None)
        if ledger.cpus_free is not None and run.cpus:
            ledger.cpus_free -= run.cpus
        if ledger.memory_free is not None and run.memory:
            ledger.memory_free -= run.memory
        ledger.team[run.team] += len(run.gpus)
        ledger.user[(run.team, run.user)] += len(run.gpus)
        if run.group:
            ledger.group[run.group] += 1
    return ledger
