"""The CLI contract other tools rely on: ids, -o json shapes, follow-up hints."""

import os

import pytest

from cli.queue_table import WOULD_START


def test_submit_prints_the_id_and_the_follow_up_commands(cli):
    code, out, err = cli("submit", "--gpus", "2", "--time", "90m", "--name", "bert", "--", "python", "train.py")
    assert code == 0 and out == "1\n"
    assert "gqa status 1" in err and "gqa logs 1 -f" in err and "gqa cancel 1" in err
    job = cli.store.get("1")
    assert (job.name, job.gpus, job.wall_time, job.state.value) == ("bert", 2, 5400, "QUEUED")
    assert job.spec.command == ["python", "train.py"]


def test_submit_json_has_id_and_state(cli):
    data = cli.json("submit", "--priority", "high", "--", "true")
    assert data["id"] == "1" and data["state"] == "QUEUED" and data["status"] == "pending"


def test_array_is_one_call_one_group(cli):
    data = cli.json("submit", "--array", "0-499", "--", "true")
    assert data["id"] == "1" and len(data["jobs"]) == 500 and data["jobs"][-1] == "1_499"
    status = cli.json("status", "1")
    assert status["counts"] == {"QUEUED": 500}
    assert cli.store.get("1_7").extra_env == {"GQA_ARRAY_INDEX": "7", "SLURM_ARRAY_TASK_MIN": "0",
                                              "SLURM_ARRAY_TASK_MAX": "499", "SLURM_ARRAY_TASK_COUNT": "500",
                                              "SLURM_ARRAY_TASK_STEP": "1"}
    cancelled = cli.json("cancel", "1")
    assert {c["action"] for c in cancelled} == {"cancelled"} and len(cancelled) == 500


def test_sweep_expands_the_grid_in_one_group(cli):
    (cli.home / "sweep.yaml").write_text("name: lr\ncommand: [python, train.py]\n"
                                         "sweep:\n  grid:\n    lr: [0.1, 0.01]\n    bs: [32, 64]\n")
    data = cli.json("submit", "sweep.yaml")
    assert len(data["jobs"]) == 4
    commands = sorted(" ".join(cli.store.get(i).spec.command) for i in data["jobs"])
    assert commands[0] == "python train.py --lr=0.01 --bs=32"


def test_queue_json_orders_pending_with_positions_and_reasons(cli):
    cli("submit", "--priority", "low", "--", "true")
    cli("submit", "--priority", "high", "--gpus", "4", "--", "true")
    data = cli.json("queue")
    assert [(p["position"], p["id"]) for p in data["pending"]] == [(1, "2"), (2, "1")]
    assert data["gpus"] == {"total": 4, "free": 4, "outside": 0}
    assert data["pending"][0]["reason"] == WOULD_START   # no daemon runs here: nothing is starting
    assert data["pending"][1]["reason"] == "needs 1 GPU, 0 free"
    assert set(data["pending"][0]["factors"]) == {"fair_share", "age", "size", "duration", "nice", "score", "service"}
    weighted = data["pending"][0]["weighted"]
    assert sum(weighted.values()) == pytest.approx(data["pending"][0]["factors"]["score"])


def test_queue_explains_nice_as_a_factor_of_the_score(cli):
    cli("submit", "--gpus", "4", "--", "true")
    cli("submit", "--nice", "500", "--", "true")
    cli("submit", "--", "true")
    data = cli.json("queue")
    assert [p["id"] for p in data["pending"]] == ["1", "3", "2"]   # nice 500: 0.05 off its score
    [niced] = [p for p in data["pending"] if p["id"] == "2"]
    assert niced["factors"]["nice"] == niced["weighted"]["nice"] == pytest.approx(-0.05)
    assert sum(niced["weighted"].values()) == pytest.approx(niced["factors"]["score"])
    _, table, _ = cli("queue", "--explain")
    assert "x duration + nice" in table   # the columns fold on a narrow terminal; the formula does not


def test_status_json_has_history_with_reasons(cli):
    cli("submit", "--", "true")
    data = cli.json("status", "1")
    assert data["state"] == "QUEUED"
    assert [(h["state"], h["reason"]) for h in data["history"]] == [("SUBMITTED", "submitted"), ("QUEUED", "admitted")]


def test_status_of_unknown_job_is_an_error(cli):
    code, out, err = cli("status", "42")
    assert code == 2 and "no job or array 42" in err


def test_requeue_of_a_job_that_never_started_is_an_error(cli):
    cli("submit", "--", "true")
    code, out, err = cli("requeue", "1")
    assert (code, out) == (2, "")
    assert err == "gqa: error: job 1 has not started (pending); only a running job can be requeued\n"


def test_quota_set_and_show(cli):
    code, out, err = cli("quota", "set", "vision", "--share", "2", "--max-gpus", "8", "--max-gpus-per-user", "4")
    assert code == 0 and "max GPUs 8" in out
    teams = {t["team"]: t for t in cli.json("quota", "show")["teams"]}
    assert teams["vision"]["share"] == 2 and teams["vision"]["max_gpus"] == 8
    cli("quota", "set", "vision", "--max-gpus", "-1")
    assert cli.store.teams()["vision"].max_gpus is None
    code, _, err = cli("quota", "set", "vision", "--share", "0")
    assert code == 2 and "--share must be positive" in err


def test_quota_cap_is_a_hard_limit_at_submit(cli):
    cli("quota", "set", "vision", "--max-gpus", "2")
    code, _, err = cli("submit", "--team", "vision", "--gpus", "3", "--", "true")
    assert code == 2 and "team vision may hold at most 2" in err


def test_local_status_json(cli):
    data = cli.json("local", "status")
    assert data["running"] is False and len(data["gpus"]) == 4


def test_queue_policy_limits_are_enforced_at_submit(cli):
    data = cli.json("quota", "policy", "--max-gpus-per-job", "2", "--max-wall-time", "1d", "--half-life", "3d")
    assert (data["max_gpus_per_job"], data["max_wall_time"], data["half_life"]) == (2, 86400, 259200)
    code, _, err = cli("submit", "--gpus", "3", "--", "true")
    assert code == 2 and "the limit per job is 2" in err
    code, _, err = cli("submit", "--time", "2d", "--", "true")
    assert code == 2 and "asks for 2d00h wall time; the limit is 1d00h" in err
    assert cli.json("quota", "policy", "--max-wall-time", "-1")["max_wall_time"] is None
    code, _, err = cli("quota", "policy", "--half-life", "soon")
    assert code == 2 and "--half-life" in err


def test_priority_weights_are_shown_and_set(cli):
    assert cli.json("quota", "policy")["weights"] == {"fair_share": 1.0, "age": 1.0, "size": 0.0, "duration": 5.0}
    shown = cli.json("quota", "policy", "--duration-weight", "0", "--age-weight", "0.5")["weights"]
    assert (shown["duration"], shown["age"], shown["fair_share"]) == (0.0, 0.5, 1.0)
    assert cli.store.policy().weights.duration == 0.0
    code, out, _ = cli("quota", "policy")
    assert code == 0 and "fair share 1, age 0.5, size 0, duration 0" in out
    code, _, err = cli("quota", "policy", "--duration-weight", "-1")
    assert code == 2 and "--duration-weight must be >= 0" in err
    assert cli.store.policy().weights.duration == 0.0


@pytest.mark.parametrize("args, message", [
    (("local", "start", "--gpus", "1", "--grace", "nan"), "--grace must be a number of seconds >= 0, got nan"),
    (("local", "start", "--gpus", "1", "--grace", "-1"), "--grace must be a number of seconds >= 0, got -1"),
    (("local", "stop", "--timeout", "nan"), "--timeout must be a number of seconds >= 0, got nan"),
    (("quota", "policy", "--age-weight", "nan"), "age_weight must be a finite number, got nan"),
    (("quota", "set", "vision", "--share", "inf"), "share must be a finite number, got inf"),
])
def test_numbers_that_are_not_numbers_are_refused(cli, args, message):
    """NaN passes every `< 0` test: each option says so instead of storing it or waiting on it."""
    before = cli.store.policy()
    code, out, err = cli(*args)
    assert code == 2 and message in err and out == ""
    assert cli.store.policy() == before and cli.store.teams() == {}


def test_per_user_cap_is_a_hard_limit_at_submit(cli):
    cli("quota", "set", "vision", "--max-gpus-per-user", "2")
    code, _, err = cli("submit", "--team", "vision", "--gpus", "3", "--", "true")
    assert code == 2 and "a user of team vision may hold at most 2" in err


def test_preemption_is_opt_in_per_tier(cli):
    assert cli.json("quota", "policy")["preempt"] == []
    assert cli.json("quota", "policy", "--preempt", "low,normal")["preempt"] == ["normal", "low"]
    assert cli.store.policy().preempt_tiers == (1, 2)
    code, _, err = cli("quota", "policy", "--preempt", "high")
    assert code == 2 and "--preempt takes low and/or normal" in err
    assert cli.json("quota", "policy", "--preempt", "none")["preempt"] == []


def test_the_slicing_options_help_names_the_rules_numbers():
    """The CLI keeps the scheduling package out of its start-up, so these numbers are written there
    by hand: this holds them to the rules'."""
    import typer.main

    from cli.quota import app
    from gqa.scheduling.slicing import CATCH_UP_SLICES, DEMOTED_SLICES
    helps = {p.name: p.help for p in typer.main.get_command(app).commands["policy"].params}
    assert f"or {CATCH_UP_SLICES} slices into its attempt" in helps["slice_starve"]
    assert f"was demoted runs {DEMOTED_SLICES} slices first" in helps["slice_min_run"]


def test_time_slicing_is_opt_in_per_tier(cli):
    assert cli.json("quota", "policy")["time_slice"]["tiers"] == []
    shown = cli.json("quota", "policy", "--slice", "normal,low", "--slice-after", "2h", "--slice-min-run", "5m",
                     "--slice-starve", "8")["time_slice"]
    assert shown == {"tiers": ["normal", "low"], "after_gpu_seconds": 7_200.0, "min_run": 300.0, "starve": 8.0}
    policy = cli.store.policy()
    assert (policy.slice_tiers, policy.slice_after, policy.slice_min_run, policy.slice_starve) == \
        ((1, 2), 7_200.0, 300.0, 8.0)
    code, out, _ = cli("quota", "policy")
    assert code == 0 and "time-sliced tiers  normal, low: a 2 GPU-hour slice" in out
    for args, message in ((("--slice", "urgent"), "--slice takes high, normal and/or low"),
                          (("--slice-starve", "-1"), "--slice-starve must be >= 0"),
                          (("--slice-after", "soon"), "--slice-after")):
        code, _, err = cli("quota", "policy", *args)
        assert code == 2 and message in err
    assert cli.store.policy().slice_tiers == (1, 2)   # refused changes changed nothing
    assert cli.json("quota", "policy", "--slice", "none")["time_slice"]["tiers"] == []


def test_backfill_counts_limits_unless_set_to_predictions(cli):
    assert cli.json("quota", "policy")["backfill_by"] == "limits"
    assert cli.json("quota", "policy", "--backfill-by", "predictions")["backfill_by"] == "predictions"
    assert cli.store.policy().backfill_by == "predictions"
    code, out, _ = cli("quota", "policy")
    assert code == 0 and "backfill by        predictions (a job's expected run time, longer once outlived)" in out
    code, _, err = cli("quota", "policy", "--backfill-by", "guesses")
    assert code == 2 and "--backfill-by: backfill counts run times by limits or predictions, not 'guesses'" in err
    assert cli.store.policy().backfill_by == "predictions"   # a refused change changed nothing
    assert cli.json("quota", "policy", "--backfill-by", "limits")["backfill_by"] == "limits"


def test_budgets_and_approval_thresholds(cli):
    assert cli.json("quota", "set", "vision", "--budget", "500")["budget"] == 500
    policy = cli.json("quota", "policy", "--approve-over-gpus", "2")
    assert policy["approval"] == {"gpus": 2, "gpu_hours": None, "cost": None}
    big = cli.json("submit", "--team", "vision", "--gpus", "3", "--", "true")
    assert big["state"] == "PENDING_APPROVAL" and big["status"] == "awaiting approval"
    assert cli.store.get(big["id"]).reason == "needs approval: asks for 3 GPUs (approval needed over 2)"
    small = cli.json("submit", "--gpus", "1", "--", "true")
    assert small["state"] == "QUEUED"
    assert cli.json("approve", big["id"])[0]["action"] == "approved"
    assert cli.store.get(big["id"]).state.value == "QUEUED"
    code, _, err = cli("approve", big["id"])
    assert code == 2 and "not awaiting approval" in err
    other = cli.json("submit", "--gpus", "4", "--", "true")
    [denied] = cli.json("deny", other["id"], "--reason", "use 2 GPUs")
    assert denied["state"] == "REJECTED"
    assert cli.store.get(other["id"]).reason.endswith(": use 2 GPUs")


def test_a_job_may_accept_several_gpu_types(cli):
    code, _, err = cli("submit", "--gpu-type", "h100,v100", "--", "true")
    assert code == 2 and "asks for h100 or v100 GPUs; the queue has 4 a10g" in err
    assert cli.json("submit", "--gpu-type", "h100,a10g", "--", "true")["state"] == "QUEUED"
    [entry] = cli.json("queue")["pending"]
    assert entry["gpu_type"] == "h100,a10g" and entry["reason"] == WOULD_START


def test_stop_at_budget_is_set_and_shown(cli):
    data = cli.json("quota", "set", "vision", "--budget", "1000", "--stop-at-budget")
    assert (data["budget"], data["stop_at_budget"]) == (1000, True)
    code, out, _ = cli("quota", "set", "vision", "--share", "2")      # unset options keep their value
    assert code == 0 and "budget $1,000.00 per month (hold queue, stop running jobs at 100%)" in out
    teams = {t["team"]: t for t in cli.json("quota", "show")["teams"]}
    assert teams["vision"]["stop_at_budget"] is True
    cli("quota", "set", "vision", "--no-stop-at-budget")
    assert cli.store.teams()["vision"].stop_at_budget is False
    code, out, _ = cli("quota", "show")
    assert code == 0 and "$1,000.00" in out and "hold queue" in out


def test_alert_settings_in_the_queue_policy(cli):
    data = cli.json("quota", "policy", "--alert-pending-after", "2h", "--budget-alerts", "75,100",
                    "--idle-gpu-below", "10", "--idle-gpu-window", "15m")
    assert data["alerts"] == {"budget_percent": [75.0, 100.0], "pending_after": 7200, "idle_gpu_below": 10.0,
                              "idle_gpu_window": 900}
    data = cli.json("quota", "policy", "--alert-pending-after", "-1", "--budget-alerts", "none",
                    "--idle-gpu-window", "-1")
    assert data["alerts"]["pending_after"] is None and data["alerts"]["budget_percent"] == []
    assert data["alerts"]["idle_gpu_window"] == 0
    code, out, _ = cli("quota", "policy")
    assert code == 0 and "pending alert      never" in out and "idle GPU alert     never" in out
    for bad in (["--budget-alerts", "50,lots"], ["--budget-alerts", "0"], ["--idle-gpu-below", "120"],
                ["--alert-pending-after", "soon"]):
        code, _, err = cli("quota", "policy", *bad)
        assert code == 2 and "gqa: error:" in err


def test_quota_set_members_alone_writes_no_quota(cli):
    code, out, err = cli("quota", "set", "vision", "--members", "alice, @ml")
    assert code == 0 and out == "team vision: members alice, @ml\n", err
    assert cli.store.team_members() == {"vision": ("alice", "@ml")}
    assert cli.json("quota", "set", "vision", "--members", "none", "--share", "2") == {
        "team": "vision", "share": 2.0, "max_gpus": None, "max_gpus_per_user": None, "budget": None,
        "stop_at_budget": False, "members": []}
    assert cli.store.team_members() == {}
    for bad, words in (("a b", "'a b' is not a member"), (",", "--members needs names")):
        code, _, err = cli("quota", "set", "vision", "--members", bad, "--share", "3")
        assert code == 2 and words in err
    assert cli.store.teams()["vision"].share == 2.0                    # refused before anything was written


def test_local_start_declares_the_cpus_jobs_may_use(cli):
    from cli.local import _inventory

    assert _inventory(2, "virtual", cpus=8)["cpus"] == 8
    assert _inventory(2, "virtual")["cpus"] == os.cpu_count()
    code, out, err = cli("local", "start", "--gpus", "2", "--cpus", "0")
    assert code == 2 and err == "gqa: error: --cpus must be between 1 and 65536, got 0\n" and out == ""


@pytest.mark.parametrize("args, line", [
    (("submit", "--cpus-per-task", "3", "--", "true"), "No such option: --cpus-per-task (`gqa submit -h` for help)"),
    (("status",), "Missing argument 'ref'. (`gqa status -h` for help)"),
    (("quota", "set"), "Missing argument 'team'. (`gqa quota set -h` for help)"),
    (("nosuch",), "No such command 'nosuch'. (`gqa -h` for help)"),
    (("queue", "--explain=yes"), "Option '--explain' does not take a value."),
])
def test_a_usage_mistake_is_one_line_on_stderr_and_exit_2(cli, args, line):
    """As every other mistake: no usage text, no boxed message."""
    assert cli(*args) == (2, "", f"gqa: error: {line}\n")


def test_a_retrying_jobs_status_tells_when_it_is_back_as_of_now_as_the_queue_does(cli, monkeypatch):
    from tests.services.conftest import Queue

    monkeypatch.setenv("COLUMNS", "250")       # the reason on one line

    queue = Queue(cli.store, 4)
    job = queue.start(retries={"on_error": 2, "backoff": "1h", "max_backoff": "2h"})
    queue.exit(job.id, 5)
    code, out, err = cli("status", job.id)
    assert code == 0, err
    [reason] = [line for line in out.splitlines() if line.strip().startswith("reason")]
    # one countdown, the queue's, counted now; the stored reason says what the backoff was
    assert "exit code 5; retry 1 of 2 after a " in reason and "backoff; back in the queue in " in reason
    assert reason.count("back in the queue in") == 1 and " of 2 in " not in reason
    [row] = cli.json("queue")["pending"]
    assert row["reason"] == reason.split("reason", 1)[1].strip()


@pytest.mark.parametrize("command", [["queue"], ["status", "1"], ["history"], ["local", "status"]])
def test_a_read_where_no_queue_is_says_so_and_makes_none(tmp_path, monkeypatch, capsys, command):
    """A read that made ~/.gqa would leave every later command on that empty queue, away from a shared box's."""
    from cli.main import main

    monkeypatch.delenv("GQA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(command) == 2
    assert f"gqa: error: no queue at {tmp_path / '.gqa'}: `gqa local start` starts one there" in \
        capsys.readouterr().err
    assert not (tmp_path / ".gqa").exists()


def test_submit_says_at_once_when_a_job_will_not_start_by_itself(cli):
    cli("quota", "policy", "--approve-over-gpus", "2")
    code, out, err = cli("submit", "--gpus", "3", "--", "true")
    assert code == 0 and out == "1\n"
    assert ("note: job 1 is awaiting approval: needs approval: asks for 3 GPUs (approval needed over 2)"
            in err.splitlines())
    code, out, err = cli("submit", "--hold", "--array", "0-2", "--", "true")
    assert code == 0 and "note: its 3 jobs are held: " in err
    code, out, err = cli("submit", "--", "true")                   # one that starts when it may: no note
    assert code == 0 and " is awaiting" not in err and " is held" not in err


def test_submit_says_at_once_when_its_team_s_budget_will_hold_the_job(cli):
    cli.json("local", "price", "--price", "3600")                  # $1 a GPU-second: $60 a GPU-minute
    cli("quota", "set", "nlp", "--budget", "1")
    reason = ("team nlp budget: spent $0.00 + $0.00 its running jobs may still cost + $60.00 for this job = "
              "$60.00, over $1.00 this period")

    code, out, err = cli("submit", "--team", "nlp", "--time", "1m", "--", "echo")

    assert code == 0 and out == "1\n"
    assert f"note: job 1 will be held by its team's budget: {reason}" in err.splitlines()
    code, out, err = cli("submit", "--team", "nlp", "--time", "1m", "--array", "0-1", "--", "echo")
    assert f"note: its 2 jobs will be held by its team's budget: {reason}" in err.splitlines()
    code, out, err = cli("submit", "--time", "1m", "--", "echo")   # the default team has no budget
    assert code == 0 and "budget" not in err


def test_submit_says_at_once_when_a_dependency_can_never_be_met(cli):
    cli("submit", "--", "sleep", "60")
    cli("cancel", "1")                                             # ended, and not a success

    code, out, err = cli("submit", "--after", "1", "--", "echo")

    # queued, as sbatch queues it (a pipeline's script goes on), and told what the next pass will do
    assert (code, out) == (0, "2\n")
    assert ("note: job 2 will be cancelled at the queue's next pass: dependency can never be met: "
            "job 1 was cancelled (afterok)\n") in err
    code, out, err = cli("submit", "--after", "1:notok", "--", "echo")
    assert code == 0 and "will be cancelled" not in err
