"""The order `gqa queue` lists is the order jobs start on a real daemon."""

from dataclasses import replace

import pytest

from gqa.scheduling.snapshot import Weights

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# vision's jobs run 0.6 s, nlp's 1.5 s, of a 3 s wall time: after one finished job each, their teams'
# histories say so (ratios 0.2 and 0.5), so the replay charges each run to its team's fair share as the
# daemon will, and every choice between the two teams differs by 0.3 GPU-seconds at least
VISION, NLP, LIMIT = ["sleep", "0.6"], ["sleep", "1.5"], {"wall_time": "3s"}


def test_jobs_start_in_the_order_gqa_queue_lists_them(make_queue):
    queue = make_queue(gpus=1)
    store = queue.backend.store
    # fair share alone orders the two teams (no age or duration factor to weigh against it)
    store.set_policy(replace(store.policy(), weights=Weights(fair_share=1.0, age=0.0, size=0.0, duration=0.0)))
    queue.wait(queue.submit(VISION, team="vision", limits=LIMIT) + queue.submit(NLP, team="nlp", limits=LIMIT))
    [blocker] = queue.submit(["sh", "-c", "while [ ! -e release ]; do sleep 0.05; done"], team="infra",
                             limits={"wall_time": "10s"})
    queue.wait(blocker, states=("RUNNING",))
    vision = queue.submit(VISION, team="vision", array="0-2", limits=LIMIT)
    nlp = queue.submit(NLP, team="nlp", array="0-2", limits=LIMIT)
    data = queue.cli_json("queue")
    listed = data["pending"]
    [running] = data["running"]     # the blocker: its limit, and the time left before it (limit - elapsed)
    assert running["id"] == blocker and running["time_limit"] == 10 and 0 < running["time_left"] < 10
    ids = [p["id"] for p in listed]
    # this pass ranks vision's whole burst first (it has used less); each run charges its team, so the
    # bursts start interleaved (about v v n v n n), and the queue says so before they start
    assert ids not in (vision + nlp, nlp + vision) and ids[0] == vision[0]
    assert [p["position"] for p in listed] == list(range(1, 7)) and all(p["eta"] for p in listed)

    (queue.home / "release").touch()
    jobs = queue.wait(vision + nlp, timeout=60)
    assert [j.id for j in sorted(jobs, key=lambda j: (j.first_start, j.seq))] == ids
