"""`gqa history` on the local queue: what it lists, in what order, how it
reads in 80 columns, as JSON and CSV, and what it refuses."""

import csv
import io
import time

import pytest

from cli import output
from gqa.models.job import JobState
from gqa.ports import Change
from tests.contract.jobs import new_job

S = JobState
NOW = 1_796_000_000.0    # 2026-12-01
HOUR = 3600.0


@pytest.fixture(autouse=True)
def fixed_now(monkeypatch):
    monkeypatch.setattr(output, "now", lambda: NOW)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TZ", "UTC")   # dates and times print in the local zone
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def finished(store, state, *, ended, ran=HOUR, waited=60.0, **record):
    """A job that waited `waited`, ran `ran` and ended in `state` at `ended`."""
    submitted = ended - ran - waited
    [job] = store.create([new_job(submitted_at=submitted, **record)])
    start = submitted + waited
    [job] = store.apply([Change(job.id, S.QUEUED, S.STARTING, "claimed", start)])
    [job] = store.apply([Change(job.id, S.STARTING, S.RUNNING, "started", start, {"started_at": start})])
    if state == S.RUNNING:
        return job
    fields = {"ended_at": ended, "gpu_seconds": ran * job.gpus, "cost": 1.25,
              "exit_code": 3 if state == S.FAILED else 0, "signal": 9 if state == S.TIMED_OUT else None}
    reason = "exited with code 3: the loss went to nan after the warm-up, see the log" if state == S.FAILED \
        else "done"
    [job] = store.apply([Change(job.id, S.RUNNING, state, reason, ended, fields)])
    return job


@pytest.fixture
def jobs(cli):
    store = cli.store
    return {
        "old": finished(store, S.SUCCEEDED, ended=NOW - 30 * HOUR, name="old"),
        "ok": finished(store, S.SUCCEEDED, ended=NOW - 3 * HOUR, name="train-ok", owner="alice", team="vision"),
        "bad": finished(store, S.FAILED, ended=NOW - 2 * HOUR, name="train-bad", owner="bob", team="nlp"),
        "slow": finished(store, S.TIMED_OUT, ended=NOW - HOUR, name="eval", owner="alice", team="nlp"),
        "now": finished(store, S.RUNNING, ended=NOW, name="train-now", owner="carol"),
    }


def test_the_last_day_newest_end_first_after_the_running_ones_in_80_columns(cli, jobs):
    code, out, err = cli("history")
    assert code == 0, err
    lines = out.splitlines()
    # the least needed columns go first: tries, submitted, team, gpus, owner, then cost for SIGKILL's width
    assert lines[0].split() == ["ID", "NAME", "STATE", "WAIT", "ELAPSED", "GPU-H", "EXIT", "REASON"]
    ids = [line.split()[0] for line in lines[1:] if line[:1].strip()]
    assert ids[:4] == [jobs["now"].id, jobs["slow"].id, jobs["bad"].id, jobs["ok"].id]   # "old" is 30 h ago
    assert all(len(line) <= 80 for line in lines)
    failed = next(line for line in lines if line.startswith(jobs["bad"].id + " "))
    assert failed.split()[2:7] == ["failed", "1m00s", "1h00m", "1.00", "3"]
    assert "the loss" in out and "nan" in out    # the reason folds onto the next lines, whole
    assert "SIGKILL" in next(line for line in lines if line.startswith(jobs["slow"].id + " "))
    # (the running job's GPU-hours count to the store's clock, not the fixed one)
    assert lines[-1].startswith("3 finished, 1 running, from 11-29 00:53 to now: ") and lines[-1].endswith(", $3.75")


@pytest.mark.parametrize("args, names", [
    (("--since", "2d"), ["train-now", "eval", "train-bad", "train-ok", "old"]),
    (("--since", "2026-11-28", "--until", "2026-11-29T12:00"), ["old"]),
    (("--since", "2026-11-28T00:00Z", "--until", "2026-11-29 14:00:00+02:00"), ["old"]),   # with offsets
    (("--since", "00:00"), ["train-now"]),                                                # today, here
    (("--since", "1d12h", "--until", "90m"), ["train-bad", "train-ok", "old"]),
    (("-u", "alice"), ["eval", "train-ok"]),
    (("--team", "nlp"), ["eval", "train-bad"]),
    (("--state", "failed", "--state", "timed out"), ["eval", "train-bad"]),
    (("--state", "completed,running"), ["train-now", "train-ok"]),
    (("--name", "train-*"), ["train-now", "train-bad", "train-ok"]),
    (("--limit", "2"), ["train-now", "eval"]),
    (("--limit", "0", "--since", "3d"), ["train-now", "eval", "train-bad", "train-ok", "old"]),
])
def test_filters_as_json(cli, jobs, args, names):
    data = cli.json("history", *args)
    assert [j["name"] for j in data["jobs"]] == names
    assert data["more"] == (args == ("--limit", "2"))


def test_mine_is_the_callers(cli, jobs, monkeypatch):
    monkeypatch.setenv("USER", "carol")
    monkeypatch.setattr("getpass.getuser", lambda: "carol")
    assert [j["name"] for j in cli.json("history", "--mine")["jobs"]] == ["train-now"]


def test_an_array_by_its_id(cli):
    tasks = cli.store.create([new_job(submitted_at=NOW - 2 * HOUR, array_index=i) for i in range(3)])
    for task in tasks:
        cli.store.apply([Change(task.id, S.QUEUED, S.CANCELLED, "cancelled by user", NOW - HOUR,
                                {"ended_at": NOW - HOUR})])
    finished(cli.store, S.SUCCEEDED, ended=NOW - HOUR)    # another job
    assert [j["id"] for j in cli.json("history", "--array", tasks[0].group)["jobs"]] == \
        sorted((t.id for t in tasks), reverse=True)


def test_json_carries_the_summary(cli, jobs):
    [row] = cli.json("history", "--state", "failed")["jobs"]
    assert (row["status"], row["exit"], row["wait"], row["elapsed"], row["gpu_hours"], row["cost"]) == \
        ("failed", "3", 60.0, HOUR, 1.0, 1.25)


def test_csv_one_row_a_job(cli, jobs):
    code, out, err = cli("history", "-o", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["name"] for r in rows] == ["train-now", "eval", "train-bad", "train-ok"]
    assert rows[2]["state"] == "failed" and rows[2]["exit"] == "3" and rows[2]["ended"] == "2026-11-29T22:53:20+0000"
    assert rows[1]["exit"] == "SIGKILL" and rows[0]["ended"] == ""


def test_nothing_in_the_window_says_so(cli, jobs):
    code, out, _ = cli("history", "--since", "2020-01-01", "--until", "2020-01-02")
    assert code == 0 and out == "No jobs finished or running from 2020-01-01 to 2020-01-02.\n"


@pytest.mark.parametrize("args, message", [
    (("--state", "done"), "unknown state 'done': use completed, failed, timed out, cancelled, rejected, running, "
                          "requeued"),
    # what a requeued job's row shows: --state names them all one way
    (("--state", "pending"), "unknown state 'pending': a job that has run and waits to run again shows pending, "
                             "held, starting, retrying; --state requeued lists them all"),
    (("--since", "yesterday"), "--since 'yesterday': use a time back from now (90m, 12h, 7d), a date"),
    (("--since", "2026-13-01"), "--since '2026-13-01' is not a date"),
    (("--since", "1h", "--until", "2h"), "--until must be later than --since"),
    # the same grammar as gqa report's: a number alone is no time, eight digits are no date
    (("--since", "24"), "--since '24' needs a unit: 24h, 24m or 24s back from now (or a date, 2026-11-30)"),
    (("--since", "20261207"), "--since '20261207': write the date as 2026-12-07"),
    (("--since", "9999-12-31"), "--since '9999-12-31' is after 2027-12-01 00:53:20 UTC, a year from now"),
    (("--since", "800000d"), "--since '800000d' is before 1970-01-01 00:00:00 UTC, earlier than any job"),
    # a window that holds no time, with both ends as dates
    (("--since", "2h", "--until", "1d"), "the window ends (2026-11-29 00:53:20 UTC) at or before it begins "
                                         "(2026-11-29 22:53:20 UTC): --until must be later than --since"),
    (("--since", "2026-12-07"), "the window ends now (2026-11-30 00:53:20 UTC), at or before it begins "
                                "(2026-12-07 00:00:00 UTC): --since must be earlier than now, or give a later --until"),
    (("--mine", "-u", "bob"), "--mine and --user both name whose jobs to show"),
    (("--limit", "-1"), "--limit must be 0 (every job) or more, got -1"),
    (("-o", "yaml"), "unknown output format 'yaml'; use table, json or csv"),
])
def test_bad_input_is_one_line_and_exit_2(cli, jobs, args, message):
    code, out, err = cli("history", *args)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1


def test_local_start_passes_the_retention_to_the_daemon_and_refuses_a_negative_one(cli):
    from daemon.main import parse

    code, out, err = cli("local", "start", "--gpus", "1", "--keep-history", "-1")
    assert code == 2 and "--keep-history must be a number of days >= 0" in err
    assert parse(["--home", "h", "--inventory", "{}", "--keep-history", "30"]).keep_history == 30.0
    assert parse(["--home", "h", "--inventory", "{}"]).keep_history == 90.0


def test_the_csv_is_a_trace_gqa_simulate_replays_beside_what_ran(cli, jobs, tmp_path):
    finished(cli.store, S.SUCCEEDED, ended=NOW - 4 * HOUR, name="urgent", wall_time=2 * HOUR, tier=0,
             gpu_type="a100")
    code, out, err = cli("history", "--since", "3d", "--limit", "0", "-o", "csv")
    assert code == 0, err
    urgent = next(r for r in csv.DictReader(io.StringIO(out)) if r["name"] == "urgent")
    assert (urgent["priority"], urgent["wall_time"], urgent["gpu_type"]) == ("high", "7200", "a100")
    (tmp_path / "history.csv").write_text(out)
    data = cli.json("simulate", str(tmp_path / "history.csv"), "--gpus", "4", "--policies", "fifo,gqa")
    assert data["jobs"] == 5   # old, ok, bad, slow and urgent; not the one running
    assert data["assumptions"][:2] == ["gqa history: 5 finished jobs that ran on GPUs; left out: 1 running at "
                                       "the export", "time limits as asked for 1 of 5 jobs (the rest, unlimited, "
                                       "get one from --estimates)"]
    assert data["as_it_ran"]["jobs"] == 5 and data["as_it_ran"]["mean_wait"] == 60.0   # each waited a minute
    assert data["as_it_ran"]["mean_jct"] == 60.0 + HOUR
    assert set(data["policies"]["gqa"]["tier_mean_jct"]) == {"high", "normal"}
