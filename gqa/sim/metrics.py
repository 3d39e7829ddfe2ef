"""What a replay measured: waits, completion times, slowdown, utilisation,
fairness across teams, ETA accuracy and cost. Times in seconds, shares as
fractions; a metric that cannot be measured is None (null in JSON), never 0."""

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ..models.priority import Priority
from ..models.stats import percentile
from .engine import Outcome, SimResult
from .trace_fields import TraceJob
from .workload import SimJob

SLOWDOWN_FLOOR = 10.0   # bounded slowdown: jobs shorter than this count as this long

# metrics where lower is better and a ratio to FIFO's reads as "x of FIFO's"
RATIO_KEYS = ("mean_wait", "p50_wait", "p95_wait", "p99_wait", "mean_jct", "p99_jct", "mean_slowdown",
              "utilisation", "utilisation_during_arrivals", "makespan", "max_team_slowdown", "jain_fairness", "cost")


def mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def jain(values: list[float]) -> float | None:
    """Jain's fairness index: 1 when all equal, 1/n when one takes everything."""
    if not values:
        return None
    squares = math.fsum(v * v for v in values)
    return math.fsum(values) ** 2 / (len(values) * squares) if squares > 0 else 1.0


@dataclass(frozen=True)
class _Done:
    """A finished job's outcome, whose start and end are known."""
    team: str
    submit: float
    start: float
    end: float
    duration: float
    wall_time: float
    eta: float | None
    timed_out: bool
    tier: int


def _finished(outcomes: Iterable[Outcome]) -> list[_Done]:
    return [_Done(o.team, o.submit, o.start, o.end, o.duration, o.wall_time, o.eta, o.timed_out, o.tier)
            for o in outcomes if o.start is not None and o.end is not None]


def summarize(result: SimResult, *, costs: dict[str, float | None] | None = None) -> dict:
    done = _finished(result.outcomes)
    waits = [o.start - o.submit for o in done]
    jcts = [o.end - o.submit for o in done]
    slowdowns = [_slowdown(o) for o in done]
    by_team: dict[str, list[float]] = defaultdict(list)
    for o, s in zip(done, slowdowns):
        by_team[o.team].append(s)
    team_slowdown = {team: math.fsum(values) / len(values) for team, values in sorted(by_team.items())}
    by_tier: dict[int, list[float]] = defaultdict(list)
    for o, jct in zip(done, jcts):
        by_tier[o.tier].append(jct)
    makespan = (max(o.end for o in done) - min(o.submit for o in result.outcomes)) if done else None
    used = math.fsum(o.gpu_seconds for o in result.outcomes)
    errors = [abs(o.eta - o.start) for o in done if o.eta is not None]
    # most jobs start on arrival, where any ETA is trivially right: also judge the ones that waited
    waited = [abs(o.eta - o.start) for o in done if o.eta is not None and o.start > o.submit]
    window = result.arrival_window[1] - result.arrival_window[0]
    summary = {
        "jobs": len(result.outcomes), "finished": len(done), "unfinished": result.unfinished,
        "given_up": result.given_up,
        "mean_wait": mean(waits), "p50_wait": percentile(waits, 50), "p95_wait": percentile(waits, 95),
        "p99_wait": percentile(waits, 99),
        "mean_jct": mean(jcts), "p50_jct": percentile(jcts, 50), "p95_jct": percentile(jcts, 95),
        "p99_jct": percentile(jcts, 99),
        "mean_slowdown": mean(slowdowns), "p99_slowdown": percentile(slowdowns, 99),
        "utilisation": used / (result.gpus * makespan) if makespan and result.gpus else None,
        # the same over the arrival window only: a trace prefix's makespan is mostly the
        # drain of its longest jobs, which says little about how busy the cluster was
        "utilisation_during_arrivals": (result.gpu_seconds_in_window / (result.gpus * window)
                                        if window > 0 and result.gpus else None),
        "makespan": makespan, "gpu_hours": used / 3600,
        "team_slowdown": team_slowdown,
        "max_team_slowdown": max(team_slowdown.values()) if team_slowdown else None,
        # what ranking by tier first buys the higher tiers and costs the rest
        "tier_mean_jct": {Priority.of_rank(tier).value: math.fsum(v) / len(v) for tier, v in sorted(by_tier.items())},
        "jain_fairness": jain(list(team_slowdown.values())),
        "eta_median_abs_error": percentile(errors, 50), "eta_p90_abs_error": percentile(errors, 90),
        "eta_checked": len(errors), "eta_waited_checked": len(waited),
        "eta_waited_median_abs_error": percentile(waited, 50), "eta_waited_p90_abs_error": percentile(waited, 90),
        "eta_waited_mean_wait": mean([o.start - o.submit for o in done if o.eta is not None and o.start > o.submit]),
        "eta_waited_mean_abs_error": mean(waited),
        # the goal's measure: the mean error of the waiting jobs' ETAs over their mean wait
        "eta_error_of_wait": _share(mean(waited), mean([o.start - o.submit for o in done
                                                        if o.eta is not None and o.start > o.submit])),
        "preemptions": sum(o.preemptions for o in result.outcomes),
        "reclaims": sum(o.reclaims for o in result.outcomes),
        "timed_out": sum(1 for o in done if o.timed_out),
        # killed at the wall time they asked for: what under-asking costs
        "timed_out_share": sum(1 for o in done if o.timed_out) / len(done) if done else None,
        "scheduling_passes": result.passes,
    }
    if costs is not None:
        summary.update(costs)
    return summary


def recorded(jobs: Iterable[SimJob], trace_jobs: Iterable[TraceJob]) -> dict | None:
    """What the trace says happened to the jobs replayed, where it records their starts and ends (a
    Slurm dump does): their waits, JCT and slowdown measured as a replay's are, each job's team and wall
    time as the replay gave them. None where it records none of them."""
    happened = {j.id: j for j in trace_jobs if j.started is not None and j.ended is not None}
    done = [_Done(job.team, ran.submit_time, ran.started, ran.ended, job.duration, job.wall_time, None, False,
                  job.tier)
            for job in jobs if (ran := happened.get(job.id)) is not None
            and ran.started is not None and ran.ended is not None]
    if not done:
        return None
    waits = [o.start - o.submit for o in done]
    jcts = [o.end - o.submit for o in done]
    by_team: dict[str, list[float]] = defaultdict(list)
    for o in done:
        by_team[o.team].append(_slowdown(o))
    team_slowdown = {team: math.fsum(values) / len(values) for team, values in sorted(by_team.items())}
    return {"jobs": len(done), "mean_wait": mean(waits), "p50_wait": percentile(waits, 50),
            "p95_wait": percentile(waits, 95), "p99_wait": percentile(waits, 99), "mean_jct": mean(jcts),
            "p99_jct": percentile(jcts, 99), "mean_slowdown": mean([_slowdown(o) for o in done]),
            "makespan": max(o.end for o in done) - min(o.submit for o in done), "team_slowdown": team_slowdown,
            "max_team_slowdown": max(team_slowdown.values()), "jain_fairness": jain(list(team_slowdown.values()))}


def most_held(trace_jobs: Iterable[TraceJob]) -> int | None:
    """The most GPUs the trace's jobs held at once as they ran, where it records their runs (a
    Slurm dump): at least the cluster they ran on. None where it records none. A requeued job holds
    its GPUs through each attempt, not while it waits to run again."""
    ran = [(started, ended, j.gpus) for j in trace_jobs for started, ended in _runs(j)]
    marks = sorted([(started, gpus) for started, _, gpus in ran] + [(ended, -gpus) for _, ended, gpus in ran])
    held = most = 0
    for _, step in marks:   # at one moment the ends (negative) sort first: a GPU freed and taken is held once
        held += step
        most = max(most, held)
    return most if marks else None


def _runs(job: TraceJob) -> tuple[tuple[float, float], ...]:
    """The spans the job held its GPUs, as the trace records them: each attempt's, else its one run."""
    if job.runs:
        return job.runs
    return ((job.started, job.ended),) if job.started is not None and job.ended is not None else ()


def _share(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def _slowdown(o: _Done) -> float:
    """(wait + run) / run, the run being what the job needed (its wall time cuts
    it short), floored at SLOWDOWN_FLOOR seconds so a 1 s job waiting 1 minute
    does not dwarf everything else; never below 1."""
    service = min(o.duration, o.wall_time)
    return max(1.0, (o.end - o.submit) / max(service, SLOWDOWN_FLOOR))


def ratios(summaries: dict[str, dict], base: str = "fifo") -> dict[str, dict[str, float | None]]:
    """Each policy's metric over the base policy's (None where either is missing or the base is 0)."""
    if base not in summaries:
        return {}
    ref = summaries[base]
    out = {}
    for name, summary in summaries.items():
        if name == base:
            continue
        out[name] = {k: (summary[k] / ref[k] if summary.get(k) is not None and ref.get(k) else None)
                     for k in RATIO_KEYS if k in summary or k in ref}
    return out
