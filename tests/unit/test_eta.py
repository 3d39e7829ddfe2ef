"""ETA: the pass run forward over expected ends."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gqa.scheduling import Snapshot, eta, plan, slicing
from gqa.scheduling.eta import expected_runtime, mean_share, median_band, predict_starts, runtime_ratio
from gqa.scheduling.index import QueueIndex
from gqa.scheduling.presets import NAMES, preset
from tests.builders import gpus, pending, running, snapshot

NOW = snapshot().now
MF = preset("multifactor")


@pytest.mark.parametrize("samples, ratio", [
    ([], 1.0),
    ([(30, 60), (45, 60), (60, 60)], 0.75),
    ([(1, 100)], 0.01),                    # as it is: a week asked for minutes run is a team's habit
    ([(0, 100), (0, 50)], eta.MIN_RATIO),   # floored only so no job is expected to end as it starts
    ([(200, 100)], 1.0),                   # over the limit (killed at it) counts as 1
    ([(10, 0), (10, None)], 1.0),          # no limit: no information
])
def test_runtime_ratio(samples, ratio):
    assert runtime_ratio(samples) == ratio


def shares_of(*shares: float) -> list[tuple[float, float]]:
    return [(share * 100, 100) for share in shares]


@pytest.mark.parametrize("samples, band", [
    ([], None),
    (shares_of(*[i / 100 for i in range(19)]), None),     # 19 samples: too few for a band
    # 20: the median is between places 9 and 10; half the root of 20, rounded up, is 3 places
    (shares_of(*[i / 100 for i in range(20)]), (0.06, 0.13)),
    (shares_of(*[i / 100 for i in range(21)]), (0.07, 0.13)),   # 21: the median at place 10
    (shares_of(*[i / 1000 for i in range(100)]), (0.044, 0.055)),   # 100: 5 places either side
    (shares_of(*[i / 1000 for i in range(99, -1, -1)]), (0.044, 0.055)),   # in any order
    (shares_of(*[0.0] * 30), (eta.MIN_RATIO, eta.MIN_RATIO)),   # floored as the ratio is
    (shares_of(*[0.3, 0.4] * 15), (0.3, 0.4)),   # a median that flips between two: both in the band
    ([(2 * i, 100) for i in range(20)] + [(5, 0), (5, None)], (0.12, 0.26)),   # no limit: no information
])
def test_median_band(samples, band):
    assert median_band(samples) == (pytest.approx(band) if band else None)
    if band:
        assert band[0] <= runtime_ratio(samples) <= band[1]


@pytest.mark.parametrize("samples, share", [
    ([], 1.0),
    ([(30, 60), (45, 60), (60, 60)], 0.75),
    ([(1, 100), (1, 100), (97, 100)], 0.33),   # skewed: the median is 0.01, the few long runs count here
    ([(0, 100), (0, 50)], eta.MIN_RATIO),
    ([(200, 100), (0, 100)], 0.5),            # over the limit (killed at it) counts as 1
    ([(10, 0), (10, None), (25, 100)], 0.25),  # no limit: no information
])
def test_mean_share(samples, share):
    assert mean_share(samples) == pytest.approx(share)


def test_the_eta_counts_the_mean_share_where_the_ranking_counts_the_median():
    # vision's last runs used 1%, 1% and 98% of their limits. Three of its jobs wait behind r: the pass
    # ranks each as a 1% run (the median), but the queue ahead holds the GPU for a third of each limit
    # on average, so x, behind r, a and b, is expected to start after three of those thirds
    samples = [(1, 100), (1, 100), (98, 100)]
    ratio, share = runtime_ratio(samples), mean_share(samples)
    wall = 3000.0
    r = running("r", team="vision", gpus=[0], started_at=NOW, wall_time=wall,
                expected_runtime=expected_runtime(wall, ratio))
    waiting = [pending(j, team="vision", wall_time=wall, seq=i, submitted_at=i,
                       expected_runtime=expected_runtime(wall, ratio)) for i, j in enumerate("abx")]
    snap = snapshot(1, policy=MF, running=[r], pending=waiting)
    assert predict_starts(snap, shares={"vision": share}, targets={"x"}) == {"x": pytest.approx(NOW + 3 * 1000)}


def test_expected_runtime():
    assert expected_runtime(3600, 0.5) == 1800 and expected_runtime(None, 0.5) is None
    # the pass counts at least a twentieth of the wall time, however little the team's jobs used
    assert expected_runtime(3600, 0.001) == 3600 * eta.RANK_FLOOR == 180


def test_the_eta_ends_runs_by_the_teams_history_below_the_passs_floor():
    # vision's jobs use 0.1% of their week-long limits: the pass ranks r as if it ran at least 5% of its
    # limit (its expected_runtime, as read_snapshot sets it), but the ETA expects it to end after 0.1%
    week = 7 * 86400.0
    r = running("r", team="vision", gpus=[0], started_at=NOW, wall_time=week,
                expected_runtime=expected_runtime(week, 0.001))
    snap = snapshot(1, policy=MF, running=[r], pending=[pending("a", wall_time=60)])
    assert r.expected_runtime == week * eta.RANK_FLOOR
    assert predict_starts(snap, shares={"vision": 0.001}) == {"a": NOW + week * 0.001}
    assert predict_starts(snap) == {"a": NOW + week * eta.RANK_FLOOR}   # no history given: the run's count


@pytest.mark.parametrize("started_ago, wall, ratio, ends_in", [
    (50, 1000, 0.1, 50),         # expected 100 s, 50 s run: 50 s to go
    (300, 1000, 0.1, 100),       # outlived 100 s and 200 s: expected to run 400 s
    (900, 1000, 0.1, 100),       # doubled to 1600 s, but killed at its limit
    (1200, 1000, 0.1, 0),        # past its limit, still running: expected now
    (300, None, 0.1, None),      # no limit: no end known, so no ETA behind it
])
def test_a_run_that_outlives_its_expected_end_is_expected_to_run_twice_as_long(started_ago, wall, ratio,
                                                                                  ends_in):
    r = running("r", team="vision", gpus=[0], started_at=NOW - started_ago, wall_time=wall,
                expected_runtime=expected_runtime(wall, ratio))
    snap = snapshot(1, policy=MF, running=[r], pending=[pending("a", wall_time=60)])
    assert predict_starts(snap, shares={"vision": ratio}) == {"a": None if ends_in is None else NOW + ends_in}


def test_a_run_backfilled_with_a_shorter_wall_time_is_expected_by_what_its_job_asked():
    # in FIFO order with EASY backfill: big waits for r's end (+200); b asks 1000 s and may run as
    # little as 100 (--time-min), so backfill grants it the 200 s before then. It is expected to run
    # 1000 * 0.1 = 100 s (not a tenth of its grant), and d goes on its GPU when it ends
    snap = snapshot(2, policy=preset("fifo-easy"), running=[running("r", gpus=[0], started_at=NOW, wall_time=200)],
                    pending=[pending("big", gpus=2, wall_time=50, seq=0),
                             pending("b", team="vision", wall_time=1000, time_min=100, seq=1, submitted_at=1),
                             pending("d", wall_time=50, seq=2, submitted_at=2)])
    got = predict_starts(snap, shares={"vision": 0.1})
    assert got == {"b": NOW, "d": NOW + 100, "big": NOW + 200}


def test_jobs_start_when_the_running_ones_are_expected_to_end():
    snap = snapshot(2, policy=MF, running=[running("r1", gpus=[0], started_at=NOW, wall_time=100),
                                           running("r2", gpus=[1], started_at=NOW, wall_time=300)],
                    pending=[pending("a", wall_time=50, seq=0), pending("b", wall_time=50, seq=1, submitted_at=1),
                             pending("c", gpus=2, wall_time=10, seq=2, submitted_at=2)])
    eta = predict_starts(snap)
    # a takes GPU 0 at +100 and ends +150; b takes it at +150; c needs both: after r2 (+300)
    assert eta == {"a": NOW + 100, "b": NOW + 150, "c": NOW + 300}


def test_team_history_shortens_the_expected_ends():
    snap = snapshot(1, policy=MF, running=[running("r", team="vision", gpus=[0], started_at=NOW, wall_time=1000)],
                    pending=[pending("a", wall_time=10)])
    assert predict_starts(snap, shares={"vision": 0.25}) == {"a": NOW + 250}


@pytest.mark.parametrize("longest, started_ago, starts_in", [
    (None, 0, 50_000),            # no history of its longest: half its limit, its team's mean share
    ({"nlp": 10}, 0, 50_000),     # another team's
    ({"vision": 1000}, 0, 2000),  # at most twice the longest run the team has had
    ({"vision": 1000}, 3000, 1000),  # past that already: twice as long again, 4000 s from its start
    ({"vision": 60_000}, 0, 50_000),  # its share comes first
    ({"vision": 0}, 0, 10),       # never under MIN_RATIO of its limit
])
def test_a_run_is_expected_to_end_by_twice_its_teams_longest_run(longest, started_ago, starts_in):
    snap = snapshot(1, policy=MF, running=[running("r", team="vision", gpus=[0], started_at=NOW - started_ago,
                                                   wall_time=100_000)],
                    pending=[pending("a", wall_time=10)])
    assert predict_starts(snap, shares={"vision": 0.5}, longest=longest) == {"a": pytest.approx(NOW + starts_in)}


def test_the_longest_run_counts_the_teams_other_runs_still_going():
    # vision's history holds a 1000 s run, but q has been going 5000 s: r may go on to twice that,
    # 10,000 s (half its limit would be 50,000). q's own 5000 s do not count for q: twice 1000 s,
    # outlived, doubled to 8000 s from its start. The 2-GPU job waits for both
    snap = snapshot(2, policy=MF, running=[running("r", team="vision", gpus=[0], started_at=NOW, wall_time=100_000),
                                           running("q", team="vision", gpus=[1], started_at=NOW - 5000,
                                                   wall_time=100_000)],
                    pending=[pending("a", gpus=2, wall_time=10)])
    assert predict_starts(snap, shares={"vision": 0.5}, longest={"vision": 1000}) == {"a": pytest.approx(NOW + 10_000)}


def test_known_run_times_set_the_ends_but_not_the_order():
    # r is expected to end at +250 (a quarter of its limit) and a at +50 of its start; told that r
    # runs 600 s and a 30 s, the replay ends them then, within their limits; with no estimate (no
    # wall time) r's end is still known. Under the duration weight c (expected 100 s) still ranks
    # ahead of b (expected 250 s), though b is known to run 10 s: ranks are the estimates'
    snap = snapshot(1, policy=MF, running=[running("r", team="vision", gpus=[0], started_at=NOW, wall_time=1000)],
                    pending=[pending("a", wall_time=200, seq=0)])
    assert predict_starts(snap, shares={"vision": 0.25}, runtimes={"r": 600, "a": 30}) == {"a": NOW + 600}
    assert predict_starts(snap, shares={"vision": 0.25}, runtimes={"r": 5000}) == {"a": NOW + 1000}  # its limit
    unknown = snapshot(1, policy=MF, running=[running("r", gpus=[0], started_at=NOW)], pending=[pending("a")])
    assert predict_starts(unknown) == {"a": None} and predict_starts(unknown, runtimes={"r": 60}) == {"a": NOW + 60}
    weighted = replace(MF, weights=replace(MF.weights, duration=1.0, age=0.0))
    ranked = snapshot(1, policy=weighted, running=[running("r", gpus=[0], started_at=NOW, wall_time=100)],
                      pending=[pending("b", wall_time=1000, seq=0), pending("c", wall_time=400, seq=1)])
    told = predict_starts(ranked, shares={"default": 0.25}, runtimes={"r": 100, "b": 10, "c": 100})
    assert told == {"c": NOW + 100, "b": NOW + 200}


LOW_PREEMPTIBLE = replace(MF, preempt_tiers=(2,))
SLICED = replace(MF, slice_tiers=(1,), slice_after=600.0, slice_min_run=60.0)


def test_a_job_that_will_preempt_is_expected_to_start_now_and_its_victim_after_it():
    # the low tier is preemptible: h stops r at once. r queues again ahead of x (submitted earlier)
    # and runs its whole 1000 s after h's 100: its first attempt's end (+1000) must not end it early
    r = running("r", gpus=[0], started_at=NOW, wall_time=1000, tier=2, submitted_at=NOW - 10)
    snap = snapshot(1, policy=LOW_PREEMPTIBLE, running=[r],
                    pending=[pending("h", tier="high", wall_time=100, submitted_at=NOW, seq=1),
                             pending("x", tier="low", wall_time=50, submitted_at=NOW, seq=2)])
    assert predict_starts(snap) == {"h": NOW, "x": NOW + 1100}
    # past its budget of stops the replay lets runs go on to their ends, as if nothing preempted
    assert predict_starts(snap, max_stops=0) == {"h": NOW + 1000, "x": NOW + 1100}


def test_time_slicing_stops_a_run_that_has_had_its_slice_for_the_jobs_waiting_in_its_tier():
    # r has 600 GPU-seconds to go before its slice is up; then a stops it, b follows a, and r,
    # demoted, comes back last
    r = running("r", gpus=[0], started_at=NOW, wall_time=10_000, expected_runtime=5000, submitted_at=NOW)
    snap = snapshot(1, policy=SLICED, running=[r],
                    pending=[pending("a", wall_time=100, expected_runtime=100, submitted_at=NOW),
                             pending("b", wall_time=100, expected_runtime=100, submitted_at=NOW + 1, seq=1)])
    assert predict_starts(snap) == {"a": NOW + 600, "b": NOW + 700}
    assert predict_starts(snap, max_stops=0) == {"a": NOW + 5000, "b": NOW + 5100}


def test_a_job_started_now_has_eta_now_and_unknown_ends_give_none():
    snap = snapshot(2, policy=MF, running=[running("r", gpus=[0], started_at=NOW)],
                    pending=[pending("now", seq=0), pending("later", gpus=2, seq=1, submitted_at=1)])
    assert predict_starts(snap) == {"now": NOW, "later": None}


def test_targets_limit_the_answer():
    snap = snapshot(1, policy=MF, running=[running("r", gpus=[0], started_at=NOW, wall_time=60)],
                    pending=[pending("a", wall_time=60, seq=0), pending("b", wall_time=60, seq=1, submitted_at=1)])
    assert predict_starts(snap, targets={"a"}) == {"a": NOW + 60}


def test_two_teams_bursts_are_predicted_to_start_interleaved_by_fair_share():
    # 2 GPUs, each team submits a burst of 4 one-minute jobs, vision's first: fair share alternates the
    # starts (a team holding a GPU ranks below one holding none), and the answer is in start order
    burst = [pending(f"v{i}", team="vision", wall_time=60, seq=i, submitted_at=0) for i in range(4)]
    burst += [pending(f"n{i}", team="nlp", wall_time=60, seq=10 + i, submitted_at=1) for i in range(4)]
    eta = predict_starts(snapshot(2, policy=MF, pending=burst))
    assert list(eta) == ["v0", "n0", "v1", "n1", "v2", "n2", "v3", "n3"]
    assert [eta[j] - NOW for j in eta] == [0, 0, 60, 60, 120, 120, 180, 180]


def test_most_stops_the_replay_and_leaves_the_rest_untold():
    jobs = [pending(f"j{i}", wall_time=60, seq=i) for i in range(5)]
    eta = predict_starts(snapshot(1, policy=MF, pending=jobs), most=2)
    assert list(eta)[:2] == ["j0", "j1"] and [eta[f"j{i}"] for i in range(2, 5)] == [None] * 3


@st.composite
def long_queues(draw):
    """Up to 40 pending jobs of a few shapes (so buckets hold many), with wall times so that the
    replay runs many passes, on 2 to 6 GPUs with running jobs, caps, array limits and --begin."""
    gpu_count = draw(st.integers(2, 6))
    held = draw(st.integers(0, gpu_count))
    runs = [running(f"r{i}", team=draw(st.sampled_from(("vision", "nlp"))), gpus=[i], started_at=NOW,
                    wall_time=draw(st.sampled_from((30, 90, None)))) for i in range(held)]
    jobs = []
    for i in range(draw(st.integers(0, 40))):
        group = draw(st.sampled_from([None, "g1", "g2"]))
        jobs.append(pending(
            f"p{i}", team=draw(st.sampled_from(("vision", "nlp"))), user=draw(st.sampled_from(("ann", "bob"))),
            tier=draw(st.sampled_from((1, 1, 1, 0))), gpus=draw(st.sampled_from((1, 1, 2, 0))), seq=i,
            submitted_at=float(draw(st.integers(0, 3))), wall_time=draw(st.sampled_from((60, 600))),
            exclusive=draw(st.integers(0, 19)) == 0, held=draw(st.integers(0, 9)) == 0,
            begin=draw(st.sampled_from([None] * 8 + [NOW + 100])),
            group=group, group_limit=draw(st.none() | st.integers(1, 2)) if group else None,
            cpus=draw(st.sampled_from((None, None, None, 2)))))
    teams = {t: {"max_gpus": draw(st.none() | st.integers(1, 4)),
                 "max_gpus_per_user": draw(st.none() | st.integers(1, 3))} for t in ("vision", "nlp")}
    # slices short enough to come up (gqa-slice), and the normal tier preemptible by the high one
    # (arrival order preempts nothing: Policy refuses it)
    base = preset(draw(st.sampled_from(NAMES)))
    policy = replace(base, reservation_depth=draw(st.integers(0, 2)),
                     backfill=draw(st.booleans()), slice_after=draw(st.sampled_from((3250.0, 30.0, 120.0))),
                     slice_min_run=draw(st.sampled_from((120.0, 10.0))),
                     preempt_tiers=() if base.ordering == "fifo" else draw(st.sampled_from(((), (), (1,)))))
    return snapshot(gpu_count, policy=policy, pending=jobs, running=runs, teams=teams,
                    cpus=draw(st.none() | st.integers(2, 8)))


def replayed_afresh(snap, max_stops):
    """The prediction's specification: every replayed pass over plain tuples of what waits and runs; a
    pass's preemptions queue their victims again and the next pass runs at once; time slicing's next
    change (slicing.next_change) wakes the replay as an end does; past `max_stops` preemptions, none."""
    waiting, running = {j.id: j for j in snap.pending}, {r.id: r for r in snap.running}
    asked_for = set(waiting)
    ends = sorted((eta._not_before(eta._expected_end(r, {}, None), r, snap.now), r.id, 0) for r in snap.running)
    starts, now, used, attempt, began = {}, snap.now, {}, {}, {}
    while True:
        usage = {t: eta.decay(u, now - snap.now, snap.policy.half_life) for t, u in snap.usage.items()}
        for team, seconds in used.items():
            usage[team] = usage.get(team, 0.0) + seconds
        current = replace(snap, now=now, pending=tuple(waiting.values()), running=tuple(running.values()),
                          usage=usage)
        decision = plan(current, explain=False)
        stopped = decision.preempt if max_stops > 0 else []
        max_stops -= len(stopped)
        for job_id in stopped:
            waiting[job_id] = eta._requeued(running.pop(job_id), began.get(job_id), snap, now)
            attempt[job_id] = attempt.get(job_id, 0) + 1
        for start in decision.starts:
            job = began[start.job_id] = waiting.pop(start.job_id)
            if job.id in asked_for:
                starts.setdefault(job.id, now)   # its first start: what a submitter is told
            running[job.id] = run = eta._as_running(job, start.gpus, now, start.wall_time)
            ends = sorted(ends + [(eta._expected_end(run, {}, None), job.id, attempt.get(job.id, 0))])
        if not waiting:
            break
        if stopped:
            continue
        begins = [j.begin for j in waiting.values() if j.begin is not None and j.begin > now]
        free = len({gpu.index for gpu in snap.gpus} - {i for run in running.values() for i in run.gpus})
        change = slicing.next_change(running.values(), waiting.values(), snap.policy, now, free) \
            if max_stops > 0 else None
        following = min([e for e, _, _ in ends[:1]] + begins + ([change] if change else []), default=eta.INF)
        if following == eta.INF:
            break
        for run in running.values():
            used[run.team] = used.get(run.team, 0.0) + len(run.gpus) * (following - now)
        now = following
        while ends and ends[0][0] <= now:
            _, job_id, which = ends.pop(0)
            if attempt.get(job_id, 0) == which:
                running.pop(job_id, None)
    # a job stopped after its first start and waiting at the end keeps that start
    return {**starts, **{j: None for j in waiting if j in asked_for and j not in starts}}


def test_a_job_preempted_after_its_first_start_keeps_that_start_though_it_never_starts_again():
    # low starts at once; at its --begin time high (tier 0) stops it, and high has no end in sight
    policy = replace(preset("gqa"), preempt_tiers=(1,))
    snap = snapshot(1, policy=policy, pending=[
        pending("low", tier=1, wall_time=600, seq=0),
        pending("high", tier=0, wall_time=None, begin=NOW + 100, seq=1)])
    assert predict_starts(snap) == replayed_afresh(snap, max_stops=25) == {"low": NOW, "high": NOW + 100}


@settings(max_examples=100, deadline=None)
@given(long_queues())
def test_the_replay_predicts_what_passes_over_fresh_snapshots_would(snap):
    # the replay keeps an index, changed by each start and end; the same starts, at the same times, in order
    # a budget of stops that time slicing's rotations, with these short slices, often spend
    kept, afresh = predict_starts(snap, max_stops=25), replayed_afresh(snap, max_stops=25)
    assert kept == afresh
    assert [j for j, at in kept.items() if at is not None] == [j for j, at in afresh.items() if at is not None]


def test_a_replay_from_the_callers_index_predicts_the_same_and_leaves_that_index_as_it_was():
    index = QueueIndex(gpus(4), preset("gqa"))
    index.start(running("r", gpus=(0, 1, 2), started_at=NOW - 100, wall_time=600.0))
    for n in range(6):
        index.add(pending(f"p{n}", gpus=1 + n % 2, submitted_at=NOW - n, seq=n, wall_time=300.0 * (n + 1)))
    kept = Snapshot(now=NOW, gpus=index.gpus, pending=index.pending_view, running=index.running_view,
                    policy=index.policy)
    before = (list(index.pending), list(index.running), dict(index.free))
    assert predict_starts(kept) == predict_starts(replace(kept, pending=tuple(kept.pending),
                                                          running=tuple(kept.running)))
    assert (list(index.pending), list(index.running), dict(index.free)) == before


def test_the_replay_wakes_at_each_begin_time_ahead_in_order_whatever_the_queue_order():
    # the --begin times ahead, read once: no job starts before its own, whichever is queued first;
    # one already past does not wake the replay (it starts at once), nor does a start move the rest
    jobs = [pending("c", begin=NOW + 300, seq=1), pending("a", begin=NOW + 100, seq=2),
            pending("past", begin=NOW - 50, seq=3), pending("b", begin=NOW + 200, seq=4)]
    assert predict_starts(snapshot(4, pending=jobs)) == {"past": NOW, "a": NOW + 100, "b": NOW + 200, "c": NOW + 300}
