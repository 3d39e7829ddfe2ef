"""The API's wire codec: every object survives JSON and back, as the CLI
rebuilds it from the Lambda's answer; a job's spec and environment stay home."""

import json
import re
from dataclasses import replace

import pytest

from gqa.http import wire
from gqa.models.errors import SpecError
from gqa.models.job import JobState, Request, Transition
from gqa.scheduling.snapshot import Factors, Policy, TeamPolicy, Weights
from gqa.services.control import ControlResult
from gqa.services.cost import CostReport, TeamCost
from gqa.services.queries import QueueEntry, QueueView
from gqa.services.quota import QuotaView, TeamQuota
from tests.builders import job_record, spec, trigger


def over_the_wire(data):
    return json.loads(json.dumps(data))


def a_job(**overrides):
    fields = dict(id="7_3", group="7", state=JobState.RUNNING, array_index=3, group_limit=10,
                  extra_env={"GQA_ARRAY_INDEX": "3"}, submit_env={"AWS_SECRET_ACCESS_KEY": "x"}, attempts=2,
                  error_retries=1, interruptions=1, reclaims=1, spot=True, not_before=None, started_at=1010.5,
                  assigned=(0, 3), pid=42, proc_token="t", reason="attempt 2 started", request=Request.CANCEL,
                  kill_reason="cancel", gpu_seconds=12.5, max_gpu_hours=4.0,
                  history=(Transition(JobState.SUBMITTED, 1000.0, "submitted"),
                           Transition(JobState.QUEUED, 1000.0, "admitted"),
                           Transition(JobState.RUNNING, 1010.5, "attempt 2 started")))
    fields.update(overrides)
    return job_record(spec={"env": {"TOKEN": "secret"}, "resources": {"gpus": 2, "gpu_type": "a10g"}}, **fields)


def withheld(job):
    return replace(job, spec_json="", submit_env=None)


def test_a_job_round_trips_with_its_history_but_not_its_spec_or_environment():
    job = a_job()
    data = over_the_wire(wire.job_to_dict(job))
    assert "spec_json" not in data and "submit_env" not in data and "secret" not in json.dumps(data)
    assert wire.job_from_dict(data) == withheld(job)


def test_fields_a_newer_api_adds_are_ignored():
    data = wire.job_to_dict(a_job()) | {"colour": "blue"}
    assert wire.job_from_dict(data) == withheld(a_job())


def test_a_submission_answer_names_its_group_count_and_id_range():
    jobs = [a_job(id=f"7_{i}", array_index=i, state=JobState.SUBMITTED, request=None) for i in range(3)]
    data = over_the_wire(wire.submitted_to_dict(jobs))
    assert (data["group"], data["count"], data["first_id"], data["last_id"]) == ("7", 3, "7_0", "7_2")
    assert "jobs" not in data
    submitted = wire.submitted_from_dict(data)
    assert submitted == wire.Submitted("7", 3, ((0, 2, 1),), withheld(jobs[0]))
    assert submitted.ids == ("7_0", "7_1", "7_2") and submitted.ref == "7"


def test_a_single_job_answers_its_own_id():
    job = a_job(id="9", group="9", array_index=None, state=JobState.SUBMITTED, request=None)
    submitted = wire.submitted_from_dict(over_the_wire(wire.submitted_to_dict([job])))
    assert (submitted.count, submitted.ids, submitted.ref, submitted.last_id) == (1, ("9",), "9", "9")


def test_a_100000_task_array_is_answered_in_a_few_hundred_bytes():
    """Lambda answers at most 6 MB: 8,000 tasks' records took more; even their ids took 1.2 MB at 100,000."""
    first = a_job(id="7_0", array_index=0, state=JobState.SUBMITTED, request=None)
    jobs = [replace(first, id=f"7_{i}", array_index=i) for i in range(100_000)]   # one built, the rest copied
    data = over_the_wire(wire.submitted_to_dict(jobs))
    assert len(json.dumps(data)) - len(json.dumps(data["first"])) < 200
    submitted = wire.submitted_from_dict(data)
    assert (submitted.count, submitted.first_id, submitted.last_id) == (100_000, "7_0", "7_99999")
    assert submitted.ids == tuple(j.id for j in jobs)


def test_uneven_indices_travel_as_their_runs():
    indices = [1, 3, 5, 6, 7, 100]
    jobs = [a_job(id=f"7_{i}", array_index=i, state=JobState.SUBMITTED, request=None) for i in indices]
    submitted = wire.submitted_from_dict(over_the_wire(wire.submitted_to_dict(jobs)))
    assert submitted.ids == tuple(f"7_{i}" for i in indices) and submitted.count == 6


def test_an_answer_whose_runs_do_not_add_up_is_malformed():
    job = a_job(id="7_0", array_index=0, state=JobState.SUBMITTED, request=None)
    data = over_the_wire(wire.submitted_to_dict([job])) | {"count": 5}
    with pytest.raises(ValueError):
        wire.submitted_from_dict(data)


def test_an_older_apis_answer_with_every_id_is_still_read():
    jobs = [a_job(id=f"7_{i}", array_index=i, state=JobState.SUBMITTED, request=None) for i in range(3)]
    data = {"group": "7", "jobs": ["7_0", "7_1", "7_2"], "first": wire.job_to_dict(jobs[0])}
    assert wire.submitted_from_dict(over_the_wire(data)).ids == ("7_0", "7_1", "7_2")


def test_the_queue_view_round_trips_with_positions_reasons_factors_and_etas():
    view = QueueView(
        pending=[QueueEntry(a_job(id="1", state=JobState.QUEUED), 1, "starting now",
                            Factors(0.5, 0.25, 0.0, 0.81, duration=0.3), 1234.5),
                 QueueEntry(a_job(id="2", state=JobState.HELD), None, "team vision spent $10 of $10")],
        running=[a_job(id="3")], total_gpus=8, free_gpus=2, weights=Weights(2.0, 0.5, 0.1, 1.0), outside_gpus=2)
    back = wire.queue_from_dict(over_the_wire(wire.queue_to_dict(view)))
    assert back == replace(view, pending=[replace(e, job=withheld(e.job)) for e in view.pending],
                           running=[withheld(j) for j in view.running])


def test_without_explain_the_factors_stay_out():
    view = QueueView([QueueEntry(a_job(id="1"), 1, "", Factors(0.5, 0.2, 0.0, 0.6), None)], [], 4, 4, Weights())
    assert wire.queue_from_dict(wire.queue_to_dict(view, explain=False)).pending[0].factors is None


def test_control_results_round_trip():
    results = [ControlResult(a_job(id="4"), "cancelling", "stopping its processes"),
               ControlResult(a_job(id="5", state=JobState.CANCELLED), "cancelled")]
    back = wire.results_from_dict(over_the_wire(wire.results_to_dict(results)))
    assert back == [replace(r, job=withheld(r.job)) for r in results]


def test_quotas_and_a_changed_policy_round_trip():
    policy = Policy(weights=Weights(3.0, 0.1, 0.2, 0.0), half_life=3600.0, max_gpus_per_job=8,
                    default_team=TeamPolicy(share=2.0, budget=100.0), preempt_tiers=(1, 2), approval_cost=50.0,
                    budget_alerts=(75.0, 100.0), alert_pending_after=None, idle_gpu_window=0.0)
    view = QuotaView([TeamQuota("vision", TeamPolicy(3.0, 16, 4, 1000.0, stop_at_budget=True), 6, True,
                                ("alice", "arn:aws:sts::123456789012:assumed-role/Vision/*", "@ml")),
                      TeamQuota("nlp", TeamPolicy(), 2, False)], policy)
    assert wire.quota_from_dict(over_the_wire(wire.quota_to_dict(view))) == view


def test_a_cost_report_round_trips():
    report = CostReport("2026-11", True, [TeamCost("vision", 812.5, 40.25, 1000.0), TeamCost("nlp", 3.0, 0.0, None)])
    assert wire.cost_from_dict(over_the_wire(wire.cost_to_dict(report))) == report


def test_quota_changes_travel_without_the_unchanged_ones():
    changes = {"share": 2.0, "max_gpus": -1, "max_gpus_per_user": None, "budget": None}
    data = over_the_wire(wire.changes_to_dict(changes))
    assert data == {"share": 2.0, "max_gpus": -1}
    assert wire.changes_from_dict(data, wire.TEAM_CHANGES) == {"share": 2.0, "max_gpus": -1}
    tiers = wire.changes_from_dict(over_the_wire(wire.changes_to_dict({"preempt_tiers": (2,)})), wire.POLICY_CHANGES)
    assert tiers == {"preempt_tiers": (2,)}
    alerts = {"budget_alerts": (50.0, 90.5), "idle_gpu_window": -1.0}
    assert wire.changes_from_dict(over_the_wire(wire.changes_to_dict(alerts)), wire.POLICY_CHANGES) == alerts
    assert wire.changes_from_dict({"stop_at_budget": False}, wire.TEAM_CHANGES) == {"stop_at_budget": False}
    backfill = {"backfill_by": "predictions"}
    assert wire.changes_from_dict(over_the_wire(wire.changes_to_dict(backfill)), wire.POLICY_CHANGES) == backfill


@pytest.mark.parametrize("body, words", [
    ([1], "must be a JSON object"),
    ({"shares": 2}, "unknown field(s) shares"),
    ({"share": "2"}, "share must be a number"),
    ({"max_gpus": 2.5}, "max_gpus must be an integer"),
    ({"max_gpus": True}, "max_gpus must be an integer"),
    ({"stop_at_budget": 1}, "stop_at_budget must be true or false"),
])
def test_bad_quota_changes_are_spec_errors(body, words):
    with pytest.raises(SpecError, match=words.replace("(", r"\(").replace(")", r"\)")):
        wire.changes_from_dict(body, wire.TEAM_CHANGES)


@pytest.mark.parametrize("body, words", [
    ({"preempt_tiers": ["low"]}, "preempt_tiers must be a list of integers"),
    ({"preempt_tiers": [1.5]}, "preempt_tiers must be a list of integers"),
    ({"budget_alerts": "50,80"}, "budget_alerts must be a list of numbers"),
    ({"backfill_by": 1}, "backfill_by must be text, got 1"),
])
def test_bad_policy_lists_are_spec_errors(body, words):
    with pytest.raises(SpecError, match=words):
        wire.changes_from_dict(body, wire.POLICY_CHANGES)


@pytest.mark.parametrize("env, with_env, sent_env", [
    ({"TOKEN": "s3cret"}, True, {"TOKEN": "s3cret"}),      # its owner and admins: all of it
    ({"TOKEN": "s3cret"}, False, None),                    # anyone else: the job without its env
    ({}, False, {}),                                       # nothing to withhold: sent as it is
])
def test_a_trigger_travels_with_its_jobs_env_only_to_whom_it_may(env, with_env, sent_env):
    made = trigger(spec_json=spec(env=env).model_dump_json())
    data = over_the_wire(wire.trigger_to_dict(made, with_env=with_env))
    [back] = wire.triggers_from_dict({"triggers": [data]})
    sent = json.loads(back.spec_json)
    assert sent.get("env") == sent_env and sent["command"] == json.loads(made.spec_json)["command"]
    assert replace(back, spec_json=made.spec_json) == made


def test_a_trigger_travels_without_its_owners_arn():
    made = trigger(owner_arn="arn:aws:sts::123456789012:assumed-role/Researcher/alice")
    data = over_the_wire(wire.trigger_to_dict(made, with_env=True))
    assert "owner_arn" not in data and made.owner_arn not in json.dumps(data)
    [back] = wire.triggers_from_dict({"triggers": [data]})
    assert back == replace(made, owner_arn="")


def test_a_malformed_trigger_answer_is_a_spec_error():
    with pytest.raises(SpecError, match="debounce"):
        wire.triggers_from_dict({"triggers": [dict(trigger().to_dict(), debounce="soon")]})


@pytest.mark.parametrize("body, message", [
    (None, 'the request body must be {"spec"'),
    ([], 'the request body must be {"spec"'),
    ({"spec": "job.yaml"}, 'the request body must be {"spec"'),
    ({"spec": {}, "environment": ["A=1"]}, "environment must be an object of strings"),
    ({"spec": {}, "environment": {"A": 1}}, "environment must be an object of strings"),
])
def test_a_malformed_submission_is_a_spec_error(body, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        wire.submission_from_dict(body)


@pytest.mark.parametrize("body, expected", [
    ({"spec": {"command": ["true"]}}, ({"command": ["true"]}, None)),
    ({"spec": {}, "environment": None}, ({}, None)),
    ({"spec": {}, "environment": {"HF_HOME": "/data"}}, ({}, {"HF_HOME": "/data"})),
])
def test_a_submission_gives_its_spec_and_environment(body, expected):
    assert wire.submission_from_dict(body) == expected


def test_a_job_summary_crosses_the_wire_whole():
    import json

    from gqa.models.accounting import summarise
    from gqa.models.job import JobState, Transition
    from tests.builders import job_record

    S = JobState
    job = job_record(state=S.SUCCEEDED, submitted_at=100.0, cost=2.5, gpu_util=61.0, history=tuple(
        Transition(state, at, "") for state, at in ((S.QUEUED, 100), (S.RUNNING, 110), (S.RETRY_WAIT, 120),
                                                     (S.QUEUED, 150), (S.RUNNING, 160), (S.SUCCEEDED, 200))))
    row = summarise(job, 900)
    assert wire.summary_from_dict(json.loads(json.dumps(wire.summary_to_dict(row)))) == row
