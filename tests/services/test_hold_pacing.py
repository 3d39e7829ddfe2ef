"""A team's whole queue crossing its budget (services/holding.py): a pass
starts the other teams' jobs first, then writes at most `holds_per_pass` of
the holds in one write, wakes the next pass for the rest, and never starts a
job whose hold is still to be written; a store that refuses the holds
(DynamoDB throttling past its retries) fails none of the starts. The budget
watch holds a bounded number per tick too, and still sends its alerts when
the store refuses them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gqa.adapters.local.budget_records import SqliteBudgetRecords
from gqa.models.errors import BackendUnavailable
from gqa.models.job import JobState
from gqa.ports import Change, Inventory
from gqa.scheduling import Gpu, TeamPolicy
from gqa.services.budget_watch import BudgetWatch
from gqa.services.supervisor import Supervisor
from tests.services.conftest import GRACE
from tests.services.fakes import CountingWaker, RecordingNotifier

S = JobState
TASKS = 1200
PER_PASS = 100
CLAIM = (S.QUEUED, S.STARTING)
HOLD, RELEASE = (S.QUEUED, S.HELD), (S.HELD, S.QUEUED)


class CountingStore:
    """The store, each apply() recorded as the moves it was asked for; `refuse`: its hold and
    release writes fail as DynamoDB's do once throttling outlasts the retries."""

    def __init__(self, store):
        self.store = store
        self.writes: list[list[tuple[JobState, JobState | None]]] = []
        self.refuse = False

    def __getattr__(self, name):
        return getattr(self.store, name)

    def apply(self, changes: list[Change]):
        moves = [(c.expect, c.to) for c in changes]
        if self.refuse and any(m in (HOLD, RELEASE) for m in moves):
            raise BackendUnavailable("ThrottlingException: throughput exceeds the partition's")
        self.writes.append(moves)
        return self.store.apply(changes)

    def counted(self, move) -> list[int]:
        """How many of each write's moves are `move`, for the writes that made any."""
        return [n for n in (w.count(move) for w in self.writes) if n]


@pytest.fixture
def over_budget(make_queue):
    """Eight $1 GPUs; team vision's 1,200 one-hour tasks queued, then its budget cut to $0.50 (each
    task's cap is $1); team nlp's four jobs queued behind them, so four GPUs stay free, which a task
    whose hold is not written yet could take; a dispatcher as AWS wires it."""
    queue = make_queue(8)
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", 1.0) for i in range(8))))
    queue.vision = [j.id for j in queue.submit(team="vision", array=f"0-{TASKS - 1}", limits={"wall_time": "1h"})]
    queue.nlp = [queue.submit_one(team="nlp", limits={"wall_time": "1h"}).id for _ in range(4)]
    queue.store.set_team("vision", TeamPolicy(budget=0.5))
    queue.counting = CountingStore(queue.store)
    queue.wakes = CountingWaker()
    queue.supervisor = Supervisor(queue.counting, queue.compute, queue.clock, queue.rng, grace=GRACE,
                                  holds_per_pass=PER_PASS, waker=queue.wakes)
    return queue


def vision_states(queue) -> dict[JobState, int]:
    out: dict[JobState, int] = {}
    for job in queue.store.list(team="vision"):
        out[job.state] = out.get(job.state, 0) + 1
    return out


def test_a_pass_starts_the_other_teams_jobs_first_then_holds_a_paced_number(over_budget):
    queue = over_budget

    started = queue.supervisor.dispatch()

    assert sorted(j.id for j in started) == sorted(queue.nlp)
    writes = queue.counting.writes
    first_hold = next(i for i, w in enumerate(writes) if HOLD in w)
    assert all(HOLD not in w for w in writes[:first_hold]) and any(CLAIM in w for w in writes[:first_hold])
    assert queue.counting.counted(HOLD) == [PER_PASS]                   # one write of at most N
    assert vision_states(queue) == {S.HELD: PER_PASS, S.QUEUED: TASKS - PER_PASS}
    assert queue.wakes.wakes == 1                                        # the next pass holds the rest


def test_the_rest_are_held_by_the_passes_after_and_none_of_them_ever_starts(over_budget):
    queue = over_budget
    passes = 0
    while True:
        started = queue.supervisor.dispatch()
        passes += 1
        assert not {j.id for j in started} & set(queue.vision)
        if vision_states(queue) == {S.HELD: TASKS}:
            break
    assert passes == TASKS // PER_PASS
    assert queue.counting.counted(HOLD) == [PER_PASS] * passes
    assert queue.wakes.wakes == passes - 1                               # the last had none left
    queue.supervisor.dispatch()
    assert queue.counting.counted(HOLD) == [PER_PASS] * passes and queue.wakes.wakes == passes - 1


def test_holds_the_store_refuses_fail_no_start_and_wait_for_the_next_tick(over_budget):
    queue = over_budget
    queue.counting.refuse = True

    started = queue.supervisor.dispatch()

    assert sorted(j.id for j in started) == sorted(queue.nlp)
    assert {queue.state(j) for j in queue.nlp} == {S.RUNNING}
    assert vision_states(queue) == {S.QUEUED: TASKS}
    assert queue.wakes.wakes == 0                                        # no wake-up into the throttling
    queue.counting.refuse = False
    queue.supervisor.dispatch()
    assert vision_states(queue) == {S.HELD: PER_PASS, S.QUEUED: TASKS - PER_PASS}


def test_releases_are_paced_too_and_a_released_job_starts_at_a_later_pass(over_budget):
    queue = over_budget
    for _ in range(TASKS // PER_PASS):
        queue.supervisor.dispatch()
    for job_id in queue.nlp:
        queue.exit(job_id, 0)
    assert vision_states(queue) == {S.HELD: TASKS}
    queue.store.set_team("vision", replace(queue.store.teams()["vision"], budget=10_000.0))
    wakes = queue.wakes.wakes

    assert queue.supervisor.dispatch() == []                             # held when the pass read them
    assert queue.counting.counted(RELEASE) == [PER_PASS]
    assert vision_states(queue) == {S.QUEUED: PER_PASS, S.HELD: TASKS - PER_PASS}
    assert queue.wakes.wakes == wakes + 1
    started = queue.supervisor.dispatch()
    assert len(started) == 8 and {j.id for j in started} <= set(queue.vision)


def test_the_budget_watch_holds_a_bounded_number_a_tick_and_alerts_whatever_the_store_does(over_budget):
    queue = over_budget
    queue.store.set_team("vision", TeamPolicy())
    running = len({j.id for j in queue.supervisor.dispatch()} & set(queue.vision))
    queue.clock.advance(3600)                                            # an hour of each: over $1
    queue.store.set_team("vision", TeamPolicy(budget=1.0))
    queued = TASKS - running
    records = SqliteBudgetRecords(queue.store.path)
    watch = BudgetWatch(queue.counting, records, RecordingNotifier(), queue.clock, holds_per_tick=PER_PASS)
    try:
        queue.counting.refuse = True
        tick = watch.tick()
        assert tick.held == [] and vision_states(queue) == {S.RUNNING: running, S.QUEUED: queued}
        assert any(a.key.endswith("#vision#100") for a in tick.sent)     # alerted all the same

        queue.counting.refuse = False
        tick = watch.tick()
        assert len(tick.held) == PER_PASS and queue.counting.counted(HOLD) == [PER_PASS]
        assert vision_states(queue) == {S.RUNNING: running, S.HELD: PER_PASS, S.QUEUED: queued - PER_PASS}
    finally:
        records.close()
