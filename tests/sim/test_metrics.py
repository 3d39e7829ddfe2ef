"""Metrics on small hand-built results."""

import pytest

from gqa.sim.engine import Outcome, SimResult
from gqa.sim.metrics import jain, percentile, ratios, summarize
from gqa.sim.pools import Pool, cost


def outcome(id, team, gpus, submit, start, run, wall=None):
    return Outcome(id=id, team=team, gpus=gpus, submit=submit, duration=run, wall_time=wall or run,
                   start=start, end=start + run, attempts=1, gpu_seconds=gpus * run)


def test_percentile_interpolates_between_ranks():
    values = [10.0, 0.0, 30.0, 20.0]
    assert percentile(values, 0) == 0 and percentile(values, 100) == 30
    assert percentile(values, 50) == 15.0
    assert percentile(values, 90) == pytest.approx(27.0)
    assert percentile([], 50) is None


def test_jain_index():
    assert jain([2.0, 2.0, 2.0]) == 1.0
    assert jain([1.0, 0.0, 0.0, 0.0]) == 0.25
    assert jain([1.0, 3.0]) == pytest.approx(16 / 20)
    assert jain([]) is None


def test_summary_of_a_tiny_run():
    # 2 GPUs; makespan 0..400
    result = SimResult(policy="x", gpus=2, outcomes=[
        outcome("a", "t1", 2, submit=0, start=0, run=100),      # wait 0, JCT 100, slowdown 1
        outcome("b", "t1", 1, submit=0, start=100, run=100),    # wait 100, JCT 200, slowdown 2
        outcome("c", "t2", 1, submit=50, start=100, run=300),   # wait 50, JCT 350, slowdown 350/300
        outcome("d", "t2", 1, submit=60, start=64, run=2),      # wait 4, JCT 6 -> bounded: 6/10 -> 1
    ])
    s = summarize(result)
    assert s["mean_wait"] == pytest.approx((0 + 100 + 50 + 4) / 4)
    assert s["p50_wait"] == pytest.approx(27.0)
    assert s["mean_jct"] == pytest.approx((100 + 200 + 350 + 6) / 4)
    assert s["makespan"] == 400
    assert s["utilisation"] == pytest.approx((200 + 100 + 300 + 2) / (2 * 400))
    assert s["team_slowdown"] == pytest.approx({"t1": 1.5, "t2": (350 / 300 + 1) / 2})
    assert s["max_team_slowdown"] == pytest.approx(1.5)
    t1, t2 = 1.5, (350 / 300 + 1) / 2
    assert s["jain_fairness"] == pytest.approx((t1 + t2) ** 2 / (2 * (t1 * t1 + t2 * t2)))
    assert s["eta_median_abs_error"] is None and s["eta_p90_abs_error"] is None
    assert (s["jobs"], s["finished"], s["unfinished"], s["preemptions"]) == (4, 4, 0, 0)


def test_eta_errors_and_unfinished_jobs():
    a = outcome("a", "t", 1, submit=0, start=100, run=10)
    a.eta = 40.0
    b = outcome("b", "t", 1, submit=0, start=0, run=10)
    b.eta = 0.0
    stuck = Outcome(id="c", team="t", gpus=1, submit=0, duration=5, wall_time=5)
    s = summarize(SimResult(policy="x", gpus=1, outcomes=[a, b, stuck]))
    assert s["eta_median_abs_error"] == 30.0 and s["eta_p90_abs_error"] == pytest.approx(54.0)
    assert (s["finished"], s["unfinished"]) == (2, 1)


def test_ratios_against_fifo():
    out = ratios({"fifo": {"mean_wait": 100.0, "utilisation": 0.5, "cost": None},
                  "gqa": {"mean_wait": 25.0, "utilisation": 0.6, "cost": None}})
    assert out["gqa"]["mean_wait"] == 0.25 and out["gqa"]["utilisation"] == pytest.approx(1.2)
    assert out["gqa"]["cost"] is None and "fifo" not in out


def test_cost_and_spot_saving():
    pools = [Pool("od", "a100", False, 4, 4.0), Pool("spot", "a100", True, 4, 1.0, 0.1),
             Pool("spot-h100", "h100", True, 4, 3.0)]
    assert cost({"od": 7200.0, "spot": 3600.0}, pools) == {"cost": 9.0, "spot_saving": 3.0}
    assert cost({"spot-h100": 3600.0}, pools) == {"cost": 3.0, "spot_saving": None}  # no on-demand price


def test_utilisation_during_arrivals_leaves_out_the_drain():
    # 1 GPU; arrivals at 0 and 100; the second job runs until 1000
    jobs = [outcome("a", "t", 1, 0, 0, 50), outcome("b", "t", 1, 100, 100, 900)]
    result = SimResult(policy="x", gpus=1, outcomes=jobs, arrival_window=(0.0, 100.0), gpu_seconds_in_window=50.0)
    s = summarize(result)
    assert s["utilisation"] == pytest.approx(950 / 1000)
    assert s["utilisation_during_arrivals"] == pytest.approx(0.5)


def test_as_it_ran_measures_the_traces_own_starts_as_a_replay_is_measured():
    from gqa.sim.metrics import recorded
    from gqa.sim.trace import TraceJob
    from gqa.sim.workload import SimJob

    def ran(id, submit, start, run, team="t1"):
        trace = TraceJob(id=id, submit_time=1_000 + submit, duration=run, gpus=1, team=team,
                         started=None if start is None else 1_000 + start,
                         ended=None if start is None else 1_000 + start + run)
        return trace, SimJob(id=id, seq=0, submit=submit, duration=run, gpus=1, team=team, user="u", tier=1,
                             wall_time=run)

    pairs = [ran("a", 0, 0, 100), ran("b", 0, 100, 100), ran("c", 50, 100, 300, "t2"), ran("d", 60, 64, 2, "t2"),
             ran("e", 0, None, 10)]   # the trace records no start for e: left out of what it measures
    traces, jobs = [t for t, _ in pairs], [j for _, j in pairs]
    got = recorded(jobs, traces)
    mirror = summarize(SimResult(policy="x", gpus=2, outcomes=[   # the same starts, replayed
        outcome("a", "t1", 1, 0, 0, 100), outcome("b", "t1", 1, 0, 100, 100), outcome("c", "t2", 1, 50, 100, 300),
        outcome("d", "t2", 1, 60, 64, 2)]))
    assert got["jobs"] == 4
    for key in ("mean_wait", "p50_wait", "p95_wait", "p99_wait", "mean_jct", "p99_jct", "mean_slowdown",
                "makespan", "team_slowdown", "max_team_slowdown", "jain_fairness"):
        assert got[key] == pytest.approx(mirror[key]), key
    assert recorded(jobs[:1], traces[1:]) is None            # none of the replayed jobs is recorded
    assert recorded(jobs, [t for t in traces if t.id == "e"]) is None


def test_most_gpus_held_at_once_as_the_trace_ran():
    from gqa.sim.metrics import most_held
    from gqa.sim.trace import TraceJob

    def ran(start, end, gpus):
        return TraceJob(id=f"{start}-{gpus}", submit_time=0, duration=end - start, gpus=gpus, started=start, ended=end)

    # 2 and 3 overlap (5); the 4-GPU job starts as they end: a GPU freed and taken at one moment is held once
    assert most_held([ran(0, 100, 2), ran(50, 100, 3), ran(100, 200, 4)]) == 5
    assert most_held([ran(0, 10, 1), ran(10, 20, 1)]) == 1
    assert most_held([TraceJob(id="x", submit_time=0, duration=5, gpus=8)]) is None   # no runs recorded
    assert most_held(iter([ran(0, 10, 4), ran(20, 30, 4)])) == 4   # read once: any iterable, a generator too


@pytest.mark.parametrize("runs, most", [
    (((0, 10), (100, 110)), 4),   # requeued: waiting again while the 4-GPU job ran, it held none
    (((0, 60), (100, 110)), 5),   # its first attempt overlaps the 4-GPU job
    (((0, 10), (45, 55)), 5),     # and so does its second
    (None, 5),                    # one run from its start to its end
])
def test_a_requeued_job_holds_its_gpus_only_while_an_attempt_runs(runs, most):
    from gqa.sim.metrics import most_held
    from gqa.sim.trace import TraceJob

    ran = sum(end - start for start, end in runs or ((0, 110),))
    requeued = TraceJob(id="r", submit_time=0, duration=ran, gpus=1, started=0, ended=110, runs=runs)
    assert most_held([requeued, TraceJob(id="big", submit_time=0, duration=50, gpus=4, started=50, ended=100)]) == most
