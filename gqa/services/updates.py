"""`gqa update`'s rule: what a pending job becomes when its owner changes its
wall time, priority tier or GPUs (Slurm's `scontrol update`). The new spec is
validated as a submitted one is, held to the queue's hard limits by the very
check a submission passes (submit.within_limits), and refused if it would
need an approval the job was not given; the record's scheduling columns are
taken from it, so spec and columns never disagree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models.errors import Rejected, SpecError
from ..models.job import JobRecord, JobState
from ..models.loader import validate
from ..models.priority import Priority
from ..models.spec import JobSpec
from ..models.units import format_duration
from ..ports import Settings
from ..scheduling.budget import gpu_hours_cap
from .submit import approval_needed, within_limits

# pending and judged already: a job awaiting approval keeps the size an approver is asked about,
# and a retrying one goes back to the queue first
UPDATABLE = frozenset({JobState.QUEUED, JobState.HELD})


@dataclass(frozen=True)
class Update:
    """The values asked for; None: left as it is."""

    time: int | None = None          # wall time, seconds
    priority: Priority | None = None
    gpus: int | None = None

    @classmethod
    def of(cls, *, time: int | None = None, priority: Priority | str | None = None,
           gpus: int | None = None) -> Update:
        """SpecError for an update that asks nothing or a value no spec may hold."""
        if time is None and priority is None and gpus is None:
            raise SpecError("nothing to update: give a wall time, a priority or a number of GPUs")
        if time is not None and (isinstance(time, bool) or not isinstance(time, int) or time <= 0):
            raise SpecError(f"the wall time must be a positive number of seconds, got {time!r}")
        if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0):
            raise SpecError(f"the number of GPUs must be a whole number, 0 or more, got {gpus!r}")
        tier = None
        if priority is not None:
            try:
                tier = Priority(priority)
            except ValueError:
                raise SpecError(f"unknown priority {priority!r}; use high, normal or low") from None
        return cls(time, tier, gpus)

    def applied(self, spec: JobSpec, *, source: str) -> JobSpec:
        """The spec with these values, validated as a submitted one (SpecError
        names what no longer holds, e.g. GPUs per task over the new GPU count)."""
        raw = spec.model_dump(mode="json")
        if self.time is not None:
            raw["limits"]["wall_time"] = f"{self.time}s"
        if self.priority is not None:
            raw["priority"] = self.priority.value
        if self.gpus is not None:
            raw["resources"]["gpus"] = self.gpus
            held = spec.resources
            if held.memory_option == "--mem-per-gpu" and held.memory:   # asked per GPU: the total follows them
                raw["resources"]["memory"] = f"{held.memory // max(held.gpus, 1) * max(self.gpus, 1)}B"
        return validate(raw, source=source)


@dataclass(frozen=True)
class Planned:
    """What an update writes on one job (no fields: it already has those
    values), and what it changes, in words with the numbers."""

    fields: dict[str, Any]
    detail: str


def planned_updates(settings: Settings, jobs: list[JobRecord], update: Update) -> dict[str, Planned]:
    """The update of each distinct spec the jobs hold (an array's tasks share
    one), by the spec's text: a job's write is planned from the spec it was
    read with, and guarded on it. Every one is checked before anything is
    written: Rejected (over a hard limit, or needing approval) or SpecError
    for the first that fails."""
    by_spec: dict[str, Planned] = {}
    for job in jobs:
        if job.spec_json not in by_spec:
            by_spec[job.spec_json] = _plan(settings, job, update)
    return by_spec


def _plan(settings: Settings, job: JobRecord, update: Update) -> Planned:
    old = job.spec
    new = update.applied(old, source=f"job {job.id}")
    changed = _changes(old, new)
    if not changed:
        return Planned({}, "already has " + ", ".join(_values(new, update)))
    try:
        inventory, policy = within_limits(settings, new)
    except Rejected as exc:
        raise Rejected(f"job {job.id} cannot be updated: it {exc}") from None
    approval = approval_needed(new, inventory, policy)
    if approval and _grows(old, new):
        raise Rejected(f"job {job.id} cannot be updated: it would then need approval: {'; '.join(approval)} "
                       "(cancel it and submit it again to ask an approver)")
    fields = {"spec_json": new.model_dump_json(), "tier": new.priority.rank, "gpus": new.resources.gpus,
              "wall_time": new.limits.wall_time, "memory": new.resources.memory}
    return Planned(fields, ", ".join(changed))


def _grows(old: JobSpec, new: JobSpec) -> bool:
    """More GPUs or more GPU-hours (and so more cost) than the job was admitted, or approved, with."""
    def hours(spec: JobSpec) -> float:
        return gpu_hours_cap(spec.resources.gpus, spec.limits.wall_time, spec.limits.max_gpu_hours)
    return new.resources.gpus > old.resources.gpus or hours(new) > hours(old)


def _duration(seconds: int | None) -> str:
    return "none" if seconds is None else format_duration(seconds)


def _changes(old: JobSpec, new: JobSpec) -> list[str]:
    out = []
    if old.limits.wall_time != new.limits.wall_time:
        out.append(f"wall time {_duration(old.limits.wall_time)} -> {_duration(new.limits.wall_time)}")
    if old.priority != new.priority:
        out.append(f"priority {old.priority.value} -> {new.priority.value}")
    if old.resources.gpus != new.resources.gpus:
        out.append(f"GPUs {old.resources.gpus} -> {new.resources.gpus}")
    if old.resources.memory != new.resources.memory:   # --mem-per-gpu's total, with the GPUs
        out.append(f"memory {_mib(old.resources.memory)} -> {_mib(new.resources.memory)}")
    return out


def _mib(size: int | None) -> str:
    return "-" if size is None else f"{-(-size // (1 << 20)):,} MiB"


def _values(spec: JobSpec, update: Update) -> list[str]:
    out = []
    if update.time is not None:
        out.append(f"wall time {_duration(spec.limits.wall_time)}")
    if update.priority is not None:
        out.append(f"priority {spec.priority.value}")
    if update.gpus is not None:
        out.append(f"{spec.resources.gpus} GPUs")
    return out
