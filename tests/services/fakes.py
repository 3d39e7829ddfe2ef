"""In-memory stand-ins for the ports the services use besides the store:
compute that records what it was asked, a clock that moves only when told,
a fixed random draw."""

from __future__ import annotations

from dataclasses import dataclass, field

from gqa.models.errors import LaunchFailed
from gqa.models.job import JobRecord
from gqa.ports import Exit, Inventory, Launched, Submission


class FakeClock:
    def __init__(self, now: float):
        self.t = now

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


@dataclass
class FixedRandom:
    draw: float = 0.5

    def random(self) -> float:
        return self.draw


@dataclass
class CountingWaker:
    wakes: int = 0

    def wake(self) -> None:
        self.wakes += 1


@dataclass
class RecordingIntake:
    """The Intake port: keeps what was sent, in order."""

    sent: list[Submission] = field(default_factory=list)
    wakes: int = 0

    def send(self, submission: Submission) -> None:
        self.sent.append(submission)

    def wake_dispatcher(self) -> None:
        self.wakes += 1


@dataclass(frozen=True)
class Launch:
    job_id: str
    gpus: tuple[int, ...]
    attempt: int


@dataclass
class FakeCompute:
    """`fail[job_id]` makes its launches raise LaunchFailed with that message;
    `alive_ids` and `exits` say what alive() and reap() report."""

    gpu_inventory: Inventory
    launches: list[Launch] = field(default_factory=list)
    terminated: list[tuple[str, float]] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)
    fail: dict[str, str] = field(default_factory=dict)
    alive_ids: set[str] = field(default_factory=set)
    exits: dict[str, Exit] = field(default_factory=dict)
    next_pid: int = 1000

    def inventory(self) -> Inventory:
        return self.gpu_inventory

    def launch(self, job: JobRecord, gpus: tuple[int, ...], attempt: int) -> Launched:
        if job.id in self.fail:
            error = self.fail[job.id]
            raise error if isinstance(error, Exception) else LaunchFailed(error)
        self.launches.append(Launch(job.id, tuple(gpus), attempt))
        self.next_pid += 1
        return Launched(pid=self.next_pid, token=f"token-{self.next_pid}")

    def terminate(self, job: JobRecord, grace: float) -> None:
        self.terminated.append((job.id, grace))

    def alive(self, job: JobRecord) -> bool:
        return job.id in self.alive_ids

    def reap(self, job: JobRecord) -> Exit | None:
        return self.exits.get(job.id)

    def cleanup(self, job: JobRecord) -> None:
        self.cleaned.append(job.id)
