"""What traces lack, derived deterministically, and said out loud.

Public traces record arrivals, run times and GPU counts; a scheduler also needs
the wall time the user asked for, a team and a user. Each derivation here
depends only on the seed and the job's id (never on the job's position), so a
prefix of a trace (`--limit`) gets the same values as the whole trace, and
every choice ends up as one plain sentence in `Workload.assumptions`."""

import math
from collections import Counter
from dataclasses import dataclass, field, replace

from ..models.priority import Priority
from ..models.units import format_count
from ..scheduling import TeamPolicy
from .estimates import MODEL, Estimates, describe, uniform as _uniform, wall_time
from .trace_fields import PRIORITIES as TIER_NAMES, PRIORITY_ALIASES, TraceJob

DEFAULT_TEAMS = (("team-a", 0.4), ("team-b", 0.3), ("team-c", 0.2), ("team-d", 0.1))
USERS_PER_TEAM = 8
# the trace's priorities, or one tier for all: what gqa gains or pays for honouring them, against
# references that never read them
PRIORITIES = ("trace", "one")


@dataclass(slots=True)
class SimJob:
    id: str
    seq: int                # arrival order, the scheduler's last tie-break
    submit: float           # seconds from the first arrival, after --load
    duration: float         # the true run time: the scheduler never sees it
    gpus: int
    team: str
    user: str
    tier: int               # 0 high, 1 normal, 2 low
    wall_time: float        # what the user asked for: all the scheduler knows of run time
    spot: bool = False      # may run on spot capacity (tried first)
    gpu_type: str | None = None   # only GPUs of this type will do (the trace's, where the pools have types)


@dataclass
class Workload:
    jobs: list[SimJob]
    teams: dict[str, TeamPolicy]
    assumptions: list[str] = field(default_factory=list)


# the slowest arrival rate a replay takes: a trace's span (submit times within 1e11 s either side of
# 1970, trace.py) stretched 100-fold stays within the seconds a float counts exactly (9e15); at 1e-300
# a replay's times ran to 300 digits
MIN_LOAD = 0.01


def load_problem(load: float) -> str | None:
    """Why an arrival-rate multiplier cannot be replayed (NaN too: every arrival would be timed at
    NaN, and the replay would never end), or None; callers check it before a trace's slow load too."""
    if MIN_LOAD <= load < float("inf"):
        return None
    return f"load must be a number from {MIN_LOAD:g} (arrivals {1 / MIN_LOAD:g} times as far apart), got {load:g}"


def derive(trace_jobs: list[TraceJob], *, cluster_gpus: int, seed: int = 0, load: float = 1.0,
           shares: dict[str, float] | None = None, limit: int | None = None, spot: bool = False,
           notes: list[str] | None = None, estimates: Estimates = MODEL, priorities: str = "trace",
           gpu_types: dict[str, int] | None = None) -> Workload:
    """`cluster_gpus`: the largest gang that can ever start (jobs over it are
    dropped and counted); `load` multiplies the arrival rate; `limit` keeps the
    first N arrivals; `shares` overrides the equal team shares; `spot`: every
    job may run on spot capacity; `estimates`: the wall times of jobs the trace
    gives none (gqa/sim/estimates.py); `priorities`: "trace" keeps the
    priority each job has in the trace, "one" puts every job in the normal
    tier, as the references that ignore tiers (fifo, las) see them; `gpu_types`: the cluster's GPU
    types, each with its largest gang (its largest pool), to hold each job to the type the trace gives
    it (None: every GPU alike, the trace's types set aside and said)."""
    problem = load_problem(load)
    if problem:
        raise ValueError(problem)
    priorities = priorities_choice(priorities)
    said = list(notes or [])
    picked = trace_jobs[:limit] if limit else trace_jobs
    fits = [j for j in picked if j.gpus <= cluster_gpus]
    if len(fits) < len(picked):
        said.append(f"dropped {format_count(len(picked) - len(fits), 'job')} asking for more than {cluster_gpus} GPUs "
                    "(the largest gang this cluster can start)")
    fits, typed = _typed(fits, gpu_types, said)
    t0 = min((j.submit_time for j in fits), default=0.0)
    jobs, seen, asked = [], set(), []
    for seq, tj in enumerate(fits):
        job_id = tj.id
        while job_id in seen:  # plan() needs unique ids; traces rarely repeat one
            job_id += "'"
        seen.add(job_id)
        team = tj.team or _weighted(tj.id, DEFAULT_TEAMS, seed)
        user = tj.user or f"{team}-u{_bucket(tj.id, _salt('user', seed), USERS_PER_TEAM)}"
        wall = tj.wall_time if tj.wall_time else wall_time(tj.duration, tj.id, seed, estimates)
        if not tj.wall_time:
            asked.append((tj.duration, wall))
        jobs.append(SimJob(id=job_id, seq=seq, submit=(tj.submit_time - t0) / load, duration=tj.duration,
                           gpus=tj.gpus, team=team, user=user, tier=_tier(tj, priorities),
                           wall_time=wall, spot=spot, gpu_type=tj.gpu_type if typed else None))
    if asked:
        said.append(describe(estimates, asked, seed))
    said += _assumptions(fits, load, shares, priorities, seed)
    names = sorted({j.team for j in jobs} | set(shares or {}))
    teams = {t: TeamPolicy(share=(shares or {}).get(t, 1.0)) for t in names}
    return Workload(jobs=jobs, teams=teams, assumptions=said)


def positive(text: str) -> float | None:
    """The number `text` says, where it is finite and above 0 (not nan, inf or 1e400); None else."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if 0 < number < math.inf else None


def shares_choice(text: str) -> dict[str, float]:
    """`TEAM=SHARE,...`: each team's fair share, relative to the others' (as Slurm's Fairshare and
    `gqa quota set --share`; a team not named has 1). ValueError saying what is wrong else."""
    shares: dict[str, float] = {}
    for part in text.split(","):
        team, named, value = part.partition("=")
        team = team.strip()
        if not named or not team:
            raise ValueError(f"shares are TEAM=SHARE pairs, comma-separated (vision=2,nlp=1), not {part.strip()!r}")
        share = positive(value)
        if share is None:
            raise ValueError(f"the share of {team} must be a number above 0, not {value.strip()!r}")
        if team in shares:
            raise ValueError(f"{team} is given a share twice")
        shares[team] = share
    return shares


def _typed(jobs: list[TraceJob], gpu_types: dict[str, int] | None, said: list[str]) -> tuple[list[TraceJob], bool]:
    """The jobs a cluster of these GPU types can run, each held to its type, and whether types are
    honoured: with no types given, every GPU is alike and the trace's types are set aside (said)."""
    given = Counter(j.gpu_type for j in jobs if j.gpu_type)
    if not given:
        return jobs, False
    split = ", ".join(f"{t} {n}" for t, n in sorted(given.items()))
    if gpu_types is None:
        said.append(f"GPU types the trace gives ({split} jobs) set aside: every GPU alike (--pools with "
                    "those gpu_type holds each job to its type)")
        return jobs, False
    unknown = Counter(j.gpu_type for j in jobs if j.gpu_type and j.gpu_type not in gpu_types)
    wide = [j for j in jobs if j.gpu_type in gpu_types and j.gpus > gpu_types[j.gpu_type]]
    if unknown:
        said.append("dropped " + ", ".join(f"{format_count(n, 'job')} of {t}" for t, n in sorted(unknown.items()))
                    + f": no pool has that type (the pools have {', '.join(sorted(gpu_types))})")
    if wide:
        said.append(f"dropped {format_count(len(wide), 'job')} asking for more GPUs than the largest pool "
                    "of their type has")
    said.append(f"GPU types as the trace gives them ({split} jobs): each runs only on its type; "
                "a job with none on any")
    return [j for j in jobs if not j.gpu_type or (j.gpu_type in gpu_types and j.gpus <= gpu_types[j.gpu_type])], True


def qos_tiers_choice(text: str) -> dict[str, str]:
    """`QOS=TIER,...`: the tier (high, normal, low, or 0, 1, 2) each of a trace's scheduler classes
    stands for, as a site names its QOS (urgent=high,scavenger=low). ValueError saying what is wrong."""
    tiers: dict[str, str] = {}
    for part in text.split(","):
        qos, named, tier = (x.strip() for x in part.partition("="))
        tier = PRIORITY_ALIASES.get(tier, tier.lower())
        if not named or not qos:
            raise ValueError(f"QOS tiers are QOS=TIER pairs, comma-separated (urgent=high,scavenger=low), "
                             f"not {part.strip()!r}")
        if tier not in TIER_NAMES:
            raise ValueError(f"the tier of {qos} must be high, normal or low (or 0, 1, 2), not {tier!r}")
        if qos.lower() in tiers:
            raise ValueError(f"{qos} is given a tier twice")
        tiers[qos.lower()] = tier
    return tiers


def with_qos_tiers(jobs: list[TraceJob], tiers: dict[str, str]) -> tuple[list[TraceJob], list[str]]:
    """Each job whose class (QOS) is named in `tiers` put in that tier, and the lines that say so:
    the classes named, with their jobs, and any named that no job has."""
    counts = Counter(j.qos for j in jobs if j.qos in tiers)
    said = ["QOS as tiers (--qos-tiers): " + ", ".join(f"{q}={t} ({format_count(counts[q], 'job')})"
                                                       for q, t in tiers.items() if counts[q])] if counts else []
    if unused := [q for q in tiers if not counts[q]]:
        said.append(f"--qos-tiers names QOS no job has: {', '.join(unused)}")
    return [replace(j, priority=tiers[j.qos]) if j.qos in tiers else j for j in jobs], said


def priorities_choice(text: str) -> str:
    """One of PRIORITIES, as typed (case and spaces aside); ValueError naming the choices else."""
    choice = text.strip().lower()
    if choice not in PRIORITIES:
        raise ValueError(f"priorities must be one of {', '.join(PRIORITIES)}, got {text!r}")
    return choice


def _tier(job: TraceJob, priorities: str) -> int:
    named = job.priority if priorities == "trace" else None
    return Priority(named or Priority.NORMAL).rank


def _assumptions(jobs: list[TraceJob], load: float, shares: dict[str, float] | None,
                 priorities: str, seed: int) -> list[str]:
    out = ["schedulers never see the true duration: they see the wall time, and (as in production) "
           "expect a run time of wall time x the median share of it the team's past jobs used"]
    if any(j.team is None for j in jobs):
        split = ", ".join(f"{t} {w:.0%}" for t, w in DEFAULT_TEAMS)
        out.append(f"teams (none in the trace): by a hash of the job id and seed {seed}: {split}")
    what = (", ".join(f"{t}={s:g}" for t, s in sorted(shares.items())) + "; a team not named: 1") if shares \
        else "equal shares"
    out.append(f"fair share: {what}")
    if any(j.user is None for j in jobs):
        out.append(f"users (none in the trace): {USERS_PER_TEAM} per team, by a hash of the job id and seed {seed}")
    given = Counter(j.priority for j in jobs if j.priority is not None)
    if priorities == "one" and given:
        split = ", ".join(f"{n} {p}" for p, n in sorted(given.items()))
        out.append(f"priority: every job normal (--priorities one), though the trace gives {split}; "
                   "fifo, fifo-easy and las never read it")
    elif any(j.priority is None for j in jobs):
        out.append("priority: normal where the trace gives none")
    if load != 1.0:
        out.append(f"load x{load:g}: arrival times divided by {load:g} (run times unchanged)")
    return out


def _bucket(job_id: str, salt: str, n: int) -> int:
    return int(_uniform(f"{salt}:{job_id}") * n)


def _salt(what: str, seed: int) -> str:
    """The hash's salt for one derivation under `seed`. Seed 0 draws as before seeds reached teams
    and users, so the figures published for it still stand."""
    return what if seed == 0 else f"{what}{seed}"


def _weighted(job_id: str, choices: tuple[tuple[str, float], ...], seed: int = 0) -> str:
    u = _uniform(f"{_salt('team', seed)}:{job_id}") * sum(w for _, w in choices)
    for name, weight in choices:
        u -= weight
        if u < 0:
            return name
    return choices[-1][0]
