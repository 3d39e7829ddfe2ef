"""The wall time a job asks for, when the trace does not say (`--estimates`).

A scheduler sees only the wall time; how far it is from the real run time is
what backfill and ETAs live on. Four ways to fill it in, each one plain
assumption line with its numbers:

- `model`: the actual duration times a seeded lognormal over-estimate;
- `default`: a share of jobs asks the partition's default whatever it needs;
- `max`: every job asks the partition's maximum;
- `fitted`: shares and spreads fitted to a public log with both the requested
  and the used time of every job.

A job that asks less than it needs is killed at its limit (the engine's
`timed_out`). Every draw depends only on the seed and the job's id, so a prefix
of a trace (`--limit`) gets the same values as the whole trace."""

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

from ..models.units import format_count

HOUR, DAY = 3600.0, 86400.0
# what people type as a wall time: jobs get one of these, rounded up
WALL_STEPS = (1800.0, HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR, 12 * HOUR, DAY, 2 * DAY, 3 * DAY, 7 * DAY)
STEP_NAMES = "30m/1h/2h/4h/8h/12h/1d/2d/3d/7d"
# users over-estimate: studies of HPC logs put the median request at a few times
# the actual run time, with a long tail
OVERESTIMATE_MEDIAN, OVERESTIMATE_SIGMA = 2.5, 0.9

MODES = ("model", "default", "max", "fitted")
# A partition's limits are the cluster's policy, not the trace's: 7 days is a
# common Slurm MaxTime on ML clusters and the longest step above; 1 day a common
# DefaultTime. Jobs that need more than what they ask are killed at it.
PARTITION_MAX = 7 * DAY
PARTITION_DEFAULT = DAY
DEFAULT_SHARE = 0.4

# Fitted by benchmarks/fit_estimates.py on 2026-12-02 to ALCF Theta's 2022 job log
# (23,911 jobs, Cobalt; field 4 run time, field 9 requested time) as published in
# github.com/SPEAR-UIC/CQSim, data/InputFiles/theta_2022.swf, commit
# 8fc7a37f8e68ccd45b0ca20ccbf38b67e27d5842. An HPC (CPU) log: no public GPU
# cluster trace with both times could be read here.
FITTED_SOURCE = "ALCF Theta 2022 (23,911 jobs)"
FITTED_KILLED_SHARE = 0.262     # used >= requested: stopped at their limit
FITTED_MAX_SHARE = 0.015        # asked the log's largest request (24 h) and finished within it
# the commonest requests, seconds, and the share of all jobs asking each (0.832 together)
FITTED_REQUESTS = ((10800.0, 0.305), (3600.0, 0.148), (21600.0, 0.105), (1800.0, 0.100),
                   (2400.0, 0.074), (7200.0, 0.058), (32400.0, 0.022), (86400.0, 0.021))
# the other jobs (neither killed nor at the largest request) that ran 10 minutes or
# more: requested/used. Those that ended sooner (mostly early failures; median
# requested/used 43.9x) asked what people commonly ask, whatever their run.
FITTED_RATIO_MEDIAN, FITTED_RATIO_SIGMA = 1.34, 0.75
FITTED_SHORT = 600.0
FITTED_STEPS = tuple(sorted(value for value, _ in FITTED_REQUESTS))


class EstimatesError(ValueError):
    """An estimates mode or share that cannot be used; the message says which."""


@dataclass(frozen=True)
class Estimates:
    mode: str = "model"
    default_share: float = DEFAULT_SHARE   # `default` mode: the share asking PARTITION_DEFAULT

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise EstimatesError(f"unknown estimates mode {self.mode!r}; choose from {', '.join(MODES)}")
        if not 0.0 <= self.default_share <= 1.0:
            raise EstimatesError(f"the default share must be between 0 and 1, not {self.default_share:g}")


MODEL = Estimates()


def wall_time(duration: float, job_id: str, seed: int, estimates: Estimates) -> float:
    """What this job asks for under `estimates`; less than `duration` means killed at it."""
    if estimates.mode == "model":
        return wall_time_for(duration, job_id, seed)
    if estimates.mode == "max":
        return PARTITION_MAX
    pick = uniform(f"{seed}:{job_id}:estimate")
    if estimates.mode == "default":
        return PARTITION_DEFAULT if pick < estimates.default_share else wall_time_for(duration, job_id, seed)
    if pick < FITTED_KILLED_SHARE:
        below = [step for step in FITTED_STEPS if step < duration]
        return below[-1] if below else duration / 2
    if pick < FITTED_KILLED_SHARE + FITTED_MAX_SHARE:
        return PARTITION_MAX
    if duration < FITTED_SHORT:
        return _weighted(uniform(f"{seed}:{job_id}:request"), FITTED_REQUESTS)
    ratio = max(1.0, FITTED_RATIO_MEDIAN * math.exp(FITTED_RATIO_SIGMA * _normal(f"{seed}:{job_id}:wall")))
    return min(PARTITION_MAX, _round_up(duration * ratio, FITTED_STEPS))


def wall_time_for(duration: float, job_id: str, seed: int) -> float:
    """The actual duration times a seeded lognormal over-estimate (at least 1x),
    rounded up to a value people type; whole days beyond a week."""
    asked = duration * max(1.0, OVERESTIMATE_MEDIAN * math.exp(OVERESTIMATE_SIGMA * _normal(f"{seed}:{job_id}:wall")))
    return _round_up(asked, WALL_STEPS)


def describe(estimates: Estimates, asked: Iterable[tuple[float, float]], seed: int) -> str:
    """The assumption line: the mode's rule and what it gave these (duration, asked) jobs."""
    pairs = list(asked)
    n = len(pairs)
    ratios = sorted(a / d for d, a in pairs)
    median = ratios[n // 2] if ratios else 0.0
    killed = sum(1 for d, a in pairs if a < d)
    unset = f"wall time ({format_count(n, 'job')} without one)"
    if estimates.mode == "model":
        return (f"{unset}: actual duration x a lognormal over-estimate "
                f"(median {OVERESTIMATE_MEDIAN}x, sigma {OVERESTIMATE_SIGMA}, at least 1x), rounded up to "
                f"{STEP_NAMES} (whole days beyond); seed {seed}; median asked/actual after rounding {median:.1f}x")
    measured = (f"median asked/actual {median:.1f}x; {killed} ({_share(killed, n)}) ask less than they "
                f"need and are killed at their limit")
    maximum, default = _name(PARTITION_MAX), _name(PARTITION_DEFAULT)
    if estimates.mode == "max":
        return (f"{unset}: every job asks the partition maximum, {maximum} (a common "
                f"Slurm MaxTime; the cluster's limit, not the trace's longest job); {measured}")
    if estimates.mode == "default":
        at_default = sum(1 for _, a in pairs if a == PARTITION_DEFAULT)
        return (f"{unset}: {estimates.default_share:.0%} of jobs (by a hash of the id) "
                f"ask the partition default, {default}, whatever they need; the rest actual x a lognormal "
                f"over-estimate (median {OVERESTIMATE_MEDIAN}x, sigma {OVERESTIMATE_SIGMA}, at least 1x) rounded "
                f"up to {STEP_NAMES}; seed {seed}; {_share(at_default, n)} ask exactly {default}; {measured}")
    at_max = sum(1 for _, a in pairs if a == PARTITION_MAX)
    steps = "/".join(_name(s) for s in FITTED_STEPS)
    return (f"{unset} fitted to {FITTED_SOURCE}, which records requested and used "
            f"time: {FITTED_KILLED_SHARE:.1%} under-ask (the largest of {steps} below their need, else half "
            f"of it), {FITTED_MAX_SHARE:.1%} ask the partition maximum {maximum}, the rest actual x a lognormal "
            f"(median {FITTED_RATIO_MEDIAN}x, sigma {FITTED_RATIO_SIGMA}, at least 1x) rounded up to {steps} "
            f"(whole days beyond, {maximum} at most), or if they need under {_name(FITTED_SHORT)}, one of those "
            f"values as often as the log's users asked each; seed {seed}; {_share(at_max, n)} ask {maximum}; "
            f"{measured}")


def uniform(key: str) -> float:
    """A number in (0, 1) from a key, the same on every machine and run
    (Python's hash() of a str is salted per process)."""
    digest = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return (digest + 0.5) / 2**64


def _normal(key: str) -> float:
    return NormalDist().inv_cdf(uniform(key))


def _weighted(u: float, choices: tuple[tuple[float, float], ...]) -> float:
    u *= sum(weight for _, weight in choices)
    for value, weight in choices:
        u -= weight
        if u < 0:
            return value
    return choices[-1][0]


def _round_up(asked: float, steps: tuple[float, ...]) -> float:
    for step in steps:
        if asked <= step:
            return step
    return math.ceil(asked / DAY) * DAY


def _name(seconds: float) -> str:
    """7d, 24h, 40m: as people type a limit."""
    for unit, size in (("d", DAY), ("h", HOUR), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _share(count: int, total: int) -> str:
    return f"{count / total:.1%}" if total else "-"
