"""The dispatch container's scheduling records (gqa/adapters/aws/listing.py), brought up to date by
the jobs that changed: always the listing a whole read gives, in its order, and a feed whose changes,
replayed, give its pending jobs; and the items of the running jobs and of those waiting to retry."""

import random

import pytest

from gqa.adapters.aws import items as it
from gqa.adapters.aws import listing
from gqa.adapters.aws.listing import LiveListing
from gqa.models.job import JobState
from tests.builders import job_record

S = JobState
STATES = (S.QUEUED, S.QUEUED, S.QUEUED, S.HELD, S.STARTING, S.RUNNING, S.RETRY_WAIT)


def item(job_id: str, seq: int, state: JobState, tier: int, revision: int) -> dict:
    running = state in (S.STARTING, S.RUNNING)
    record = job_record(id=job_id, group=job_id, seq=seq, state=state, tier=tier, submitted_at=float(seq),
                        assigned=(seq % 8,) if running else (), started_at=100.0 if running else None)
    return it.projected(it.job_item(record, revision))


def whole(live: dict) -> LiveListing:
    fresh = LiveListing()
    fresh.brought_up(live, None)
    return fresh


def replayed(on: dict, changes) -> None:
    for job_id, job in changes:
        if job is None:
            on.pop(job_id, None)
        else:
            on[job_id] = job


@pytest.mark.parametrize("seed", range(6))
def test_a_listing_brought_up_by_what_changed_is_the_whole_listing_and_its_feed_adds_up(seed):
    rng = random.Random(seed)
    live: dict[str, dict] = {}
    seqs: dict[str, int] = {}
    kept = LiveListing()
    kept.brought_up(live, None)
    mark, follower = kept.feed(None)[0], {}   # a reader of the feed: the pending jobs by id
    revision = 0
    for step in range(300):
        dirty: set[str] = set()
        for _ in range(rng.randint(0, 6)):
            revision += 1
            roll = rng.random()
            if roll < 0.35 or not live:   # a new job, or one that came back (a requeue, a retry's end)
                job_id = str(rng.randrange(200))
                seqs.setdefault(job_id, len(seqs))
            else:
                job_id = rng.choice(list(live))
            if roll > 0.85 and job_id in live:
                del live[job_id]              # ended: it left the live jobs
            else:                             # any state change, or a new tier (a priority update)
                live[job_id] = item(job_id, seqs[job_id], rng.choice(STATES), rng.choice((0, 1, 1, 2)), revision)
            dirty.add(job_id)
        dirty |= set(rng.sample(list(live), min(2, len(live))))   # named but unchanged: the same item
        kept.brought_up(live, dirty)
        pending, running = kept.view()
        fresh = whole(live)
        assert (pending, running) == fresh.view()   # the same records, in the same order
        assert kept.running_items() == fresh.running_items() and kept.retrying_items() == fresh.retrying_items()
        assert {i["id"] for i in kept.retrying_items()} == {k for k, i in live.items() if i["state"] == "RETRY_WAIT"}
        assert all(j.tier <= k.tier for j, k in zip(pending, pending[1:]))
        if rng.random() < 0.3:   # read now and then, so the changes pile up between reads
            mark, changes = kept.feed(mark)
            assert changes is not None
            replayed(follower, changes)
            assert follower == {j.id: j for j in pending}, step


def test_an_unchanged_job_keeps_its_very_record_and_a_changed_one_gets_a_new_one():
    live = {str(n): item(str(n), n, S.QUEUED, 1, 1) for n in range(4)}
    kept = LiveListing()
    kept.brought_up(live, None)
    before, _ = kept.view()
    live["2"] = item("2", 2, S.QUEUED, 0, 2)   # moved up a tier: now first
    kept.brought_up(live, {"2", "3"})
    after, _ = kept.view()
    assert [j.id for j in after] == ["2", "0", "1", "3"]
    assert after[1] is before[0] and after[3] is before[3] and after[0] is not before[2]


def test_a_whole_listing_or_a_long_log_answers_not_known():
    live = {str(n): item(str(n), n, S.QUEUED, 1, 1) for n in range(3)}
    kept = LiveListing()
    kept.brought_up(live, None)
    mark, _ = kept.feed(None)
    live["9"] = item("9", 9, S.QUEUED, 1, 2)
    kept.brought_up(live, {"9"})
    assert kept.feed(mark)[1] == [("9", kept.view()[0][-1])]
    kept.brought_up(live, None)                    # a whole read: a new era
    assert kept.feed(mark)[1] is None
    mark, _ = kept.feed(None)
    for revision in range(listing.LOG_AT_LEAST + 1):   # past the log's cap: forgotten
        live["9"] = item("9", 9, S.QUEUED, 1, 3 + revision)
        kept.brought_up(live, {"9"})
    assert kept.feed(mark)[1] is None
    assert kept.view() == whole(live).view()


def test_a_bringing_up_that_fails_halfway_leaves_a_whole_listing_in_a_new_era_next(monkeypatch):
    live = {str(n): item(str(n), n, S.QUEUED, 1, 1) for n in range(4)}
    kept = LiveListing()
    kept.brought_up(live, None)
    mark, _ = kept.feed(None)
    made = listing._made

    def malformed_on_2(entry):
        if entry["id"] == "2":
            raise KeyError("tier")
        return made(entry)
    monkeypatch.setattr(listing, "_made", malformed_on_2)
    live["1"], live["2"] = item("1", 1, S.RUNNING, 1, 2), item("2", 2, S.HELD, 1, 2)
    with pytest.raises(KeyError):
        kept.brought_up(live, ["1", "2"])   # "2" was taken out of its list, its new entry never made
    monkeypatch.setattr(listing, "_made", made)
    kept.brought_up(live, set())            # told of nothing more: still lists whole
    assert kept.view() == whole(live).view() and kept.feed(mark)[1] is None
    live["2"] = item("2", 2, S.QUEUED, 0, 3)
    kept.brought_up(live, {"2"})            # and takes changes again after that
    assert kept.view() == whole(live).view()
