"""Properties of backfill and preemption over random snapshots."""

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from gqa.scheduling import PendingJob, RunningJob, plan
from gqa.scheduling.presets import preset
from tests.builders import snapshot

NOW = snapshot().now
GPUS = 8


@st.composite
def snapshots(draw, policy=preset("multifactor")):
    """Jobs carry expected run times (some under, some over their limits, some none): backfill
    by limits must ignore them, backfill by predictions count them."""
    free = list(range(GPUS))
    running = []
    for i in range(draw(st.integers(0, 5))):
        size = draw(st.integers(1, 3))
        if len(free) < size:
            break
        gpus, free = tuple(free[:size]), free[size:]
        running.append(RunningJob(id=f"r{i}", team=draw(st.sampled_from(["a", "b", "c"])), user="u", gpus=gpus,
                                  started_at=NOW - 10,
                                  wall_time=draw(st.sampled_from([None, 60, 600, 3600])),
                                  expected_runtime=draw(st.sampled_from([None, 5, 30, 300, 5000])),
                                  tier=draw(st.integers(0, 2))))
    pending = []
    for i in range(draw(st.integers(1, 8))):
        wall_time = draw(st.sampled_from([None, 30, 300, 3000, 30000]))
        # Slurm's options: CPU-only jobs, exclusive ones, a --time-min no longer than the wall time
        time_min = draw(st.sampled_from([None, 10, 100, 1000]))
        pending.append(PendingJob(
            id=f"p{i}", team=draw(st.sampled_from(["a", "b"])), user="u", tier=draw(st.integers(0, 2)),
            gpus=draw(st.integers(0, GPUS)), submitted_at=NOW - 100 + i, seq=i, wall_time=wall_time,
            expected_runtime=draw(st.sampled_from([None, 20, 200, 2000])),
            exclusive=draw(st.booleans()) and draw(st.booleans()),
            time_min=time_min if time_min is not None and (wall_time is None or time_min <= wall_time) else None))
    return snapshot(GPUS, pending=pending, running=running, policy=policy)


def _with_starts(snap, result):
    by_id = {j.id: j for j in snap.pending}
    started = [RunningJob(id=s.job_id, team=by_id[s.job_id].team, user="u", gpus=s.gpus, started_at=snap.now,
                          wall_time=s.wall_time or by_id[s.job_id].wall_time, tier=by_id[s.job_id].tier,
                          expected_runtime=by_id[s.job_id].expected_runtime,
                          exclusive=by_id[s.job_id].exclusive) for s in result.starts]
    return started


@settings(max_examples=300, deadline=None)
@given(snapshots() | snapshots(policy=replace(preset("multifactor"), backfill_by="predictions")))
def test_backfill_never_delays_the_first_reserved_job(snap):
    """By limits, provably; by predictions, as long as jobs end when they are expected to (the
    second pass counts the started jobs as the first did)."""
    result = plan(snap)
    if not result.reserved:
        return
    head = next(j for j in result.order if j in result.reserved)
    before = result.reserved[head]
    job = next(j for j in snap.pending if j.id == head)
    after_snap = replace(snap, running=snap.running + tuple(_with_starts(snap, result)), pending=(job,))
    after = plan(after_snap).reserved.get(head, after_snap.now)
    assert after <= before, f"{head} moved from {before} to {after}"


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_a_granted_wall_time_is_never_below_time_min_nor_above_the_wall_time(snap):
    by_id = {j.id: j for j in snap.pending}
    for start in plan(snap).starts:
        job = by_id[start.job_id]
        if start.wall_time is not None:
            assert job.time_min is not None and job.time_min <= start.wall_time < (job.wall_time or float("inf"))


@settings(max_examples=300, deadline=None)
@given(snapshots(policy=replace(preset("gqa"), preempt_tiers=(1, 2))))
def test_preemption_only_takes_lower_preemptible_tiers_and_never_twice(snap):
    result = plan(snap)
    running = {r.id: r for r in snap.running}
    assert len(result.preempt) == len(set(result.preempt))
    waiting_tiers = [j.tier for j in snap.pending if j.id in result.waiting]
    for victim in result.preempt:
        assert running[victim].tier in (1, 2)
        assert waiting_tiers and min(waiting_tiers) < running[victim].tier


@settings(max_examples=200, deadline=None)
@given(snapshots(), st.floats(0, 50))
def test_budgets_are_never_exceeded_by_the_starts_of_a_pass(snap, budget):
    from gqa.scheduling import Gpu, TeamPolicy
    from gqa.scheduling.budget import BudgetLedger

    priced = replace(snap, gpus=tuple(Gpu(g.index, g.type, price=1.0) for g in snap.gpus),
                     teams={"a": TeamPolicy(budget=budget), "b": TeamPolicy(budget=budget)})
    result = plan(priced)
    ledger = BudgetLedger(priced)
    by_id = {j.id: j for j in priced.pending}
    for team in ("a", "b"):
        caps = [ledger.cap(by_id[s.job_id]) for s in result.starts if by_id[s.job_id].team == team]
        if caps:  # whatever starts fits, with what running jobs may still cost
            assert ledger.committed[team] + sum(caps) <= budget + 1e-9
