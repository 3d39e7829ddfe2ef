"""The history contract (HistoryReads), on every backend: finished jobs by
their end, newest first, after the running ones; the filters; pages that
add up to the whole window, each job once; the retention's prune."""

import time

import pytest

from gqa.models.errors import NotFound, SpecError
from gqa.ports import HistoryQuery
from tests.contract.jobs import S, put

DAY = 86_400.0
# the start of a UTC day three days ago: DynamoDB's index is read a day at a time up to now
T0 = float(int(time.time() // DAY * DAY) - 3 * DAY)


def ended(store, state, end, **record):
    return put(store, state, at=end, fields={"ended_at": end}, **record)


def ids(jobs):
    return [j.id for j in jobs]


def every_page(store, query, after=None):
    out, pages = [], 0
    while True:
        jobs, after = store.history(query, after)
        out += jobs
        pages += 1
        if after is None:
            return out, pages


@pytest.fixture
def finished(store):
    """Jobs ended over three days, one running, one queued (never listed)."""
    a = ended(store, S.SUCCEEDED, T0 + 100, name="train-a", owner="alice", team="vision")
    b = ended(store, S.FAILED, T0 + DAY + 50, name="train-b", owner="bob", team="nlp")
    c = ended(store, S.CANCELLED, T0 + 2 * DAY + 10, name="eval-c", owner="alice", team="nlp")
    d = ended(store, S.SUCCEEDED, T0 + 2 * DAY + 20, name="train-d", owner="alice", team="vision")
    run = put(store, S.RUNNING, at=T0 + 2 * DAY, fields={"started_at": T0 + 2 * DAY}, name="train-r")
    put(store, S.QUEUED, name="waiting")
    return a, b, c, d, run


def test_running_first_then_finished_by_their_end_newest_first(store, finished):
    a, b, c, d, run = finished
    jobs, after = store.history(HistoryQuery(since=T0))
    assert ids(jobs) == [run.id, d.id, c.id, b.id, a.id] and after is None
    # each with its transitions, the first start among them
    assert [t.state for t in jobs[1].history] == [S.SUBMITTED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def test_a_finished_job_belongs_to_the_window_its_end_falls_in(store, finished):
    a, b, c, d, run = finished
    day2 = HistoryQuery(since=T0 + DAY, until=T0 + 2 * DAY)
    assert ids(store.history(day2)[0]) == [b.id]   # running since T0 + 2 days: not yet in the window
    day3 = HistoryQuery(since=T0 + 2 * DAY, until=T0 + 2 * DAY + 20)
    assert ids(store.history(day3)[0]) == [run.id, c.id]   # the end is exclusive
    assert ids(store.history(HistoryQuery(since=T0 + 3 * DAY))[0]) == [run.id]


@pytest.mark.parametrize("filters, expected", [
    ({"owner": "alice"}, "r d c a"),         # the running job's owner is the builder's alice
    ({"owner": "bob"}, "b"),
    ({"team": "nlp"}, "c b"),
    ({"states": frozenset({S.SUCCEEDED})}, "d a"),
    ({"states": frozenset({S.RUNNING, S.FAILED})}, "r b"),
    ({"name": "train-*"}, "r d b a"),
    ({"name": "eval-?"}, "c"),
    ({"owner": "alice", "team": "vision", "name": "*-d"}, "d"),
])
def test_filters(store, finished, filters, expected):
    a, b, c, d, run = finished
    named = {"a": a, "b": b, "c": c, "d": d, "r": run}
    assert ids(store.history(HistoryQuery(since=T0, **filters))[0]) == [named[k].id for k in expected.split()]


def test_an_array_by_its_group(store):
    first = ended(store, S.SUCCEEDED, T0 + 5, array_index=0, group_limit=None)
    other = ended(store, S.SUCCEEDED, T0 + 6)
    assert ids(store.history(HistoryQuery(since=T0, group=first.group))[0]) == [first.id]
    assert ids(store.history(HistoryQuery(since=T0, group=other.group))[0]) == [other.id]


@pytest.mark.parametrize("limit", [1, 2, 4])
def test_pages_add_up_to_the_window_each_job_once(store, finished, limit):
    whole = ids(store.history(HistoryQuery(since=T0))[0])
    paged, pages = every_page(store, HistoryQuery(since=T0, limit=limit))
    assert ids(paged) == whole
    assert pages >= len(whole) / limit


def test_jobs_ending_at_the_same_time_page_apart(store):
    same = [ended(store, S.SUCCEEDED, T0 + 7) for _ in range(5)]
    paged, _ = every_page(store, HistoryQuery(since=T0, limit=2))
    assert sorted(ids(paged)) == sorted(ids(same)) and len(set(ids(paged))) == 5


def test_a_token_from_elsewhere_is_refused(store, finished):
    with pytest.raises(SpecError, match="page token"):
        store.history(HistoryQuery(since=T0), "not-a-token")


# backends whose own expiry deletes finished jobs (DynamoDB's TTL on the item, set by items.job_item)
EXPIRES_BY_ITSELF = {"dynamodb"}


def test_prune_deletes_finished_jobs_before_the_cutoff_in_batches(store, finished, open_store, request):
    a, b, c, d, run = finished
    if request.node.callspec.params["open_store"] in EXPIRES_BY_ITSELF:
        before = {j.id for j in store.list()}
        assert store.prune_history(T0 + 2 * DAY, batch=1) == 0     # deletes nothing: the backend expires them
        assert {j.id for j in open_store().list()} == before
        return
    assert store.prune_history(T0 + 2 * DAY, batch=1) == 1
    assert store.prune_history(T0 + 2 * DAY, batch=1) == 1
    assert store.prune_history(T0 + 2 * DAY, batch=1) == 0   # run again: nothing left to do
    for gone in (a, b):
        with pytest.raises(NotFound):
            open_store().get(gone.id)
    assert ids(store.history(HistoryQuery(since=T0))[0]) == [run.id, d.id, c.id]
    assert len(store.list()) == 4   # the running, queued and later jobs stay
