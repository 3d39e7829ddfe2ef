"""The Tiresias-style LAS replay on workloads small enough to work out by hand."""

import pytest

from gqa.scheduling import TeamPolicy
from gqa.sim.las import simulate_las
from gqa.sim.metrics import summarize
from gqa.sim.workload import SimJob, Workload


def job(id, submit, duration, gpus=1, wall=None, seq=None, tier=1):
    return SimJob(id=id, seq=int(submit) if seq is None else seq, submit=submit, duration=duration, gpus=gpus,
                  team="t", user="u", tier=tier, wall_time=wall or duration)


def las(gpus, *jobs, threshold=100.0, starve=0.0, restart=0.0, tiers=False):
    result = simulate_las(Workload(jobs=list(jobs), teams={"t": TeamPolicy()}), gpus, threshold=threshold,
                          starve=starve, restart=restart, tiers=tiers)
    return {o.id: o for o in result.outcomes}, result


def test_a_new_job_preempts_one_past_the_threshold_which_pays_the_restart():
    # long: 100 GPU-s at t=100, second queue; short arrives at 200 and takes its GPU;
    # long kept its 200 s of work, resumes at 250 and spends 60 s restarting: 250 + 60 + 800
    out, result = las(1, job("long", 0, 1000), job("short", 200, 50), restart=60)
    assert (out["short"].start, out["short"].end) == (200, 250)
    assert (out["long"].end, out["long"].attempts, out["long"].preemptions) == (1110, 2, 1)
    assert out["long"].gpu_seconds == 200 + 60 + 800
    assert summarize(result)["preemptions"] == 1


def test_within_the_first_queue_it_is_fifo_until_the_threshold_is_crossed():
    # short waits behind long (both in the first queue) until long's 100 GPU-s at t=100
    out, _ = las(1, job("long", 0, 1000), job("short", 50, 50), restart=60)
    assert (out["short"].start, out["short"].end) == (100, 150)
    assert out["long"].end == 150 + 60 + 900


def test_within_a_queue_jobs_rank_by_submit_then_seq_whatever_order_the_trace_lists_them():
    # a job's rank packs its level above its index in (submit, seq) order: listed out of order,
    # c (submitted first, the highest seq) runs first, then a and b by seq at the same submit
    jobs = [job("busy", 0, 100, seq=0), job("b", 10, 10, seq=5), job("a", 10, 10, seq=3), job("c", 5, 10, seq=9)]
    out, _ = las(1, *jobs, threshold=1e9)
    assert [out[k].start for k in ("c", "a", "b")] == [100, 110, 120]


def test_attained_service_counts_gpus_times_time():
    # 4 GPUs reach 100 GPU-s in 25 s: the single-GPU job arriving at 30 preempts the gang
    out, _ = las(4, job("gang", 0, 1000, gpus=4), job("one", 30, 10))
    assert out["one"].start == 30 and out["gang"].preemptions == 1
    assert out["gang"].end == 1000 + 10


def test_the_lowest_priority_victims_whose_gpus_are_not_needed_are_spared():
    # 3 GPUs; "old" (2 GPUs, submitted first) and "young" (1 GPU) both past the threshold;
    # "new" needs 2: taking young alone is not enough, old alone is: young keeps running
    out, _ = las(3, job("old", 0, 1000, gpus=2), job("young", 1, 1000), job("new", 500, 10, gpus=2))
    assert out["new"].start == 500
    assert (out["old"].preemptions, out["young"].preemptions) == (1, 0)


def test_a_gang_that_cannot_get_room_is_skipped_and_smaller_jobs_start():
    # "big" needs 4 of 4 GPUs, but "held" (first queue, before it) keeps one: "small" starts instead
    out, _ = las(4, job("held", 0, 1000), job("big", 10, 100, gpus=4), job("small", 20, 100), threshold=1e9)
    assert out["small"].start == 20 and out["big"].start == 1000


STREAM = [job(f"b{k}", 100.0 * k, 100) for k in range(1, 6)]   # one 100 s job every 100 s from t=100


@pytest.mark.parametrize("starve, preempted, b3_start, b5_start", [
    # no guard: the stream holds the GPU from 100 to 600, "long" waits all that time
    pytest.param(0.0, 1, 300, 500, id="without the guard the stream starves it"),
    # guard 2: preempted at 100 after 100 s run, promoted at 300 (waited 2 x 100), runs to 400,
    # preempted by b3; promoted at 600, runs to 700, preempted by b5; resumes at 800
    pytest.param(2.0, 3, 400, 700, id="promoted after waiting twice its run"),
])
def test_starvation_guard(starve, preempted, b3_start, b5_start):
    out, _ = las(1, job("long", 0, 1000), *STREAM, starve=starve)
    assert out["long"].preemptions == preempted
    assert (out["b3"].start, out["b5"].start) == (b3_start, b5_start)
    assert out["long"].end == 1500   # one GPU, never idle: the same end either way


def test_a_job_past_its_wall_time_is_killed_there():
    out, result = las(1, job("over", 0, 500, wall=300), job("next", 10, 10), threshold=1e9)
    assert (out["over"].end, out["over"].timed_out) == (300, True)
    assert out["next"].start == 300 and summarize(result)["timed_out"] == 1


def test_books_and_utilisation():
    out, result = las(2, job("a", 0, 100), job("b", 0, 100, seq=1), job("c", 50, 100, gpus=2))
    summary = summarize(result)
    assert summary["finished"] == 3 and summary["unfinished"] == 0
    assert result.gpu_seconds_by_pool == {"gpu": 100 + 100 + 200}
    assert summary["utilisation"] == pytest.approx(400 / (2 * 200))


def test_gangs_whose_reload_outlasts_their_slice_still_progress():
    # 2-GPU jobs reach 100 GPU-s in 50 s, less than a resume's 60 s reload: counted as service, the
    # reload demoted them before any new work, and these three preempted each other forever
    out, result = las(2, job("a", 30, 273, gpus=2), job("b", 120, 353, gpus=2), job("c", 145, 52, gpus=2),
                      starve=2.0, restart=60)
    assert all(o.end is not None and not o.timed_out for o in out.values())
    for o in out.values():   # its work, and at most a reload per resume (one may be cut short)
        assert 2 * o.duration < o.gpu_seconds <= 2 * (o.duration + 60 * (o.attempts - 1))
    busy = sum(o.gpu_seconds for o in out.values()) / 2
    assert max(o.end for o in out.values()) == 30 + busy   # never idle from the first arrival
    assert summarize(result)["preemptions"] == 16


# -- las-tiers: the same replay honouring the jobs' tiers --------------------------------------------

HIGH, NORMAL, LOW = 0, 1, 2


@pytest.mark.parametrize("tiers, order", [
    pytest.param(False, ["normal", "low", "high"], id="blind: first come first served in the first queue"),
    pytest.param(True, ["high", "normal", "low"], id="tiers: high preempts normal at once, low waits for both"),
])
def test_tiers_come_before_attained_service_only_where_honoured(tiers, order):
    out, _ = las(1, job("normal", 0, 100, tier=NORMAL), job("low", 1, 10, tier=LOW), job("high", 2, 300, tier=HIGH),
                 threshold=1e9, restart=60, tiers=tiers)
    assert sorted(out, key=lambda i: out[i].end) == order
    if tiers:   # normal ran 2 s, resumes at 302 with a 60 s restart: 302 + 60 + 98; low after it
        assert (out["high"].start, out["normal"].end, out["normal"].preemptions) == (2, 460, 1)
        assert (out["low"].start, out["low"].end) == (460, 470)


def test_a_lower_tier_never_preempts_a_higher_one_however_much_service_it_had():
    # high is far past the threshold; a fresh low job waits for it to end, as a fresh high one would not
    out, _ = las(1, job("high", 0, 1000, tier=HIGH), job("low", 500, 10, tier=LOW), job("high2", 600, 10, tier=HIGH),
                 tiers=True)
    assert (out["high"].preemptions, out["high2"].start) == (1, 600)
    assert out["low"].start == out["high"].end == 1010


def test_within_a_tier_it_is_las_and_a_demoted_higher_tier_still_comes_first():
    # two normal jobs: the fresh one preempts the demoted one (its tier's LAS); the low job, though
    # fresh, ranks below both, demoted or not
    out, _ = las(1, job("old", 0, 1000, tier=NORMAL), job("low", 200, 50, tier=LOW), job("new", 300, 50, tier=NORMAL),
                 tiers=True)
    assert (out["new"].start, out["old"].preemptions) == (300, 1)
    assert out["low"].start == out["old"].end == 1050


def test_with_every_job_in_one_tier_honouring_tiers_changes_nothing():
    jobs = [job(f"j{k}", 37.0 * k, 50 + 91 * (k % 5), gpus=1 + k % 3) for k in range(40)]
    blind, _ = las(4, *jobs, restart=60, starve=2.0)
    tiered, _ = las(4, *jobs, restart=60, starve=2.0, tiers=True)
    assert blind == tiered


@pytest.mark.parametrize("seed", range(3))
def test_dropping_stale_events_from_the_heap_changes_nothing(seed, monkeypatch):
    """A preempted job's end stays in the event heap until its time; once stale events are half of
    the heap they are dropped in one go. Dropped after every handful, the replay of a busy random
    workload (many preemptions and promotions) gives every outcome it gives when none are dropped."""
    import random

    from gqa.sim import las as las_module

    rng = random.Random(seed)
    jobs = [job(f"j{n}", round(rng.uniform(0, 20_000)), rng.choice([30, 300, 3_000, 20_000]),
                gpus=rng.choice([1, 1, 2, 4]), seq=n) for n in range(300)]

    def replay(kept):
        monkeypatch.setattr(las_module, "STALE_KEPT", kept)
        out, result = las(6, *jobs, threshold=200.0, starve=2.0, restart=10.0)
        return [(o.id, o.start, o.end, o.attempts, o.preemptions, o.gpu_seconds) for o in out.values()], result

    never, result = replay(10**9)
    assert sum(o.preemptions for o in result.outcomes) > 100 and result.passes > 300
    assert replay(4)[0] == never


def test_the_waiting_keys_stay_sorted_through_adds_removes_and_takes(monkeypatch):
    """The replay's own sorted container, against a sorted list, with buckets of 2 to 4 keys so
    that they split and empty all the time."""
    import random

    from gqa.sim.sorted_ints import SortedInts

    monkeypatch.setattr(SortedInts, "LOAD", 2)
    rng, keys, want = random.Random(7), SortedInts(), []
    for _ in range(3_000):
        roll = rng.random()
        if roll < 0.5 or not want:
            key = rng.randrange(10**6)
            if key not in want:
                keys.add(key)
                want.append(key)
                want.sort()
        elif roll < 0.75:
            key = rng.choice(want)
            keys.remove(key)
            want.remove(key)
        else:   # take the key at a place found with after(), as a pass does
            key = rng.choice(want)
            at, i = keys.after(key - 1)
            assert keys.buckets[at][i] == key
            at, i = keys.take(at, i)
            want.remove(key)
            later = [k for k in want if k > key]
            assert (keys.buckets[at][i] if at < len(keys.buckets) else None) == (later[0] if later else None)
        assert list(keys) == want and len(keys) == len(want)
        assert all(bucket and bucket[-1] == top for bucket, top in zip(keys.buckets, keys.maxes, strict=True))
        assert all(len(bucket) <= 4 for bucket in keys.buckets)
    with pytest.raises(KeyError):
        keys.remove(10**6 + 1)


@pytest.mark.parametrize("load", [1, 3])
def test_a_pass_walks_the_same_with_buckets_that_split_under_it(load, monkeypatch):
    """A preemption adds its victims behind the job it starts, splitting the bucket the pass is
    walking; with buckets of a few keys that happens at almost every preemption, and the replay
    decides every job as with the default buckets."""
    import random

    from gqa.sim.sorted_ints import SortedInts

    rng = random.Random(load)
    jobs = [job(f"j{n}", round(rng.uniform(0, 5_000)), rng.choice([30, 300, 3_000]),
                gpus=rng.choice([1, 1, 2, 4]), seq=n) for n in range(200)]

    def replay():
        out, result = las(6, *jobs, threshold=200.0, starve=2.0, restart=10.0)
        return [(o.id, o.start, o.end, o.attempts, o.preemptions) for o in out.values()], result

    default, result = replay()
    assert sum(o.preemptions for o in result.outcomes) > 50
    monkeypatch.setattr(SortedInts, "LOAD", load)
    assert replay()[0] == default
