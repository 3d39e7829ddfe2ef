"""The QueueIndex a dispatcher keeps between its passes (the local daemon, the
dispatch function's container). Such a dispatcher reads its whole queue at
every pass (from the records its store keeps, reading again only what
changed); a pass over a snapshot of plain tuples builds its index from
scratch, O(n log n) in the queue, however little changed since the pass
before. `KeptQueue` brings an index kept from that pass to the new snapshot,
one change at a time (a job queued, started, changed or gone), so a pass costs
what changed and what it looks at, as a replay's pass does (index.py).

A job is unchanged when the snapshot lists the very record the index holds:
the caller hands back the same record for a job that did not change
(services/snapshot.Estimated). Where much changed, or the inventory or the
policy did, or time went back, the index is built afresh, as a pass would."""

from dataclasses import replace

from .index import REBUILD_SHARE, QueueIndex, gated
from .snapshot import PendingJob, RunningJob, Snapshot


class KeptQueue:
    """An index kept from pass to pass, and the snapshot of each pass made its views."""

    def __init__(self) -> None:
        self.index: QueueIndex | None = None
        self.built = 0   # times the index was built afresh (a cold start included): what a test reads

    def over(self, snap: Snapshot) -> Snapshot:
        """`snap` with its pending and running jobs as views of the kept index, brought to them:
        plan() reads that index as it stands rather than indexing the snapshot."""
        index, self.index = self.index, None   # a change that fails halfway leaves no index behind
        if index is None or not _brought(index, snap):
            index = QueueIndex.of(snap.gpus, snap.policy, snap.pending, snap.running, snap.now)
            self.built += 1
        self.index = index
        # plan() knows its index by these very objects (plan.indexed)
        return replace(snap, gpus=index.gpus, policy=index.policy, pending=index.pending_view,
                       running=index.running_view)


def _brought(index: QueueIndex, snap: Snapshot) -> bool:
    """Brings `index` to the snapshot's time and jobs; False where a build is the better way
    (the index is then left as it was, or half changed: the caller drops it)."""
    if index.gpus != snap.gpus or index.policy != snap.policy or snap.now < index.ranked.now:
        return False
    pending: dict[str, PendingJob] = {job.id: job for job in snap.pending}   # the latest listing counts
    running: dict[str, RunningJob] = {run.id: run for run in snap.running}
    held_pending, held_running = index.pending, index.running
    gone = [job_id for job_id in held_pending if job_id not in pending]
    changed = [job for job in pending.values() if held_pending.get(job.id) is not job]
    ended = [run_id for run_id, run in held_running.items() if running.get(run_id) is not run]
    begun = [run for run in running.values() if held_running.get(run.id) is not run]
    changes = len(gone) + len(changed) + len(ended) + len(begun)
    if changes and changes * REBUILD_SHARE >= len(pending) + len(running):
        return False   # a build ranks the queue in O(n), lazily: cheaper than a good part of it moved
    # brought to `now` only once it is kept: advancing may first rebuild the ranked lists' books of
    # places and ages (RankedJobs._places), a read of every job, wasted on an index dropped
    index.ranked.advance(snap.now)
    index.advance_ends(snap.now)
    for run_id in ended:   # first: a run that began since may hold GPUs one that ended held
        index.stop(run_id)
    for job_id in gone:
        index.remove(job_id)
    for job in changed:
        was = held_pending.get(job.id)
        if was is None:
            index.add(job)
        elif was.gpus == job.gpus and gated(was) == gated(job):
            index.replace(job)
        else:
            index.remove(job.id)
            index.add(job)
    for run in begun:
        index.start(run)
    return True
