"""The event loop's books: fair-share usage, requeues, spot reclaims, and plan() misbehaving."""

import random
from dataclasses import replace
from types import SimpleNamespace

import pytest

from gqa.scheduling import Policy, Start, TeamPolicy
from gqa.scheduling.index import QueueIndex
from gqa.scheduling.presets import preset
from gqa.sim import engine as engine_module
from gqa.sim.engine import SimulationError, cluster, simulate
from gqa.sim.policies import run_policy
from gqa.sim.pools import Pool, pool_gpus, reclaim_rates
from gqa.sim.trace import TraceJob
from gqa.sim.workload import SimJob, Workload, derive


def job(id, submit, duration, gpus=1, team="t", wall=None, seq=0):
    return SimJob(id=id, seq=seq, submit=submit, duration=duration, gpus=gpus, team=team, user="u",
                  tier=1, wall_time=wall or duration)


def work(*jobs, teams=None):
    return Workload(jobs=list(jobs), teams=teams or {j.team: TeamPolicy() for j in jobs})


def test_usage_as_the_local_store_books_it(monkeypatch):
    seen = {}
    real = engine_module.plan

    def spy(snap, **kw):
        seen[snap.now] = dict(snap.usage)
        return real(snap, **kw)

    monkeypatch.setattr(engine_module, "plan", spy)
    w = work(job("a", 0, 100, team="x", seq=0), job("b", 10, 10, team="y", seq=1),
             job("c", 150, 10, team="x", seq=2))
    simulate(w, cluster(1), Policy(half_life=100.0))
    assert seen[0] == {}
    assert 10 not in seen                          # no free GPU: the pass is skipped
    assert seen[100] == {"x": 100.0}               # a finished at 100: 1 GPU x 100 s
    assert seen[150] == pytest.approx({"x": 100 * 0.5 ** 0.5, "y": 10 * 0.5 ** 0.4})


def scripted(script):
    """A stand-in for plan(): at each time, exactly the given decision."""
    def fake(snap, **kw):
        starts, preempt = script.pop(snap.now, ([], []))
        return SimpleNamespace(starts=[Start(j, g) for j, g in starts], preempt=preempt)
    return fake


def test_a_preempted_job_resumes_from_its_last_checkpoint(monkeypatch):
    monkeypatch.setattr(engine_module, "plan", scripted({
        0: ([("long", (0,))], []),
        100: ([("urgent", (0,))], ["long"]),
        150: ([("long", (0,))], []),
    }))
    w = work(job("long", 0, 1000, wall=2000, seq=0), job("urgent", 100, 50, seq=1))
    result = simulate(w, cluster(1), Policy(), checkpoint_interval=30, may_preempt=True)
    long, urgent = result.outcomes
    assert (long.start, long.attempts, long.preemptions) == (0, 2, 1)
    assert long.end == 150 + (1000 - 90)           # ran 100 s, checkpointed at 90
    assert long.gpu_seconds == 100 + 910
    assert (urgent.start, urgent.end) == (100, 150)
    assert result.gpu_seconds_by_pool == {"gpu": 1010 + 50}


def test_a_job_that_saves_when_stopped_keeps_all_its_work_and_pays_the_restart(monkeypatch):
    """save_on_preempt: the stopped job checkpoints on SIGTERM (gqa.runtime), as las assumes."""
    monkeypatch.setattr(engine_module, "plan", scripted({
        0: ([("long", (0,))], []),
        100: ([("urgent", (0,))], ["long"]),
        150: ([("long", (0,))], []),
    }))
    w = work(job("long", 0, 1000, wall=2000, seq=0), job("urgent", 100, 50, seq=1))
    result = simulate(w, cluster(1), Policy(), checkpoint_interval=30, may_preempt=True, save_on_preempt=True,
                      restart_cost=60)
    long, _ = result.outcomes
    assert long.end == 150 + (1000 - 100) + 60      # all 100 s kept; the resume reloads for 60 s


def test_a_sliced_replay_tells_the_pass_each_jobs_service_and_slices():
    """gqa-slice end to end in the engine: the long job has its slice, the short one arriving
    later preempts it and finishes first; the long one then resumes, its work kept."""
    w = work(job("long", 0, 20_000, wall=40_000, seq=0), job("short", 5_000, 100, wall=200, seq=1))
    result = run_policy("gqa-slice", w, cluster(1))
    long, short = result.outcomes
    assert (short.start, short.end) == (5_000, 5_100)
    assert long.preemptions == 1 and long.end == 20_000 + 100 + 60
    plain = run_policy("gqa", w, cluster(1))
    assert plain.outcomes[1].start == 20_000 and plain.outcomes[0].preemptions == 0


def test_a_sliced_replay_skips_only_the_passes_that_can_neither_start_nor_preempt(monkeypatch):
    """With no GPU free, a time-sliced pass may still stop a job that has had its slice, but only
    for a waiting job of its tier that is not demoted: any other pass is skipped, and the replay
    ends exactly as one that runs every pass (may_preempt given: plan() is not second-guessed)."""
    rng = random.Random(7)
    jobs = [job(f"j{n}", n * 900 + rng.choice([0, 300]), rng.choice([600, 7_200, 30_000]),
                gpus=rng.choice([1, 1, 2, 4]), team=rng.choice(["x", "y"]), seq=n) for n in range(50)]
    real, passes = engine_module.plan, []

    def counted(snap, **kw):
        decision = real(snap, **kw)
        passes.append((snap.now, bool(decision.starts or decision.preempt)))
        return decision

    monkeypatch.setattr(engine_module, "plan", counted)
    skipping = run_policy("gqa-slice", work(*jobs), cluster(4))
    ran, passes[:] = list(passes), []
    every = run_policy("gqa-slice", work(*jobs), cluster(4), may_preempt=True)
    assert skipping.outcomes == every.outcomes and sum(o.preemptions for o in skipping.outcomes) > 0
    skipped = [now for now, _ in passes if now not in {now for now, _ in ran}]
    assert skipped and not [now for now, decided in passes if decided and now in skipped]


def test_a_sliced_replay_wakes_only_once_slicing_may_make_room_and_ends_as_one_woken_at_every_stop(monkeypatch):
    """Gangs on a small cluster: a run becoming one slicing may stop wakes the replay only once
    such runs, with the free GPUs, hold enough for the smallest waiting job that has not had its
    slice (QueueIndex.next_slicing_room). Woken at every run slicing may stop, and asking slicing
    in every tier where it may stop one, the replay ends the same after more passes."""
    rng = random.Random(11)
    jobs = [job(f"j{n}", n * 600 + rng.choice([0, 300]), rng.choice([900, 7_200, 30_000]),
                gpus=rng.choice([1, 2, 4, 8]), team=rng.choice(["x", "y"]), seq=n) for n in range(60)]
    counting = run_policy("gqa-slice", work(*jobs), cluster(8))
    monkeypatch.setattr(QueueIndex, "next_slicing_room", lambda self, now: self.next_sliceable(now))
    monkeypatch.setattr(QueueIndex, "slicing_may_stop",
                        lambda self, now: frozenset(t for t in self.slicing if self.may_slice(t, now)))
    every = run_policy("gqa-slice", work(*jobs), cluster(8))
    assert counting.outcomes == every.outcomes and sum(o.preemptions for o in counting.outcomes) > 0
    assert counting.passes < every.passes


def test_plan_starting_a_job_on_a_busy_gpu_is_an_error(monkeypatch):
    monkeypatch.setattr(engine_module, "plan", scripted({0: ([("a", (0,))], []), 5: ([("b", (0,))], [])}))
    with pytest.raises(SimulationError, match="busy"):
        simulate(work(job("a", 0, 100, seq=0), job("b", 5, 10, seq=1)), cluster(2), Policy())


def test_a_job_that_can_never_start_is_left_unfinished():
    w = work(job("big", 0, 10, gpus=2, team="capped", seq=0), job("ok", 1, 10, seq=1),
             teams={"capped": TeamPolicy(max_gpus=1), "t": TeamPolicy()})
    result = simulate(w, cluster(2), preset("gqa"))
    assert result.unfinished == 1 and result.outcomes[1].end == 11


def test_a_wall_time_shorter_than_the_run_kills_the_job():
    result = simulate(work(job("a", 0, 100, wall=60)), cluster(1), preset("fifo"))
    assert (result.outcomes[0].end, result.outcomes[0].timed_out) == (60, True)


def test_spot_reclaims_requeue_jobs_deterministically():
    pools = [Pool("od", "a100", False, 2, 4.0), Pool("spot", "a100", True, 4, 1.0, reclaim_rate_per_hour=2.0)]
    trace = [TraceJob(f"j{i}", i * 600.0, 3 * 3600.0, 1 + i % 2) for i in range(20)]
    w = derive(trace, cluster_gpus=4, seed=5, spot=True)
    gpus, pool_of = pool_gpus(pools)

    def run(seed):
        return simulate(w, gpus, preset("gqa"), pool_of=pool_of, reclaim_per_hour=reclaim_rates(pools),
                        checkpoint_interval=600, seed=seed)

    a, b, c = run(1), run(1), run(2)
    assert a.unfinished == 0 and sum(o.reclaims for o in a.outcomes) > 0
    assert all(o.gpu_seconds >= o.gpus * o.duration for o in a.outcomes)
    assert [(o.start, o.end) for o in a.outcomes] == [(o.start, o.end) for o in b.outcomes]
    assert [(o.start, o.end) for o in a.outcomes] != [(o.start, o.end) for o in c.outcomes]
    assert set(a.gpu_seconds_by_pool) == {"od", "spot"}


def test_eta_hook_is_asked_for_each_arrival():
    asked = []

    def eta(snap, ids, ratios=None, shares=None, longest=None):
        asked.append((snap.now, ids))
        return {j: snap.now + 7 for j in ids}

    w = work(job("a", 0, 100, seq=0), job("b", 10, 10, seq=1), job("c", 20, 10, seq=2))
    result = simulate(w, cluster(1), preset("fifo"), eta=eta, eta_every=2)
    assert asked == [(0, ["a"]), (20, ["c"])]
    assert [o.eta for o in result.outcomes] == [7, None, 27]


def test_the_eta_is_handed_each_teams_history_as_it_stands_at_the_arrival():
    """Production reads a team's finished jobs when it predicts; the replay refreshes the ranking's
    ratios only every RATIO_REFRESH finishes, but hands the ETA the shares (and longest runs) as they
    are: else, before the first refresh, it had no history and expected every run to last its limit."""
    handed = []

    def eta(snap, ids, ratios=None, shares=None, longest=None):
        handed.append((snap.now, dict(shares or {}), dict(longest or {})))
        return {}

    # x's first two runs use a tenth and a half of their limits; y uses all of its own; x's third
    # is killed at its limit, which production does not sample either
    w = work(job("a", 0, 10, team="x", wall=100, seq=0), job("b", 20, 50, team="x", wall=100, seq=1),
             job("y", 100, 10, team="y", seq=2), job("c", 110, 500, team="x", wall=100, seq=3),
             job("z", 300, 10, team="z", seq=4))
    simulate(w, cluster(2), preset("fifo"), eta=eta)
    assert engine_module.RATIO_REFRESH > 3   # not one refresh in this replay
    assert [now for now, _, _ in handed] == [0, 20, 100, 110, 300]
    assert [shares for _, shares, _ in handed] == [{}, pytest.approx({"x": 0.1}), pytest.approx({"x": 0.3}),
                                                    pytest.approx({"x": 0.3, "y": 1.0}),
                                                    pytest.approx({"x": 0.3, "y": 1.0})]
    # and each team's longest run so far, the ETA's bound on how long a run goes on
    assert [longest for _, _, longest in handed] == [{}, {"x": 10}, {"x": 50}, {"x": 50, "y": 10}, {"x": 50, "y": 10}]


def test_production_eta_on_the_golden_trace():
    from pathlib import Path

    from gqa.sim import load_trace
    from gqa.sim.engine import production_eta

    eta = production_eta()
    assert eta is not None
    golden = load_trace(Path(__file__).with_name("golden.csv")).jobs
    exact = [replace(j, wall_time=j.duration) for j in golden]
    # FIFO, wall times equal to the run times, and the ETA is the pass run forward: exact
    # (under gqa a later, shorter job may still overtake: an ETA at submit cannot know)
    result = simulate(derive(exact, cluster_gpus=4), cluster(4), preset("fifo"), eta=eta)
    assert [o.eta for o in result.outcomes] == [o.start for o in result.outcomes]
    # with the golden wall times: F is predicted for 210 (C's limit) and starts at 200 (C's end);
    # H is predicted for 450 (G's limit) and starts at 430 (G's end)
    result = simulate(derive(golden, cluster_gpus=4), cluster(4), preset("fifo"), eta=eta)
    assert {o.id: o.eta - o.start for o in result.outcomes if o.eta != o.start} == {"F": 10, "H": 20}


def test_plan_preempting_a_lower_tier_frees_gpus_at_once():
    batch = replace(job("batch", 0, 1000, wall=2000, seq=0), tier=2)
    urgent = replace(job("urgent", 100, 50, seq=1), tier=0)
    policy = replace(preset("gqa"), preempt_tiers=(2,))
    result = simulate(work(batch, urgent), cluster(1), policy, checkpoint_interval=30)
    b, u = result.outcomes
    assert (u.start, u.end) == (100, 150)          # the pass after the preemption starts it
    assert (b.preemptions, b.attempts, b.end) == (1, 2, 150 + 910)


def test_gpu_time_inside_the_arrival_window_is_booked():
    w = work(job("a", 0, 50, seq=0), job("b", 100, 900, seq=1), job("c", 200, 10, seq=2))
    result = simulate(w, cluster(1), preset("fifo"))
    assert result.arrival_window == (0, 200)
    assert result.gpu_seconds_in_window == 50 + 100  # a wholly, b from 100 to 200; c starts at 1000


@pytest.mark.parametrize("policy, re_estimated", [
    ("fifo", False), ("fifo-easy", False), ("multifactor", False),   # no decision reads a waiting job's estimate
    ("gqa", True),                                                    # its duration weight ranks by it
])
def test_what_waits_is_re_estimated_only_where_a_decision_reads_it(monkeypatch, policy, re_estimated):
    from gqa.scheduling.eta import expected_runtime, runtime_ratio
    from gqa.scheduling.index import QueueIndex

    monkeypatch.setattr(engine_module, "RATIO_REFRESH", 2)
    waiting, started = [], {}
    real_plan, real_start = engine_module.plan, QueueIndex.start

    def spy(snap, **kw):
        waiting.extend(j for j in snap.pending if j.id == "d")
        return real_plan(snap, **kw)

    def start(index, run):
        started[run.id] = run.expected_runtime
        return real_start(index, run)

    monkeypatch.setattr(engine_module, "plan", spy)
    monkeypatch.setattr(QueueIndex, "start", start)
    # one GPU; a, b and c use a tenth of the 100 s they ask for: after a and b, the ratio is 0.1
    w = work(*(job(n, 0, 10, wall=100, seq=i) for i, n in enumerate("abc")), job("d", 0, 50, wall=100, seq=3))
    simulate(w, cluster(1), preset(policy))
    estimated = expected_runtime(100, runtime_ratio([(10, 100)] * 2))
    assert waiting[0].expected_runtime == 100                     # at arrival: no history, the wall time
    assert (waiting[-1].expected_runtime == estimated) is re_estimated
    assert (waiting[-1] is waiting[0]) is not re_estimated       # left as it was: no copy made
    assert started["d"] == estimated                              # a start estimates from the ratios it finds


@pytest.mark.parametrize("policy, eta, summed", [
    ("fifo", False, False), ("fifo-easy", False, False), ("sjf-oracle", False, False),   # no order reads usage
    ("multifactor", False, True), ("gqa", False, True),                                  # fair share reads it
    ("fifo", True, True),                                                                # the ETA reads it
])
def test_usage_is_summed_only_where_something_reads_it(monkeypatch, policy, eta, summed):
    seen = []
    real = engine_module.plan

    def spy(snap, **kw):
        seen.append(dict(snap.usage))
        return real(snap, **kw)

    monkeypatch.setattr(engine_module, "plan", spy)
    w = work(job("a", 0, 100, team="x", seq=0), job("b", 150, 10, team="y", seq=1))
    run_policy(policy, w, cluster(1), eta=(lambda *a: {}) if eta else None)
    assert (seen[-1] == {"x": pytest.approx(100 * 0.5 ** (50 / (7 * 86400)))}) is summed
    assert (seen[-1] == {}) is not summed


def test_a_refresh_re_estimates_the_waiting_jobs_of_the_teams_whose_ratio_moved_and_no_others(monkeypatch):
    from gqa.scheduling.eta import expected_runtime

    monkeypatch.setattr(engine_module, "RATIO_REFRESH", 2)
    records = {}   # each pass's time -> the waiting records of xw and yw
    real = engine_module.plan

    def spy(snap, **kw):
        records[snap.now] = {j.id: j for j in snap.pending if j.id in ("xw", "yw")}
        return real(snap, **kw)

    monkeypatch.setattr(engine_module, "plan", spy)
    # one GPU; xw and yw ask for two, so wait the whole replay. x1 and y1 use a tenth of what they
    # ask (the first refresh: both teams at 0.1), then x2 and x3 half (the second: x's median 0.5, y's
    # stands, with no new run); x4 arrives after, for a pass to read them
    w = work(job("xw", 0, 10, gpus=2, team="x", wall=100, seq=0), job("yw", 0, 10, gpus=2, team="y", wall=100, seq=1),
             job("x1", 0, 10, team="x", wall=100, seq=2), job("y1", 10, 10, team="y", wall=100, seq=3),
             job("x2", 20, 50, team="x", wall=100, seq=4), job("x3", 70, 50, team="x", wall=100, seq=5),
             job("x4", 120, 10, team="x", wall=100, seq=6))
    simulate(w, cluster(1), preset("gqa"))
    assert sorted(records) == [0, 10, 20, 70, 120]
    assert records[0]["xw"].expected_runtime == records[0]["yw"].expected_runtime == 100   # no history
    assert records[10]["xw"].expected_runtime == 100                                      # one finish
    assert records[20]["xw"].expected_runtime == records[20]["yw"].expected_runtime == expected_runtime(100, 0.1)
    assert records[70]["xw"] is records[20]["xw"]                                         # one finish
    assert records[120]["xw"].expected_runtime == expected_runtime(100, 0.5)
    assert records[120]["yw"] is records[20]["yw"]    # y ran nothing since: its record is left as it is
