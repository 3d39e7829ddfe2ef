"""GET /queue pages without a scheduling pass per page: the first page's
listing is kept a minute in the api function's container, named by the
pages' tokens; a token it does not hold (another container's, an older
one) computes the listing again, and the pages still add up."""

from __future__ import annotations

from unittest import mock

import pytest

from gqa.services.queries import QueryService
from lambdas.api import jobs as routes
from tests.aws.test_api_handler import api, read_all  # noqa: F401  (the fixture)

pytestmark = pytest.mark.aws


@pytest.fixture
def passes():
    """How many times a queue listing (a whole scheduling pass) is computed."""
    routes._queue_views.clear()
    with mock.patch.object(QueryService, "queue", autospec=True, side_effect=QueryService.queue) as counted:
        yield counted
    routes._queue_views.clear()


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
    routes._queue_views.clear()                     # another container, or a minute later
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
