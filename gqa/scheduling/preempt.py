"""Preemption (opt-in per tier): a waiting job may stop running jobs of lower,
preemptible tiers. Victims are chosen to lose the least work: the least time
since their last checkpoint, then the least elapsed. They are sent back to the
queue keeping their place; the waiting job starts once their GPUs are free.
GPUs of jobs already being stopped count first, so one shortage never
preempts twice."""

from collections import defaultdict

from .fit import pools_for
from .inventory import tables
from .snapshot import PendingJob, RunningJob, Snapshot


class Preemptor:
    def __init__(self, snap: Snapshot, free: dict[int, str]):
        self.enabled = bool(snap.policy.preempt_tiers)
        self.now = snap.now
        self.policy = snap.policy
        self.free = free
        self.stopping: dict[str, list[int]] = defaultdict(list)   # pool -> GPUs already on their way back
        self.candidates: list[RunningJob] = []
        self.chosen: list[str] = []
        if not self.enabled:
            return
        self.gpu_type = tables(snap.gpus).pool_of   # index -> pool (type, spot)
        for run in snap.running:
            if run.stopping:
                for index in run.gpus:
                    self.stopping[self.gpu_type[index]].append(index)
            elif run.tier in snap.policy.preempt_tiers:
                self.candidates.append(run)
        self.candidates.sort(key=lambda r: (self.now - (r.checkpointed_at or r.started_at), -r.started_at, r.id))

    def victims_for(self, job: PendingJob, tier: int) -> tuple[list[str], str] | None:
        """Jobs to stop so `job` can start, and a reason; None if preemption cannot help."""
        if not self.enabled:
            return None
        best = None
        pools = sorted({p for r in pools_for(job, set(self.gpu_type.values()), self.policy) for p in r})
        for gpu_type in pools:
            free_now = sum(1 for t in self.free.values() if t == gpu_type)
            if free_now >= job.gpus:
                return None  # enough GPUs: it waits for another reason (a reservation), not for capacity
            have = free_now + len(self.stopping[gpu_type])
            picked = []
            for run in self.candidates:
                if have >= job.gpus:
                    break
                if run.tier <= tier or run.id in self.chosen:
                    continue
                mine = [i for i in run.gpus if self.gpu_type[i] == gpu_type]
                if mine:
                    picked.append(run)
                    have += len(mine)
            if have >= job.gpus and (best is None or len(picked) < len(best[1])):
                best = (gpu_type, picked)
        if best is None:
            return None
        gpu_type, picked = best
        # what it takes: keep the stopping GPUs and these victims for this job
        need = job.gpus - sum(1 for t in self.free.values() if t == gpu_type)
        self.stopping[gpu_type] = self.stopping[gpu_type][max(0, need):]
        self.chosen += [r.id for r in picked]
        lost = sum(self.now - (r.checkpointed_at or r.started_at) for r in picked)
        if not picked:
            return [], "starts when the preempted jobs have stopped"
        names = ", ".join(r.id for r in picked)
        return [r.id for r in picked], (f"preempting {names} (lower tier; {lost / 60:.0f} GPU-job-minutes "
                                        "since their last checkpoints)")
