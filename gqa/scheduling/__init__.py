"""The scheduling core: pure functions from a snapshot to decisions.

No I/O, no clock: `now` is part of the snapshot. The local daemon, the AWS
dispatcher and the simulator all call `plan()`."""

from .plan import plan
from .snapshot import Gpu, Plan, Policy, PendingJob, RunningJob, Snapshot, Start, TeamPolicy, Weights

__all__ = ["plan", "Gpu", "Plan", "Policy", "PendingJob", "RunningJob", "Snapshot", "Start", "TeamPolicy", "Weights"]
