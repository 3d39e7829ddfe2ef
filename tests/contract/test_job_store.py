"""The JobStore port's contract, run against every backend (see conftest.py).

Only the protocol in gqa/ports is used here: what holds for one backend
must hold for all of them."""

from dataclasses import replace
from threading import Thread

import pytest

from gqa.models.errors import Conflict, InvalidTransition, NotFound
from gqa.models.job import JobState, Request, Transition
from gqa.ports import Change, Inventory
from gqa.scheduling import Gpu, PendingJob, Policy, RunningJob, TeamPolicy, Weights
from tests.builders import gpus
from tests.contract.jobs import T0, new_job, put

S = JobState
HOUR = 3600.0


def ids(jobs) -> list[str]:
    return [j.id for j in jobs]


# -- create ----------------------------------------------------------------------

def test_single_jobs_get_consecutive_ids_each_its_own_group(store):
    [first] = store.create([new_job()])
    [second] = store.create([new_job()])

    assert (first.id, first.group) == ("1", "1")
    assert (second.id, second.group) == ("2", "2")
    assert first.seq < second.seq


def test_an_array_is_one_group_created_in_one_call(store):
    store.create([new_job()])

    tasks = store.create([new_job(array_index=i, group_limit=2) for i in (0, 2, 4)])
    [after] = store.create([new_job()])

    assert ids(tasks) == ["2_0", "2_2", "2_4"]
    assert {t.group for t in tasks} == {"2"}
    assert [t.group_limit for t in tasks] == [2, 2, 2]
    assert after.id == "3"   # group ids and job ids never collide


def test_seq_increases_in_submission_order(store):
    created = store.create([new_job()]) + store.create([new_job(array_index=i) for i in range(3)]) \
        + store.create([new_job()])

    seqs = [j.seq for j in created]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert ids(store.list()) == ids(created)


def test_create_returns_the_records_as_stored_with_their_history(store):
    job = new_job(spec={"priority": "high", "resources": {"gpus": 2, "gpu_type": "a10g", "cpus": 8,
                                                          "memory": "16Gi"},
                        "limits": {"wall_time": "1h"}},
                  extra_env={"GQA_ARRAY_INDEX": "7"}, array_index=7, group_limit=3)

    [created] = store.create([job])

    assert created == replace(job, id="1_7", group="1", seq=created.seq)
    assert store.get(created.id) == created
    assert [(t.state, t.at, t.reason) for t in store.get(created.id).history] == [
        (S.SUBMITTED, T0, "submitted"), (S.QUEUED, T0, "admitted")]


# -- reserved ids: create-if-absent ------------------------------------------------------------

def test_reserve_ids_assigns_as_create_would_and_writes_no_job(store):
    [single] = store.reserve_ids([new_job()])
    tasks = store.reserve_ids([new_job(array_index=i) for i in (0, 2)])

    assert (single.id, single.group) == ("1", "1")
    assert [(t.id, t.group) for t in tasks] == [("2_0", "2"), ("2_2", "2")]
    assert single.seq < tasks[0].seq < tasks[1].seq
    assert store.list() == []
    with pytest.raises(NotFound):
        store.get("1")


def test_reserved_ids_are_never_handed_out_again(open_store):
    one, other = open_store(), open_store()
    reserved = one.reserve_ids([new_job(array_index=0)]) + one.reserve_ids([new_job()])

    [after] = other.create([new_job()])

    assert after.id == "3"
    assert after.seq > max(j.seq for j in reserved)


def test_reserved_tells_the_groups_handed_out_written_or_not(open_store):
    one, other = open_store(), open_store()
    assert not one.reserved("1")                   # nothing handed out yet
    one.reserve_ids([new_job()])                   # group 1, never written
    one.create([new_job(array_index=i) for i in range(2)])   # group 2, written

    assert [other.reserved(g) for g in ("1", "2", "3")] == [True, True, False]


@pytest.mark.parametrize("ref", ["0", "01", "", "x", "1_0", "-1", "1x", "1\n", "\u0661"])
def test_reserved_is_false_for_what_is_no_group_id(store, ref):
    store.reserve_ids([new_job(array_index=0)])
    assert not store.reserved(ref)


def test_jobs_with_reserved_ids_are_written_under_them(store):
    reserved = store.reserve_ids([new_job(array_index=i, group_limit=2) for i in range(3)])

    created = store.create(reserved)

    assert created == reserved
    assert store.list(history=True) == reserved
    assert [j.id for j in store.resolve("1")] == ["1_0", "1_1", "1_2"]


def test_creating_reserved_ids_again_leaves_the_stored_jobs_as_they_are(store):
    reserved = store.reserve_ids([new_job(array_index=i) for i in range(2)])
    store.create(reserved)
    [moved] = store.apply([Change("1_0", S.QUEUED, S.STARTING, "assigned", T0 + 1, {"assigned": (0,)})])

    again = store.create(reserved)

    assert again == [moved, store.get("1_1")]
    assert again[0].state == S.STARTING and again[0].history == moved.history
    assert len(store.list()) == 2


def test_a_partly_written_submission_is_completed_without_touching_what_exists(store):
    reserved = store.reserve_ids([new_job(array_index=i) for i in range(4)])
    store.create(reserved[1:3])
    [cancelled] = store.apply([Change("1_1", S.QUEUED, S.CANCELLED, "cancelled", T0 + 1)])

    created = store.create(reserved)

    assert [j.id for j in created] == ["1_0", "1_1", "1_2", "1_3"]
    assert created[1] == cancelled
    assert [j.state for j in store.list()] == [S.QUEUED, S.CANCELLED, S.QUEUED, S.QUEUED]


@pytest.mark.slow
def test_a_large_array_is_completed_across_transactions(store):
    reserved = store.reserve_ids([new_job(array_index=i) for i in range(230)])
    store.create(reserved[95:105] + reserved[200:])     # what a crashed first delivery might have left

    created = store.create(reserved)

    assert [j.id for j in created] == [f"1_{i}" for i in range(230)]
    assert [j.id for j in store.list()] == [j.id for j in reserved]


# -- get, resolve, list --------------------------------------------------------------

@pytest.fixture
def one_job_and_an_array(store):
    store.create([new_job()])
    store.create([new_job(array_index=i) for i in range(3)])
    return store


@pytest.mark.parametrize("ref, expected", [
    ("1", ["1"]),
    ("2", ["2_0", "2_1", "2_2"]),
    ("2_1", ["2_1"]),
])
def test_resolve_a_job_or_a_group(one_job_and_an_array, ref, expected):
    jobs = one_job_and_an_array.resolve(ref)

    assert ids(jobs) == expected
    assert all(j.history for j in jobs)


@pytest.mark.parametrize("lookup", ["get", "resolve"])
@pytest.mark.parametrize("ref", ["9", "2_9", ""])
def test_unknown_refs_are_not_found(one_job_and_an_array, lookup, ref):
    with pytest.raises(NotFound):
        getattr(one_job_and_an_array, lookup)(ref)


@pytest.fixture
def mixed_jobs(store):
    for team, state in [("vision", S.QUEUED), ("nlp", S.RUNNING), ("vision", S.SUCCEEDED),
                        ("nlp", S.QUEUED), ("vision", S.RUNNING)]:
        put(store, state, spec={"team": team})
    return store


@pytest.mark.parametrize("args, kwargs, expected", [
    ((), {}, ["1", "2", "3", "4", "5"]),
    (([S.QUEUED],), {}, ["1", "4"]),
    (([S.QUEUED, S.RUNNING],), {}, ["1", "2", "4", "5"]),
    (([],), {}, []),
    (([S.RETRY_WAIT],), {}, []),
    ((), {"team": "vision"}, ["1", "3", "5"]),
    (([S.RUNNING],), {"team": "vision"}, ["5"]),
    ((), {"limit": 2}, ["1", "2"]),
    (([S.QUEUED, S.RUNNING],), {"team": "nlp", "limit": 1}, ["2"]),
])
def test_list_filters_by_state_and_team_in_submission_order(mixed_jobs, args, kwargs, expected):
    assert ids(mixed_jobs.list(*args, **kwargs)) == expected


def test_list_with_history(mixed_jobs):
    jobs = mixed_jobs.list([S.SUCCEEDED], history=True)

    assert [t.state for t in jobs[0].history] == [S.SUBMITTED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert jobs == [mixed_jobs.get("3")]


# -- apply -----------------------------------------------------------------------------

def test_a_guarded_transition_moves_state_appends_history_and_sets_fields(store):
    [job] = store.create([new_job(spec={"resources": {"gpus": 2}})])

    [moved] = store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 2,3", T0 + 5, {"assigned": (2, 3)})])

    assert (moved.state, moved.reason, moved.assigned) == (S.STARTING, "assigned GPUs 2,3", (2, 3))
    assert moved.history[-1] == Transition(S.STARTING, T0 + 5, "assigned GPUs 2,3")
    assert moved.history[:-1] == job.history
    assert store.get(job.id) == moved


def test_apply_returns_each_record_as_it_is_now_stored(store):
    job = put(store, S.RUNNING, fields={"pid": 42, "proc_token": "t", "started_at": T0, "assigned": (0,)})

    [settled] = store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "exit code 0", T0 + 60,
                                    {"exit_code": 0, "pid": None, "ended_at": T0 + 60, "assigned": ()})])

    assert settled == store.get(job.id)
    assert settled.first_start == T0
    assert (settled.pid, settled.proc_token, settled.exit_code, settled.assigned) == (None, "t", 0, ())


def test_a_stale_expect_raises_conflict_and_changes_nothing(store):
    job = put(store, S.RUNNING)
    before = store.get(job.id)

    with pytest.raises(Conflict):
        store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned", T0, {"assigned": (0,)})])

    assert store.get(job.id) == before


@pytest.mark.parametrize("current, to", [
    (S.QUEUED, S.RUNNING),
    (S.QUEUED, S.SUCCEEDED),
    (S.HELD, S.STARTING),
    (S.RUNNING, S.QUEUED),
    (S.SUCCEEDED, S.QUEUED),
    (S.CANCELLED, S.CANCELLED),
])
def test_an_illegal_transition_raises_and_changes_nothing(store, current, to):
    job = put(store, current)
    before = store.get(job.id)

    with pytest.raises(InvalidTransition):
        store.apply([Change(job.id, current, to, "no", T0 + 1)])

    assert store.get(job.id) == before


def _stale(job):
    return Change(job.id, S.RUNNING, S.SUCCEEDED, "stale", T0 + 9)


def _illegal(job):
    return Change(job.id, S.QUEUED, S.RUNNING, "illegal", T0 + 9)


def _unknown(job):
    return Change("99", S.QUEUED, S.STARTING, "no such job", T0 + 9)


@pytest.mark.parametrize("bad, error", [(_stale, Conflict), (_illegal, InvalidTransition), (_unknown, NotFound)])
@pytest.mark.parametrize("bad_first", [False, True], ids=["bad-last", "bad-first"])
def test_a_batch_with_one_bad_change_applies_nothing(store, bad, error, bad_first):
    running = put(store, S.RUNNING, fields={"started_at": T0}, spec={"team": "vision"})
    queued = put(store, S.QUEUED)
    good = [Change(running.id, S.RUNNING, S.SUCCEEDED, "exit code 0", T0 + 9, {"exit_code": 0}, usage=100.0),
            Change(queued.id, S.QUEUED, None, "", T0 + 9, {"not_before": T0 + 99})]
    batch = [bad(queued)] + good if bad_first else good + [bad(queued)]
    before = [store.get(running.id), store.get(queued.id)]

    with pytest.raises(error):
        store.apply(batch)

    assert [store.get(running.id), store.get(queued.id)] == before
    # the running job still counts as running; the batch's usage was not added
    assert store.usage(T0 + 9, HOUR) == {"vision": pytest.approx(9.0)}


def test_fields_only_change_keeps_state_and_history(store):
    job = put(store, S.RUNNING)

    [updated] = store.apply([Change(job.id, S.RUNNING, None, "", T0 + 1, {"request": Request.CANCEL})])

    assert (updated.state, updated.request, updated.history) == (S.RUNNING, Request.CANCEL, job.history)
    assert store.get(job.id) == updated


def test_fields_only_change_is_guarded(store):
    job = put(store, S.SUCCEEDED)
    before = store.get(job.id)

    with pytest.raises(Conflict):
        store.apply([Change(job.id, S.RUNNING, None, "", T0 + 1, {"request": Request.CANCEL})])

    assert store.get(job.id) == before


def test_several_changes_apply_together(store):
    a, b = put(store, S.QUEUED), put(store, S.QUEUED)

    out = store.apply([Change(a.id, S.QUEUED, S.STARTING, "go", T0, {"assigned": (0,)}),
                       Change(b.id, S.QUEUED, S.STARTING, "go", T0, {"assigned": (1,)})])

    assert [(j.id, j.state, j.assigned) for j in out] == [("1", S.STARTING, (0,)), ("2", S.STARTING, (1,))]
    assert out == [store.get("1"), store.get("2")]


def test_change_usage_is_added_to_the_team(store):
    store.set_policy(Policy(half_life=HOUR))
    vision = [put(store, S.RUNNING, spec={"team": "vision"}) for _ in range(2)]
    nlp = put(store, S.RUNNING, spec={"team": "nlp"})

    store.apply([Change(vision[0].id, S.RUNNING, S.SUCCEEDED, "done", T0, usage=80.0),
                 Change(nlp.id, S.RUNNING, S.FAILED, "done", T0, usage=10.0)])
    # added later: the earlier usage decays first, by the store's policy half-life
    store.apply([Change(vision[1].id, S.RUNNING, S.SUCCEEDED, "done", T0 + HOUR, usage=40.0)])

    assert store.usage(T0 + HOUR, HOUR) == {"vision": pytest.approx(80.0), "nlp": pytest.approx(5.0)}


# -- the supervisor's queries -------------------------------------------------------------

@pytest.mark.parametrize("state, fields, wanted", [
    (S.RUNNING, {"request": Request.CANCEL}, True),
    (S.STARTING, {"request": Request.REQUEUE}, True),
    (S.RUNNING, {"request": Request.CANCEL, "kill_reason": "cancel"}, False),   # being carried out
    (S.RUNNING, {}, False),
    (S.RUNNING, {"kill_reason": "timeout"}, False),
    (S.QUEUED, {}, False),
])
def test_with_requests(store, state, fields, wanted):
    put(store, S.RUNNING)   # a bystander
    job = put(store, state, fields=fields)

    assert ids(store.with_requests()) == ([job.id] if wanted else [])


def test_scheduling_view(store):
    queued = put(store, S.QUEUED, submitted_at=T0 + 1,
                 spec={"team": "vision", "owner": "bob", "priority": "high",
                       "resources": {"gpus": 2, "gpu_type": "h100", "cpus": 4, "memory": "8Gi"},
                       "limits": {"wall_time": "2h"}})
    [task] = store.create([new_job(array_index=0, group_limit=1, spec={"team": "nlp"})])
    running = put(store, S.RUNNING, fields={"assigned": (2, 3), "started_at": T0 + 7, "gpu_seconds": 50.0},
                  spec={"team": "vision", "resources": {"gpus": 2, "cpus": 2, "memory": "1Gi"}})
    starting = put(store, S.STARTING, fields={"assigned": (5,)})
    held = put(store, S.HELD, fields={"gpu_seconds": 7_200.0})   # run before: time slicing reads it as service
    for state in (S.RETRY_WAIT, S.SUCCEEDED, S.CANCELLED):
        put(store, state)

    pending, holding = store.scheduling_view()

    assert sorted(pending, key=lambda p: p.seq) == [
        PendingJob(id=queued.id, team="vision", user="bob", tier=0, gpus=2, submitted_at=T0 + 1, gpu_type="h100",
                   cpus=4, memory=8 * 1024**3, wall_time=7200, group=queued.group, group_limit=None,
                   seq=queued.seq, name=queued.name),
        PendingJob(id=task.id, team="nlp", user="alice", tier=1, gpus=1, submitted_at=T0, group=task.group,
                   group_limit=1, seq=task.seq, name=task.name),
        PendingJob(id=held.id, team="default", user="alice", tier=1, gpus=1, submitted_at=T0, group=held.group,
                   seq=held.seq, held=True, name=held.name, served=7_200.0),  # HELD: seen so the pass can release them
    ]
    by_id = {r.id: r for r in holding}
    assert set(by_id) == {running.id, starting.id}
    assert by_id[running.id] == RunningJob(id=running.id, team="vision", user="alice", gpus=(2, 3),
                                           started_at=T0 + 7, cpus=2, memory=1024**3, group=running.group,
                                           name=running.name, served=50.0, submitted_at=T0)
    assert by_id[starting.id].gpus == (5,)
    # a STARTING job's attempt has not begun: what it costs counts from its start, not from a stale started_at
    assert (by_id[running.id].started, by_id[starting.id].started) == (True, False)


def test_retry_wakeups_and_due_retries(store):
    assert store.next_wakeup() is None
    put(store, S.QUEUED, fields={"not_before": T0 - 50})   # only RETRY_WAIT counts
    later = put(store, S.RETRY_WAIT, fields={"not_before": T0 + 30})
    sooner = put(store, S.RETRY_WAIT, fields={"not_before": T0 + 10})
    now = put(store, S.RETRY_WAIT, fields={"not_before": T0})

    assert store.next_wakeup() == T0
    assert ids(store.due_retries(T0 - 1)) == []
    assert ids(store.due_retries(T0)) == [now.id]
    assert ids(store.due_retries(T0 + 10)) == [sooner.id, now.id]
    assert ids(store.due_retries(T0 + 30)) == [later.id, sooner.id, now.id]

    store.apply([Change(now.id, S.RETRY_WAIT, S.QUEUED, "back in the queue", T0)])
    assert store.next_wakeup() == T0 + 10


# -- settings and usage ---------------------------------------------------------------------

def test_teams_round_trip(store):
    assert store.teams() == {}
    store.set_team("vision", TeamPolicy(share=2.0, max_gpus=8))
    store.set_team("nlp", TeamPolicy(max_gpus_per_user=2))
    store.set_team("vision", TeamPolicy(share=3.0))   # replaces the whole policy

    assert store.teams() == {"vision": TeamPolicy(share=3.0), "nlp": TeamPolicy(max_gpus_per_user=2)}


def test_team_members_round_trip_and_a_quota_change_keeps_them(store):
    assert store.team_members() == {}
    store.set_team("vision", TeamPolicy(share=2.0, max_gpus=8))
    store.set_team_members("vision", ("alice", "arn:aws:sts::1:assumed-role/Vision/*", "@ml"))
    store.set_team("vision", TeamPolicy(share=3.0))   # `gqa quota set vision --share 3`
    assert store.team_members() == {"vision": ("alice", "arn:aws:sts::1:assumed-role/Vision/*", "@ml")}
    assert store.teams() == {"vision": TeamPolicy(share=3.0)}

    store.set_team_members("vision", ("bob",))        # replaces the list
    store.set_team_members("vision", ())              # none: only admins may submit for it
    assert store.team_members() == {} and store.teams() == {"vision": TeamPolicy(share=3.0)}


def test_members_of_a_team_not_configured_yet_come_with_the_default_policy(store):
    store.set_policy(Policy(default_team=TeamPolicy(share=0.5, max_gpus=2)))
    store.set_team_members("nlp", ("carol",))
    assert store.teams() == {"nlp": TeamPolicy(share=0.5, max_gpus=2)}
    assert store.team_members() == {"nlp": ("carol",)}


def test_usage_decays_by_half_each_half_life(store):
    store.set_policy(Policy(half_life=HOUR))
    job = put(store, S.RUNNING, spec={"team": "vision"})
    store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", T0, usage=1000.0)])

    assert store.usage(T0, HOUR) == {"vision": pytest.approx(1000.0)}
    assert store.usage(T0 + HOUR, HOUR) == {"vision": pytest.approx(500.0)}
    assert store.usage(T0 + 2 * HOUR, HOUR) == {"vision": pytest.approx(250.0)}


def test_usage_counts_running_jobs_as_they_run(store):
    put(store, S.RUNNING, fields={"started_at": T0}, spec={"team": "vision", "resources": {"gpus": 2}})
    put(store, S.STARTING, spec={"team": "nlp"})
    put(store, S.QUEUED, spec={"team": "nlp"})

    assert store.usage(T0 + 30, HOUR).get("vision") == pytest.approx(60.0)
    assert store.usage(T0 + 30, HOUR).get("nlp", 0.0) == 0.0


def test_inventory_round_trip(store):
    assert store.inventory() is None
    inventory = Inventory(gpus=gpus({"a10g": 2, "h100": 2}), cpus=32, memory=256 * 1024**3)

    store.set_inventory(inventory)
    assert store.inventory() == inventory
    store.set_inventory(Inventory(gpus=(Gpu(0),)))
    assert store.inventory() == Inventory(gpus=(Gpu(0),))


def test_policy_round_trip(store):
    assert store.policy() == Policy()
    policy = Policy(weights=Weights(fair_share=2.0, age=0.5, size=0.1), half_life=HOUR, max_age=2 * HOUR,
                    max_gpus_per_job=4, max_wall_time=24 * HOUR, default_team=TeamPolicy(share=0.5, max_gpus=2),
                    backfill_by="predictions")

    store.set_policy(policy)

    assert store.policy() == policy


# -- two views of one backend ------------------------------------------------------------------

def test_a_write_through_one_store_is_seen_by_another(open_store):
    one, other = open_store(), open_store()

    [job] = one.create([new_job()])
    one.set_team("vision", TeamPolicy(max_gpus=4))
    one.set_inventory(Inventory(gpus=gpus(2)))
    other.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned", T0, {"assigned": (1,)})])

    assert one.get(job.id) == other.get(job.id)
    assert one.get(job.id).state == S.STARTING
    assert other.teams() == {"vision": TeamPolicy(max_gpus=4)}
    assert other.inventory() == Inventory(gpus=gpus(2))
    [second] = other.create([new_job()])
    assert second.id == "2"


def test_a_guarded_write_from_a_stale_read_fails(open_store):
    one, other = open_store(), open_store()
    [job] = one.create([new_job()])
    seen = one.get(job.id)                    # QUEUED
    other.apply([Change(job.id, S.QUEUED, S.CANCELLED, "cancelled by user", T0 + 1)])

    with pytest.raises(Conflict):
        one.apply([Change(seen.id, seen.state, S.STARTING, "assigned", T0 + 2, {"assigned": (0,)})])

    assert one.get(job.id).state == other.get(job.id).state == S.CANCELLED
    assert one.get(job.id).assigned == ()


def test_concurrent_submissions_get_distinct_ids(open_store):
    stores = [open_store() for _ in range(3)]
    created: list[list] = [[] for _ in stores]

    def submit(n: int) -> None:
        for i in range(10):
            created[n] += stores[n].create([new_job()] if i % 2 else [new_job(array_index=k) for k in range(2)])

    threads = [Thread(target=submit, args=(n,)) for n in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    everything = [j for batch in created for j in batch]
    assert len(everything) == 3 * (5 + 10)
    assert len({j.id for j in everything}) == len(everything)
    assert len({j.seq for j in everything}) == len(everything)
    assert sorted(ids(stores[0].list()), key=lambda i: [int(p) for p in i.split("_")]) == \
        sorted(ids(everything), key=lambda i: [int(p) for p in i.split("_")])


def test_runtime_samples_are_recent_successes_with_a_limit(store):
    put(store, S.SUCCEEDED, team="vision", fields={"started_at": T0, "ended_at": T0 + 30}, wall_time=60)
    put(store, S.SUCCEEDED, team="nlp", fields={"started_at": T0, "ended_at": T0 + 5})  # no limit: no sample
    put(store, S.FAILED, team="vision", fields={"started_at": T0, "ended_at": T0 + 1}, wall_time=60)
    assert store.runtime_samples() == [("vision", 30.0, 60.0)]


def test_spend_is_added_per_team_and_period_with_the_change(store):
    job = put(store, S.RUNNING, team="vision")
    store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", 1_796_000_000.0, cost=12.5)])
    other = put(store, S.RUNNING, team="vision")
    store.apply([Change(other.id, S.RUNNING, S.FAILED, "exit 1", 1_796_000_100.0, cost=2.5)])
    assert store.spend("2026-11") == {"vision": 15.0}
    assert store.spend("2026-12") == {}


def test_spot_and_reclaims_are_stored_and_scheduled(store):
    tolerant = put(store, S.QUEUED, spec={"spot": True}, fields={"reclaims": 2})
    strict = put(store, S.HELD)

    pending, _ = store.scheduling_view()

    assert {p.id: (p.spot, p.reclaims) for p in pending} == {tolerant.id: (True, 2), strict.id: (False, 0)}
    assert (store.get(tolerant.id).spot, store.get(tolerant.id).reclaims) == (True, 2)
    assert (store.get(strict.id).spot, store.get(strict.id).reclaims) == (False, 0)
