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
(services/snapshot.Estimated). A caller that knows which pending jobs it
handed back new records for since its previous snapshot names them, and only
those are looked at: else every pending job is, by identity, which at 30,000
queued was a third of a pass that started one job. Where much changed, or the
inventory or the policy did, or time went back, the index is built afresh, as
a pass would."""

from collections.abc import Mapping
from dataclasses import replace

from .index import REBUILD_SHARE, QueueIndex, gated
from .snapshot import PendingJob, RunningJob, Snapshot


class KeptQueue:
    """An index kept from pass to pass, and the snapshot of each pass made its views."""

    def __init__(self) -> None:
        self.index: QueueIndex | None = None
        self.built = 0   # times the index was built afresh (a cold start included): what a test reads
        self.hinted = 0  # times it was brought by the changes named alone: what a test reads
        self._version: int | None = None   # the caller's number for the snapshot the index stands at

    def over(self, snap: Snapshot, *, version: int | None = None,
             changes: Mapping[str, PendingJob | None] | None = None) -> Snapshot:
        """`snap` with its pending and running jobs as views of the kept index, brought to them:
        plan() reads that index as it stands rather than indexing the snapshot. `version`: the
        caller's number for this snapshot, one more than the previous one's; `changes`: the
        pending jobs whose records differ from that previous snapshot's, by id (None: no longer
        pending). They are taken only where the index stands at that very previous snapshot."""
        index, self.index = self.index, None   # a change that fails halfway leaves no index behind
        known = changes if changes is not None and version is not None and self._version is not None \
            and version == self._version + 1 else None
        self._version = None
        if index is None or not _brought(index, snap, known):
            index = QueueIndex.of(snap.gpus, snap.policy, snap.pending, snap.running, snap.now)
            self.built += 1
        elif known is not None:
            self.hinted += 1
        self.index, self._version = index, version
        # plan() knows its index by these very objects (plan.indexed)
        return replace(snap, gpus=index.gpus, policy=index.policy, pending=index.pending_view,
                       running=index.running_view)


def _brought(index: QueueIndex, snap: Snapshot, known: Mapping[str, PendingJob | None] | None) -> bool:
    """Brings `index` to the snapshot's time and jobs; False where a build is the better way
    (the index is then left as it was, or half changed: the caller drops it). `known`: the
    pending jobs that changed, where the caller names them."""
    if index.gpus != snap.gpus or index.policy != snap.policy or snap.now < index.ranked.now:
        return False
    held_pending, held_running = index.pending, index.running
    if known is None:
        pending: Mapping[str, PendingJob | None] = {job.id: job for job in snap.pending}   # the latest counts
        gone = [job_id for job_id in held_pending if job_id not in pending]
    else:
        pending = known
        gone = [job_id for job_id, job in known.items() if job is None and job_id in held_pending]
    changed = [job for job in pending.values() if job is not None and held_pending.get(job.id) is not job]
    running: dict[str, RunningJob] = {run.id: run for run in snap.running}
    ended = [run_id for run_id, run in held_running.items() if running.get(run_id) is not run]
    begun = [run for run in running.values() if held_running.get(run.id) is not run]
    # a launched run awaiting its start is seen to begin at each pass (services/snapshot.Estimated), so
    # its record is new at every pass, though only its end moved on the same GPUs: placed again, it
    # counts for no change (300 launched into a queue of 1,000 rebuilt the index at every pass)
    awaiting = sum(1 for run in begun if _awaits_start(held_running.get(run.id), run))
    changes = len(gone) + len(changed) + len(ended) + len(begun) - 2 * awaiting
    if changes and changes * REBUILD_SHARE >= len(snap.pending) + len(running):
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


def _awaits_start(held: RunningJob | None, run: RunningJob) -> bool:
    """Whether `run` is the held run still awaiting its start on the same GPUs, seen anew."""
    return held is not None and not held.started and not run.started and held.gpus == run.gpus
