"""benchmarks/seed_spread.py: the table's rows under several seeds, each goal counted per
seed and per row, on a small trace in the Alibaba format."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sim.test_simulate_traces_benchmark import alibaba_trace

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "seed_spread.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

from gqa.scheduling.snapshot import Weights  # noqa: E402
from seed_spread import seeds_of, weights_of  # noqa: E402


@pytest.mark.parametrize("text, seeds", [("0-3", [0, 1, 2, 3]), ("7", [7]), ("0,2,5", [0, 2, 5]),
                                         ("1-2,9", [1, 2, 9])])
def test_seeds_are_ranges_or_lists(text, seeds):
    assert seeds_of(text) == seeds


@pytest.mark.parametrize("text", ["", "a-b", "3-1", "0,0", "-1", "1-"])
def test_bad_seeds_are_refused(text):
    with pytest.raises(ValueError, match="seeds must be"):
        seeds_of(text)


def test_weights_are_duration_age_fair_share_sets():
    assert weights_of("5:1:1,8:0.5:0") == [Weights(duration=5, age=1, fair_share=1),
                                           Weights(duration=8, age=0.5, fair_share=0)]


@pytest.mark.parametrize("text", ["5:1", "5:1:1:1", "a:1:1", "5:-1:1", "inf:1:1", "5:nan:1", "5:1:1,"])
def test_bad_weights_are_refused(text):
    with pytest.raises(ValueError, match="weights must be"):
        weights_of(text)


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for flag, value in (("--seeds", "x"), ("--only", "philly"), ("--estimates", "guess"), ("--weights", "5:1"),
                        ("--backfill-by", "guesses"), ("--targets", "0"), ("--workers", "0")):
        done = subprocess.run([sys.executable, str(SCRIPT), "--traces", str(tmp_path), flag, value],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and value in done.stderr, done.stderr
    done = subprocess.run([sys.executable, str(SCRIPT), "--traces", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "not found" in done.stderr and "no trace to replay" in done.stderr


@pytest.mark.slow
def test_every_seed_counts_the_goals_of_the_same_rows(tmp_path):
    alibaba_trace(tmp_path, pods=300)
    done = subprocess.run([sys.executable, str(SCRIPT), "--traces", str(tmp_path), "--seeds", "0,1,2",
                           "--targets", "0.95", "--estimates", "model", "--workers", "1", "-o", "json",
                           "--weights", "5:1:1,5:1:0"],
                          capture_output=True, text=True, timeout=300, check=True)
    out = json.loads(done.stdout)
    assert out["seeds"] == [0, 1, 2] and set(out["per_seed"]) == {"0", "1", "2"}
    # one row per tiers choice, each replayed under every seed
    assert [(r["trace"], r["estimates"], r["tiers"], r["target"]) for r in out["per_row"]] == [
        ("alibaba", "model", 3, 0.95), ("alibaba", "model", 1, 0.95)]
    for row in out["per_row"]:
        las = row["goals"]["jct_vs_las"]
        assert las["of"] == 3 and 0 <= las["met"] <= 3 and las["least"] <= las["median"] <= las["most"]
        # the oracle's goal is judged under today's estimates (model): here, in every seed
        assert row["goals"]["jct_vs_oracle"]["of"] == 3
        assert ("slice_jct_vs_las_tiers" in row["goals"]) == (row["tiers"] > 1)
    # the two views count the same: a row's seeds met are its seeds' counts added up
    for priorities, row in zip(("trace", "one"), out["per_row"]):
        for goal, cell in row["goals"].items():
            counted = [out["per_seed"][seed][priorities][goal] for seed in ("0", "1", "2")]
            assert all(judged == 1 for _, judged in counted)
            assert sum(met for met, _ in counted) == cell["met"], goal
        assert "eta_error_of_wait" not in out["per_seed"]["0"][priorities]   # no ETAs asked for: not judged
    # the default's counts, then each choice's: the default again, replayed anew, counts the same
    default, again, unfair = out["weights"]
    assert default["weights"] == again["weights"] == {"duration": 5.0, "age": 1.0, "fair_share": 1.0}
    assert again["met"] == default["met"]
    assert default["met"]["trace"]["jct_vs_las"][0] == out["per_row"][0]["goals"]["jct_vs_las"]["met"]
    assert unfair["weights"]["fair_share"] == 0.0 and unfair["met"]["trace"]["jct_vs_las"][1] == 3
    # the seeds draw other wall times and teams: the ratios differ between them
    worst = out["per_row"][0]["goals"]["worst_team_vs_fifo_easy"]
    assert worst["least"] < worst["most"]
