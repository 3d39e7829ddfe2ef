"""Phase 4 of a pass: fit. Gang: a job gets all its GPUs, of one type, or none.

A job that does not fit keeps its place. Without backfill, the GPU types it
can use are held for it: nothing later starts on them (FIFO blocking). With
backfill (EASY), it gets a reservation instead: the earliest time enough GPUs
free up, from the running jobs' wall-time limits (hard bounds: a job is killed
at its limit). A later job may start now only on GPUs it will have released,
by its own limit, before any reservation on them begins, so it provably
delays no reserved job. The first `reservation_depth` blocked jobs and the
first blocked job of every tier get reservations."""

from collections import defaultdict

from .ledger import Ledger
from .snapshot import PendingJob, Snapshot

INF = float("inf")


class Capacity:
    def __init__(self, snap: Snapshot, ledger: Ledger):
        self.snap, self.ledger, self.now = snap, ledger, snap.now
        self.backfill = snap.policy.backfill
        self.types: dict[str, list[int]] = defaultdict(list)     # type -> all its GPU indices
        for gpu in snap.gpus:
            self.types[gpu.type].append(gpu.index)
        self.busy_until = {g.index: snap.now for g in snap.gpus}  # when each GPU is next free
        for run in snap.running:
            for index in run.gpus:
                self.busy_until[index] = run.ends_by
        self.booked: dict[int, tuple[float, str]] = {}            # GPU -> (held from, job) of its first reservation
        self.reserved_start: dict[str, float] = {}                # job -> its reserved start (inf: unknown)
        self.held_types: dict[str | None, str] = {}               # without backfill: type -> blocking job
        self.depth_left = snap.policy.reservation_depth
        self.tiers_reserved: set[int] = set()

    # -- gates -------------------------------------------------------------------
    def behind(self, job: PendingJob) -> str | None:
        """Without backfill: a job waiting first for all types, or for this job's type, holds it back."""
        holder = self.held_types.get(None)
        if holder is None and job.gpu_type is not None:
            holder = self.held_types.get(job.gpu_type)
        if holder is None:
            return None
        kind = f"{job.gpu_type} GPUs" if job.gpu_type else "GPUs"
        return f"waiting behind job {holder}, which is first in line for {kind}"

    def fit(self, job: PendingJob) -> tuple[tuple[int, ...] | None, str]:
        """The GPUs the job starts on now, or None and why not (with numbers)."""
        of = f" of {job.gpu_type}" if job.gpu_type else ""
        if job.gpu_type and job.gpu_type not in self.types:
            kinds = ", ".join(sorted(self.types)) or "none"
            return None, f"needs {gpus_text(job.gpus)}{of}; this cluster has none of that type (has: {kinds})"
        free: dict[str, list[int]] = defaultdict(list)
        usable: dict[str, list[int]] = defaultdict(list)
        limit_end = self.now + job.wall_time if job.wall_time else INF
        blocker = None
        for index, gpu_type in sorted(self.ledger.free.items()):
            if job.gpu_type is not None and gpu_type != job.gpu_type:
                continue
            free[gpu_type].append(index)
            if not self.backfill and gpu_type in self.held_types:
                blocker = blocker or (self.held_types[gpu_type], gpu_type)
                continue
            booking = self.booked.get(index)
            if booking is not None and limit_end > booking[0]:
                blocker = blocker or (booking[1], gpu_type)
                continue
            usable[gpu_type].append(index)
        # best fit: the type with the fewest usable GPUs that still holds the whole gang
        candidates = sorted((len(v), t) for t, v in usable.items() if len(v) >= job.gpus)
        if not candidates:
            return None, self._shortfall(job, free, blocker, of)
        led = self.ledger
        if led.cpus_free is not None and job.cpus and job.cpus > led.cpus_free:
            return None, f"needs {job.cpus} CPUs, {led.cpus_free} free"
        if led.memory_free is not None and job.memory and job.memory > led.memory_free:
            from ..models.units import format_size
            return None, f"needs {format_size(job.memory)} memory, {format_size(led.memory_free)} free"
        return tuple(usable[candidates[0][1]][: job.gpus]), ""

    def _shortfall(self, job: PendingJob, free: dict[str, list[int]], blocker, of: str) -> str:
        total = sum(len(v) for v in free.values())
        if blocker is not None and any(len(v) >= job.gpus for v in free.values()):
            holder, gpu_type = blocker
            if not self.backfill:
                return f"waiting behind job {holder}, which is first in line for {gpu_type} GPUs"
            start = self.booked_start(holder)
            if start == INF:
                return (f"waiting behind job {holder}, which holds these GPUs until running jobs end "
                        "(they have no wall time, so nothing can be backfilled safely)")
            why = "it has no wall time" if not job.wall_time else \
                f"its wall time of {_in(job.wall_time)} would run past that"
            return f"waiting behind job {holder}, reserved to start in {_in(start - self.now)}; {why}"
        most = max((len(v) for v in free.values()), default=0)
        detail = f"{total} free" if len(free) <= 1 else f"{total} free, at most {most} of one type"
        return f"needs {gpus_text(job.gpus)}{of}, {detail}"

    def booked_start(self, job_id: str) -> float:
        return self.reserved_start.get(job_id, INF)

    # -- outcomes ------------------------------------------------------------------
    def started(self, job: PendingJob, gpus: tuple[int, ...]) -> bool:
        """Record a start; True if it started ahead of a reserved job (backfill)."""
        end = self.now + job.wall_time if job.wall_time else INF
        for index in gpus:
            self.busy_until[index] = end
        return bool(self.booked)

    def blocked(self, job: PendingJob, tier: int) -> float | None:
        """Hold capacity for a job that does not fit; the reserved start, if one was made."""
        if not self._could_ever_fit(job):
            return None  # it can never run here: it must not block the rest
        if not self.backfill:
            for gpu_type in ([job.gpu_type] if job.gpu_type else [None]):
                self.held_types.setdefault(gpu_type, job.id)
            return None
        if self.depth_left <= 0 and tier in self.tiers_reserved:
            return None
        self.depth_left -= 1
        self.tiers_reserved.add(tier)
        return self._reserve(job)

    def _reserve(self, job: PendingJob) -> float:
        best = None
        for gpu_type, indices in self.types.items():
            if job.gpu_type is not None and gpu_type != job.gpu_type or len(indices) < job.gpus:
                continue
            start = sorted(self.busy_until[i] for i in indices)[job.gpus - 1]
            if best is None or start < best[0]:
                # of the GPUs free by then, book those that free up last: GPUs free now stay
                # available to long jobs that could not otherwise backfill (EASY's "extra" nodes)
                ready = sorted((i for i in indices if self.busy_until[i] <= start),
                               key=lambda i: (-self.busy_until[i], i))
                if start == INF:  # unknowable: hold the GPUs free soonest, i.e. those free now
                    ready = sorted(indices, key=lambda i: (self.busy_until[i], i))
                best = (start, ready[: job.gpus])
        start, chosen = best
        self.reserved_start[job.id] = start
        # unknown ends make the start unknowable: then nothing may borrow these GPUs at all
        hold_from = start if start < INF else self.now
        end = start + job.wall_time if job.wall_time and start < INF else INF
        for index in chosen:
            if index not in self.booked or hold_from < self.booked[index][0]:
                self.booked[index] = (hold_from, job.id)
            self.busy_until[index] = end
        return start

    def _could_ever_fit(self, job: PendingJob) -> bool:
        most = len(self.types.get(job.gpu_type, ())) if job.gpu_type else max(map(len, self.types.values()), default=0)
        snap = self.snap
        if job.gpus > most:
            return False
        if snap.cpus is not None and job.cpus and job.cpus > snap.cpus:
            return False
        return not (snap.memory is not None and job.memory and job.memory > snap.memory)


def gpus_text(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _in(seconds: float) -> str:
    if seconds == INF:
        return "an unknown time (running jobs have no wall time)"
    from ..models.units import format_duration
    return format_duration(seconds)
