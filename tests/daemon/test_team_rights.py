"""Teams are rights on a shared box: a submission for a team the caller's
Unix user or groups are not members of is refused with who is, and nothing
is written, through every door the daemon has (the API route and the light
client's `gqa submit`); admins set the members and may submit for any team."""

import os

import pytest

from cli.backend import LocalBackend
from daemon.requests import RequestHandler
from daemon.routes import Router
from daemon.server import Peer
from daemon.submit_command import SubmitCommand
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu
from gqa.services.access import LocalAccess

ACCESS = LocalAccess(admins=frozenset({"root"}), admin_groups=frozenset({"gqa-admins"}))
GROUPS = {"alice": ["users"], "bob": ["users", "ml"], "carl": ["users"], "root": [], "dana": ["gqa-admins"]}


def caller(user: str):
    return ACCESS.principal(user, GROUPS[user])


@pytest.fixture
def box(tmp_path):
    be = LocalBackend(tmp_path / "home")
    be.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g") for i in range(4)), cpus=8, memory=64 << 30))
    router = Router(be, ACCESS)
    status, answer = router.handle(caller("dana"), "PUT", "/quota/teams/vision/members", None,
                                   {"members": ["alice", "@ml"]})
    assert (status, answer) == (200, {"team": "vision", "members": ["alice", "@ml"]})
    return router, be


def submit(router, user: str, team: str | None = None):
    spec = {"command": ["true"], "workdir": "/", **({"team": team} if team else {})}
    return router.handle(caller(user), "POST", "/jobs", None, {"spec": spec})


@pytest.mark.parametrize("user, team, expected", [
    ("alice", "vision", "vision"),        # by user name
    ("bob", "vision", "vision"),          # by group, @ml
    ("bob", None, "vision"),              # naming none: the caller's only team
    ("carl", None, "default"),            # in no team: the default team
    ("root", "nlp", "nlp"),               # admins: any team
])
def test_a_job_runs_for_a_team_its_submitter_is_in(box, user, team, expected):
    router, be = box
    status, answer = submit(router, user, team)
    assert status == 201, answer
    assert be.store.get(answer["first_id"]).team == expected


def test_a_team_the_caller_is_not_in_is_403_naming_the_members(box):
    router, be = box
    status, answer = submit(router, "carl", "vision")
    assert (status, answer["error"]) == (403, "NotPermitted")
    assert answer["message"] == ("carl is not a member of team vision (members: alice, @ml); submit for team "
                                 "default (the team of users in no team), or ask an admin to add you")
    assert be.store.list() == []


def test_only_admins_set_members_and_bad_ones_are_refused(box):
    router, be = box
    status, answer = router.handle(caller("alice"), "PUT", "/quota/teams/vision/members", None, {"members": []})
    assert (status, answer["error"]) == (403, "NotPermitted")
    status, answer = router.handle(caller("root"), "PUT", "/quota/teams/vision/members", None, {"members": ["@"]})
    assert (status, answer["error"]) == (400, "SpecError")
    status, answer = router.handle(caller("root"), "PUT", "/quota/teams/vision/members", None, {"people": []})
    assert (status, answer["error"]) == (400, "SpecError")
    assert be.store.team_members() == {"vision": ("alice", "@ml")}


def test_the_light_clients_submit_is_checked_the_same(box):
    """POST /cli/submit: `gqa submit` parsed and recorded by the daemon for the caller."""
    router, be = box
    handler = RequestHandler(SubmitCommand(be.submitter()), lambda: {}, router,
                             principal=lambda peer: caller({1001: "carl", 1002: "bob"}[peer.uid]))

    def cli_submit(uid: int, *argv: str) -> dict:
        status, answer = handler(Peer(0, uid, uid), {"v": 1, "method": "POST", "path": "/cli/submit",
                                                      "body": {"argv": ["submit", *argv, "--", "true"],
                                                               "cwd": "/", "env": {}}})
        assert status == 200
        return answer

    refused = cli_submit(1001, "--team", "vision")
    assert refused["code"] == 2 and "carl is not a member of team vision" in refused["stderr"]
    assert be.store.list() == []
    done = cli_submit(1002)
    assert done["code"] == 0, done
    assert [j.team for j in be.store.list()] == ["vision"]


def test_on_a_single_user_queue_its_owner_administers_it(tmp_path):
    be = LocalBackend(tmp_path / "home")
    be.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g"),), cpus=8, memory=64 << 30))
    be.quota().set_members("vision", ["someone-else"])
    handler = RequestHandler(SubmitCommand(be.submitter()), lambda: {})
    status, answer = handler(Peer(0, os.getuid(), os.getgid()),
                             {"v": 1, "method": "POST", "path": "/cli/submit",
                              "body": {"argv": ["submit", "--team", "vision", "--", "true"], "cwd": "/",
                                       "env": {}}})
    assert (status, answer["code"]) == (200, 0), answer
    assert [j.team for j in be.store.list()] == ["vision"]
