"""The index a dispatcher keeps between its passes (gqa.scheduling.kept): brought to
each pass's snapshot one change at a time, it must give every pass what a pass over
that snapshot alone gives, and be built afresh only where it cannot be brought."""

import random
from dataclasses import replace

import pytest

from gqa.scheduling import Gpu, Policy, Snapshot, plan
from gqa.scheduling.index import index_of
from gqa.scheduling import kept as kept_module
from gqa.scheduling.kept import KeptQueue
from tests.builders import pending, running
from tests.unit.test_queue_index import INVENTORY, POLICIES, random_job


def decided(result):
    return (result.starts, sorted(result.preempt), result.hold, sorted(result.release), result.never,
            result.reserved)


class Store:
    """A queue as a dispatcher reads it: the same record for a job that did not change, a
    new one for a job that did, listed in the store's own order (tier, then submission)."""

    def __init__(self, rng: random.Random):
        self.rng, self.n = rng, 0
        self.pending: dict[str, object] = {}
        self.running: dict[str, object] = {}

    def snapshot(self, now: float, policy: Policy) -> Snapshot:
        ordered = sorted(self.pending.values(), key=lambda j: (j.tier, j.seq))
        return Snapshot(now=now, gpus=tuple(INVENTORY), pending=tuple(ordered), running=tuple(self.running.values()),
                        policy=policy, usage={"vision": 5e4, "nlp": 1e3}, cpus=64)

    def arrive(self, now: float, count: int) -> None:
        for _ in range(count):
            job = random_job(self.rng, self.n, now)
            self.pending[job.id] = job
            self.n += 1

    def carry_out(self, result, now: float) -> None:
        rng = self.rng
        for job_id in result.preempt:   # back to the queue with the service it had
            run = self.running.pop(job_id)
            self.pending[job_id] = replace(random_job(rng, self.n, now), id=job_id, gpus=len(run.gpus), tier=run.tier,
                                           submitted_at=run.submitted_at, served=run.attained(now), seq=self.n)
            self.n += 1
        for start in result.starts:
            job = self.pending.pop(start.job_id)
            self.running[job.id] = running(job.id, team=job.team, user=job.user, gpus=start.gpus, started_at=now,
                                           wall_time=start.wall_time or job.wall_time, tier=job.tier,
                                           expected_runtime=job.expected_runtime, submitted_at=job.submitted_at,
                                           served=job.served, started=rng.random() < 0.8)
        for job_id in list(result.release):
            self.pending[job_id] = replace(self.pending[job_id], held=False)
        for job_id, _ in result.hold.items():
            self.pending[job_id] = replace(self.pending[job_id], held=True)

    def churn(self, now: float) -> None:
        rng = self.rng
        for run_id, run in list(self.running.items()):
            roll = rng.random()
            if roll < 0.12:
                del self.running[run_id]                                # ended
            elif roll < 0.16:
                self.running[run_id] = replace(run, stopping=True)     # being stopped
            elif roll < 0.2 and not run.started:
                self.running[run_id] = replace(run, started=True, started_at=now)
        for job_id, job in list(self.pending.items()):
            roll = rng.random()
            if roll < 0.04:
                del self.pending[job_id]                                # cancelled
            elif roll < 0.08:
                self.pending[job_id] = replace(job, nice=rng.choice([0, 50, -20]))
            elif roll < 0.1:
                self.pending[job_id] = replace(job, gpus=rng.choice([1, 2, 4]))   # resized: moved, not replaced
            elif roll < 0.12 and job.wall_time:
                self.pending[job_id] = replace(job, expected_runtime=job.wall_time * rng.choice([0.2, 1.0]))
            elif roll < 0.13:
                self.pending[job_id] = replace(job, user_hold=not job.user_hold)


def changes_between(before: Snapshot | None, after: Snapshot) -> dict[str, object] | None:
    """The pending jobs whose records differ, by id (None: gone), as a caller that knows them names them."""
    if before is None:
        return None
    was, now = {j.id: j for j in before.pending}, {j.id: j for j in after.pending}
    out: dict[str, object] = {job_id: None for job_id in was.keys() - now.keys()}
    out.update({job_id: job for job_id, job in now.items() if was.get(job_id) is not job})
    return out


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("rebuilds", [True, False])   # False: brought however much changed
@pytest.mark.parametrize("named", [False, True])      # True: the caller names the pending jobs that changed
def test_a_kept_queue_plans_every_pass_as_a_pass_over_its_snapshot_alone(name, seed, rebuilds, named, monkeypatch):
    rng, policy = random.Random(seed), POLICIES[name]
    if not rebuilds:
        monkeypatch.setattr(kept_module, "REBUILD_SHARE", 0)
    store, kept = Store(rng), KeptQueue()
    now, before = 1_000.0, None
    for version in range(100):
        store.arrive(now, rng.choice([0, 1, 3, 8]))
        snap = store.snapshot(now, replace(policy))   # an equal policy read again: the index stands
        over = kept.over(snap, version=version, changes=changes_between(before, snap)) if named else kept.over(snap)
        before = snap
        assert index_of(over.pending, over.running) is kept.index
        assert sorted(j.id for j in over.pending) == sorted(j.id for j in snap.pending)
        for explain in (False, True):
            assert decided(plan(over, explain=explain)) == decided(plan(snap, explain=explain))
        store.carry_out(plan(over, explain=False), now)
        store.churn(now)
        now += rng.choice([0.0, 60.0, 900.0, 4_000.0])
    assert kept.built == 1 or rebuilds
    assert (kept.hinted == 99 - (kept.built - 1)) if named else kept.hinted == 0


def test_changes_named_are_taken_only_after_the_very_snapshot_the_index_stands_at():
    """A caller's numbers that skip one (a snapshot the index never saw) or a pass that named
    none: every pending job is looked at again, so a change left unnamed is not missed."""
    jobs = tuple(pending(f"j{i}", seq=i, wall_time=3600.0) for i in range(20))
    snap = Snapshot(now=100.0, gpus=(Gpu(0, "a100"), Gpu(1, "a100")), pending=jobs, running=(), policy=Policy())
    kept = KeptQueue()
    kept.over(snap, version=1, changes=None)
    nice = replace(snap, now=110.0, pending=(replace(jobs[0], nice=50),) + jobs[1:])
    over = kept.over(nice, version=3, changes={})   # skipped 2: the index walks, and finds j0 changed
    assert kept.hinted == 0 and kept.built == 1
    assert decided(plan(over, explain=False)) == decided(plan(nice, explain=False))
    gone = replace(nice, now=120.0, pending=nice.pending[1:])
    over = kept.over(gone, version=4, changes={"j0": None})
    assert kept.hinted == 1 and kept.built == 1 and "j0" not in kept.index.pending
    assert decided(plan(over, explain=False)) == decided(plan(gone, explain=False))
    kept.over(replace(gone, now=130.0))   # no number: the next named changes are not taken
    kept.over(replace(gone, now=140.0), version=5, changes={})
    assert kept.hinted == 1


def test_a_pass_that_changed_little_keeps_the_index_and_one_that_cannot_builds_it_afresh():
    jobs = [pending(f"j{i}", seq=i, wall_time=3600.0, gpus=1 + i % 2) for i in range(40)]
    runs = [running("r0", gpus=(0, 1), wall_time=7200.0, started=True)]
    gpus = tuple(Gpu(i, "a100") for i in range(4))
    snap = Snapshot(now=100.0, gpus=gpus, pending=tuple(jobs), running=tuple(runs), policy=Policy())
    kept = KeptQueue()
    first = kept.over(snap)
    index = kept.index
    steps = [
        ("a job arrives", replace(snap, now=160.0, pending=snap.pending + (pending("new", seq=99),)), True),
        ("equal inventory and policy, read again", replace(snap, now=200.0, gpus=tuple(gpus), policy=Policy()), True),
        ("a job ended", replace(snap, now=260.0, running=()), True),
        ("another policy", replace(snap, now=300.0, policy=Policy(max_age=60.0)), False),
        ("another inventory", replace(snap, now=400.0, gpus=gpus[:3]), False),
        ("time went back", replace(snap, now=50.0), False),
        ("most of the queue changed", replace(snap, now=500.0, pending=tuple(replace(j, nice=5) for j in jobs)), False),
    ]
    assert index_of(first.pending, first.running) is index and kept.built == 1
    for what, step, keeps in steps:
        built, was_now = kept.built, index.ranked.now
        over = kept.over(step)
        assert (kept.index is index) == keeps and kept.built == built + (not keeps), what
        # an index dropped is not brought to the new time first (that may read every job)
        assert keeps or index.ranked.now == was_now, what
        assert decided(plan(over, explain=False)) == decided(plan(step, explain=False)), what
        index = kept.index


def test_runs_awaiting_their_start_seen_anew_at_each_pass_keep_the_index():
    # 30 launched runs awaiting their start beside 40 queued: each pass sees each begin at its own time
    # (a new record), which moved its end only; the index is kept and decides as a fresh pass does
    gpus = tuple(Gpu(i, "a100") for i in range(34))
    jobs = tuple(pending(f"j{i}", seq=i, wall_time=3600.0, gpus=1 + i % 2) for i in range(40))

    def launched(now: float) -> tuple:
        return tuple(running(f"r{i}", gpus=(i,), wall_time=7200.0, started=False, started_at=now) for i in range(30))
    kept = KeptQueue()
    kept.over(Snapshot(now=100.0, gpus=gpus, pending=jobs, running=launched(100.0), policy=Policy()))
    index = kept.index
    for now in (160.0, 220.0, 280.0):
        snap = Snapshot(now=now, gpus=gpus, pending=jobs, running=launched(now), policy=Policy())
        over = kept.over(snap)
        assert kept.index is index and kept.built == 1
        assert decided(plan(over, explain=False)) == decided(plan(snap, explain=False))
    # one that started, or moved to other GPUs, is a change as any other
    moved = launched(340.0)[:-1] + (running("r29", gpus=(33,), wall_time=7200.0, started=False, started_at=340.0),)
    snap = Snapshot(now=340.0, gpus=gpus, pending=jobs, running=moved, policy=Policy())
    assert decided(plan(kept.over(snap), explain=False)) == decided(plan(snap, explain=False))


def test_a_change_that_fails_halfway_leaves_no_index_behind():
    jobs = tuple(pending(f"j{i}", seq=i) for i in range(20))
    snap = Snapshot(now=100.0, gpus=(Gpu(0, "a100"),), pending=jobs, running=(), policy=Policy())
    kept = KeptQueue()
    kept.over(snap)
    # one job resized (taken out, then added: the add fails) and one new
    broken = replace(snap, now=200.0, pending=(replace(jobs[0], gpus=2),) + jobs[1:] + (pending("new", seq=20),))
    index = kept.index
    original = index.add

    def fails_once(job):
        index.add = original
        raise RuntimeError("disk full")
    index.add = fails_once
    with pytest.raises(RuntimeError):
        kept.over(broken)
    assert kept.index is None
    over = kept.over(broken)   # the next pass builds afresh
    assert sorted(j.id for j in over.pending) == sorted(j.id for j in broken.pending) and kept.built == 2
    assert next(j for j in over.pending if j.id == "j0").gpus == 2
