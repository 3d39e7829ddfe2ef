"""GET /overview on the api function (moto): for everyone who may read the
queue, the GPUs and the job on each, the queue's head with its reasons, the
teams against quota and budget and the latest transitions; the CLI's proxy
reads the answer back into the same Overview."""

from __future__ import annotations

import pytest

from cli.aws_backend import Overviews
from gqa.http.wire import overview_from_dict
from gqa.scheduling import TeamPolicy
from tests.aws.test_api_handler import api  # noqa: F401  (the fixture: the handler on moto)

pytestmark = pytest.mark.aws


def test_the_overview_shows_gpus_head_teams_and_events(api):  # noqa: F811
    api.store.set_team("default", TeamPolicy(max_gpus=3))
    running = api.running("alice")
    waiting = api.job("bob", name="sweep", resources={"gpus": 3})
    status, view = api("GET", "/overview", "carol")
    assert status == 200
    assert [(g["index"], g["job"]["id"] if g["job"] else None) for g in view["gpus"]] == [
        (0, running), (1, None), (2, None), (3, None)]
    assert [(e["id"], e["position"], e["reason"]) for e in view["head"]] == [
        (waiting, 1, "team default at 1 of 3 GPUs; needs 3 more")]
    [team] = view["teams"]
    assert (team["team"], team["gpus_held"], team["max_gpus"], team["budget"]) == ("default", 1, 3, None)
    assert view["events"][0]["job_id"] == waiting and view["events"][0]["state"] == "QUEUED"
    assert overview_from_dict(view).head[0].id == waiting


def test_the_proxy_asks_for_the_sizes_and_decodes_the_answer(api):  # noqa: F811
    for _ in range(3):
        api.job("bob")

    class Calls:
        def call(self, method, path, *, query=None, body=None):
            status, answer = api(method, path, "bob", query={k: str(v) for k, v in (query or {}).items()
                                                               if v is not None})
            assert status == 200, answer
            return answer

    seen = Overviews(Calls()).overview(head=2, events=1)
    assert (seen.pending, len(seen.head), len(seen.events)) == (3, 2, 1)


@pytest.mark.parametrize("query, words", [({"head": "500"}, "head must be at most 200, got 500"),
                                          ({"events": "x"}, "events must be")])
def test_bad_sizes_are_400(api, query, words):  # noqa: F811
    status, answer = api("GET", "/overview", query=query)
    assert status == 400 and words in answer["message"]


def test_without_an_identity_the_overview_is_401(api):  # noqa: F811
    status, _ = api("GET", "/overview", who=None)
    assert status == 401



def test_a_frame_reads_the_live_jobs_once_for_the_queue_the_quotas_and_the_spend(api):  # noqa: F811
    from gqa.adapters.aws.tables import CHANGE_SHARDS
    from tests.aws.moto_support import capture

    api.running("alice")
    api.job("bob")
    api("GET", "/overview")                      # the container keeps the settings from here on
    calls = capture(api.module.container().store.client)
    api("GET", "/overview")
    passes = [c for c in calls if c.get("IndexName") == "pass"]
    states = [c["ExpressionAttributeValues"][":v0"]["S"] for c in calls if c.get("IndexName") == "by_state"]
    # the usage ledger's running jobs once, the latest writes once; the listing (the rows and the
    # scheduling view made from them, store_live.queue_listing) once, a Query of each listed state
    assert len(passes) == 2 * CHANGE_SHARDS, [(c["_operation"], c.get("IndexName")) for c in calls]
    assert sorted(states) == sorted(set(states)), states
