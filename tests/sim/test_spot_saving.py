"""benchmarks/spot_saving.py on a tiny trace: its table's arithmetic against
the all-on-demand run, and the goal's verdict."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.spot_saving import (
    GOAL_PENALTY,
    GOAL_SAVING,
    INSTANCE,
    compare,
    run_trace,
    smallest_pool,
    table,
    verdict,
)


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "jobs.csv"
    rows = [f"j{i},{i * 900},{3600 * (1 + i % 5)},{1 + i % 2}" for i in range(40)]
    path.write_text("id,submit_time,duration,gpus\n" + "\n".join(rows) + "\n")
    return str(path)


def test_the_table_is_each_spot_run_against_all_on_demand(trace):
    result = run_trace(trace, limit=30, seed=1, workers=1, mixes=(0.5, 1.0), levels=("high",))
    rows = result["rows"]
    assert [(r["spot_share"], r["notice"]) for r in rows] == [(0.0, False), (0.5, False), (0.5, True),
                                                            (1.0, False), (1.0, True)]
    base = rows[0]
    assert base["jobs"] == 30 and base["reclaims"] == 0 and base["lost_gpu_hours"] == pytest.approx(0)
    # all on demand pays the on-demand price for exactly the GPU time the jobs needed
    assert base["cost"] == pytest.approx(base["needed_gpu_hours"] * INSTANCE.on_demand_per_gpu_hour)
    for r in rows:
        assert r["saving"] == pytest.approx(1 - r["cost"] / base["cost"])
        assert r["jct_ratio"] == pytest.approx(r["mean_jct"] / base["mean_jct"])
        assert r["reclaims_per_job"] == pytest.approx(r["reclaims"] / r["jobs"])
        assert r["lost_share"] == pytest.approx(r["lost_gpu_hours"] / r["needed_gpu_hours"])
        assert r["unfinished"] == 0 and r["lost_gpu_hours"] >= 0
    all_spot = rows[-1]
    assert all_spot["reclaims"] > 0                # about one reclaim per 2 hours run, on hours-long jobs
    # all spot pays the spot price for all the GPU time it held: the jobs' and the lost
    held = all_spot["needed_gpu_hours"] + all_spot["lost_gpu_hours"]
    assert all_spot["cost"] == pytest.approx(held * INSTANCE.spot_per_gpu_hour)
    lines = table(result, "jobs.csv")
    assert len(lines) == 2 + len(rows) + 1 and lines[-1].strip() == result["verdict"]


def row(share, saving, ratio, unfinished=0):
    return {"spot_share": share, "level": "high", "notice": True, "saving": saving, "jct_ratio": ratio,
            "unfinished": unfinished}


@pytest.mark.parametrize("rows, says", [
    ([row(1.0, GOAL_SAVING, GOAL_PENALTY)], "goal met by 1 of 1 mixes; the best: 100% spot"),
    ([row(1.0, 0.77, 1.5), row(0.5, 0.4, 1.02)], "goal not met; the most saved within a 10% JCT penalty: 50% spot"),
    ([row(1.0, 0.77, 1.0, unfinished=3)], "goal not met"),
])
def test_the_verdict(rows, says):
    assert verdict(rows).startswith(says)


def test_compare_needs_the_all_on_demand_run():
    with pytest.raises(ValueError):
        compare([{"spot_share": 0.5}])


def test_the_smaller_pool_of_every_mix():
    assert smallest_pool(40, (0.25, 0.5, 1.0)) == 10
    assert smallest_pool(13, (1.0,)) == 13


def test_bad_input_and_no_trace_exit_2(tmp_path):
    script = str(Path(__file__).resolve().parents[2] / "benchmarks" / "spot_saving.py")
    for flag, value, says in (("--only", "philly", "unknown trace philly"),   # a KeyError before
                              ("--workers", "0", "--workers must be at least 1, got 0")):
        done = subprocess.run([sys.executable, script, "--traces", str(tmp_path), flag, value],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and says in done.stderr, done.stderr
    done = subprocess.run([sys.executable, script, "--traces", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)   # exit 0 with nothing done, before
    assert done.returncode == 2 and "not found" in done.stderr and "no trace to replay" in done.stderr
