"""`gqa history -o csv` as a trace: rows built here for each rule, with the columns the history writes
(tests/cli/test_history.py replays a real local queue's export)."""

import pytest

from cli.history import CSV_COLUMNS
from gqa.sim.queue_history import NEEDED, is_queue_history
from gqa.sim.trace import TraceError, load_trace

HEADER = ",".join(CSV_COLUMNS)


def row(id="j1", state="completed", submitted="2026-12-01T10:00:00+0000", started="2026-12-01T10:01:00+0000",
        ended="2026-12-01T11:01:00+0000", elapsed="3600", gpus="2", priority="normal", wall_time="7200",
        gpu_type="", name="train", team="vision", owner="ana") -> str:
    values = {"id": id, "name": name, "team": team, "owner": owner, "state": state, "submitted": submitted,
              "started": started, "ended": ended, "wait": "60", "elapsed": elapsed, "gpus": gpus,
              "gpu_hours": "2", "cost": "1.5", "attempts": "1", "exit": "0", "reason": "done",
              "priority": priority, "wall_time": wall_time, "gpu_type": gpu_type}
    return ",".join(values[c] for c in CSV_COLUMNS)


def export(tmp_path, *rows: str):
    path = tmp_path / "history.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def test_the_history_writes_every_column_the_trace_reads():
    assert set(NEEDED) | {"priority", "wall_time", "gpu_type", "team", "owner", "name"} <= set(CSV_COLUMNS)
    assert is_queue_history(HEADER) and not is_queue_history("submit_time,duration,gpus")


def test_a_finished_job_is_a_job_with_what_happened_to_it(tmp_path):
    trace = load_trace(export(tmp_path, row(gpu_type="a100", priority="high")))
    (job,) = trace.jobs
    assert trace.format == "queue-history"
    assert (job.id, job.duration, job.gpus, job.team, job.user, job.name, job.priority, job.wall_time,
            job.gpu_type) == ("j1", 3600.0, 2, "vision", "ana", "train", "high", 7200.0, "a100")
    assert (job.started - job.submit_time, job.ended - job.submit_time) == (60.0, 3660.0)


@pytest.mark.parametrize("changes, counted", [
    ({"state": "running", "ended": ""}, "1 running at the export"),
    ({"state": "cancelled", "started": "", "elapsed": "0"}, "1 that never started"),
    ({"gpus": "0"}, "1 that asked no GPU"),
    ({"elapsed": "0"}, "1 that ran 0 s"),
])
def test_what_did_not_run_on_a_gpu_to_its_end_is_left_out_and_counted(tmp_path, changes, counted):
    trace = load_trace(export(tmp_path, row(id="keep"), row(id="out", **changes)))
    assert [j.id for j in trace.jobs] == ["keep"] and trace.notes[0].endswith(f"left out: {counted}")


@pytest.mark.parametrize("changes, message", [
    ({"gpus": "1.5"}, "line 3: gpus must be a whole number, got '1.5'"),
    ({"elapsed": "soon"}, "line 3: elapsed is not a number: 'soon'"),
    ({"submitted": "yesterday"}, "line 3: submitted is not an ISO-8601 time: 'yesterday'"),
    ({"priority": "urgent"}, "line 3: priority must be high, normal or low, got 'urgent'"),
    ({"id": ""}, "line 3: id is empty"),
    ({"wall_time": "nan"}, "line 3: wall_time must be a finite number"),
    ({"wall_time": "-60"}, "line 3: wall_time must be positive, got '-60'"),
    ({"wall_time": "0"}, "line 3: wall_time must be positive, got '0'"),
    # times that run backwards: a negative run, wait or JCT is refused, not counted as a run of 0 s
    ({"elapsed": "-40"}, "line 3: elapsed must be 0 or more, got '-40'"),
    ({"started": "2026-12-01T09:00:00+0000"},
     r"line 3: started 2026-12-01T09:00:00\+0000 is before submitted 2026-12-01T10:00:00\+0000$"),
    ({"ended": "2026-12-01T10:00:30+0000"},
     r"line 3: ended 2026-12-01T10:00:30\+0000 is before started 2026-12-01T10:01:00\+0000$"),
])
def test_a_bad_row_names_its_line(tmp_path, changes, message):
    with pytest.raises(TraceError, match=message):
        load_trace(export(tmp_path, row(), row(**changes)))


@pytest.mark.parametrize("changes", [{"elapsed": "-40"}, {"started": "2026-12-01T09:00:00+0000"},
                                     {"started": "2026-12-01T10:30:00+0100"}])   # 09:30 UTC
def test_gqa_simulate_stops_at_a_row_whose_times_run_backwards(tmp_path, capsys, changes):
    from cli.main import main

    path = export(tmp_path, row(), row(id="j2", **changes))
    assert main(["simulate", str(path), "--gpus", "2", "--policies", "fifo", "-o", "json"]) == 2
    assert capsys.readouterr().err.startswith(f"gqa: error: {path}: line 3: ")


def test_a_row_short_of_fields_names_its_line(tmp_path):
    with pytest.raises(TraceError, match="line 3: not as many fields as the header has"):
        load_trace(export(tmp_path, row(), "j2,train,vision"))


def test_the_estimates_fit_reads_an_export_as_it_reads_a_dump(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path = export(tmp_path, row(id="a", elapsed="3600", wall_time="7200"), row(id="b", elapsed="600", wall_time="600"),
                  row(id="c", wall_time=""))
    script = Path(__file__).parents[2] / "benchmarks" / "fit_estimates.py"
    done = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2 jobs with both times (1 without)")
    assert "killed at their limit (used >= requested): 0.500" in done.stdout   # b ran all of its 600 s


RUNNING = {"state": "running", "ended": "", "elapsed": "600"}
# job 1 of queue A waits 1 minute; job 1 of queue B, submitted an hour later, waits 5
QUEUE_A = [row(id="1")]
QUEUE_B = [row(id="1", submitted="2026-12-01T11:00:00+0000", started="2026-12-01T11:05:00+0000",
               ended="2026-12-01T12:05:00+0000")]


@pytest.mark.parametrize("first, then, ids, waits, note", [
    # two queues' histories put together: both jobs 1 replayed, and both as they ran
    (QUEUE_A, QUEUE_B, ["1", "1'"], [60.0, 300.0],
     "1 job with the id of an earlier one submitted at another time (several queues' histories put together?): "
     "each replayed as its own, its id marked with a '"),
    # one queue's exports of overlapping periods: job 1 running in the first, ended in the second
    ([row(id="1", **RUNNING)], QUEUE_A, ["1"], [60.0], None),
    (QUEUE_A, [row(id="1", **RUNNING)], ["1"], [60.0], None),
    (QUEUE_A, QUEUE_A, ["1"], [60.0], None),
], ids=["two-queues", "running-then-ended", "ended-then-running", "twice"])
def test_exports_put_together_replay_each_job_once_and_as_it_ran(tmp_path, capsys, first, then, ids, waits, note):
    import json

    from cli.main import main

    for header in ([HEADER], []):   # cat a.csv b.csv; or b's rows alone added to a
        path = tmp_path / "both.csv"
        path.write_text("\n".join([HEADER, *first, *header, *then]) + "\n")
        trace = load_trace(path)
        assert [j.id for j in trace.jobs] == ids
        assert ("left out: 1 row repeated (exports of overlapping periods: each read once, as it stood last)"
                in trace.notes[0]) is (len(ids) == 1)
        assert (trace.notes[2:] == [note]) if note else len(trace.notes) == 2
        assert main(["simulate", str(path), "--gpus", "4", "--policies", "fifo", "-o", "json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["jobs"] == out["as_it_ran"]["jobs"] == len(ids)
        assert out["as_it_ran"]["mean_wait"] == pytest.approx(sum(waits) / len(waits))
