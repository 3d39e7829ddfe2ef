"""SubmitService: hard limits, arrays and sweeps, one write per submission."""

import pytest

from gqa.adapters.local.store import SqliteStore
from gqa.models.errors import BackendUnavailable, Rejected
from gqa.models.job import JobState, Transition
from gqa.ports import Inventory
from gqa.scheduling import Policy, TeamPolicy
from gqa.services.submit import SubmitService
from tests.builders import gpus, spec
from tests.services.conftest import T0
from tests.services.fakes import FakeClock

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
    ({"resources": {"gpus": 5}}, {}, Policy(), "asks for 5 GPUs; this machine has 4"),
    ({"resources": {"gpu_type": "h100"}}, {}, Policy(), "asks for h100 GPUs; this machine has 4 gpu"),
    ({"team": "vision", "resources": {"gpus": 3}}, {"vision": TeamPolicy(max_gpus=2)}, Policy(),
     "asks for 3 GPUs; team vision may hold at most 2"),
    ({"team": "nlp", "resources": {"gpus": 2}}, {}, Policy(default_team=TeamPolicy(max_gpus=1)),
     "asks for 2 GPUs; team nlp may hold at most 1"),
    ({"resources": {"gpus": 3}}, {}, Policy(max_gpus_per_job=2), "asks for 3 GPUs; the limit per job is 2"),
    ({"limits": {"wall_time": "3h"}}, {}, Policy(max_wall_time=7200),
     "asks for 3h00m wall time; the limit is 2h00m"),
    ({"array": "0-9", "resources": {"gpus": 8}}, {}, Policy(), "asks for 8 GPUs; this machine has 4"),
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

    assert str(raised.value) == "asks for 6 GPUs; this machine has 4; asks for 6 GPUs; the limit per job is 2"


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


def test_an_admitted_submission_is_owned_by_the_verified_caller_not_the_specs_text(make_queue):
    from gqa.ports import Submission
    from tests.builders import spec

    queue = make_queue(2)
    forged = spec(owner="alice").model_dump_json()
    [job] = queue.submitter.admit(Submission(spec_json=forged, owner="bob", tier=1, idempotency_key="k",
                                             environment={"HOME": "/home/bob"}))
    assert job.owner == "bob" and job.submit_env == {"HOME": "/home/bob"}


def test_a_submission_with_a_bad_spec_names_the_field(make_queue):
    from gqa.models.errors import SpecError
    from gqa.ports import Submission

    queue = make_queue(2)
    bad = Submission(spec_json='{"command": ["a"], "resources": {"gpus": 0}}', owner="bob", tier=1,
                     idempotency_key="k")
    with pytest.raises(SpecError, match="submission: resources.gpus"):
        queue.submitter.admit(bad)
