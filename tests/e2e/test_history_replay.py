"""A real daemon's history, exported and replayed: `gqa history -o csv` written by the queue that ran
the jobs is a trace `gqa simulate` reads, with what happened beside each policy's replay."""

import csv
import io

import pytest

pytestmark = pytest.mark.e2e


def test_a_queues_own_history_replays_beside_what_it_did(queue, tmp_path):
    ran = [queue.submit(["sleep", "0.4"], resources={"gpus": 2}, limits={"wall_time": "10m"}, priority=p)[0]
           for p in ("normal", "normal", "high", "low", "normal")]   # 5 gangs of 2 on 4 GPUs: some wait
    [cancelled] = queue.submit(["sleep", "30"], resources={"gpus": 1}, hold=True)
    queue.cli("cancel", cancelled, check=True)
    queue.wait(ran + [cancelled])
    export = queue.cli("history", "--since", "1h", "--limit", "0", "-o", "csv", check=True).stdout
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(export))}
    assert {rows[i]["priority"] for i in ran} == {"high", "normal", "low"}
    assert {rows[i]["wall_time"] for i in ran} == {"600"}
    (tmp_path / "history.csv").write_text(export)
    out = queue.cli_json("simulate", str(tmp_path / "history.csv"), "--gpus", "4", "--policies", "fifo,gqa")
    assert out["jobs"] == 5
    assert out["assumptions"][0] == ("gqa history: 5 finished jobs that ran on GPUs; left out: 1 that never "
                                     "started")
    recorded = out["as_it_ran"]
    # the export's times are whole seconds, its waits and run times tenths: they agree within a second
    waits = [float(rows[i]["wait"]) for i in ran]
    jcts = [float(rows[i]["wait"]) + float(rows[i]["elapsed"]) for i in ran]
    assert recorded["jobs"] == 5
    assert recorded["mean_wait"] == pytest.approx(sum(waits) / 5, abs=1.0)
    assert recorded["mean_jct"] == pytest.approx(sum(jcts) / 5, abs=1.0)
    assert set(out["ratios_vs_as_it_ran"]) == {"fifo", "gqa"}
