"""The history contract (HistoryReads), on every backend: finished jobs by
their end, newest first, after the ones not finished that have run (running,
or between attempts); with `waiting`, the ones not started yet too; the
filters; pages that add up to the whole window, each job once; the
retention's prune."""

import time

import pytest

from gqa.models.errors import NotFound, SpecError
from gqa.ports import BETWEEN_ATTEMPTS, Change, HistoryQuery
from tests.contract.jobs import S, new_job, put

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


def test_prune_keeps_a_finished_job_a_waiting_job_depends_on(store, open_store, request):
    """Its end decides the waiting job: kept past the retention while that job waits, pruned after."""
    parent = ended(store, S.SUCCEEDED, T0 + 100)
    other = ended(store, S.SUCCEEDED, T0 + 200)
    task = ended(store, S.FAILED, T0 + 300, array_index=0, group_limit=None)
    waiting = put(store, S.HELD, dependency=f"afterok:{parent.id},afterany:{task.group}")
    if request.node.callspec.params["open_store"] in EXPIRES_BY_ITSELF:
        assert store.prune_history(T0 + DAY, batch=1) == 0
        return
    # the kept jobs come first by their end yet hold back none after them, even a batch at a time
    assert store.prune_history(T0 + DAY, batch=1) == 1
    assert store.prune_history(T0 + DAY, batch=1) == 0
    with pytest.raises(NotFound):
        open_store().get(other.id)
    assert {open_store().get(j.id).id for j in (parent, task)} == {parent.id, task.id}
    assert store.states_of([parent.id, task.group]) == {parent.id: {S.SUCCEEDED: 1}, task.group: {S.FAILED: 1}}
    store.apply([Change(waiting.id, S.HELD, S.CANCELLED, "cancelled", T0 + 400)])
    assert store.prune_history(T0 + DAY, batch=5) == 2   # no job waits on them now


def test_a_pruned_job_reads_as_gone(store, open_store, request):
    """A job the retention deleted: `purged` says how long jobs were kept and `states_of` names it with
    no states, where the store can tell it from an id not recorded yet (DynamoDB cannot)."""
    gone = ended(store, S.SUCCEEDED, T0 + 100)
    kept = put(store, S.QUEUED)
    assert store.purged(gone.group) is None and store.purged(kept.group) is None
    if request.node.callspec.params["open_store"] in EXPIRES_BY_ITSELF:
        return
    assert store.prune_history(T0 + DAY, batch=5, keep=DAY) == 1
    reader = open_store()
    assert reader.purged(gone.group) == DAY and reader.purged(kept.group) is None
    [later] = reader.reserve_ids([new_job()])   # accepted, not recorded yet: not gone
    assert reader.purged("999") is None and reader.purged(later.group) is None
    assert reader.states_of([gone.id, kept.id, later.id, "999"]) == {gone.id: {}, kept.id: {S.QUEUED: 1}}


# -- jobs between attempts, and the ones not started yet ----------------------------------------------

def requeued(store, state, start, **record):
    """A job whose attempt ran from `start` for a minute and that now waits to run again in `state`
    (RETRY_WAIT after an error or a reclaim, QUEUED once its retry is due or it was requeued, HELD
    after that by its owner), with that attempt's GPU time and money."""
    used = {"started_at": start, "gpu_seconds": 60.0, "cost": 0.25, "not_before": start + 60}
    job = put(store, S.RETRY_WAIT, at=start + 60, fields=used, **record)
    for step in {S.QUEUED: (S.QUEUED,), S.HELD: (S.QUEUED, S.HELD)}.get(state, ()):
        [job] = store.apply([Change(job.id, job.state, step, f"moved to {step}", start + 61)])
    return job


@pytest.fixture
def between(store, finished):
    """The finished fixture's jobs, and three that have run and wait to run again."""
    retry = requeued(store, S.RETRY_WAIT, T0 + 2 * DAY + 5, name="train-retry", owner="bob")
    back = requeued(store, S.QUEUED, T0 + DAY, name="train-back", team="nlp")
    held = requeued(store, S.HELD, T0 + 50, name="eval-held")
    return {**dict(zip("abcdr", finished)), "retry": retry, "back": back, "held": held}


def named(jobs, keys):
    return [jobs[k].id for k in keys.split()]


def test_jobs_between_attempts_are_listed_with_the_running_ones_by_their_start(store, between):
    jobs, after = store.history(HistoryQuery(since=T0))
    assert ids(jobs) == named(between, "retry r back held d c b a") and after is None
    back = jobs[2]
    assert (back.state, back.started_at, back.gpu_seconds, back.cost) == (S.QUEUED, T0 + DAY, 60.0, 0.25)
    assert [t.state for t in back.history][-3:] == [S.RUNNING, S.RETRY_WAIT, S.QUEUED]   # its transitions too
    assert back.spec_json == ""


@pytest.mark.parametrize("query, expected", [
    # every window from its start on: a window before the start holds it not
    ({"since": T0 + DAY, "until": T0 + 2 * DAY}, "back held b"),
    ({"since": T0 + 3 * DAY}, "retry r back held"),
    ({"since": T0, "states": BETWEEN_ATTEMPTS}, "retry back held"),
    ({"since": T0, "states": frozenset({S.RETRY_WAIT, S.SUCCEEDED})}, "retry d a"),
    ({"since": T0, "states": frozenset({S.RUNNING})}, "r"),
    ({"since": T0, "owner": "bob"}, "retry b"),
    ({"since": T0, "team": "nlp"}, "back c b"),
    ({"since": T0, "name": "eval-*"}, "held c"),
])
def test_the_window_and_filters_hold_jobs_between_attempts(store, between, query, expected):
    assert ids(store.history(HistoryQuery(**query))[0]) == named(between, expected)


def test_with_waiting_the_jobs_not_started_follow_the_started_ones(store, between):
    queued = [j for j in store.list() if j.name == "waiting"]     # the finished fixture's, never started
    [approval] = store.create([new_job(state=S.PENDING_APPROVAL, submitted_at=T0 + 7, name="big")])
    later = put(store, S.QUEUED, at=T0 + 9, name="later", submitted_at=T0 + 4 * DAY)
    jobs, _ = store.history(HistoryQuery(since=T0, until=T0 + 3 * DAY, waiting=True))
    unfinished = [j.id for j in jobs if not j.state.terminal]
    # latest start first, then the ones not started by their order of submission, latest first
    assert unfinished == named(between, "retry r back held") + [approval.id, queued[0].id]
    assert later.id not in ids(jobs)     # submitted after the window's end
    held = store.history(HistoryQuery(since=T0, waiting=True, states=frozenset({S.HELD, S.PENDING_APPROVAL})))[0]
    assert ids(held) == [between["held"].id, approval.id]


@pytest.mark.parametrize("waiting", [False, True])
def test_each_store_lists_what_the_rule_holds(store, between, waiting):
    """Every job the store keeps, against HistoryQuery.holds: the stores read by the rule."""
    every = store.list()
    for query in (HistoryQuery(since=T0 + DAY, until=T0 + 2 * DAY, waiting=waiting),
                  HistoryQuery(since=T0 + 2 * DAY, waiting=waiting, states=BETWEEN_ATTEMPTS | {S.CANCELLED}),
                  HistoryQuery(since=T0 - DAY, until=T0 + 40, waiting=waiting)):
        assert sorted(ids(store.history(query)[0])) == sorted(j.id for j in every if query.holds(j))


@pytest.mark.parametrize("limit", [1, 2, 3])
@pytest.mark.parametrize("waiting", [False, True])
def test_pages_through_jobs_between_attempts_and_not_started_add_up(store, between, limit, waiting):
    for _ in range(3):
        put(store, S.QUEUED, name="queued")   # not started: several at the same place (0, then their order)
    requeued(store, S.QUEUED, T0 + DAY, name="same-start")   # the same start as `back`: a tie
    query = HistoryQuery(since=T0, waiting=waiting)
    whole = ids(store.history(query)[0])
    paged, pages = every_page(store, HistoryQuery(since=T0, waiting=waiting, limit=limit))
    assert ids(paged) == whole and len(set(whole)) == len(whole) == (13 if waiting else 9)
    assert pages >= len(whole) / limit
