"""benchmarks/simulate_traces.py: the whole table (traces x estimates x loads x
policies) from one run, its goals as the ratios they are judged by, and its plot,
on a small trace in the Alibaba format."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from gqa.sim.policies import NAMES

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
           "creation_time,deletion_time,scheduled_time")


def alibaba_trace(folder: Path, pods: int = 80) -> None:
    rng = random.Random(7)
    rows, t = [COLUMNS], 0.0
    for n in range(pods):
        t += rng.expovariate(1 / 200)
        run = rng.choice([60, 300, 1_800, 7_200, 36_000])
        qos = rng.choice(["BE", "BE", "Burstable", "LS"])
        rows.append(f"pod-{n},1000,1024,{rng.choice([1, 1, 1, 2, 4])},1000,,{qos},Succeeded,{t:.0f},{t + run:.0f},"
                    f"{t:.0f}")
    place = folder / "alibaba-gpu-v2023"
    place.mkdir(parents=True)
    (place / "openb_pod_list_default.csv").write_text("\n".join(rows) + "\n")


@pytest.mark.slow
def test_one_run_gives_every_row_its_goals_and_draws_the_plot(tmp_path):
    alibaba_trace(tmp_path)
    plot = tmp_path / "table.png"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulate_traces.py"), "--traces", str(tmp_path),
                           "--only", "alibaba", "--targets", "0.8,0.95", "--estimates", "model,max", "--workers", "1",
                           "--eta-jobs", "20", "--plot", str(plot), "-o", "json"],
                          capture_output=True, text=True, timeout=300, check=True)
    out = json.loads(done.stdout)
    rows = out["rows"]
    # the trace's three qos tiers, then every job in one, at every mode and load
    assert [(r["priorities"], r["tiers"], r["estimates"], r["target"]) for r in rows] == [
        (p, tiers, mode, load) for p, tiers in (("trace", 3), ("one", 1)) for mode in ("model", "max")
        for load in (0.8, 0.95)]
    for kept, one in zip(rows[:4], rows[4:]):
        assert one["gpus"] == kept["gpus"]
        # fifo never reads a tier: the same replay, only counted by other tiers
        assert {**one["policies"]["fifo"], "tier_mean_jct": None} == {**kept["policies"]["fifo"], "tier_mean_jct": None}
    for row in rows:
        # las-tiers only where the jobs are in several tiers: in one it replays as las
        expected = NAMES if row["tiers"] > 1 else [n for n in NAMES if n != "las-tiers"]
        assert sorted(row["policies"]) == sorted(expected) and row["jobs"] == 80
        if row["tiers"] > 1:
            assert row["goals"]["slice_jct_vs_las_tiers"] == pytest.approx(
                row["policies"]["gqa-slice"]["mean_jct"] / row["policies"]["las-tiers"]["mean_jct"])
        else:
            assert row["goals"]["slice_jct_vs_las_tiers"] is None
        gqa, las, oracle, easy = (row["policies"][p] for p in ("gqa", "las", "sjf-oracle", "fifo-easy"))
        goals = row["goals"]
        assert goals["jct_vs_las"] == pytest.approx(gqa["mean_jct"] / las["mean_jct"])
        assert goals["jct_vs_oracle"] == pytest.approx(gqa["mean_jct"] / oracle["mean_jct"])
        assert goals["worst_team_vs_fifo_easy"] == pytest.approx(gqa["max_team_slowdown"] / easy["max_team_slowdown"])
        assert goals["util_points_vs_fifo_easy"] == pytest.approx((gqa["utilisation"] - easy["utilisation"]) * 100)
        tiers = {"high", "normal", "low"} if row["priorities"] == "trace" else {"normal"}
        assert set(gqa["tier_mean_jct"]) == tiers and all(v > 0 for v in gqa["tier_mean_jct"].values())
        assert gqa["eta_checked"] > 0 and all(0 <= s < 300 for s in row["cpu_s"].values())
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unknown_mode_or_policy_is_one_line_and_exit_2(tmp_path):
    for flag, value, says in (("--estimates", "guess", "guess"), ("--policies", "gqa,lottery", "lottery"),
                              ("--priorities", "trace,flat", "flat"), ("--backfill-by", "guesses", "guesses"),
                              ("--eta-for", "gqa,las", "las"),
                              # a zero target divided by zero, a NaN one raised: tracebacks before
                              ("--targets", "0.85,0", "--targets: each a number above 0 (0.85 for 85%), not '0'"),
                              ("--targets", "nan", "not 'nan'"), ("--only", "philly", "unknown trace philly"),
                              ("--workers", "0", "--workers must be at least 1, got 0"),
                              ("--eta-jobs", "-1", "--eta-jobs must be at least 0, got -1"),
                              # a matplotlib traceback after the whole table, before
                              ("--plot", "table.txt", "--plot table.txt: name a .png, .svg or .pdf file")):
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulate_traces.py"), "--traces",
                               str(tmp_path), flag, value], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and says in done.stderr, done.stderr
    # no trace in the folder: each skipped, and nothing to tabulate (an empty max() raised before)
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulate_traces.py"), "--traces",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "not found" in done.stderr and "no trace to replay" in done.stderr


def test_backfill_by_predictions_reaches_gqa_and_not_the_baselines(tmp_path):
    alibaba_trace(tmp_path, pods=800)   # past 200 finished jobs, the teams have run-time ratios to predict with
    common = [sys.executable, str(ROOT / "benchmarks" / "simulate_traces.py"), "--traces", str(tmp_path), "--only",
              "alibaba", "--targets", "0.95", "--estimates", "max", "--priorities", "trace", "--workers", "1",
              "--eta-jobs", "0", "--policies", "fifo-easy,gqa", "-o", "json"]
    runs = {}
    for by in ("limits", "predictions"):
        done = subprocess.run(common + ["--backfill-by", by], capture_output=True, text=True, timeout=300, check=True)
        runs[by] = json.loads(done.stdout)["rows"][0]
    assert (runs["limits"]["backfill_by"], runs["predictions"]["backfill_by"]) == ("limits", "predictions")
    assert runs["limits"]["policies"]["fifo-easy"] == runs["predictions"]["policies"]["fifo-easy"]
    assert runs["limits"]["policies"]["gqa"]["mean_jct"] != runs["predictions"]["policies"]["gqa"]["mean_jct"]


def test_eta_for_checks_the_etas_of_the_policies_named(tmp_path):
    # gqa-slice's ETAs checked, gqa's not (none counted)
    alibaba_trace(tmp_path, pods=300)
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulate_traces.py"), "--traces", str(tmp_path),
                           "--only", "alibaba", "--targets", "0.95", "--estimates", "model", "--priorities", "trace",
                           "--workers", "1", "--policies", "gqa,gqa-slice", "--eta-for", "gqa-slice", "-o", "json"],
                          capture_output=True, text=True, timeout=300, check=True)
    [row] = json.loads(done.stdout)["rows"]
    assert row["policies"]["gqa-slice"]["eta_checked"] > 0
    assert row["policies"]["gqa"]["eta_checked"] == 0


def test_missing_traces_say_where_to_get_them(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulate_traces.py"), "--traces",
                           str(tmp_path), "--only", "itp"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"skipping itp: {tmp_path / 'itp-2021' / 'raw-traces.tar.gz'} not found (use --traces DIR)",
        "no trace to replay: see the messages above; the README's \"Getting the traces\" (under \"Simulating a "
        "policy on real traces\") says where to download each and where to put it"]


def test_a_policy_named_twice_is_refused(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulate_traces.py"), "--traces",
                           str(tmp_path), "--policies", "fifo,gqa,fifo"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--policies names fifo twice" in done.stderr
