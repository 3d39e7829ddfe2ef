"""What a scheduling pass sees and what it returns."""

from collections.abc import Collection
from dataclasses import dataclass, field

from ..models.job import JobState

DAY = 86400.0


@dataclass(frozen=True)
class Gpu:
    index: int
    type: str = "gpu"
    price: float = 0.0               # per GPU-hour, for budgets and approvals
    spot: bool = False               # bought spot (cheaper, may be reclaimed) rather than on demand

    @property
    def pool(self) -> tuple[str, bool]:
        """A pool (Kueue: a flavor) is a GPU type with a purchase option; a gang never spans two."""
        return self.type, self.spot


@dataclass(frozen=True)
class PendingJob:
    id: str
    team: str
    user: str
    tier: int                      # 0 = high, 1 = normal, 2 = low
    gpus: int
    submitted_at: float
    gpu_type: str | None = None
    cpus: int | None = None
    memory: int | None = None
    wall_time: float | None = None
    group: str | None = None
    group_limit: int | None = None  # array %N: tasks of the group running at once
    seq: int = 0                    # submission order, the last tie-break
    expected_runtime: float | None = None  # best guess of its run time (wall time corrected by history)
    max_gpu_hours: float | None = None
    held: bool = False                     # HELD for its team's budget: released when it fits again
    gpu_types: tuple[str, ...] = ()        # acceptable types, when more than one will do
    spot: bool = False                     # may run on spot capacity (tried first)
    reclaims: int = 0                      # spot reclaims so far: too many for its run, on demand first
    exclusive: bool = False                # the whole machine: starts when nothing runs, and nothing starts beside it
    nice: int = 0                          # Slurm's --nice: positive lowers it within its tier
    name: str = ""                         # with `user`, what a singleton dependency goes by
    dependency: str | None = None          # canonical --dependency text (dependencies.py)
    user_hold: bool = False                # held by its owner (gqa hold): only `gqa release` frees it
    begin: float | None = None             # not started before this time (--begin)
    time_min: float | None = None          # Slurm's --time-min: backfill may grant a wall time this short
    served: float = 0.0                    # GPU-seconds its earlier attempts ran: past policy.slice_after, demoted

    @property
    def cpus_counted(self) -> int:
        """The CPUs it takes from the machine: its own, else one for a CPU-only job
        (Slurm's one CPU per task), else none (a GPU job that asks for none)."""
        return self.cpus or (1 if self.gpus == 0 else 0)

    def types(self) -> tuple[str, ...] | None:
        """The GPU types it accepts; None for any. gpu_type may list several: 'a10g,l4'."""
        return self.gpu_types or (tuple(self.gpu_type.split(",")) if self.gpu_type else None)


@dataclass(frozen=True)
class RunningJob:
    id: str
    team: str
    user: str
    gpus: tuple[int, ...]          # the GPU indices it holds
    started_at: float
    cpus: int | None = None
    memory: int | None = None
    group: str | None = None
    wall_time: float | None = None  # the attempt is killed by then: a hard bound for backfill
    expected_runtime: float | None = None  # best guess of its whole run time, for ETAs
    tier: int = 1
    checkpointed_at: float | None = None   # its latest checkpoint: what a preemption would lose
    stopping: bool = False                 # being stopped (cancel, requeue, preemption)
    started: bool = True                   # its current attempt runs; False while STARTING, when `started_at`
                                           # is still the previous attempt's (or 0) and nothing costs yet
    exclusive: bool = False                # holds the whole machine while it runs
    name: str = ""                         # with `user`, what a singleton dependency goes by
    served: float = 0.0                    # GPU-seconds its earlier attempts ran (this one not included)
    submitted_at: float = 0.0              # time slicing's starvation guard counts its wait from here

    @property
    def cpus_counted(self) -> int:
        return self.cpus or (0 if self.gpus else 1)

    def attained(self, now: float) -> float:
        """GPU-seconds of service so far, this attempt included (time slicing reads it)."""
        return self.served + (len(self.gpus) * max(0.0, now - self.started_at) if self.started else 0.0)

    @property
    def ends_by(self) -> float:
        return self.started_at + self.wall_time if self.wall_time else float("inf")


@dataclass(frozen=True)
class TeamPolicy:
    share: float = 1.0               # relative entitlement in fair share
    max_gpus: int | None = None      # concurrent GPUs for the whole team
    max_gpus_per_user: int | None = None
    budget: float | None = None      # spend allowed per period (calendar month)
    stop_at_budget: bool = False     # at 100% of the budget, running jobs are requeued (checkpoint, wait held)


@dataclass(frozen=True)
class Weights:
    """Multifactor weights within a tier (Slurm's PriorityWeight*)."""

    fair_share: float = 1.0
    # a week's wait (max_age) is worth 1: fair share's whole range, or an expected run time about 14
    # times shorter (at 5 below); a job much longer than the fresh ones still waits until they thin out
    age: float = 1.0
    size: float = 0.0
    # favours jobs expected to be short (not in Slurm): 1 - log(run time) / log(max_runtime), so 10
    # minutes scores 0.52, 10 hours 0.21. At 5 that gap (1.55) outweighs fair share (0-1), which
    # settles jobs expected to run within a few times as long as each other. Replayed on the traces
    # in the README (weights 1 to 8, age 0.25 to 2), mean JCT and the worst team's slowdown fall as
    # it grows and level off from 5; with age at 1, the longest jobs wait less than at 1 and 0.25.
    duration: float = 5.0


@dataclass(frozen=True)
class Policy:
    weights: Weights = Weights()
    half_life: float = 7 * DAY       # fair-share usage decay
    max_age: float = 7 * DAY         # age factor saturates here (Slurm PriorityMaxAge)
    max_gpus_per_job: int | None = None
    max_wall_time: float | None = None
    default_team: TeamPolicy = TeamPolicy()
    ordering: str = "multifactor"    # or "fifo": arrival order only, tiers and factors ignored; or "sjf"
    backfill: bool = True            # EASY: later jobs may start if they cannot delay a reserved one
    # what backfill counts a job's run as: "limits" (its wall time, Slurm's) or "predictions" (its
    # expected run time, lengthened when outlived; horizon.py)
    backfill_by: str = "limits"
    reservation_depth: int = 1       # blocked jobs that get a reservation (plus each tier's first; fifo: one list)
    max_runtime: float = 7 * DAY     # the duration factor is 0 from here on
    preempt_tiers: tuple[int, ...] = ()  # running jobs of these tiers may be preempted by higher tiers
    # time slicing (Tiresias' two-queue LAS within a tier, slicing.py): in these tiers a job that
    # has had slice_after GPU-seconds of service ranks after the rest of its tier, which may preempt
    # it once it has run slice_min_run seconds in its attempt
    slice_tiers: tuple[int, ...] = ()
    slice_after: float = 3250.0          # GPU-seconds: Tiresias' first queue
    slice_min_run: float = 120.0         # seconds an attempt runs before slicing may stop it
    slice_starve: float = 16.0           # a demoted job that waited this many times its run is promoted (0: never)
    spot_fallback_after: int = 2         # reclaims (and one per 4 h run) before on demand comes first
    approval_gpus: int | None = None     # jobs over these wait for approval (None: no threshold)
    approval_gpu_hours: float | None = None
    approval_cost: float | None = None
    budget_alerts: tuple[float, ...] = (50.0, 80.0, 100.0)  # % of a team's budget: one alert each per period
    alert_pending_after: float | None = 4 * 3600.0          # alert on a job waiting longer (None: never)
    idle_gpu_percent: float = 5.0        # a running job whose GPUs average under this...
    idle_gpu_window: float = 1800.0      # ...over this long (seconds) is reported idle (0: never)

    def __post_init__(self):
        # a pass stops a run for a job that ranks ahead of it once both are queued; arrival order
        # never reads a tier, so the stopped run would start again at once, pass after pass (time
        # slicing, by service, is off there already: slicing.slicing_tiers)
        if self.ordering == "fifo" and self.preempt_tiers:
            raise ValueError("the fifo ordering ranks by arrival alone, so it cannot preempt by tier "
                             f"(preempt_tiers {list(self.preempt_tiers)})")


@dataclass(frozen=True)
class Snapshot:
    now: float
    gpus: tuple[Gpu, ...]
    # tuples, or the live views of a QueueIndex the caller keeps (index.py): iterate, count, test membership
    pending: Collection[PendingJob] = ()
    running: Collection[RunningJob] = ()
    teams: dict[str, TeamPolicy] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)   # decayed GPU-seconds per team, as of now
    policy: Policy = Policy()
    cpus: int | None = None          # None: CPUs are not accounted
    memory: int | None = None        # None: memory is not accounted
    spend: dict[str, float] = field(default_factory=dict)   # per team this period, running jobs included
    # the jobs pending jobs' dependencies name: per job id, array task id or array id, how many of its
    # jobs are in each state (QueueReads.states_of); a name absent here names no job yet
    named: dict[str, dict[JobState, int]] = field(default_factory=dict)
    # of those an `after` waits some minutes past (after:12+10), the ones started or ended: when the
    # minutes count from, and whether it started (else it was cancelled) (QueueReads.start_times)
    started: dict[str, tuple[float, bool]] = field(default_factory=dict)

    def team(self, name: str) -> TeamPolicy:
        return self.teams.get(name, self.policy.default_team)


@dataclass(frozen=True)
class Start:
    job_id: str
    gpus: tuple[int, ...]          # () for a CPU-only job
    wall_time: float | None = None  # a limit shorter than the job's own, granted by backfill (--time-min)


@dataclass(frozen=True)
class Factors:
    """One pending job's priority, like `sprio`: each factor in [0, 1], and the
    weighted sum that orders jobs within a tier, plus its --nice adjustment."""

    fair_share: float
    age: float
    size: float
    score: float
    duration: float = 0.0
    nice: float = 0.0      # added to the score as it is: -nice / 10,000 (ranking.NICE_SCALE)
    service: float = 0.0   # time slicing: below the rest of its tier once past its slice (ranked.service)


@dataclass
class Plan:
    starts: list[Start] = field(default_factory=list)
    order: list[str] = field(default_factory=list)           # pending jobs in the order considered
    # job id -> why it is not starting now ("" where a pass that explains nothing spares the words)
    waiting: dict[str, str] = field(default_factory=dict)
    factors: dict[str, Factors] = field(default_factory=dict)
    reserved: dict[str, float] = field(default_factory=dict)  # blocked job -> the start held for it
    preempt: list[str] = field(default_factory=list)          # running jobs to stop and requeue
    hold: dict[str, str] = field(default_factory=dict)        # queued job -> HELD, with the budget arithmetic
    release: list[str] = field(default_factory=list)          # held jobs the budget allows again
    backfilled: set[str] = field(default_factory=set)         # started ahead of a reserved job
    never: dict[str, str] = field(default_factory=dict)       # pending job -> why its dependency can never be met
