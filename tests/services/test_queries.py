"""QueryService.queue(): the pending jobs in the order they would start; jobs(): a job
or a group, and the truth about ids accepted but not recorded yet."""

import pytest

from gqa.models.errors import NotAdmitted, NotFound
from gqa.models.job import JobState
from gqa.ports import Inventory
from gqa.scheduling import plan
from gqa.services.queries import QueryService
from gqa.services.snapshot import read_snapshot
from tests.builders import gpus, spec
from tests.services.fakes import RecordingIntake

S = JobState


def rows(view):
    return [(e.job.id, e.position, e.reason) for e in view.pending]


def test_pending_jobs_are_listed_in_plan_order_with_positions_and_reasons(make_queue):
    queue = make_queue(2)
    big = queue.start(resources={"gpus": 2})
    queue.clock.advance(1)
    normal = queue.submit_one(priority="normal")
    queue.clock.advance(1)
    high = queue.submit_one(priority="high")
    queue.clock.advance(1)
    low = queue.submit_one(priority="low")

    view = queue.queries.queue()

    full = "needs 1 GPU, 0 free"
    assert rows(view) == [(high.id, 1, full), (normal.id, 2, full), (low.id, 3, full)]
    assert [e.job.id for e in view.pending] == plan(read_snapshot(queue.store, queue.clock.now())).order
    assert all(e.factors is not None for e in view.pending)
    assert [j.id for j in view.running] == [big.id]
    assert (view.total_gpus, view.free_gpus) == (2, 0)


def test_jobs_that_fit_are_starting_now(queue):
    queue.start(resources={"gpus": 2})
    fits = queue.submit_one(resources={"gpus": 2})
    too_big = queue.submit_one(resources={"gpus": 3})

    view = queue.queries.queue()

    assert rows(view) == [(fits.id, 1, "starting now"), (too_big.id, 2, "needs 3 GPUs, 0 free")]
    assert (view.total_gpus, view.free_gpus) == (4, 2)


def test_gpus_held_beyond_a_shrunk_inventory_are_counted_apart_not_against_it(queue):
    """A daemon restarted with 2 of its 4 GPUs adopts the jobs still on GPUs 2 and 3."""
    queue.start(resources={"gpus": 2})
    queue.start(resources={"gpus": 2})
    queue.store.set_inventory(Inventory(gpus=gpus(2)))
    queue.clock.advance(1)
    queue.submit_one()

    view = queue.queries.queue()

    assert (view.total_gpus, view.free_gpus, view.outside_gpus) == (2, 0, 2)
    assert rows(view)[0][2] == "needs 1 GPU, 0 free"


def test_a_job_waiting_to_be_retried_has_no_position(queue):
    retried = queue.start(retries={"on_error": 1})
    queue.exit(retried.id, 1)                      # back in 5s
    waiting = queue.submit_one()
    retry_reason = "exit code 1; retry 1 of 1 after a 5s backoff; back in the queue in {}"

    view = queue.queries.queue()
    assert rows(view) == [(waiting.id, 1, "starting now"), (retried.id, None, retry_reason.format("5s"))]

    queue.clock.advance(3)
    assert rows(queue.queries.queue())[-1] == (retried.id, None, retry_reason.format("2s"))

    queue.clock.advance(3)                         # due, not yet promoted
    assert rows(queue.queries.queue())[-1] == (retried.id, None, retry_reason.format("0s"))

    queue.supervisor.promote_retries()
    assert [(e.job.id, e.position) for e in queue.queries.queue().pending] == [(retried.id, 1), (waiting.id, 2)]


def test_a_group_shows_only_its_jobs_with_their_place_in_the_whole_queue(make_queue):
    queue = make_queue(1)
    single = queue.start()
    queue.clock.advance(1)
    queue.submit_one()
    queue.submit(array="0-1")

    view = queue.queries.queue(group="3")

    assert [(e.job.id, e.position) for e in view.pending] == [("3_0", 2), ("3_1", 3)]
    assert view.running == []
    assert [j.id for j in queue.queries.queue(group=single.group).running] == [single.id]


def test_jobs_resolves_a_job_or_a_group(queue):
    queue.submit_one()
    queue.submit(array="0-2")

    assert [j.id for j in queue.queries.jobs("2")] == ["2_0", "2_1", "2_2"]
    assert [t.state for t in queue.queries.jobs("1")[0].history] == [S.SUBMITTED, S.QUEUED]


@pytest.mark.parametrize("wall_time, ran", [
    ("10m", 150),   # the team used a quarter of its 10 minutes
    # 6 s of 2 hours (0.08%): the pass counts the running job as 6 minutes at least (eta.RANK_FLOOR),
    # but the ETA takes the team's history as it is
    ("2h", 6),
])
def test_each_pending_job_has_an_eta_from_the_running_jobs_expected_ends(make_queue, wall_time, ran):
    queue = make_queue(1)
    done = queue.start(limits={"wall_time": wall_time}, team="vision")
    queue.clock.advance(ran)
    queue.exit(done.id, 0)
    running = queue.start(limits={"wall_time": wall_time}, team="vision")
    waiting = queue.submit_one(limits={"wall_time": "10m"})

    [entry] = queue.queries.queue().pending
    assert entry.job.id == waiting.id
    assert entry.eta == running.started_at + ran


def test_the_eta_ends_runs_by_the_teams_mean_share_of_its_limits(make_queue):
    # vision's runs used 60, 60 and 480 s of 10 minutes: the median (a tenth) is one typical run, the
    # pass's count; the mean (a third) is what a queue of such runs holds the GPUs for, the ETA's
    queue = make_queue(1)
    for ran in (60, 60, 480):
        done = queue.start(limits={"wall_time": "10m"}, team="vision")
        queue.clock.advance(ran)
        queue.exit(done.id, 0)
    running = queue.start(limits={"wall_time": "10m"}, team="vision")
    queue.submit_one(limits={"wall_time": "10m"})

    [entry] = queue.queries.queue().pending
    assert entry.eta == running.started_at + 200


def test_the_eta_expects_no_run_to_last_past_twice_its_teams_longest(make_queue):
    # vision's runs used 60 s of 2 minutes (a mean share of a half); its next asks a day, which the
    # share alone would expect to run 12 hours: at most twice its longest run, 2 minutes
    queue = make_queue(1)
    for _ in range(3):
        done = queue.start(limits={"wall_time": "2m"}, team="vision")
        queue.clock.advance(60)
        queue.exit(done.id, 0)
    running = queue.start(limits={"wall_time": "1d"}, team="vision")
    queue.submit_one(limits={"wall_time": "10m"})

    [entry] = queue.queries.queue().pending
    assert entry.eta == running.started_at + 120


# -- QueryService.jobs(): a job accepted but not admitted yet ---------------------------------------

def accepted(queue, **overrides):
    """accept() as the API calls it: ids reserved, the submission sent, no job written."""
    intake = RecordingIntake()
    jobs = queue.submitter.accept(spec(**overrides), owner="bob", intake=intake)
    [submission] = intake.sent
    return jobs, submission


@pytest.mark.parametrize("overrides, ref, recorded", [
    ({}, "1", ["1"]),
    ({"array": "0-2"}, "1", ["1_0", "1_1", "1_2"]),
    ({"array": "0-2"}, "1_2", ["1_2"]),
])
def test_an_accepted_job_is_waiting_for_admission_until_it_is_recorded(queue, overrides, ref, recorded):
    _, submission = accepted(queue, **overrides)

    with pytest.raises(NotAdmitted) as caught:
        queue.queries.jobs(ref)
    message = str(caught.value)
    assert message.startswith(f"job {ref} was accepted and is waiting for admission")
    assert "try again in a moment" in message and "dead-letter queue" in message

    queue.submitter.admit(submission)
    assert [j.id for j in queue.queries.jobs(ref)] == recorded


@pytest.mark.parametrize("ref, message", [
    ("3", "no job or array 3"),
    ("1_0", "job 1 is a single job, not an array; name it 1"),
    ("2_5", "array 2 has no task 5: its 2 tasks are 0-1"),
    ("2_a", "2_a is not a task of array 2: a task is GROUP_INDEX, e.g. 2_0"),
    ("x", "no job or array x"),
    ("", "no job or array "),
])
def test_ids_never_handed_out_or_not_in_a_recorded_group_are_not_found(queue, ref, message):
    queue.submit_one()                               # job 1
    queue.submitter.submit(spec(array="0-1"))        # array 2: 2_0, 2_1
    with pytest.raises(NotFound) as caught:
        queue.queries.jobs(ref)
    assert type(caught.value) is NotFound and str(caught.value) == message


class CountingReserved:
    """The store, counting the calls to reserved()."""

    def __init__(self, store):
        self.store, self.calls = store, 0

    def reserved(self, group):
        self.calls += 1
        return self.store.reserved(group)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_recorded_job_is_read_without_asking_about_reservations(queue):
    job = queue.submit_one()
    store = CountingReserved(queue.store)
    queries = QueryService(store, queue.clock)

    assert [j.id for j in queries.jobs(job.id)] == [job.id]
    assert store.calls == 0
    with pytest.raises(NotFound):
        queries.jobs("9")
    assert store.calls == 1


def test_positions_follow_the_predicted_start_order_two_teams_bursts_interleaved(make_queue):
    # vision's burst is older, so this pass ranks all of it first; but each start lowers vision's fair
    # share, so the two bursts start alternately, and the positions say so
    queue = make_queue(2)
    vision = queue.submit(team="vision", array="0-3", limits={"wall_time": "1h"})
    queue.clock.advance(1)
    nlp = queue.submit(team="nlp", array="0-3", limits={"wall_time": "1h"})

    view = queue.queries.queue()

    ranked = plan(read_snapshot(queue.store, queue.clock.now())).order
    assert ranked[2:] == [j.id for j in vision[1:] + nlp[1:]]     # one team first, as the pass ranks them
    alternate = [j.id for pair in zip(vision, nlp) for j in pair]
    assert [e.job.id for e in view.pending] == alternate
    assert [e.position for e in view.pending] == list(range(1, 9))
    assert [e.eta - queue.clock.now() for e in view.pending] == [0, 0, 3600, 3600, 7200, 7200, 10800, 10800]


def test_one_jobs_standing_is_the_queues(make_queue):
    queue = make_queue(1)
    queue.submit(team="vision", array="0-2", limits={"wall_time": "1h"})
    [one] = queue.submit(team="nlp", limits={"wall_time": "1h"})
    whole = {e.job.id: e for e in queue.queries.queue().pending}
    [entry] = queue.queries.queue(group=one.id).pending
    assert entry == whole[one.id] and entry.position == 2


def test_the_queue_ranks_by_the_ratios_the_dispatchers_passes_plan_by(make_queue, monkeypatch):
    """A team's ratio holds in the supervisor until it moves past the drift; the queue's view beside
    it (the daemon's) ranks by the same, and a view on its own by the samples as they are."""
    import gqa.services.queries as queries
    from gqa.services.overview import OverviewService

    queue = make_queue(1)
    for _ in range(6):
        queue.submit_one(limits={"wall_time": "1h"})
    [job] = queue.supervisor.dispatch()
    for share in (0.50, 0.51):   # the median: 0.5, then 0.505, within 5% of it
        queue.clock.advance(3600 * share)
        queue.exit(job.id, 0)
        [job] = queue.supervisor.dispatch()
    seen = []
    real = queries.read_snapshot
    monkeypatch.setattr(queries, "read_snapshot", lambda store, now, ratios, **read: seen.append(ratios) or real(
        store, now, ratios, **read))
    QueryService(queue.store, queue.clock, ratios=queue.supervisor.ratios_in_use).queue()
    QueryService(queue.store, queue.clock).queue()
    OverviewService(queue.store, queue.store, queue.clock, ratios=queue.supervisor.ratios_in_use).overview()
    assert seen == [{"default": 0.5}, {"default": 0.505}, {"default": 0.5}]
    assert queue.supervisor.ratios_in_use({"default": 0.505}) == {"default": 0.5}   # and kept nothing new
