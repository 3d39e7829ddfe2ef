"""Pages of the API's long listings (gqa.http.paging) and their wire form:
a listing read page by page adds up to the listing read whole, each job once
even when the listing moves between pages, and a bad token or limit is a
SpecError (400)."""

import json
from dataclasses import replace

import pytest

from gqa.http import paging, wire
from gqa.models.errors import SpecError
from gqa.models.job import JobState, Transition
from gqa.scheduling.snapshot import Factors, Weights
from gqa.services.queries import QueueEntry, QueueView
from tests.builders import job_record


def a_job(seq: int, **overrides):
    return job_record(id=str(seq), group=str(seq), seq=seq, **overrides)


def a_queue(seqs_in_order, *, not_queued=(), running=(3, 9)) -> QueueView:
    """Pending jobs in the pass's order (which is not seq order), then some held ones."""
    pending = [QueueEntry(a_job(s), p, f"waits behind {p - 1}", Factors(0.1 * p, 0.2, 0.0, 0.3), 100.0 + p)
               for p, s in enumerate(seqs_in_order, start=1)]
    pending += [QueueEntry(a_job(s, state=JobState.HELD), None, "held by its owner") for s in not_queued]
    return QueueView(pending, [a_job(s, state=JobState.RUNNING) for s in running], 8, 2, Weights(2.0, 0.5, 0.1))


def read_pages(fetch, listing):
    """Every page's answer, following `next` as the CLI does."""
    pages, token = [], None
    while True:
        page = json.loads(json.dumps(fetch(paging.after_of(listing, token), first=token is None)))
        pages.append(page)
        token = page["next"]
        if token is None:
            return pages


def queue_pages(view_of, limit):
    def fetch(after, first):
        view = view_of()
        page = paging.page_of(view.pending, lambda e: e.job.seq, limit=limit, after=after)
        return wire.queue_page_to_dict(view, page, paging.token("queue", page.next), first=first)
    return read_pages(fetch, "queue")


def as_read(view: QueueView) -> QueueView:
    """What the codec gives back: jobs without their spec."""
    strip = lambda j: replace(j, spec_json="", submit_env=None)     # noqa: E731
    return replace(view, pending=[replace(e, job=strip(e.job)) for e in view.pending],
                   running=[strip(j) for j in view.running])


@pytest.mark.parametrize("seqs, limit, after, taken, next_", [
    ([5, 1, 4, 2, 3], 2, None, [1, 2], 2),       # the lowest seqs, kept in the listing's order
    ([5, 1, 4, 2, 3], 2, 2, [4, 3], 4),
    ([5, 1, 4, 2, 3], 2, 4, [5], None),          # the last page: no next
    ([5, 1, 4, 2, 3], 5, None, [5, 1, 4, 2, 3], None),
    ([5, 1, 4, 2, 3], 9, 7, [], None),           # past the end: an empty last page
    ([], 3, None, [], None),
])
def test_a_page_is_the_next_seqs_in_listing_order(seqs, limit, after, taken, next_):
    page = paging.page_of(seqs, lambda s: s, limit=limit, after=after)
    assert [s for _, s in page.items] == taken and page.next == next_
    assert all(seqs[rank] == s for rank, s in page.items)


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 1000])
def test_a_queue_read_in_pages_is_the_queue_read_whole(limit):
    view = a_queue([6, 2, 7, 1, 5], not_queued=[4, 8])
    pages = queue_pages(lambda: view, limit)
    assert len(pages) == max(1, -(-len(view.pending) // limit))
    assert wire.queue_from_pages(pages) == as_read(view)
    assert all((p["total_gpus"], p["free_gpus"], p["weights"]["age"]) == (8, 2, 0.5) for p in pages)
    assert [len(p["running"] or []) for p in pages] == [2] + [0] * (len(pages) - 1)
    assert all(p["running"] is None for p in pages[1:])


def test_a_one_page_answer_without_ranks_reads_as_before():
    view = a_queue([3, 1, 2])
    assert wire.queue_from_pages([wire.queue_to_dict(view)]) == as_read(view)


def test_a_queue_that_moves_between_pages_lists_each_job_that_stayed_once():
    views = iter([a_queue([6, 2, 7, 1, 5]),                # page 1 (seqs 1, 2)
                  a_queue([12, 6, 1, 7, 5, 11]),           # 2 started, 11 and 12 arrived: page 2 (5, 6)
                  a_queue([7, 11, 12])])                   # page 3 (7, 11), page 4 (12)
    pages = queue_pages(lambda: next(views, a_queue([7, 11, 12])), 2)
    seqs = [e.job.seq for e in wire.queue_from_pages(pages).pending]
    assert sorted(seqs) == [1, 2, 5, 6, 7, 11, 12] and len(set(seqs)) == len(seqs)


def test_jobs_read_in_pages_are_the_jobs_read_whole():
    jobs = [a_job(s, array_index=s) for s in range(1, 8)]

    def fetch(after, first):
        page = paging.page_of(jobs, lambda j: j.seq, limit=3, after=after)
        return wire.jobs_page_to_dict(page, paging.token("jobs", page.next))
    pages = read_pages(fetch, "jobs")
    assert len(pages) == 3 and pages[-1]["next"] is None
    assert wire.jobs_from_pages(pages) == [replace(j, spec_json="", submit_env=None) for j in jobs]


def test_a_token_reads_back_as_the_seq_it_names():
    token = paging.token("queue", 1234)
    assert paging.after_of("queue", token) == 1234 and paging.token("queue", None) is None
    assert paging.after_of("queue", None) is None


@pytest.mark.parametrize("listing, token", [
    ("jobs", paging.token("queue", 5)),                      # another listing's token
    ("queue", "not-a-token"), ("queue", "!!!"), ("queue", ""),
    ("queue", "eyJvZiI6InF1ZXVlIiwiYWZ0ZXIiOi0xfQ"),          # {"of":"queue","after":-1}
    ("queue", "eyJvZiI6InF1ZXVlIiwiYWZ0ZXIiOiI1In0"),         # {"of":"queue","after":"5"}
    ("queue", "WzFd"),                                       # [1]
])
def test_a_bad_token_is_a_spec_error(listing, token):
    with pytest.raises(SpecError, match="not a page token"):
        paging.after_of(listing, token)


@pytest.mark.parametrize("limit, expected", [(None, 1000), (1, 1), (1000, 1000)])
def test_limit_defaults_to_and_stops_at_a_thousand(limit, expected):
    assert paging.check_limit(limit) == expected


@pytest.mark.parametrize("limit", [0, 1001])
def test_a_limit_out_of_range_is_a_spec_error(limit):
    with pytest.raises(SpecError, match="between 1 and 1000"):
        paging.check_limit(limit)


def test_a_full_page_of_large_jobs_stays_well_under_lambdas_six_megabytes():
    history = tuple(Transition(JobState.QUEUED, 1.0 * i, "requeued after a spot reclaim") for i in range(12))
    entries = [QueueEntry(a_job(s, history=history, name=f"sweep-lr-{s:05d}", reason="waits " * 20), s,
                          "team vision at 8 of 8 GPUs; needs 4 of a10g, 2 free", Factors(0.5, 0.2, 0.1, 0.4), 9.0)
               for s in range(1, paging.MAX_LIMIT + 1)]
    view = QueueView(entries, [], 8, 2, Weights())
    page = paging.page_of(entries, lambda e: e.job.seq, limit=paging.MAX_LIMIT, after=None)
    size = len(json.dumps(wire.queue_page_to_dict(view, page, None, first=True)))
    assert size < 3 * 1024 * 1024, size


@pytest.mark.parametrize("limit", [1, 3, 1000])
def test_a_page_ends_where_its_bytes_run_out_and_the_pages_hold_each_item_once(limit):
    listing = [9, 4, 12, 1, 7, 3, 11, 2, 10, 5, 8, 6]       # the listing's order, not seq order
    size = {s: 10 * s for s in listing}.__getitem__         # 12 alone takes more than the budget
    pages, after = [], None
    while True:
        page = paging.page_of(listing, lambda s: s, limit=limit, after=after, size=size, budget=100)
        taken = [s for _, s in page.items]
        assert taken and len(taken) <= limit
        assert sum(size(s) + 1 for s in taken) <= 100 or len(taken) == 1   # one too large makes a page alone
        assert [s for s in listing if s in taken] == taken                   # in the listing's order
        pages.append(taken)
        if page.next is None:
            break
        after = page.next
    assert sorted(s for taken in pages for s in taken) == sorted(listing)
    if limit == 1000:
        # 1-3 take 63 bytes with their commas, 1-4 would take 104; 4-5 take 92
        assert pages == [[1, 3, 2], [4, 5], [6], [7], [8], [9], [10], [11], [12]]


def test_a_page_without_sizes_is_cut_by_count_alone():
    page = paging.page_of(list(range(1, 2001)), lambda s: s, limit=1000, after=None, budget=1)
    assert len(page.items) == 1000 and page.next == 1000


def test_encoded_bytes_are_what_lambdas_answer_carries_of_the_body():
    data = {"reason": 'said "no" \\ twice\n', "name": "caf\u00e9 \u65e5\u672c", "n": [1.5, None, True]}
    body = json.dumps(data, separators=(",", ":"))               # the API's serializer
    assert paging.encoded_bytes(data) == len(json.dumps({"body": body})) - len(json.dumps({"body": ""}))
