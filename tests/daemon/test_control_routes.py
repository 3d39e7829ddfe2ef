"""A shared box's hold, release and update routes (daemon/routes.py): the
owner's or an admin's, as on AWS; refused ones change nothing."""

import pytest

from cli.backend import LocalBackend
from daemon.routes import Router
from gqa.models.job import JobState
from gqa.ports import Change, Inventory
from gqa.scheduling.snapshot import Gpu, Policy
from gqa.services.access import LocalAccess

ACCESS = LocalAccess(admins=frozenset({"root"}))


def caller(user: str):
    return ACCESS.principal(user, [])


@pytest.fixture
def box(tmp_path):
    be = LocalBackend(tmp_path / "home")
    be.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g") for i in range(4)), cpus=8, memory=64 << 30))
    return Router(be, ACCESS), be


def submit(router, user: str, **spec) -> str:
    status, answer = router.handle(caller(user), "POST", "/jobs", None,
                                   {"spec": {"command": ["true"], "workdir": "/", **spec}})
    assert status == 201, answer
    return answer["first_id"]


def test_an_owner_holds_and_releases_their_jobs(box):
    router, be = box
    first, second = submit(router, "alice"), submit(router, "alice")

    status, answer = router.handle(caller("alice"), "POST", f"/jobs/{first},{second}/hold", None, None)

    assert status == 200 and [r["action"] for r in answer["results"]] == ["held", "held"]
    stored = be.store.get(first)
    assert (stored.state.value, stored.user_hold, stored.reason) == ("HELD", True, "held by alice")
    status, answer = router.handle(caller("alice"), "POST", f"/jobs/{first}/release", None, None)
    assert status == 200 and answer["results"][0]["action"] == "released"
    assert be.store.get(first).reason == "released by alice" and be.store.get(second).state.value == "HELD"


def test_an_owner_updates_a_pending_job(box):
    router, be = box
    job_id = submit(router, "alice", resources={"gpus": 2})

    status, answer = router.handle(caller("alice"), "POST", f"/jobs/{job_id}/update", None,
                                   {"time": 1800, "priority": "low", "gpus": 1})

    assert status == 200, answer
    [result] = answer["results"]
    assert (result["action"], result["detail"]) == ("updated", "wall time none -> 30m00s, priority normal -> low, "
                                                               "GPUs 2 -> 1")
    stored = be.store.get(job_id)
    assert (stored.wall_time, stored.tier, stored.gpus, stored.spec.resources.gpus) == (1800, 2, 1, 1)


@pytest.mark.parametrize("path, body", [
    ("/jobs/{j}/hold", None), ("/jobs/{j}/release", None), ("/jobs/{j}/update", {"gpus": 1}),
])
def test_another_user_may_not_and_nothing_changes(box, path, body):
    router, be = box
    job_id = submit(router, "alice")
    router.handle(caller("alice"), "POST", f"/jobs/{job_id}/hold", None, None)
    before = be.store.get(job_id)

    status, answer = router.handle(caller("bob"), "POST", path.format(j=job_id), None, body)

    assert (status, answer["error"]) == (403, "NotPermitted")
    verb = path.rsplit("/", 1)[1]
    assert answer["message"] == (f"job {job_id} belongs to alice; bob may not {verb} it "
                                 f"(owners {verb} their own jobs; admins may {verb} any)")
    assert be.store.get(job_id) == before
    status, _ = router.handle(caller("root"), "POST", path.format(j=job_id), None, body)   # admins may
    assert status == 200


@pytest.mark.parametrize("body, status, error, words", [
    ({"gpus": "two"}, 400, "SpecError", "gpus must be a whole number, got 'two'"),
    ({"walltime": 60}, 400, "SpecError", "unknown field(s) walltime; expected some of time, priority, gpus"),
    ([1], 400, "SpecError", "the request body must be a JSON object"),
    ({}, 400, "SpecError", "nothing to update"),
    ({"gpus": 3}, 422, "Rejected", "asks for 3 GPUs; the limit per job is 2"),
])
def test_a_bad_or_refused_update_changes_nothing(box, body, status, error, words):
    router, be = box
    be.store.set_policy(Policy(max_gpus_per_job=2))
    job_id = submit(router, "alice", resources={"gpus": 1})
    before = be.store.get(job_id)

    answer = router.handle(caller("alice"), "POST", f"/jobs/{job_id}/update", None, body)

    assert (answer[0], answer[1]["error"]) == (status, error) and words in answer[1]["message"]
    assert be.store.get(job_id) == before


def test_holding_a_running_job_is_a_conflict_that_says_what_to_do(box):
    router, be = box
    job_id = submit(router, "alice")
    be.store.apply([Change(job_id, JobState.QUEUED, JobState.STARTING, "test", 1.0, {"assigned": (0,)})])
    status, answer = router.handle(caller("alice"), "POST", f"/jobs/{job_id}/hold", None, None)
    assert (status, answer["error"]) == (409, "InvalidTransition")
    assert f"gqa cancel {job_id} stops it" in answer["message"]


def test_a_submission_its_teams_budget_will_hold_is_told_so_in_the_answer(box):
    # the full CLI on a shared box submits through this route: it said nothing of the hold the
    # next pass would put on the job, where the CLI run by the queue's owner says it
    import json

    from cli.submit import recorded
    from gqa.http import wire
    from gqa.scheduling import TeamPolicy

    router, be = box
    be.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g", price=3600.0),), cpus=8, memory=64 << 30))
    be.store.set_team("nlp", TeamPolicy(budget=1.0))
    be.store.set_team_members("nlp", ("alice",))
    status, answer = router.handle(caller("alice"), "POST", "/jobs", None,
                                   {"spec": {"command": ["true"], "workdir": "/", "team": "nlp",
                                             "limits": {"wall_time": "1m"}}})
    assert status == 201, answer

    class OverHttp:   # the daemon's client: its submit answers what came over the wire
        def submit(self, spec, **_):
            return wire.submitted_from_dict(json.loads(json.dumps(answer)))

    submitted, note = recorded(OverHttp(), None, environment=None, owner=None)
    assert note is not None and note.startswith("will be held by its team's budget: team nlp budget: spent $0.00")
    assert "over $1.00" in note
    assert "note" not in submit_answer(router, "bob")     # a team with no budget: nothing said


def submit_answer(router, user: str) -> dict:
    status, answer = router.handle(caller(user), "POST", "/jobs", None, {"spec": {"command": ["true"], "workdir": "/"}})
    assert status == 201, answer
    return answer
