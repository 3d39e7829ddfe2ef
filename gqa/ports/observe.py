"""Alerts, checkpoints, logs, the budget watch's records and metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

from ..models.job import JobRecord


class Notifier(Protocol):
    """Alerts and approval requests (SNS on AWS, the log locally)."""

    def notify(self, subject: str, message: str, *, kind: str, team: str | None = None) -> None: ...


class Checkpoints(Protocol):
    """Where a job's checkpoints live, and the latest good one."""

    def location(self, job_id: str) -> str:
        """The directory or URI handed to the job (GQA_CHECKPOINT_DIR / GQA_CHECKPOINT_URI)."""

    def latest(self, job_id: str) -> str | None:
        """The latest complete checkpoint, for GQA_RESUME_FROM; None if there is none."""


@dataclass(frozen=True)
class AttemptLog:
    """Where one attempt's output is, as the compute backend knows it. `stream`
    is None while the attempt has no output to read (not yet running, or a
    container that never started); `detail` then says why, in the backend's
    words."""

    attempt: int
    source: str                 # what ran it, for people: e.g. "Batch job 5f0c..."
    status: str                 # the backend's own state of it when last read, e.g. RUNNABLE, RUNNING, FAILED
    started_at: float | None    # epoch seconds, when known
    group: str | None = None    # e.g. the CloudWatch log group
    stream: str | None = None   # e.g. the CloudWatch log stream
    detail: str = ""


@dataclass(frozen=True)
class LogChunk:
    """Lines read from a stream. `token` continues after them (the same token
    when nothing new came); `caught_up` says the stream had no more lines now.
    `after`, where the backend can resume within what it read: the token that
    continues after each line (so a reader that takes only the first n lines,
    to keep an answer's size, continues from `after[n - 1]`); None: only after
    all of them."""

    lines: tuple[str, ...]
    token: str | None
    caught_up: bool
    after: tuple[str, ...] | None = None


class JobLogs(Protocol):
    """The output of a job's attempts (CloudWatch Logs on AWS)."""

    def attempt(self, job: JobRecord, attempt: int) -> AttemptLog | None:
        """Where attempt `attempt` (1-based, at most job.attempts) wrote its
        output; None if the backend no longer knows the attempt. Once it has
        a stream the answer may come from memory (a stream does not move)."""

    def read(self, log: AttemptLog, token: str | None, limit: int) -> LogChunk:
        """Up to `limit` lines of the attempt's stream after `token` (None:
        from the start). NotFound if the stream does not exist."""


# -- the budget watch's seams ---------------------------------------------------------

@dataclass(frozen=True)
class LiveSpend:
    """A team's spend this period as of `as_of`: settled attempts plus what the
    running ones had cost by then (a figure for dashboards, rewritten each tick)."""

    team: str
    settled: float
    running: float
    as_of: float

    @property
    def amount(self) -> float:
        return self.settled + self.running


class BudgetRecords(Protocol):
    """What the budget watch keeps besides the jobs: which alerts went out, and
    each team's live spend. A claim is a conditional write, so two overlapping
    watch ticks never send the same alert twice."""

    def sent(self, keys: Iterable[str], now: float) -> set[str]:
        """Which of these alert keys are sent, or claimed by a tick still within its lease at `now`."""

    def claim(self, key: str, at: float, lease: float) -> str | None:
        """Claim an alert for sending: a token if this caller won it, None if it is
        sent or claimed by another. A claim not confirmed within `lease` seconds
        (its tick died) may be taken over."""

    def confirm(self, key: str, token: str, at: float) -> None:
        """The alert went out: it is never claimed again."""

    def release(self, key: str, token: str) -> None:
        """Sending failed: let a later tick claim the alert again."""

    def record_spend(self, period: str, spend: list[LiveSpend]) -> None:
        """Replace the live spend figures of the period (a figure older than the
        one stored is ignored, so overlapping ticks never step back in time)."""

    def live_spend(self, period: str) -> dict[str, LiveSpend]: ...


class GpuUtilization(Protocol):
    """How busy running jobs keep their GPUs (the jobs publish it, gqa.runtime.gpu_metrics)."""

    def recent(self, job_ids: list[str], window: float, now: float) -> dict[str, float]:
        """Mean GPU utilisation in percent over [now - window, now], per job that
        reported any; a job without data is absent, never 0."""


@dataclass(frozen=True)
class GpuReading:
    """One GPU as last read (NVML locally): what it is doing now, not a mean.
    A figure the GPU does not report is None."""

    index: int                          # gqa's GPU index (nvidia-smi's, the one CUDA_VISIBLE_DEVICES names)
    at: float                           # epoch seconds
    utilization: float | None           # percent of the last sample period a kernel ran
    memory_used: float | None           # MiB
    memory_total: float | None          # MiB


class GpuReadings(Protocol):
    """This machine's GPUs, read on demand (NVML locally)."""

    def read(self) -> dict[int, GpuReading]:
        """Every GPU that answered, by gqa's index; BackendUnavailable when none can be read at all."""

    def power_limits(self) -> dict[int, float]:
        """Each GPU's power limit in watts, where the GPU reports one."""


class Metrics(Protocol):
    """Metrics out (CloudWatch EMF on AWS). Dimensions added apply until the next flush."""

    def add_metric(self, name: str, unit: str, value: float) -> None: ...

    def add_dimension(self, name: str, value: str) -> None: ...

    def flush_metrics(self) -> None: ...
