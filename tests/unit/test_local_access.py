"""A shared box's access rule and the daemon's API: who is who on the box
(LocalAccess), every route against the job's owner, another user, an
approver and an admin, over the SQLite services; and a job's output paged
from the local log file."""

from dataclasses import dataclass

import pytest

from cli.backend import LocalBackend
from daemon.callers import principal_for
from daemon.routes import Router
from gqa.adapters.local.log_pages import LocalLogFiles
from gqa.adapters.local.paths import StatePaths
from gqa.models.job import JobState
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu
from gqa.services.access import LocalAccess, Role
from gqa.services.logs import LogService
from tests.builders import history, job_record

ACCESS = LocalAccess(admins=frozenset({"root", "gqa"}), admin_groups=frozenset({"gqa-admins"}),
                     approver_groups=frozenset({"gqa-approvers"}))


@pytest.mark.parametrize("user, groups, roles", [
    ("alice", [], set()),
    ("alice", ["users", "vision"], set()),
    ("root", [], {Role.ADMIN}),
    ("gqa", [], {Role.ADMIN}),                                  # the user who runs the daemon
    ("dana", ["gqa-admins"], {Role.ADMIN}),
    ("carol", ["gqa-approvers"], {Role.APPROVER}),
    ("erin", ["gqa-approvers", "gqa-admins"], {Role.ADMIN, Role.APPROVER}),
])
def test_roles_on_a_shared_box(user, groups, roles):
    who = ACCESS.principal(user, groups)
    assert (who.owner, who.arn, who.roles) == (user, f"unix:{user}", frozenset(roles))


def test_an_empty_policy_makes_nobody_admin():
    assert not LocalAccess().principal("root", ["root"]).admin


def test_peer_credentials_of_root_make_an_admin_and_a_uid_with_no_name_is_refused():
    from gqa.models.errors import NotPermitted

    assert principal_for(0, 0, LocalAccess(admins=frozenset({"root"}))).admin
    with pytest.raises(NotPermitted, match="uid 3999999 has no user name"):
        principal_for(3999999, 3999999, ACCESS)


# -- the routes --------------------------------------------------------------------------------

WHO = {"owner": ACCESS.principal("alice"), "other": ACCESS.principal("bob"),
       "approver": ACCESS.principal("carol", ["gqa-approvers"]), "admin": ACCESS.principal("root")}


@pytest.fixture
def box(tmp_path):
    """A queue of 4 GPUs where jobs over 1 GPU need approval, and alice's job 1
    (2 GPUs, awaiting approval) in it, submitted through the router."""
    be = LocalBackend(tmp_path / "home")
    be.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g") for i in range(4)), cpus=8, memory=64 << 30))
    be.quota().set_policy(approval_gpus=1)
    router = Router(be, ACCESS)
    status, body = router.handle(WHO["owner"], "POST", "/jobs", None,
                                 {"spec": {"command": ["true"], "resources": {"gpus": 2}, "workdir": "/"},
                                  "environment": {"HF_TOKEN": "secret"}})
    assert status == 201, body
    return router, be, body["first_id"]


ROUTES = [
    # method, path, body, {caller: status}
    ("GET", "/whoami", None, {"owner": 200, "other": 200, "admin": 200}),
    ("GET", "/jobs/{id}", None, {"owner": 200, "other": 200, "admin": 200}),
    ("GET", "/queue", None, {"owner": 200, "other": 200, "admin": 200}),
    ("POST", "/jobs/{id}/cancel", None, {"owner": 200, "other": 403, "approver": 403, "admin": 200}),
    # a job awaiting approval cannot be requeued: past the rule, the lifecycle refuses (409)
    ("POST", "/jobs/{id}/requeue", None, {"owner": 409, "other": 403, "admin": 409}),
    ("POST", "/jobs/{id}/approve", None, {"owner": 403, "other": 403, "approver": 200, "admin": 200}),
    ("POST", "/jobs/{id}/deny", {"reason": "too big"}, {"owner": 403, "approver": 200, "admin": 200}),
    # not started: the owner and admins hear so (404 NotStarted); others may not read it at all
    ("GET", "/jobs/{id}/logs", None, {"owner": 404, "other": 403, "approver": 403, "admin": 404}),
    ("GET", "/quota", None, {"owner": 200, "other": 200}),
    ("PUT", "/quota/teams/vision", {"max_gpus": 2}, {"owner": 403, "approver": 403, "admin": 200}),
    ("PUT", "/quota/policy", {"half_life": 3600}, {"owner": 403, "approver": 403, "admin": 200}),
    ("GET", "/cost", None, {"owner": 200, "other": 200}),
    ("GET", "/nowhere", None, {"owner": 404, "admin": 404}),
    ("DELETE", "/jobs/{id}", None, {"owner": 404}),
    ("GET", "/triggers", None, {"owner": 503}),
]


@pytest.mark.parametrize("method, path, body, caller, expected",
                         [(m, p, b, c, s) for m, p, b, by in ROUTES for c, s in by.items()],
                         ids=lambda v: v if isinstance(v, str) else None)
def test_each_route_authorised_as_on_aws(box, method, path, body, caller, expected):
    router, be, job_id = box
    status, answer = router.handle(WHO[caller], method, path.format(id=job_id), None, body)
    assert status == expected, answer
    if status >= 400:
        assert set(answer) == {"error", "message"} and "\n" not in answer["message"]
    if status == 403:                       # refused before anything changed
        assert be.store.get(job_id).state == JobState.PENDING_APPROVAL


def test_a_refusal_names_the_owner_and_who_may(box):
    router, _, job_id = box
    status, answer = router.handle(WHO["other"], "POST", f"/jobs/{job_id}/cancel", None, None)
    assert (status, answer["error"]) == (403, "NotPermitted")
    assert answer["message"] == (f"job {job_id} belongs to alice; bob may not cancel it "
                                 "(owners cancel their own jobs; admins may cancel any)")


def test_the_environment_is_stored_for_the_job_and_never_sent_back(box):
    router, be, job_id = box
    assert be.store.get(job_id).submit_env == {"HF_TOKEN": "secret"}
    for caller in ("owner", "admin"):
        for path in (f"/jobs/{job_id}", "/queue"):
            status, answer = router.handle(WHO[caller], "GET", path, None, None)
            assert status == 200 and "secret" not in repr(answer)


def test_the_owner_is_the_caller_whatever_the_spec_says(box):
    router, be, _ = box
    status, answer = router.handle(WHO["other"], "POST", "/jobs", None,
                                   {"spec": {"command": ["true"], "owner": "alice", "workdir": "/"}})
    assert status == 201 and be.store.get(answer["first_id"]).owner == "bob"


@pytest.mark.parametrize("body, words", [
    ({"spec": "true"}, "the request body must be"),
    ({"spec": {"command": ["true"]}, "environment": {"A": 1}}, "environment must be an object of strings"),
    ({"spec": {"command": ["true"], "resources": {"gpus": 9}}}, "asks for 9 GPUs"),
])
def test_bad_submissions_are_refused_in_one_line(box, body, words):
    router, _, _ = box
    status, answer = router.handle(WHO["owner"], "POST", "/jobs", None, body)
    assert status in (400, 422) and words in answer["message"]


def test_queries_are_read_as_a_url_carries_them(box):
    router, _, job_id = box
    status, answer = router.handle(WHO["owner"], "GET", "/queue", {"explain": "false", "limit": "1"}, None)
    assert status == 200 and answer["pending"][0]["factors"] is None
    status, answer = router.handle(WHO["owner"], "GET", f"/jobs/{job_id}", {"limit": "zero"}, None)
    assert status == 400 and "whole number" in answer["message"]


@dataclass
class Peer:
    uid: int
    gid: int
    pid: int = 1


@pytest.mark.parametrize("request_line, status", [
    ({"v": 1, "method": "GET", "path": "/whoami"}, 200),
    ({"v": 2, "method": "GET", "path": "/whoami"}, 400),
    ({"v": 1, "path": "/whoami"}, 400),
])
def test_serve_takes_the_caller_from_the_peer(box, request_line, status):
    router, _, _ = box
    got, answer = Router(router.wiring, LocalAccess(admins=frozenset({"root"}))).serve(Peer(0, 0), request_line)
    assert got == status
    if status == 200:
        assert answer["owner"] == "root" and "admin" in answer["roles"]


def test_a_bug_answers_500_and_the_daemon_keeps_serving(box):
    router, _, _ = box

    class Broken:
        def queries(self):
            raise RuntimeError("boom")

    status, answer = Router(Broken(), ACCESS).handle(WHO["owner"], "GET", "/queue", None, None)
    assert status == 500 and answer["error"] == "InternalError" and "boom" not in answer["message"]


# -- a job's output from the local log file ---------------------------------------------------------

def _log(tmp_path, text: str) -> StatePaths:
    paths = StatePaths(tmp_path)
    paths.logs.mkdir(parents=True, exist_ok=True)
    paths.log_for("7").write_text(text)
    return paths


class OneJob:
    def __init__(self, job):
        self.job = job

    def resolve(self, ref, *, history=True):
        return [self.job]


TWO_ATTEMPTS = ("--- gqa: attempt 1 of job 7 on GPUs 0 at 2026-01-01 00:00:00: python t.py\nstep 1\nstep 2\n"
                "--- gqa: attempt 2 of job 7 on GPUs 1 at 2026-01-01 00:10:00: python t.py\nresumed\n")


@pytest.mark.parametrize("state, attempt, limit, pages", [
    # every attempt, headed once each (by LogService), the launcher's own line not repeated
    (JobState.SUCCEEDED, None, 100, [["#1", "step 1", "step 2", "#2", "resumed"]]),
    (JobState.SUCCEEDED, None, 1, [["#1", "step 1"], ["step 2"], ["#2", "resumed"]]),
    (JobState.SUCCEEDED, 1, 100, [["#1", "step 1", "step 2"]]),
    (JobState.SUCCEEDED, 2, 100, [["#2", "resumed"]]),
])
def test_local_log_pages(tmp_path, state, attempt, limit, pages):
    paths = _log(tmp_path, TWO_ATTEMPTS)
    job = job_record(id="7", group="7", state=state, attempts=2, spec={"command": ["python", "t.py"]},
                     history=history("RUNNING@0", "RUNNING@600", f"{state.value}@700"))
    service = LogService(OneJob(job), LocalLogFiles(paths))
    token, got = None, []
    for _ in range(10):
        page = service.page("7", attempt=attempt, token=token, limit=limit)
        got.append([line if not line.startswith("--- gqa: attempt") else "#" + line.split()[3]
                    for line in page.lines])
        token = page.token
        if page.done:
            break
    assert [p for p in got if p] == pages


def test_a_live_attempt_gives_whole_lines_only_and_continues_from_its_token(tmp_path):
    paths = _log(tmp_path, "--- gqa: attempt 1 of job 7 on GPUs 0 at x: t\nfirst\nhalf a li")
    job = job_record(id="7", group="7", state=JobState.RUNNING, attempts=1, spec={"command": ["t"]})
    service = LogService(OneJob(job), LocalLogFiles(paths))
    page = service.page("7")
    assert page.lines[1:] == ("first",) and not page.done
    with open(paths.log_for("7"), "a") as fh:
        fh.write("ne\nmore\n")
    assert service.page("7", token=page.token).lines == ("half a line", "more")
