"""benchmarks/eta_error_sources.py: the ETA's error as in production, with its waits stretched by the
best constant and each band of them moved by its best shift, with what it cannot know handed over
(true run times, later arrivals, both), and with those drawn instead (the median of several forward
replays), on a small trace in the Alibaba format."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sim.test_simulate_traces_benchmark import COLUMNS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "eta_error_sources.py"


def bursty_trace(folder: Path, bursts: int = 10, size: int = 12) -> None:
    """Pods in the Alibaba format arriving `size` at a time every hour: a queue forms at each burst."""
    rng = random.Random(3)
    rows = [COLUMNS]
    for b in range(bursts):
        for n in range(size):
            t, run = b * 3600 + n, rng.choice([600, 1_800, 3_600, 7_200])
            rows.append(f"pod-{b}-{n},1000,1024,{rng.choice([1, 2, 4])},1000,,BE,Succeeded,{t},{t + run},{t}")
    place = folder / "alibaba-gpu-v2023"
    place.mkdir(parents=True)
    (place / "openb_pod_list_default.csv").write_text("\n".join(rows) + "\n")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_handed_what_it_cannot_know_the_forward_replay_predicts_the_starts(tmp_path):
    bursty_trace(tmp_path)
    done = run("--traces", str(tmp_path), "--trace", "alibaba", "--jobs", "120", "--target", "0.95",
               "--estimates", "model", "--draws", "3", "-o", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    rows = {r["handed"]: r for r in out["rows"]}
    stretched = [name for name in rows if name.startswith("none, waits stretched x")]
    drawn = ["run times drawn, median of 3", "later arrivals drawn, median of 3", "both drawn, median of 3"]
    assert list(rows) == ["as in production", *stretched, "none, each band shifted best",
                          "none, each band shifted as learned", "true run times", "later arrivals", "both", *drawn]
    assert len(stretched) == 1
    production, both = rows["as in production"], rows["both"]
    # the best of the stretches, 1 among them, and the best shift of each band, 0 among them, chosen on
    # the outcomes: no worse than none
    assert rows[stretched[0]]["eta_error_of_wait"] <= production["eta_error_of_wait"]
    assert rows["none, each band shifted best"]["eta_error_of_wait"] <= production["eta_error_of_wait"] + 1e-9
    assert production["waited"] > 10 and production["eta_error_of_wait"] > 0.1   # jobs waited, and ETAs missed
    # the same replay, handed every run time and every later arrival: it is the production pass run
    # forward, but for the fair share it books as it goes (two 4-GPU pods of different teams swap here)
    alone = min(rows["true run times"]["eta_error_of_wait"], rows["later arrivals"]["eta_error_of_wait"])
    assert both["eta_error_of_wait"] < 0.5 * alone
    assert both["eta_error_of_wait"] < 0.25 * production["eta_error_of_wait"]
    assert all(r["waited"] == production["waited"] and r["waits_beyond_horizon"] == 0 for r in rows.values())
    # drawn, the later arrivals queue ahead of what waits, and its predictions come later than production's;
    # drawn run times move them too (each row its own replays, not a copy of production's)
    assert rows[drawn[1]]["mean_signed_error_s"] > production["mean_signed_error_s"]
    assert rows[drawn[0]]["eta_error_of_wait"] != production["eta_error_of_wait"]


def test_bad_input_is_refused_with_a_message(tmp_path):
    for args, words in ((("--target", "1.5"), "--target"), (("--estimates", "guess"), "guess"),
                        (("--draws", "-1"), "--draws"),
                        (("--traces", str(tmp_path)), "not found")):
        done = run(*args)
        assert done.returncode == 2 and words in done.stderr and not done.stdout


def test_a_band_holds_the_waits_within_one_doubling():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from eta_error_sources import wait_band, _shifted_by_band

    assert [wait_band(w) for w in (0.0, 59.9, 60.0, 119.9, 120.0, 239.0, 240.0, 3600.0)] == [0, 0, 1, 1, 2, 2, 3, 6]

    class Done:   # what the replay's outcomes give the correction: submitted, predicted and real start
        def __init__(self, predicted_wait: float, wait: float):
            self.submit, self.eta, self.start = 1000.0, 1000.0 + predicted_wait, 1000.0 + wait

    # two bands: 1-2 minutes (errors +60, +60, +600: shifted +60) and 16-32 (errors -300, +100: the midpoint)
    waited = [Done(90, 150), Done(100, 160), Done(110, 710), Done(1000, 700), Done(1100, 1200)]
    assert _shifted_by_band(waited) == [1000 + 150, 1000 + 160, 1000 + 170, 1000 + 900, 1000 + 1000]


def test_a_band_is_shifted_by_the_errors_of_the_jobs_started_before_the_prediction():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from eta_error_sources import _shifted_as_learned

    class Done:
        def __init__(self, job_id: str, submit: float, predicted_wait: float, wait: float):
            self.id, self.submit, self.eta, self.start = job_id, submit, submit + predicted_wait, submit + wait

    # all in the band of 1-2 minutes predicted but w3: errors p1 +60 (started at 150), w0 +100 (210),
    # p2 +60 (260), w1 +250 (850), p3 +200 (900)
    past = [Done("p1", 0, 90, 150), Done("p2", 100, 100, 160), Done("p3", 600, 100, 300)]
    early = Done("w0", 10, 100, 200)     # submitted before any start: as predicted
    w1 = Done("w1", 500, 100, 350)       # p1, w0, p2 known: the median, +60
    w2 = Done("w2", 1000, 110, 130)      # all five known: +100
    w3 = Done("w3", 5000, 3000, 3500)    # its band (32-64 minutes) has none: as predicted
    waited = [w2, early, w3, w1]         # answered in this order, whatever order they are learned in
    outcomes = past + waited
    assert _shifted_as_learned(outcomes, waited, least=2) == [w2.eta + 100, early.eta, w3.eta, w1.eta + 60]
    # a band with fewer known than `least` is not moved; only the last `recent` to start count
    assert _shifted_as_learned(outcomes, waited, least=4) == [w2.eta + 100, early.eta, w3.eta, w1.eta]
    assert _shifted_as_learned(outcomes, [w2], least=1, recent=1) == [w2.eta + 200]
    assert _shifted_as_learned(outcomes, [w2], least=1, recent=2) == [w2.eta + 225]


def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import eta_error_sources
    return eta_error_sources


def ended(job_id: str, team: str, start: float, end: float, wall_time: float = 100.0, **fields):
    from gqa.sim.engine import Outcome

    return Outcome(id=job_id, team=team, gpus=1, submit=0.0, duration=end - start, wall_time=wall_time,
                   start=start, end=end, attempts=fields.pop("attempts", 1), **fields)


def test_a_teams_history_holds_its_first_attempts_that_ended_in_time_by_when_they_ended():
    history = bench().History([
        ended("late", "a", 0.0, 200.0, wall_time=1000.0),        # 0.2, ended last
        ended("early", "a", 50.0, 100.0),                        # 0.5
        ended("killed", "a", 0.0, 100.0, timed_out=True),        # at its limit: not sampled
        ended("again", "a", 0.0, 150.0, attempts=2),             # a second attempt: not sampled
        ended("other", "b", 0.0, 10.0),
    ])
    assert history.at("a", 99.0) == []
    assert history.at("a", 100.0) == [0.5]
    assert history.at("a", 1e9) == [0.5, 0.2]
    assert history.at("b", 1e9) == [0.1] and history.at("c", 1e9) == []


def test_a_history_holds_a_teams_last_runs_only():
    module = bench()
    history = module.History([ended(f"j{i}", "a", float(i), float(i) + 10.0) for i in range(module.RECENT + 5)])
    assert len(history.at("a", 1e9)) == module.RECENT
    assert len(history.at("a", 14.0)) == 5   # the runs ended by then


def test_a_running_job_is_drawn_among_the_runs_that_lasted_longer_than_it_has_run():
    from tests.builders import pending, running, snapshot

    module = bench()
    # the team ran 50 and 500 of its 1,000-second limits; the run going has run 100 already, so it runs
    # 500 in every draw and the job behind it starts then (production ends it at the mean, 275)
    history = module.History([ended("short", "a", 0.0, 50.0, wall_time=1000.0),
                              ended("long", "a", 0.0, 500.0, wall_time=1000.0)])
    snap = snapshot(1, now=600.0, running=[running("going", team="a", started_at=500.0, wall_time=1000.0)],
                    pending=[pending("next", team="a", submitted_at=600.0, wall_time=1000.0)])
    drawn = module.Drawn(history, [], [0.0], 3600.0, 5, runs=True, arrivals=False)
    assert drawn.predict(snap, ["next"], {}, {"a": 0.275}, None) == {"next": 1000.0}
    # with no run of the team longer than it has run, the run is left to production's end (its limit here)
    snap = snapshot(1, now=1100.0, running=[running("going", team="a", started_at=500.0, wall_time=1000.0)],
                    pending=[pending("next", team="a", submitted_at=1100.0, wall_time=1000.0)])
    assert drawn.predict(snap, ["next"], {}, {"a": 0.275}, None) == {"next": 1500.0}


def test_drawn_arrivals_are_a_window_of_the_past_shifted_to_begin_now_as_new_jobs():
    from gqa.sim.workload import SimJob

    module = bench()
    jobs = [SimJob(id=f"p{i}", team="a", user="u", tier=1, gpus=1, submit=at, duration=50.0, wall_time=100.0, seq=i)
            for i, at in enumerate((0.0, 100.0, 200.0, 300.0))]
    drawn = module.Drawn(module.History([]), jobs, [j.submit for j in jobs], 1000.0, 2, runs=False, arrivals=True)
    coming = drawn._coming(300.0, random.Random(0), 1, {}, {})
    # the whole past (shorter than the window) again, from now on; what arrives at now is not past yet
    assert [(j.id, j.begin, j.submitted_at) for j in coming] == [("p0~1", 300.0, 300.0), ("p1~1", 400.0, 400.0),
                                                                   ("p2~1", 500.0, 500.0)]
    assert min(j.seq for j in coming) > max(j.seq for j in jobs)
