"""The index a caller keeps between passes (gqa.scheduling.index): kept one
change at a time, it must give every pass exactly what a pass over a fresh
snapshot of the same jobs gives, and a pass that explains nothing must stop
as soon as nothing more can start, whatever the queue's length."""

import heapq
import importlib
import random
from dataclasses import replace
from itertools import islice

import pytest

from gqa.scheduling import Gpu, Policy, Snapshot, plan
from gqa.scheduling import ranked as ranked_module
from gqa.scheduling.index import QueueIndex, SkipBooks, index_of
from gqa.scheduling.ranked import LAZY_READS, in_order
from gqa.scheduling.presets import preset
from gqa.scheduling.slicing import next_change
from tests.builders import NOW, gpus, pending, running

plan_module = importlib.import_module("gqa.scheduling.plan")   # the package's `plan` is the function

POLICIES = {
    "gqa": preset("gqa", Policy(max_age=5_000.0)),          # a short max_age: jobs reach it within the run
    "multifactor": preset("multifactor", Policy(max_age=5_000.0)),
    "fifo": preset("fifo"),
    "fifo-easy": preset("fifo-easy"),
    "sjf": preset("sjf-oracle"),
    # time slicing in the normal and low tiers: demoted jobs, and promotions as time passes
    "gqa-slice": replace(preset("gqa", Policy(max_age=5_000.0)), slice_tiers=(1, 2), slice_starve=4.0),
    # backfill counts expected run times: predicted ends that move on as running jobs outlive them
    "gqa-predictions": preset("gqa", Policy(max_age=5_000.0, backfill_by="predictions")),
}
INVENTORY = tuple(Gpu(i, "a100" if i < 12 else "l4", spot=i % 5 == 0) for i in range(20))


def fresh(snap: Snapshot) -> Snapshot:
    """The same snapshot as plain tuples: the pass indexes it from scratch."""
    return replace(snap, pending=tuple(snap.pending), running=tuple(snap.running))


def random_job(rng: random.Random, n: int, now: float):
    wall = rng.choice([None, 600.0, 3_600.0, 7_200.0, 86_400.0])
    extra: dict = {"time_min": 300.0} if wall and rng.random() < 0.1 else {}
    extra["served"] = rng.choice([0.0, 0.0, 1_000.0, 5_000.0, 40_000.0])   # GPU-seconds of earlier attempts
    if rng.random() < 0.1:
        extra["gpu_type"] = rng.choice(["a100", "l4"])
    return pending(f"j{n}", team=rng.choice(["vision", "nlp", "speech"]), user=rng.choice(["ann", "bob"]),
                   gpus=rng.choice([0, 1, 1, 1, 2, 4, 8]), tier=rng.choice(["high", "normal", "normal", "low"]),
                   submitted_at=now - rng.choice([0.0, 0.0, 100.0, 6_000.0]), seq=n, wall_time=wall,
                   expected_runtime=wall and wall * rng.choice([0.3, 0.5, 1.0]), nice=rng.choice([0, 0, 50]),
                   **extra)


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("seed", range(4))
def test_a_kept_index_plans_exactly_as_a_fresh_snapshot_does(name, seed, monkeypatch):
    rng, policy = random.Random(seed), POLICIES[name]
    index = QueueIndex(INVENTORY, policy)
    now, n = 1_000.0, 0
    for _ in range(120):
        for _ in range(rng.choice([0, 1, 3])):
            index.add(random_job(rng, n, now))
            n += 1
        snap = Snapshot(now=now, gpus=INVENTORY, pending=index.pending_view, running=index.running_view,
                        policy=policy, usage={"vision": 5e4, "nlp": 1e3}, cpus=64)
        assert index_of(snap.pending, snap.running) is index
        decided = set()
        for explain in (True, False):
            kept, built = plan(snap, explain=explain), plan(fresh(snap), explain=explain)
            assert (kept.starts, kept.preempt) == (built.starts, built.preempt)
            decided.add((tuple(kept.starts), tuple(kept.preempt)))
            if explain:
                assert (kept.order, kept.waiting, kept.reserved, kept.factors) == \
                    (built.order, built.waiting, built.reserved, built.factors)
        assert len(decided) == 1   # a pass that explains nothing (and skips what cannot start) decides the same
        if index.slicing:   # slicing asked in every tier where it may stop a run, GPUs not counted: the same
            with monkeypatch.context() as patched:
                patched.setattr(QueueIndex, "slicing_may_stop", _sliceable_tiers)
                uncounted = plan(fresh(snap), explain=False)
            assert (uncounted.starts, uncounted.preempt) == (kept.starts, kept.preempt)
        # what the loop wakes for: the index's order of running jobs in the tiers a job that is
        # not demoted waits in, and the GPUs each holds, as the rule reads them (handed those jobs
        # only: no promotion to come)
        ranked = index.rank()
        undemoted = [job for job in index.pending.values() if not ranked.service(job)]
        may_stop = set()   # slicing may stop a run for a job: read the long way
        for tier in index.slicing:
            sizes = [j.gpus for j in undemoted if j.tier == tier]
            room = len(index.free) + sum(len(run.gpus) for run in index.sliced(tier, now))
            if index.may_slice(tier, now) and any(size <= room for size in sizes):
                may_stop.add(tier)
        assert index.copy().slicing_may_stop(now) == may_stop   # nothing kept: read as far as it needs
        for tier in index.slicing:
            assert ranked.least_undemoted(tier) == min((j.gpus for j in undemoted if j.tier == tier), default=None)
        assert index.slicing_may_stop(now) == may_stop   # the least kept: the runs counted as far as it needs
        assert index.next_slicing_room(now) == \
            next_change(index.running.values(), undemoted, policy, now, free=len(index.free))
        for job_id in kept.preempt:   # back to the queue with the service it had
            run = index.stop(job_id)
            index.add(replace(random_job(rng, n, now), id=job_id, gpus=len(run.gpus), tier=run.tier,
                              submitted_at=run.submitted_at, served=run.attained(now)))
            n += 1
        for start in kept.starts:
            job = index.remove(start.job_id)
            index.start(running(job.id, team=job.team, user=job.user, gpus=start.gpus, started_at=now,
                                wall_time=start.wall_time or job.wall_time, tier=job.tier,
                                expected_runtime=job.expected_runtime and job.expected_runtime * rng.choice([0.1, 1.0]),
                                submitted_at=job.submitted_at, served=job.served))
        for run in list(index.running.values()):
            if rng.random() < 0.15:
                index.stop(run.id)
        if rng.random() < 0.1:   # a copy keeps every table, slicing's order among them
            index = index.copy()
        if rng.random() < 0.15:   # new run-time ratios: some or all of the queue re-estimated at once
            jobs = [job for job in index.pending.values() if job.wall_time and rng.random() < rng.choice([0.1, 1.0])]
            index.replace_many([replace(job, expected_runtime=job.wall_time * rng.choice([0.2, 0.6, 1.0]))
                                for job in jobs])
        now += rng.choice([0.0, 60.0, 900.0, 4_000.0])


def _sliceable_tiers(index: QueueIndex, now: float) -> frozenset[int]:
    """The tiers where slicing may stop a run, however few GPUs it holds."""
    return frozenset(tier for tier in index.slicing if index.may_slice(tier, now))


def _long_queue_job(rng: random.Random, n: int, now: float):
    """random_job, now and then exclusive or gated (its owner's hold, a --begin, a dependency)."""
    job = random_job(rng, n, now)
    roll = rng.random()
    if roll < 0.02:
        return replace(job, exclusive=True)
    if roll < 0.04:
        return replace(job, user_hold=True)
    if roll < 0.06:
        return replace(job, begin=now + rng.choice([-60.0, 600.0]))
    if roll < 0.08 and n:
        return replace(job, dependency=f"afterany:j{rng.randrange(n)}")
    return job


@pytest.mark.parametrize("name", ["fifo-easy", "multifactor", "gqa", "sjf", "gqa-predictions", "gqa-slice"])
@pytest.mark.parametrize("seed", range(5))
def test_a_pass_over_a_long_queue_reads_only_what_may_fit_and_decides_as_an_explained_pass(name, seed, monkeypatch):
    """Hundreds waiting on a busy cluster: once a list passes over a few jobs in a row, a pass that
    explains nothing reads only the jobs that may still fit after them (and the held, gated and
    exclusive ones). Set to jump after 2 and whatever the candidates' share, so that it jumps
    often, it must start, stop, hold and release what an explaining pass over a fresh snapshot does."""
    monkeypatch.setattr(ranked_module, "SKIP_AFTER", 2)
    monkeypatch.setattr(plan_module, "SKIP_SHARE", 1)
    jumps = []
    candidates = plan_module._candidates

    def counted(index, capacity, left, preemptor):
        ask = candidates(index, capacity, left, preemptor)
        return lambda tier: (ids := ask(tier)) is not None and jumps.append(len(ids)) or ids
    monkeypatch.setattr(plan_module, "_candidates", counted)
    rng, policy = random.Random(seed), POLICIES[name]
    index = QueueIndex(INVENTORY, policy)
    now, n = 1_000.0, 0
    for gpu in range(len(INVENTORY)):
        if rng.random() < 0.85:
            index.start(running(f"r{gpu}", gpus=(gpu,), started_at=now - 100.0,
                                wall_time=rng.choice([300.0, 1_800.0, 7_200.0, 90_000.0])))
    for _ in range(300):
        index.add(_long_queue_job(rng, n, now))
        n += 1
    for _ in range(25):
        snap = Snapshot(now=now, gpus=INVENTORY, pending=index.pending_view, running=index.running_view,
                        policy=policy, usage={"vision": 5e4, "nlp": 1e3}, cpus=64)
        quick, full = plan(snap, explain=False), plan(fresh(snap))
        assert (quick.starts, quick.preempt, quick.hold, quick.release) == \
            (full.starts, full.preempt, full.hold, full.release)
        for start in quick.starts:
            job = index.remove(start.job_id)
            index.start(running(job.id, team=job.team, user=job.user, gpus=start.gpus, started_at=now,
                                wall_time=start.wall_time or job.wall_time, tier=job.tier,
                                exclusive=job.exclusive, submitted_at=job.submitted_at))
        for run in list(index.running.values()):
            if rng.random() < 0.1:
                index.stop(run.id)
        for _ in range(rng.choice([0, 5, 20])):
            index.add(_long_queue_job(rng, n, now))
            n += 1
        now += rng.choice([0.0, 60.0, 900.0])
    assert jumps   # the pass did read only the candidates, and some of those many times


def test_a_pass_that_jumps_past_gangs_slicing_cannot_make_room_for_still_reads_a_job_it_can(monkeypatch):
    """Every GPU busy, one run slicing may stop: the 4-GPU gangs ranked first cannot get room and
    are passed over; a pass that then jumps to the candidates must still read the 1-GPU job ranked
    after them, which slicing can start, as an explaining pass does."""
    monkeypatch.setattr(ranked_module, "SKIP_AFTER", 2)
    monkeypatch.setattr(plan_module, "SKIP_SHARE", 1)
    policy, now = POLICIES["gqa-slice"], 100_000.0
    index = QueueIndex(gpus(8), policy)
    index.start(running("sliced", gpus=(0,), started_at=now - 20_000.0, wall_time=90_000.0))
    for gpu in range(1, 8):
        index.start(running(f"r{gpu}", gpus=(gpu,), started_at=now - 100.0, wall_time=90_000.0))
    for n in range(3):   # expected to run 10 minutes: ranked before the 2-hour job
        index.add(pending(f"gang{n}", gpus=4, submitted_at=now - 10.0, seq=n, wall_time=600.0,
                          expected_runtime=600.0))
    index.add(pending("small", submitted_at=now - 10.0, seq=3, wall_time=7_200.0, expected_runtime=7_200.0))
    for n in range(20):   # demoted: ranked after all of them
        index.add(pending(f"had{n}", submitted_at=now - 50.0, seq=4 + n, wall_time=600.0, served=1e6))
    snap = Snapshot(now=now, gpus=index.gpus, pending=index.pending_view, running=index.running_view,
                    policy=policy)
    quick, full = plan(snap, explain=False), plan(fresh(snap))
    assert quick.preempt == full.preempt == ["sliced"] and "small" in quick.order
    assert not {"gang0", "gang1", "gang2"} & set(quick.order)   # passed over unscored


@pytest.mark.parametrize("name", ["fifo-easy", "multifactor"])
def test_a_job_held_for_a_budget_no_longer_set_is_released_however_deep_in_the_queue(name):
    """No team has a budget now, so a pass releases a job still held for one. A pass that explains
    nothing would stop after the head (nothing else fits), so while a job is held it does not stop
    early: it releases the job 2,000 places back, as an explaining pass does."""
    inventory = gpus(8)
    index = QueueIndex(inventory, POLICIES[name])
    for i in range(6):
        index.start(running(f"r{i}", gpus=(i,), started_at=0.0, wall_time=1_000.0))
    index.add(pending("head", gpus=8, submitted_at=0.0, wall_time=200.0))
    for n in range(2_000):
        index.add(pending(f"q{n}", gpus=4, submitted_at=1.0 + n, seq=n + 1, wall_time=300.0))
    index.add(pending("held", gpus=4, submitted_at=5_000.0, seq=5_000, wall_time=300.0, held=True))
    snap = Snapshot(now=10.0, gpus=inventory, pending=index.pending_view, running=index.running_view,
                    policy=index.policy)
    assert plan(snap, explain=False).release == plan(fresh(snap)).release == ["held"]
    index.replace(replace(index.pending["held"], held=False))   # released: the pass may stop early again
    quick = plan(snap, explain=False)
    assert quick.release == [] and len(quick.order) <= 2


@pytest.mark.parametrize("seed", range(3))
def test_the_skip_books_kept_through_changes_are_those_a_build_makes(seed):
    """Once a pass has asked for them, the books of which jobs may fit are kept through every add,
    removal, replacement (one, or many at once) and copy, and stay what building them afresh from
    the pending jobs gives; a rebuild of the ranking drops them, to be built again when asked."""
    rng, index = random.Random(seed), QueueIndex(INVENTORY, POLICIES["gqa"])
    now, n = 1_000.0, 0
    for _ in range(40):
        index.add(_long_queue_job(rng, n, now))
        n += 1
    index.skip_books()
    for _ in range(200):
        roll = rng.random()
        if roll < 0.4 or not index.pending:
            index.add(_long_queue_job(rng, n, now))
            n += 1
        elif roll < 0.7:
            index.remove(rng.choice(list(index.pending)))
        elif roll < 0.9:
            job = index.pending[rng.choice(list(index.pending))]
            index.replace(replace(job, tier=rng.choice([0, 1, 2]), wall_time=rng.choice([None, 600.0, 86_400.0]),
                                  held=rng.random() < 0.2))
        elif roll < 0.95:
            index = index.copy()
        else:
            index.replace_many([replace(job, expected_runtime=60.0) for job in list(index.pending.values())[:5]])
        books = index.skip_books()
        fresh_books = SkipBooks.of(index.pending.values(), index.kind, index.shortest_limit)
        assert {k: list(v) for k, v in books.by_limit.items() if v} == \
            {k: list(v) for k, v in fresh_books.by_limit.items() if v}
        assert (+books.tiers, books.exclusive) == (fresh_books.tiers, fresh_books.exclusive)
        assert index.held == {job.id for job in index.pending.values() if job.held}


def test_the_gate_phase_reads_the_gated_jobs_alone_in_queue_order():
    from gqa.scheduling.index import gated

    index = QueueIndex.of(gpus(4), Policy(), [pending("a"), pending("b", begin=NOW + 60), pending("c"),
                                              pending("d", user_hold=True)], [], NOW)
    index.add(pending("e", dependency="afterok:a"))
    index.add(pending("f"))
    index.remove("b")
    index.add(pending("b", begin=NOW + 120))                  # queued again: at the back
    index.replace(replace(index.pending["d"], name="renamed"))   # in its place
    in_queue_order = [job.id for job in index.pending.values() if gated(job)]
    assert [job.id for job in index.gated_jobs()] == in_queue_order == ["d", "e", "b"]
    copy = index.copy()
    copy.remove("e")
    assert ([j.id for j in copy.gated_jobs()], [j.id for j in index.gated_jobs()]) == (["d", "b"], ["d", "e", "b"])


def test_changes_keep_the_books_a_pass_reads():
    index = QueueIndex(gpus({"a100": 4, "l4": 2}), Policy())
    index.add(pending("a", team="vision", gpus=2, wall_time=3_600.0))
    index.add(pending("b", team="nlp", gpus=0, dependency="afterok:a"))
    kind = index.kind(index.pending["a"])
    assert kind == (None, False, 2)
    assert (dict(index.sizes), list(index.gated), index.count_within(kind, 3_600.0),
            index.count_within(kind, 3_599.0)) == ({2: 1, 0: 1}, ["b"], 1, 0)
    index.remove("a")
    index.start(running("a", team="vision", gpus=(0, 1), started_at=100.0, wall_time=3_600.0, cpus=4))
    assert sorted(index.free) == [2, 3, 4, 5]
    assert list(index.busy_in(("a100", False))) == [(3_700.0, 0), (3_700.0, 1)]
    assert (index.team_gpus["vision"], index.cpus_used, index.teams_active()) == (2, 4, {"vision", "nlp"})
    index.stop("a")
    assert sorted(index.free) == [0, 1, 2, 3, 4, 5] and not index.busy_in(("a100", False))
    assert (index.team_gpus["vision"], index.cpus_used) == (0, 0)


def test_a_gpu_two_jobs_hold_is_busy_until_the_last_of_them_ends():
    index = QueueIndex(gpus(2), Policy())
    index.start(running("stopping", gpus=(0,), started_at=0.0, wall_time=100.0, stopping=True))
    index.start(running("next", gpus=(0,), started_at=0.0, wall_time=50.0))
    assert list(index.busy_in(("gpu", False))) == [(100.0, 0)] and 0 not in index.free
    index.stop("stopping")
    assert list(index.busy_in(("gpu", False))) == [(50.0, 0)] and 0 not in index.free
    index.stop("next")
    assert 0 in index.free


@pytest.mark.parametrize("seed", range(5))
def test_each_pools_busy_gpus_read_at_any_moment_are_those_running_jobs_hold(seed):
    """The busy books are brought up to date only when read (a replay whose passes reserve nothing
    never reads them): starts, stops and jobs sharing a GPU between reads, a copy taken with
    changes unread, and every read in order of when the GPU frees up."""
    rng = random.Random(seed)
    index = QueueIndex(INVENTORY, Policy())
    ends: dict[str, tuple[tuple[int, ...], float]] = {}
    copies = []
    for step in range(300):
        free = sorted(index.free)
        if free and (rng.random() < 0.55 or not ends):
            chosen = tuple(rng.sample(free, rng.randint(1, min(4, len(free)))))
            if ends and rng.random() < 0.1:   # a job starting on a GPU a stopping job still holds
                chosen += (rng.choice(ends[rng.choice(sorted(ends))][0]),)
            wall = float(rng.randint(1, 50) * 100)
            index.start(running(f"j{step}", gpus=chosen, started_at=0.0, wall_time=wall))
            ends[f"j{step}"] = (chosen, wall)
        else:
            gone = rng.choice(sorted(ends))
            index.stop(gone)
            del ends[gone]
        if rng.random() < 0.2:
            copies.append((index.copy(), dict(ends)))
        if rng.random() < 0.3 or step == 299:
            for books, held in [(index, ends), *copies[-1:]]:
                until: dict[int, float] = {}
                for chosen, wall in held.values():
                    for gpu in chosen:
                        until[gpu] = max(until.get(gpu, 0.0), wall)
                for pool in {(g.type, g.spot) for g in INVENTORY}:
                    expect = sorted((end, gpu) for gpu, end in until.items() if (INVENTORY[gpu].type,
                                                                                 INVENTORY[gpu].spot) == pool)
                    assert list(books.busy_in(pool)) == expect


def test_replacing_a_job_keeps_its_place_in_the_queue_and_refuses_a_new_size():
    index = QueueIndex(gpus(4), Policy())
    for name in ("a", "b", "c"):
        index.add(pending(name, wall_time=3_600.0))
    index.replace(pending("a", wall_time=3_600.0, expected_runtime=60.0))
    assert list(index.pending) == ["a", "b", "c"] and index.pending["a"].expected_runtime == 60.0
    with pytest.raises(ValueError, match="size"):
        index.replace(pending("b", gpus=2))
    with pytest.raises(ValueError, match="already pending"):
        index.add(pending("c"))


@pytest.mark.parametrize("share", [1, 5])   # one job of five: each moved; all five: ranked again
def test_replacing_many_jobs_keeps_their_places_and_refuses_a_new_size(share):
    index = QueueIndex(gpus(4), preset("gqa"))   # the expected run time weighs in its score
    walls = {"a": 600.0, "b": 3_600.0, "c": 86_400.0, "d": 90_000.0, "e": 95_000.0}
    for name, wall in walls.items():
        index.add(pending(name, wall_time=wall, expected_runtime=wall, submitted_at=0.0))
    # c's run time turns out short: it now ranks first (the shortest expected run time scores most)
    changed = [pending(name, wall_time=wall, expected_runtime=60.0 if name == "c" else wall, submitted_at=0.0)
               for name, wall in sorted(walls.items(), key=lambda item: item[0] != "c")][:share]
    index.replace_many(changed)
    assert list(index.pending) == ["a", "b", "c", "d", "e"] and index.pending["c"].expected_runtime == 60.0
    snap = Snapshot(now=0.0, gpus=index.gpus, pending=index.pending_view, running=index.running_view,
                    policy=index.policy)
    assert plan(snap).order == plan(fresh(snap)).order == ["c", "a", "b", "d", "e"]
    assert index.count_within(index.kind(index.pending["a"]), 3_600.0) == 2
    with pytest.raises(ValueError, match="size"):
        index.replace_many([pending("b", gpus=2)] * share)


@pytest.mark.parametrize("queued", [3, 10])   # two of three: ranked again; two of ten: each moved
def test_replacing_many_jobs_replaces_none_when_one_is_refused(queued):
    index = QueueIndex(gpus(4), preset("gqa"))
    for n in range(queued):
        index.add(pending(f"j{n}", wall_time=3_600.0, expected_runtime=3_600.0, seq=n))
    before = plan(Snapshot(now=0.0, gpus=index.gpus, pending=index.pending_view, running=index.running_view,
                           policy=index.policy)).order
    with pytest.raises(ValueError, match="size"):
        index.replace_many([pending(f"j{queued - 1}", wall_time=3_600.0, expected_runtime=60.0, seq=queued - 1),
                            pending("j0", gpus=2)])
    assert index.pending[f"j{queued - 1}"].expected_runtime == 3_600.0
    assert plan(Snapshot(now=0.0, gpus=index.gpus, pending=index.pending_view, running=index.running_view,
                         policy=index.policy)).order == before


def test_a_snapshot_changed_by_replace_is_indexed_afresh():
    index = QueueIndex(gpus(2), Policy())
    index.add(pending("a"))
    snap = Snapshot(now=0.0, gpus=index.gpus, pending=index.pending_view, running=index.running_view,
                    policy=index.policy)
    other = replace(snap, pending=(pending("z"),))
    assert index_of(other.pending, other.running) is None
    assert [s.job_id for s in plan(other).starts] == ["z"]


@pytest.mark.parametrize("queued", [1_000, 20_000])
def test_a_pass_that_explains_nothing_looks_at_a_few_jobs_however_long_the_queue(queued):
    """The head needs 8 GPUs with 4 free: it reserves them all; behind it every job would run
    past that reservation, so nothing can start and the pass stops after the head."""
    inventory = gpus(8)
    index = QueueIndex(inventory, Policy())
    for i in range(4):
        index.start(running(f"r{i}", gpus=(i,), started_at=0.0, wall_time=1_000.0))
    index.add(pending("head", gpus=8, submitted_at=0.0, wall_time=500.0, tier="high"))
    for n in range(queued):
        index.add(pending(f"q{n}", submitted_at=float(n), seq=n + 1, wall_time=86_400.0))
    snap = Snapshot(now=10.0, gpus=inventory, pending=index.pending_view, running=index.running_view,
                    policy=index.policy)
    quick = plan(snap, explain=False)
    assert quick.starts == [] and len(quick.order) <= 2
    assert len(plan(snap).order) == queued + 1   # explaining, it looks at every job


def _small_job_deep_in_the_queue(policy: Policy) -> tuple[QueueIndex, Snapshot]:
    """6 of 8 GPUs busy until 1,000 s; the head (8 GPUs) reserves them all from then; 3,000 jobs of 4
    GPUs behind it; last, one 1-GPU job short enough to run on a free GPU before the reservation."""
    inventory = gpus(8)
    index = QueueIndex(inventory, policy)
    for i in range(6):
        index.start(running(f"r{i}", gpus=(i,), started_at=0.0, wall_time=1_000.0))
    index.add(pending("head", gpus=8, submitted_at=0.0, wall_time=200.0))
    for n in range(3_000):
        index.add(pending(f"q{n}", gpus=4, submitted_at=1.0 + n, seq=n + 1, wall_time=300.0))
    index.add(pending("small", gpus=1, submitted_at=5_000.0, seq=5_000, wall_time=600.0))
    return index, Snapshot(now=10.0, gpus=inventory, pending=index.pending_view, running=index.running_view,
                           policy=index.policy)


@pytest.mark.parametrize("policy", [Policy(), Policy(ordering="fifo", backfill=True), Policy(slice_tiers=(2,))],
                         ids=["multifactor", "fifo-easy", "slicing-another-tier"])
def test_a_pass_that_explains_nothing_finds_a_small_job_deep_in_the_queue_without_scoring_the_rest(policy):
    """2 GPUs free; the head (8 GPUs) reserves all 8; 3,000 jobs of 4 GPUs behind it can neither
    start nor reserve; the one 1-GPU job short enough to run before the reservation, ranked last
    (the youngest, smallest and longest), starts. The jobs between decide nothing: the ranking
    passes over them unscored and unlisted, and the pass decides what an explaining pass does.
    So too where time slicing preempts in a tier these jobs are not in: it cannot help them."""
    index, snap = _small_job_deep_in_the_queue(policy)
    scored = []
    factors = index.ranked.factors
    index.ranked.factors = lambda job: scored.append(job.id) or factors(job)   # type: ignore[method-assign]
    quick = plan(snap, explain=False)
    assert [s.job_id for s in quick.starts] == ["small"] and quick.reserved == {"head": 1_000.0}
    assert quick.order == ["head", "small"]
    assert len(scored) <= 3                  # the head, the first job behind it (read ahead), the small one
    full = plan(fresh(snap))
    assert full.starts == quick.starts and len(full.order) == 3_002 and full.order[-1] == "small"


def test_a_pass_that_explains_nothing_reads_past_a_time_sliced_tiers_demoted_jobs():
    """Time slicing in the queue's own tier, which reserves nothing: 2 of 8 GPUs free, and no running
    job has had its slice yet. A fresh 4-GPU job cannot start or stop one; 3,000 demoted 4-GPU jobs
    behind it cannot either; last, a demoted 1-GPU job fits the free GPUs. The pass passes over the
    4-GPU jobs unscored and unlisted, reads only what may fit once it has passed over a run of
    them, and starts what an explaining pass starts."""
    inventory = gpus(8)
    index = QueueIndex(inventory, Policy(slice_tiers=(1,)))
    for i in range(6):
        index.start(running(f"r{i}", gpus=(i,), started_at=0.0, wall_time=86_400.0))
    index.add(pending("fresh", gpus=4, submitted_at=0.0, wall_time=3_600.0))
    for n in range(3_000):   # 5,000 s run each: demoted until 85,000 s after submission
        index.add(pending(f"q{n}", gpus=4, submitted_at=n * 0.3, seq=n + 1, wall_time=3_600.0, served=20_000.0))
    index.add(pending("small", gpus=1, submitted_at=950.0, seq=5_000, wall_time=7_200.0, served=4_000.0))
    snap = Snapshot(now=1_000.0, gpus=inventory, pending=index.pending_view, running=index.running_view,
                    policy=index.policy)
    scored = []
    factors = index.ranked.factors
    index.ranked.factors = lambda job: scored.append(job.id) or factors(job)   # type: ignore[method-assign]
    quick = plan(snap, explain=False)
    assert [s.job_id for s in quick.starts] == ["small"] and quick.preempt == [] and quick.order == ["small"]
    assert len(scored) <= 3
    full = plan(fresh(snap))
    assert full.starts == quick.starts and full.preempt == [] and len(full.order) == 3_002


def test_only_an_index_kept_between_passes_builds_the_books_of_what_may_fit(monkeypatch):
    """The books cost a pass over all pending jobs: a kept index (the replay's, the ETA's) builds them
    once for many passes; a pass over a snapshot indexed for it alone (a dispatcher's) walks instead.
    Both start the one small job deep in the queue."""
    built = []
    of = SkipBooks.of
    monkeypatch.setattr(SkipBooks, "of", classmethod(lambda cls, *a: built.append(1) or of(*a)))
    index, snap = _small_job_deep_in_the_queue(Policy())
    assert [s.job_id for s in plan(fresh(snap), explain=False).starts] == ["small"] and built == []
    assert [s.job_id for s in plan(snap, explain=False).starts] == ["small"] and built == [1]
    plan(snap, explain=False)
    assert built == [1]   # kept with the index


def test_a_pass_stops_when_free_gpus_are_only_in_pools_the_queue_may_not_use():
    """Spot GPUs stand free while every waiting job runs on demand only, which is full: nothing
    can start, and the pass says so after looking at one job, not the whole queue."""
    inventory = tuple(Gpu(i, "a100", spot=i >= 4) for i in range(8))
    index = QueueIndex(inventory, Policy())
    for i in range(4):
        index.start(running(f"r{i}", gpus=(i,), started_at=0.0, wall_time=1_000.0))
    for n in range(2_000):
        index.add(pending(f"q{n}", submitted_at=float(n), seq=n, wall_time=600.0))
    snap = Snapshot(now=10.0, gpus=inventory, pending=index.pending_view, running=index.running_view,
                    policy=index.policy)
    quick = plan(snap, explain=False)
    assert quick.starts == [] and len(quick.order) <= 1
    assert plan(fresh(snap), explain=False).starts == []
    spot_open = replace(snap, pending=(pending("new", spot=True, wall_time=600.0),))
    assert [s.gpus for s in plan(spot_open, explain=False).starts] == [(4,)]


def test_a_snapshot_listing_a_job_twice_plans_it_once():
    """A store read while a job changed may list it twice; the pass must go on (or the queue stops)."""
    snap = Snapshot(now=0.0, gpus=gpus(4), pending=(pending("a", gpus=1), pending("b", gpus=2), pending("a", gpus=1)),
                    running=(running("r", gpus=(0,)), running("r", gpus=(0,))), policy=Policy())
    starts = plan(snap).starts
    assert sorted(s.job_id for s in starts) == ["a", "b"]
    assert sorted(g for s in starts for g in s.gpus) == [1, 2, 3]


@pytest.mark.parametrize("built", [False, True])
def test_three_jobs_on_one_gpu_free_it_only_when_the_last_ends(built):
    runs = [running("a", gpus=(0, 1), wall_time=100.0), running("b", gpus=(0,), wall_time=300.0),
            running("c", gpus=(0,), wall_time=200.0)]
    if built:   # as a pass builds it from a snapshot
        index = QueueIndex.of(gpus(2), Policy(), (), runs, 0.0)
    else:
        index = QueueIndex(gpus(2), Policy())
        for run in runs:
            index.start(run)
    assert list(index.busy_in(("gpu", False))) == [(100.0, 1), (300.0, 0)]
    index.stop("b")
    assert list(index.busy_in(("gpu", False))) == [(100.0, 1), (200.0, 0)]
    index.stop("a")
    assert list(index.busy_in(("gpu", False))) == [(200.0, 0)] and sorted(index.free) == [1]
    index.stop("c")
    assert sorted(index.free) == [0, 1] and not index.until


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_built_index_ranks_and_counts_each_job_as_adding_it_alone_does(name):
    """A build scores and sorts many jobs in loops of its own (RankedJobs.bulk_add, QueueIndex._by_kind):
    the same keys, bit for bit, and the same kinds as one `add` at a time gives."""
    rng, policy, now = random.Random(7), POLICIES[name], 10_000.0
    jobs = [random_job(rng, n, now) for n in range(400)]
    jobs += [replace(job, spot=True, reclaims=rng.choice([0, 5])) for job in jobs[:40]]
    jobs = [replace(job, id=f"k{n}") for n, job in enumerate(jobs)]
    built = QueueIndex.of(INVENTORY, policy, jobs, (), now)
    one_by_one = QueueIndex(INVENTORY, policy)
    one_by_one.ranked.advance(now)
    for job in jobs:
        one_by_one.add(job)
    built.rank()

    def entries(index):
        return sorted(entry for lists in (index.ranked.young, index.ranked.old)
                      for teams in lists.values() for slot in teams.values() for entry in slot)
    assert entries(built) == entries(one_by_one)
    assert {k: list(v) for k, v in built.limits.items() if v} == {k: list(v) for k, v in one_by_one.limits.items() if v}


@pytest.mark.parametrize("size", [0, 1, LAZY_READS - 1, LAZY_READS, LAZY_READS + 1, 1_000])
@pytest.mark.parametrize("read", [0, 5, LAZY_READS, 2_000])
def test_a_heap_is_read_in_order_without_being_changed_however_far_a_pass_reads(size, read):
    """A fresh build's lists are heaps: read one entry at a time at first, then from a sorted copy."""
    rng = random.Random(size * 7 + read)
    heap = [(rng.random(), n) for n in range(size)]
    heapq.heapify(heap)
    kept = list(heap)
    got = list(islice(in_order(heap), read))
    assert got == sorted(heap)[:read]
    assert heap == kept
