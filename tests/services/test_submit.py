"""SubmitService: hard limits, arrays and sweeps, one write per submission; on AWS
accept (ids reserved, nothing written) then admit (written under those ids, once)."""

import re
from dataclasses import replace

import pytest

from gqa.adapters.local.store import SqliteStore
from gqa.models.errors import BackendUnavailable, Rejected, SpecError
from gqa.models.job import JobState, Transition
from gqa.ports import Inventory, Submission
from gqa.scheduling import Policy, TeamPolicy
from gqa.services.submit import SubmitService
from tests.builders import gpus, spec
from tests.services.conftest import T0
from tests.services.fakes import FakeClock, RecordingIntake

S = JobState


class CountingStore:
    """Passes every call to the real store and counts create() calls."""

    def __init__(self, store):
        self.store, self.creates = store, []

    def create(self, jobs):
        self.creates.append(len(jobs))
        return self.store.create(jobs)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_job_is_recorded_queued_with_its_history(queue):
    job_spec = spec(name="resnet", team="vision", owner="bob", priority="high",
                    resources={"gpus": 2, "cpus": 4, "memory": "8Gi"}, limits={"wall_time": "2h"})

    [job] = queue.submitter.submit(job_spec)

    assert (job.id, job.group, job.state, job.reason) == ("1", "1", S.QUEUED, "admitted")
    assert job.history == (Transition(S.SUBMITTED, T0, "submitted"), Transition(S.QUEUED, T0, "admitted"))
    assert (job.name, job.team, job.owner, job.tier, job.gpus, job.cpus, job.memory, job.wall_time) == \
        ("resnet", "vision", "bob", 0, 2, 4, 8 * 1024**3, 7200)
    assert job.submitted_at == T0 and job.spec == job_spec
    assert queue.get("1") == job
    assert queue.waker.wakes == 1


@pytest.mark.parametrize("overrides, expected_ids, limit, extra_env", [
    ({"array": "0-3%2"}, ["1_0", "1_1", "1_2", "1_3"], 2, ["0", "1", "2", "3"]),
    ({"array": "1,5"}, ["1_1", "1_5"], None, ["1", "5"]),
    ({"sweep": {"grid": {"lr": [0.1, 0.01], "bs": [32, 64]}}}, ["1_0", "1_1", "1_2", "1_3"], None,
     ["0", "1", "2", "3"]),
])
def test_an_array_or_sweep_is_one_group_written_in_one_call(queue, overrides, expected_ids, limit, extra_env):
    counting = CountingStore(queue.store)
    service = SubmitService(counting, queue.clock)

    jobs = service.submit(spec(**overrides))

    assert counting.creates == [len(expected_ids)]
    assert [j.id for j in jobs] == expected_ids
    assert {j.group for j in jobs} == {"1"}
    assert {j.group_limit for j in jobs} == {limit}
    assert [j.extra_env["GQA_ARRAY_INDEX"] for j in jobs] == extra_env
    assert [j.id for j in queue.store.resolve("1")] == expected_ids
    assert {j.state for j in queue.store.resolve("1")} == {S.QUEUED}


def test_a_sweep_gives_each_job_its_values(queue):
    jobs = queue.submit(sweep={"grid": {"lr": [0.1, 0.01], "bs": [32]}})

    assert [j.spec.command for j in jobs] == [["python", "train.py", "--lr=0.1", "--bs=32"],
                                              ["python", "train.py", "--lr=0.01", "--bs=32"]]
    assert [j.spec.tags for j in jobs] == [{"sweep.lr": "0.1", "sweep.bs": "32"},
                                           {"sweep.lr": "0.01", "sweep.bs": "32"}]


@pytest.mark.parametrize("overrides, teams, policy, message", [
    ({"resources": {"gpus": 5}}, {}, Policy(), "asks for 5 GPUs; the queue has 4"),
    ({"resources": {"gpu_type": "h100"}}, {}, Policy(), "asks for h100 GPUs; the queue has 4 gpu"),
    ({"team": "vision", "resources": {"gpus": 3}}, {"vision": TeamPolicy(max_gpus=2)}, Policy(),
     "asks for 3 GPUs; team vision may hold at most 2"),
    ({"team": "nlp", "resources": {"gpus": 2}}, {}, Policy(default_team=TeamPolicy(max_gpus=1)),
     "asks for 2 GPUs; team nlp may hold at most 1"),
    ({"resources": {"gpus": 3}}, {}, Policy(max_gpus_per_job=2), "asks for 3 GPUs; the limit per job is 2"),
    ({"limits": {"wall_time": "3h"}}, {}, Policy(max_wall_time=7200),
     "asks for 3h00m wall time; the limit is 2h00m"),
    ({"array": "0-9", "resources": {"gpus": 8}}, {}, Policy(), "asks for 8 GPUs; the queue has 4"),
])
def test_a_job_over_a_hard_limit_is_rejected_with_numbers_and_nothing_is_written(
        queue, overrides, teams, policy, message):
    queue.store.set_policy(policy)
    for team, team_policy in teams.items():
        queue.store.set_team(team, team_policy)

    with pytest.raises(Rejected) as raised:
        queue.submit(**overrides)

    assert message in str(raised.value)
    assert queue.store.list() == []
    assert queue.waker.wakes == 0


def test_every_problem_is_reported_at_once(queue):
    queue.store.set_policy(Policy(max_gpus_per_job=2))

    with pytest.raises(Rejected) as raised:
        queue.submit(resources={"gpus": 6})

    assert str(raised.value) == "asks for 6 GPUs; the queue has 4; asks for 6 GPUs; the limit per job is 2"


def priced_budget(queue, policy: Policy | None = None) -> None:
    """Team nlp on a $100 budget, GPUs at $2 an hour."""
    queue.store.set_inventory(Inventory(gpus=tuple(replace(g, price=2.0) for g in gpus(4))))
    queue.store.set_policy(policy or Policy())
    queue.store.set_team("nlp", TeamPolicy(budget=100.0))


def test_a_job_with_no_wall_time_in_a_team_with_a_budget_is_refused_saying_what_to_add(queue):
    # accepted, it was held for good: "+ unbounded for this job = unbounded, over $100.00"
    priced_budget(queue)
    with pytest.raises(Rejected, match=re.escape(
            "team nlp has a budget ($100.00 a month): give the job a wall time (--time 4h) so its cost can be "
            "bounded")):
        queue.submit(team="nlp")
    assert queue.store.list() == []
    assert queue.submit_one(team="nlp", limits={"max_gpu_hours": 8}).state == S.QUEUED   # bounded another way
    assert queue.submit_one(team="vision").state == S.QUEUED                             # no budget: no bound needed


def test_a_job_with_no_wall_time_in_a_team_with_a_budget_gets_the_queue_s_maximum(queue):
    # as Slurm gives a job without --time its partition's limit: the cap the budget counts is enforced
    priced_budget(queue, Policy(max_wall_time=4 * 3600))
    job = queue.submit_one(team="nlp")
    assert (job.state, job.wall_time, job.attempt_wall_time) == (S.QUEUED, 4 * 3600, 4 * 3600)
    assert queue.supervisor.dispatch()[0].id == job.id                   # $8 at most: within $100


@pytest.mark.parametrize("overrides, held", [
    ({"limits": {"wall_time": "30h"}}, True),               # $240 at most: over $100
    ({"limits": {"wall_time": "30h"}, "array": "0-2"}, True),
    ({"limits": {"wall_time": "1h"}}, False),               # $8: within it
    ({"limits": {"wall_time": "30h"}, "hold": True}, False),    # held by its owner: that is what it is told
    ({"limits": {"wall_time": "30h"}, "team": "vision"}, False),  # no budget
])
def test_a_submission_is_told_when_its_team_s_budget_will_hold_it_with_the_pass_s_reason(queue, overrides, held):
    priced_budget(queue)
    done = queue.submitter.record(spec(**{"team": "nlp", "resources": {"gpus": 4}, **overrides}))

    queue.supervisor.dispatch()

    first = queue.get(done.jobs[0].id)
    if held:
        assert first.state == S.HELD and done.note == f"will be held by its team's budget: {first.reason}"
        assert done.note == ("will be held by its team's budget: team nlp budget: spent $0.00 + $0.00 its running "
                             "jobs may still cost + $240.00 for this job = $240.00, over $100.00 this period")
    else:
        assert done.note is None


def test_the_budget_counts_what_the_team_s_running_jobs_may_still_cost(queue):
    priced_budget(queue)
    queue.submit_one(team="nlp", resources={"gpus": 2}, limits={"wall_time": "20h"})   # $80 at most
    queue.supervisor.dispatch()

    done = queue.submitter.record(spec(team="nlp", resources={"gpus": 2}, limits={"wall_time": "6h"}))   # $24

    held = ("team nlp budget: spent $0.00 + $80.00 its running jobs may still cost + "
            "$24.00 for this job = $104.00, over $100.00 this period")
    assert done.note == f"will be held by its team's budget: {held}"
    queue.supervisor.dispatch()
    assert queue.get(done.jobs[0].id).reason == held


def test_a_queue_without_gpus_registered_is_unavailable(tmp_path):
    store = SqliteStore(tmp_path / "empty.db")
    try:
        with pytest.raises(BackendUnavailable):
            SubmitService(store, FakeClock(T0)).submit(spec())
        assert store.list() == []
        store.set_inventory(Inventory(gpus=gpus(1)))
        assert [j.id for j in SubmitService(store, FakeClock(T0)).submit(spec())] == ["1"]
    finally:
        store.close()


# -- the API's half and the admit function's half (AWS) ------------------------------------------

def accepted(queue, *, owner: str = "bob", **overrides) -> tuple[list, Submission]:
    intake = RecordingIntake()
    jobs = queue.submitter.accept(spec(**overrides), owner=owner, environment={"HOME": "/home/bob"}, intake=intake)
    [submission] = intake.sent
    return jobs, submission


def test_accept_reserves_ids_and_sends_the_submission_without_writing_a_job(queue):
    jobs, submission = accepted(queue, owner="bob", array="0-2", priority="high")

    assert [(j.id, j.group, j.state, j.reason) for j in jobs] == [
        (f"1_{i}", "1", S.SUBMITTED, "accepted; waiting for admission") for i in range(3)]
    assert [j.seq for j in jobs] == [jobs[0].seq, jobs[0].seq + 1, jobs[0].seq + 2]
    assert {j.owner for j in jobs} == {"bob"}
    assert (submission.job_ids, submission.seq) == (("1_0", "1_1", "1_2"), jobs[0].seq)
    assert (submission.owner, submission.tier, submission.environment) == ("bob", 0, {"HOME": "/home/bob"})
    assert submission.idempotency_key == "jobs-1"
    assert queue.store.list() == []
    assert queue.waker.wakes == 0
    # reserved for good: the next submission gets the next ids, before any admission
    assert [j.id for j in queue.submit()] == ["2"]


def test_accept_checks_the_hard_limits_and_sends_nothing_over_them(queue):
    intake = RecordingIntake()
    with pytest.raises(Rejected, match="asks for 5 GPUs; the queue has 4"):
        queue.submitter.accept(spec(resources={"gpus": 5}), owner="bob", intake=intake)
    assert intake.sent == []
    assert [j.id for j in queue.submit()] == ["1"]     # no id was used up


def test_a_team_the_caller_is_not_in_is_refused_before_any_id_is_reserved(queue):
    from gqa.models.errors import NotPermitted
    from gqa.services.access import Principal

    queue.store.set_team_members("vision", ("alice",))
    bob = Principal(owner="bob", arn="arn:aws:iam::1:user/bob")
    intake = RecordingIntake()
    with pytest.raises(NotPermitted, match=r"bob is not a member of team vision \(members: alice\)"):
        queue.submitter.accept(spec(team="vision"), owner="bob", intake=intake, caller=bob)
    with pytest.raises(NotPermitted, match="bob is not a member of team vision"):
        queue.submitter.submit(spec(team="vision"), owner="bob", caller=bob)
    assert intake.sent == [] and queue.store.list() == []
    assert [j.id for j in queue.submit()] == ["1"]     # no id was used up
    alice = Principal(owner="alice", arn="arn:aws:iam::1:user/alice")
    [job] = queue.submitter.submit(spec(), owner="alice", caller=alice)
    assert job.team == "vision"                        # naming no team: her only one


def test_accept_uses_the_constructors_intake_when_given_none(queue):
    intake = RecordingIntake()
    [job] = SubmitService(queue.store, queue.clock, intake=intake).accept(spec(), owner="bob")
    assert [s.job_ids for s in intake.sent] == [(job.id,)]
    with pytest.raises(BackendUnavailable):
        queue.submitter.accept(spec(), owner="bob")


def test_admit_writes_the_jobs_under_the_reserved_ids(queue):
    jobs, submission = accepted(queue, array="0-3:2")
    queue.clock.advance(5)

    admitted = queue.submitter.admit(submission)

    assert [(j.id, j.group, j.seq) for j in admitted] == [(j.id, j.group, j.seq) for j in jobs]
    assert [j.state for j in admitted] == [S.QUEUED, S.QUEUED]
    assert [j.extra_env["GQA_ARRAY_INDEX"] for j in admitted] == ["0", "2"]
    assert queue.store.resolve("1") == admitted
    assert queue.waker.wakes == 1


def test_a_redelivered_submission_changes_nothing(queue):
    _, submission = accepted(queue)
    [job] = queue.submitter.admit(submission)
    queue.supervisor.dispatch()
    running = queue.get(job.id)
    assert running.state == S.RUNNING

    assert queue.submitter.admit(submission) == [running]     # the job as it is, not as first written
    assert queue.store.list(history=True) == [running]


def test_an_admitted_submission_is_owned_by_the_verified_caller_not_the_specs_text(queue):
    _, submission = accepted(queue, owner="bob")
    forged = replace(submission, spec_json=spec(owner="alice").model_dump_json())
    [job] = queue.submitter.admit(forged)
    assert job.owner == "bob" and job.submit_env == {"HOME": "/home/bob"}


def test_a_submission_over_a_limit_set_after_it_was_accepted_is_recorded_rejected(queue):
    _, submission = accepted(queue, resources={"gpus": 3})
    queue.store.set_policy(Policy(max_gpus_per_job=2))

    [job] = queue.submitter.admit(submission)

    assert (job.id, job.state) == (submission.job_ids[0], S.REJECTED)
    assert job.reason == "rejected: asks for 3 GPUs; the limit per job is 2"
    assert [t.state for t in job.history] == [S.SUBMITTED, S.REJECTED]
    assert queue.get(job.id) == job


@pytest.mark.parametrize("change, message", [
    ({"job_ids": ()}, "no reserved job ids"),
    ({"seq": None}, "no reserved job ids"),
    ({"job_ids": ("1_0", "1_1")}, "2 job ids for 3 jobs"),
    ({"job_ids": ("1_0", "1_1", "1_3")}, "job id 1_3 does not fit job 2 (expected 1_2)"),
    ({"job_ids": ("1_0", "2_1", "1_2")}, "job id 2_1 does not fit job 1 (expected 1_1)"),
    ({"job_ids": ("1", "1_1", "1_2")}, "job id 1 does not fit job 0 (expected 1_0)"),
])
def test_a_submission_whose_ids_do_not_fit_is_malformed_and_writes_nothing(queue, change, message):
    _, submission = accepted(queue, array="0-2")
    with pytest.raises(SpecError, match=re.escape(message)):
        queue.submitter.admit(replace(submission, **change))
    assert queue.store.list() == []


def test_a_single_jobs_id_has_no_index(queue):
    _, submission = accepted(queue)
    with pytest.raises(SpecError, match="does not fit"):
        queue.submitter.admit(replace(submission, job_ids=("1_0",)))


def test_a_submission_with_a_bad_spec_names_the_field(queue):
    _, submission = accepted(queue)
    bad = replace(submission, spec_json='{"command": ["a"], "resources": {"gpus": -1}}')
    with pytest.raises(SpecError, match="submission: resources.gpus"):
        queue.submitter.admit(bad)


# -- Slurm's --export: the submitter's environment a job starts from --------------------------------

SHELL_ENV = {"HOME": "/home/bob", "EDITOR": "vi", "SLURM_CONF": "/etc/slurm.conf"}


@pytest.mark.parametrize("export, expected", [
    (None, SHELL_ENV),
    ("ALL,EDITOR", SHELL_ENV),
    ("NONE", None),                                       # the queue's own environment
    ("EDITOR", {"EDITOR": "vi", "SLURM_CONF": "/etc/slurm.conf"}),
])
def test_a_submission_records_the_environment_export_passes_on(queue, export, expected):
    [job] = queue.submitter.submit(spec(export=export), environment=dict(SHELL_ENV))
    assert job.submit_env == expected
    assert queue.store.get(job.id).submit_env == expected


def test_an_admitted_submission_records_the_environment_export_passes_on(queue):
    intake = RecordingIntake()
    [reserved] = queue.submitter.accept(spec(export="EDITOR"), owner="bob", environment=dict(SHELL_ENV),
                                        intake=intake)
    assert reserved.submit_env == {"EDITOR": "vi", "SLURM_CONF": "/etc/slurm.conf"}
    [job] = queue.submitter.admit(intake.sent[0])
    assert job.submit_env == {"EDITOR": "vi", "SLURM_CONF": "/etc/slurm.conf"}
