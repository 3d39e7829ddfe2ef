"""Each running job's GPU utilisation and memory, from readings of the GPUs.

The local daemon reads the GPUs off its loop (GpuReadings) and hands the
latest readings here with the running jobs; each job's GPUs are the ones
assigned to its attempt, so a reading is attributed by GPU index. This folds
them into each job's mean utilisation (over every sample of its run) and its
peak memory (MiB summed over its GPUs), and writes both on the record: one
guarded change on RUNNING for all the jobs due, at most once per
`write_every` per job, and once more as an attempt ends (`write(ended)`),
so a finished job keeps its figures. A job that moved on is skipped.

It is also the budget watch's GpuUtilization: the mean of a job's recent
samples, which the idle-GPU alert compares with its threshold."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..models.errors import Conflict, NotFound
from ..models.job import JobRecord, JobState
from ..ports import Change, Clock, JobRecords, apply_all_else_each
from ..ports.observe import GpuReading

WRITE_EVERY = 60.0     # seconds between two writes of one job's figures
KEEP = 4 * 3600.0      # seconds of samples kept per job for the idle alert's window


@dataclass
class JobGpuUse:
    """What the readings said of one job so far."""

    total: float = 0.0               # sum of the samples' utilisation, each weighted
    weight: float = 0.0              # how many samples that sum is worth
    peak_memory: float | None = None
    last_at: float = float("-inf")   # the newest reading folded in
    written: float = float("-inf")
    dirty: bool = False
    recent: deque[tuple[float, float]] = field(default_factory=deque)

    @property
    def mean(self) -> float | None:
        return self.total / self.weight if self.weight > 0 else None


class GpuUsage:
    def __init__(self, store: JobRecords, clock: Clock, *, sample_every: float,
                 write_every: float = WRITE_EVERY, keep: float = KEEP):
        self.store, self.clock = store, clock
        self.sample_every, self.write_every, self.keep = sample_every, write_every, keep
        self.jobs: dict[str, JobGpuUse] = {}

    def observe(self, readings: Mapping[int, GpuReading], running: Iterable[JobRecord]) -> None:
        """Fold the readings newer than the last into each running job's figures;
        jobs no longer running are forgotten (their figures were written as they ended)."""
        now = self.clock.now()
        seen = set()
        for job in running:
            if job.state != JobState.RUNNING or not job.assigned:
                continue      # a CPU-only job has no GPU to read
            seen.add(job.id)
            use = self.jobs.get(job.id) or self._seeded(job, now)
            self.jobs[job.id] = use
            fresh = [readings[i] for i in job.assigned if i in readings and readings[i].at > use.last_at]
            if not fresh:
                continue
            at = max(r.at for r in fresh)
            busy = [r.utilization for r in fresh if r.utilization is not None]
            if busy:
                sample = sum(busy) / len(busy)
                use.total += sample
                use.weight += 1
                use.recent.append((at, sample))
                while use.recent and use.recent[0][0] < at - self.keep:
                    use.recent.popleft()
            memory = [r.memory_used for r in fresh if r.memory_used is not None]
            if len(memory) == len(fresh):     # the sum means something only with every GPU's figure
                used = sum(memory)
                use.peak_memory = used if use.peak_memory is None else max(use.peak_memory, used)
            use.last_at, use.dirty = at, True
        for gone in set(self.jobs) - seen:
            del self.jobs[gone]

    def _seeded(self, job: JobRecord, now: float) -> JobGpuUse:
        """A job first seen mid-run (a restarted daemon, a later attempt) carries
        on from its stored figures, weighted by the time it has run."""
        use = JobGpuUse(peak_memory=job.gpu_memory)
        if job.gpu_util is not None:
            ran = job.gpu_seconds / max(1, job.gpus)
            if job.started_at is not None:
                ran += max(0.0, now - job.started_at)
            use.weight = max(1.0, ran / self.sample_every)
            use.total = job.gpu_util * use.weight
        return use

    def write(self, ended: Iterable[str] = ()) -> int:
        """Write the figures due (and those of `ended` attempts, whatever the
        time): one guarded change per job, all in one transaction if they
        hold. How many were written."""
        now = self.clock.now()
        final = set(ended)
        changes = []
        for job_id, use in self.jobs.items():
            if not use.dirty or (job_id not in final and now - use.written < self.write_every):
                continue
            fields: dict[str, float] = {}
            if use.mean is not None:
                fields["gpu_util"] = round(use.mean, 2)
            if use.peak_memory is not None:
                fields["gpu_memory"] = round(use.peak_memory, 1)
            if fields:
                changes.append(Change(job_id, JobState.RUNNING, None, "", now, fields))
            use.written, use.dirty = now, False
        written = apply_all_else_each(self.store.apply, changes, skip=(Conflict, NotFound))
        return sum(1 for job in written if job is not None)

    def recent(self, job_ids: list[str], window: float, now: float) -> dict[str, float]:
        """GpuUtilization: mean utilisation over [now - window, now] per job with samples there."""
        out = {}
        for job_id in job_ids:
            use = self.jobs.get(job_id)
            samples = [u for at, u in use.recent if at >= now - window] if use else []
            if samples:
                out[job_id] = sum(samples) / len(samples)
        return out
