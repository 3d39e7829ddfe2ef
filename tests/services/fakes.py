"""In-memory stand-ins for the ports the services use besides the store:
compute that records what it was asked, a clock that moves only when told,
a fixed random draw."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gqa.models.errors import LaunchFailed, NotFound
from gqa.models.job import JobRecord
from gqa.ports import AttemptLog, Exit, Inventory, Launched, LogChunk, Submission


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
    named: list[list[str]] = field(default_factory=list)   # the jobs each wake-up named

    def wake(self, jobs=()) -> None:
        self.wakes += 1
        self.named.append(list(jobs))


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
    `alive_ids`, `ended_ids` and `exits` say what alive(), ended() and reap() report."""

    gpu_inventory: Inventory
    launches: list[Launch] = field(default_factory=list)
    terminated: list[tuple[str, float]] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    fail: dict[str, str] = field(default_factory=dict)
    alive_ids: set[str] = field(default_factory=set)
    ended_ids: set[str] = field(default_factory=set)
    exits: dict[str, Exit] = field(default_factory=dict)
    next_pid: int = 1000
    holds_launches: bool = False   # True: as a local executor, launches wait for release()
    launch_is_start: bool = True   # False: as AWS Batch, a launch waits for the backend to start it

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

    def ended(self, job: JobRecord) -> bool:
        return job.id in self.ended_ids

    def reap(self, job: JobRecord) -> Exit | None:
        return self.exits.get(job.id)

    def cleanup(self, job: JobRecord) -> None:
        self.cleaned.append(job.id)

    def release(self, job_ids: list[str]) -> None:
        self.released += list(job_ids)

    def abandon(self, job_ids: list[str]) -> None:
        self.abandoned += list(job_ids)

    def forget(self, job: JobRecord) -> None:
        self.forgotten.append(job.id)


@dataclass
class FakeRecords:
    """The store as the log service reads it: records by id or group, replaced as a test moves the job on."""

    jobs: dict[str, JobRecord] = field(default_factory=dict)
    handed_out: set[str] = field(default_factory=set)    # groups reserved, recorded or not

    def put(self, *jobs: JobRecord) -> None:
        self.jobs.update({j.id: j for j in jobs})
        self.handed_out.update(j.group for j in jobs)

    def reserved(self, group: str) -> bool:
        return group in self.handed_out

    def purged(self, group: str) -> float | None:
        return None   # a handed-out group with no job is awaiting admission, as on AWS

    def resolve(self, ref: str, *, history: bool = True) -> list[JobRecord]:
        found = [j if history else replace(j, history=()) for j in self.jobs.values() if ref in (j.id, j.group)]
        if not found:
            raise NotFound(f"no job or array {ref}")
        return found


@dataclass
class FakeJobLogs:
    """Each attempt's whereabouts (`where`; a missing key: the backend forgot
    it) and each stream's lines (`streams`; a missing key: the stream does not
    exist), which a test extends as the job writes. Tokens are line offsets,
    after each line too; `page_size` caps what one read returns, as a backend's
    own pages do; `resumes` False: a backend that continues only after a whole read."""

    where: dict[int, AttemptLog] = field(default_factory=dict)
    streams: dict[str, list[str]] = field(default_factory=dict)
    page_size: int = 1000
    reads: list[tuple[int, str | None, int]] = field(default_factory=list)
    resumes: bool = True

    def attempt(self, job: JobRecord, attempt: int) -> AttemptLog | None:
        return self.where.get(attempt)

    def read(self, log: AttemptLog, token: str | None, limit: int) -> LogChunk:
        self.reads.append((log.attempt, token, limit))
        if log.stream not in self.streams:
            raise NotFound(f"no stream {log.stream}")
        lines = self.streams[log.stream]
        start = int(token) if token is not None else 0
        got = lines[start:start + min(limit, self.page_size)]
        end = start + len(got)
        after = tuple(str(start + n + 1) for n in range(len(got))) if self.resumes else None
        return LogChunk(tuple(got), str(end), caught_up=end >= len(lines), after=after)


@dataclass
class RecordingNotifier:
    """Keeps what it was asked to send; `fail` makes the next that many sends raise."""

    sent: list[tuple[str, str, str, str | None]] = field(default_factory=list)
    fail: int = 0

    def notify(self, subject: str, message: str, *, kind: str, team: str | None = None) -> None:
        if self.fail:
            from gqa.models.errors import BackendUnavailable
            self.fail -= 1
            raise BackendUnavailable("the notifier is down")
        self.sent.append((subject, message, kind, team))


@dataclass
class FixedUtilisation:
    """GPU utilisation per job id, and the questions asked."""

    percent: dict[str, float] = field(default_factory=dict)
    asked: list[list[str]] = field(default_factory=list)

    def recent(self, job_ids: list[str], window: float, now: float) -> dict[str, float]:
        self.asked.append(list(job_ids))
        return {j: self.percent[j] for j in job_ids if j in self.percent}


@dataclass
class RecordingMetrics:
    """Each flush as (dimensions, {metric: value}) (the last value of a metric
    added several times), and as (dimensions, {metric: [every value]}) in `series`."""

    flushed: list[tuple[dict[str, str], dict[str, float]]] = field(default_factory=list)
    series: list[tuple[dict[str, str], dict[str, list[float]]]] = field(default_factory=list)
    dimensions: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    values: dict[str, list[float]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.metrics[name] = value
        self.values.setdefault(name, []).append(value)
        self.units[name] = unit

    def add_dimension(self, name: str, value: str) -> None:
        self.dimensions[name] = value

    def flush_metrics(self) -> None:
        self.flushed.append((self.dimensions, self.metrics))
        self.series.append((self.dimensions, self.values))
        self.dimensions, self.metrics, self.values = {}, {}, {}
