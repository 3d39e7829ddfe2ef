"""GET /queue and GET /jobs/<group> page without a scheduling pass or a
read of the whole group per page: the first page's listing is kept a minute
in the api function's container, named by the pages' tokens; a token it
does not hold (another container's, an older one) computes the listing
again, and the pages still add up."""

from __future__ import annotations

from unittest import mock

import pytest

from gqa.adapters.clock import SystemClock
from gqa.services.queries import QueryService
from gqa.services.submit import SubmitService
from lambdas.api import listings
from tests.aws.test_api_handler import api, read_all  # noqa: F401  (the fixture)
from tests.builders import spec

pytestmark = pytest.mark.aws


@pytest.fixture
def passes():
    """How many times a queue listing (a whole scheduling pass) is computed."""
    listings.queues.clear()
    with mock.patch.object(QueryService, "queue", autospec=True, side_effect=QueryService.queue) as counted:
        yield counted
    listings.queues.clear()


@pytest.fixture
def reads():
    """How many times a group's jobs are read."""
    listings.groups.clear()
    with mock.patch.object(QueryService, "jobs", autospec=True, side_effect=QueryService.jobs) as counted:
        yield counted
    listings.groups.clear()


def test_the_queue_is_computed_once_for_all_its_pages(api, passes):   # noqa: F811
    ids = [api.job(priority=p) for p in ("low", "high", "normal", "low", "high")]
    pages = read_all(api, "/queue", limit="2")
    assert [len(p["pending"]) for p in pages] == [2, 2, 1]
    assert passes.call_count == 1
    entries = sorted((e for p in pages for e in p["pending"]), key=lambda e: e["rank"])
    assert sorted(e["job"]["id"] for e in entries) == sorted(ids)
    assert [e["position"] for e in entries] == list(range(1, len(ids) + 1))   # one pass's positions


def test_a_page_whose_listing_this_container_no_longer_holds_computes_it_again(api, passes):   # noqa: F811
    ids = [api.job() for _ in range(3)]
    _, first = api("GET", "/queue", "bob", query={"limit": "2"})
    listings.queues.clear()                         # another container, or a minute later
    _, rest = api("GET", "/queue", "bob", query={"limit": "2", "next": first["next"]})
    assert passes.call_count == 2
    assert sorted(e["job"]["id"] for e in first["pending"] + rest["pending"]) == sorted(ids)
    assert rest["next"] is None


def test_a_listing_kept_for_one_group_does_not_answer_another(api, passes):   # noqa: F811
    [api.job() for _ in range(3)]
    _, first = api("GET", "/queue", "bob", query={"limit": "1"})
    status, other = api("GET", "/queue", "bob", query={"limit": "1", "group": "2", "next": first["next"]})
    assert status == 200 and passes.call_count == 2
    assert all(e["job"]["group"] == "2" for e in other["pending"])


def array(api, tasks: int) -> str:  # noqa: F811
    """An array of `tasks` written as admission would; its group."""
    return SubmitService(api.store, SystemClock()).submit(spec(array=f"0-{tasks - 1}"), owner="alice")[0].group


def test_a_groups_jobs_are_read_once_for_all_their_pages(api, reads):   # noqa: F811
    group = array(api, 7)
    pages = read_all(api, f"/jobs/{group}", limit="3")
    assert [len(p["jobs"]) for p in pages] == [3, 3, 1] and reads.call_count == 1
    assert [j["id"] for p in pages for j in p["jobs"]] == [f"{group}_{i}" for i in range(7)]
    listings.groups.clear()                         # another container: the next page reads it again
    _, first = api("GET", f"/jobs/{group}", "bob", query={"limit": "4"})
    listings.groups.clear()
    _, rest = api("GET", f"/jobs/{group}", "bob", query={"limit": "4", "next": first["next"]})
    assert reads.call_count == 3 and len(first["jobs"] + rest["jobs"]) == 7 and rest["next"] is None


def test_a_kept_listing_of_one_group_does_not_answer_another(api, reads):   # noqa: F811
    one, other = array(api, 3), array(api, 3)
    _, first = api("GET", f"/jobs/{one}", "bob", query={"limit": "1"})
    status, page = api("GET", f"/jobs/{other}", "bob", query={"limit": "1", "next": first["next"]})
    assert status == 200 and reads.call_count == 2 and page["jobs"][0]["group"] == other
