"""Test-data builders: each takes only what a test is about and fills in the
rest with plain defaults, so a table row reads like the rule it checks.

    snapshot(gpus=4, pending=[pending("1", team="vision", gpus=2)])
    job_record(spec={"retries": {"on_error": 2}}, error_retries=1)
"""

from __future__ import annotations

import subprocess
import sys

from collections.abc import Iterable, Mapping
from typing import Any

from gqa.models.burst import Burst, key_size
from gqa.models.job import JobRecord, JobState, Transition
from gqa.models.loader import merge, validate
from gqa.models.priority import Priority
from gqa.models.spec import JobSpec
from gqa.models.trigger import Trigger
from gqa.ports import AttemptLog
from gqa.scheduling import Gpu, PendingJob, Policy, RunningJob, Snapshot, TeamPolicy

NOW = 1_000_000.0


def tier_rank(tier: int | str) -> int:
    return Priority(tier).rank if isinstance(tier, str) else tier


# -- scheduling ------------------------------------------------------------------

def gpus(count: int | Mapping[str, int] | Iterable[Gpu] = 4, gpu_type: str = "gpu") -> tuple[Gpu, ...]:
    """`4` -> four GPUs of one type, indices 0-3; `{"a10g": 2, "h100": 2}` ->
    indices 0-1 are a10g and 2-3 are h100; Gpu objects pass through."""
    if isinstance(count, int):
        return tuple(Gpu(i, gpu_type) for i in range(count))
    if isinstance(count, Mapping):
        out: list[Gpu] = []
        for kind, n in count.items():
            out.extend(Gpu(len(out), kind) for _ in range(n))
        return tuple(out)
    return tuple(count)


def pending(id: str, *, team: str = "default", user: str = "alice", gpus: int = 1,
            tier: int | str = "normal", submitted_at: float = 0.0, **fields: Any) -> PendingJob:
    return PendingJob(id=id, team=team, user=user, tier=tier_rank(tier), gpus=gpus,
                      submitted_at=submitted_at, **fields)


def running(id: str, *, team: str = "default", user: str = "alice", gpus: Iterable[int] = (0,),
            started_at: float = 0.0, **fields: Any) -> RunningJob:
    fields.setdefault("submitted_at", started_at)   # started as soon as it was submitted, unless told
    return RunningJob(id=id, team=team, user=user, gpus=tuple(gpus), started_at=started_at, **fields)


def teams(**policies: TeamPolicy | Mapping[str, Any]) -> dict[str, TeamPolicy]:
    """teams(vision={"max_gpus": 8}, nlp=TeamPolicy(share=3))"""
    return {name: p if isinstance(p, TeamPolicy) else TeamPolicy(**p) for name, p in policies.items()}


def snapshot(gpus: int | Mapping[str, int] | Iterable[Gpu] = 4, *, pending: Iterable[PendingJob] = (),
             running: Iterable[RunningJob] = (), teams: Mapping[str, TeamPolicy | Mapping[str, Any]] | None = None,
             usage: Mapping[str, float] | None = None, policy: Policy | None = None, now: float = NOW,
             cpus: int | None = None, memory: int | None = None,
             spend: Mapping[str, float] | None = None,
             named: Mapping[str, Mapping[JobState, int]] | None = None) -> Snapshot:
    team_policies = {name: p if isinstance(p, TeamPolicy) else TeamPolicy(**p) for name, p in (teams or {}).items()}
    return Snapshot(now=now, gpus=_gpus(gpus), pending=tuple(pending), running=tuple(running),
                    teams=team_policies, usage=dict(usage or {}), policy=policy or Policy(),
                    cpus=cpus, memory=memory, spend=dict(spend or {}),
                    named={ref: dict(states) for ref, states in (named or {}).items()})


_gpus = gpus  # `snapshot` takes a parameter of the same name


# -- specs and records -------------------------------------------------------------

def spec(**overrides: Any) -> JobSpec:
    """A valid spec; nested dicts merge into the defaults
    (`spec(resources={"gpus": 2})` keeps the default command)."""
    raw: dict[str, Any] = {"name": "train", "team": "default", "owner": "alice",
                           "command": ["python", "train.py"]}
    return validate(merge(raw, overrides))


def job_record(*, spec: JobSpec | Mapping[str, Any] | None = None, **overrides: Any) -> JobRecord:
    """A record as the submit service would write it, then `overrides`
    (state, attempts, request, kill_reason, ...)."""
    job_spec = spec if isinstance(spec, JobSpec) else _spec(**dict(spec or {}))
    r = job_spec.resources
    fields: dict[str, Any] = dict(
        id="1", group="1", name=job_spec.name, team=job_spec.team, owner=job_spec.owner,
        tier=job_spec.priority.rank, gpus=r.gpus, gpu_type=r.gpu_type, cpus=r.cpus, memory=r.memory,
        wall_time=job_spec.limits.wall_time, submitted_at=0.0, spec_json=job_spec.model_dump_json(),
        state=JobState.QUEUED, spot=job_spec.spot, dependency=job_spec.after, user_hold=job_spec.hold,
        begin=job_spec.begin, nice=job_spec.nice, exclusive=r.exclusive)
    fields.update(overrides)
    return JobRecord(**fields)


_spec = spec  # `job_record` takes a parameter of the same name


def history(*steps: str) -> tuple[Transition, ...]:
    """A job's history from "STATE@seconds" steps: history("QUEUED@0", "STARTING@30")."""
    out = []
    for step in steps:
        state, at = step.split("@")
        out.append(Transition(JobState(state), float(at), state.lower()))
    return tuple(out)


def left_at_version(path, version: int, *statements: str | tuple[str, tuple]) -> None:
    """A queue database brought back to how schema `version` left it: `statements` (SQL, or
    SQL and its parameters) undo what came after, then the version is written, in one commit."""
    import sqlite3

    old = sqlite3.connect(path)
    for statement in statements:
        old.execute(*((statement,) if isinstance(statement, str) else statement))
    old.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    old.commit()
    old.close()


# -- logs ------------------------------------------------------------------------

def attempt_log(attempt: int = 1, *, stream: str | None = "auto", status: str = "RUNNING",
                started_at: float | None = NOW, **fields: Any) -> AttemptLog:
    """Where attempt `attempt` wrote; `stream` defaults to "stream-<attempt>",
    None for an attempt that has no stream (its container never ran)."""
    return AttemptLog(attempt=attempt, source=fields.pop("source", f"Batch job b-{attempt}"), status=status,
                      started_at=started_at, group=fields.pop("group", "/aws/batch/job"),
                      stream=f"stream-{attempt}" if stream == "auto" else stream, **fields)

# -- triggers ----------------------------------------------------------------------

def trigger(**overrides: Any) -> Trigger:
    """A valid trigger on s3://data/incoming/ with a two-minute window."""
    fields: dict[str, Any] = dict(id="tr-0001", bucket="data", prefix="incoming/", spec_json=spec().model_dump_json(),
                                  owner="alice", debounce=120, created_at=NOW)
    fields.update(overrides)
    return Trigger(**fields)


def burst(keys: Iterable[str] = ("incoming/a.csv",), *, more: int = 0, opened_at: float = NOW,
          closes_at: float | None = None, **overrides: Any) -> Burst:
    """An open burst of trigger tr-0001 holding `keys`."""
    keys = tuple(keys)
    fields: dict[str, Any] = dict(trigger_id="tr-0001", id="b1", opened_at=opened_at,
                                  closes_at=opened_at + 120 if closes_at is None else closes_at, keys=keys,
                                  key_bytes=sum(key_size(k) for k in keys), more=more)
    fields.update(overrides)
    return Burst(**fields)


_LINE_WRITER = """
import sys, time
with open(sys.argv[1], "ab", buffering=0) as out:
    for i in range(int(sys.argv[2])):
        out.write(b"line %d\\n" % i)
        if i % int(sys.argv[3]) == 0:
            time.sleep(0.001)
"""


def line_writer(path: object, lines: int, *, pause_every: int) -> subprocess.Popen[bytes]:
    """A process that appends `line 0` .. `line N-1` to `path`, unbuffered, pausing a
    millisecond every `pause_every` lines (so a rotation can land between writes)."""
    return subprocess.Popen([sys.executable, "-c", _LINE_WRITER, str(path), str(lines), str(pause_every)])


def overview(gpus: int = 4, *, pending: int = 3, teams: int = 2, events: int = 3, now: float = NOW):
    """An Overview (gqa.services.overview) of a queue with `gpus` GPUs, the first
    two held by job 7 "train-resnet50" (vision, 1h10m in, 50m left, 87% busy)
    and the last spot; `pending` jobs waiting for their team's cap; `teams`
    teams; `events` transitions."""
    from gqa.ports import JobEvent
    from gqa.services.overview import GpuSlot, HeadEntry, Overview, RunningJob, TeamLoad

    train = RunningJob("7", "train-resnet50", "alice", "vision", "running", (0, 1), now - 4200, 4200.0, 3000.0, 87.0,
                       30_000.0, "attempt 1 started")
    slots = [GpuSlot(i, "a100", i == gpus - 1 and gpus > 2, train if i < 2 else None) for i in range(gpus)]
    head = [HeadEntry(n + 1, str(10 + n), f"sweep-{n}", "bob", "nlp", 1, 2, "pending", now - 600 - n, now + 3000,
                      "team nlp at 4 of 4 GPUs; needs 2 more") for n in range(pending)]
    loads = [TeamLoad(name, 2 if name == "vision" else 0, 4, 120.5, 1000.0)
             for name in ("vision", "nlp", "speech", "robotics")[:teams]]
    recent = [JobEvent(str(20 + n), f"job-{n}", JobState.SUCCEEDED, now - 60 * n, "exited 0") for n in range(events)]
    return Overview(now, "2026-12", slots, [train], pending, head, loads, recent)
