"""The budget watch's tick over the SQLite store and SQLite budget records,
with a recording notifier, fixed GPU utilisation and a fake clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gqa.adapters.local.budget_records import SqliteBudgetRecords
from gqa.models.job import JobState, Request
from gqa.ports import Inventory
from gqa.scheduling import Gpu, TeamPolicy
from gqa.scheduling.budget import period_of
from gqa.services.budget_watch import BudgetWatch, waiting_since
from tests.services.fakes import FixedUtilisation, RecordingMetrics, RecordingNotifier

HOUR = 3600.0
PRICE = 10.0      # per GPU-hour
BUDGET = 100.0


class Watched:
    """A queue with priced GPUs, team vision on a budget, and a watch over it."""

    def __init__(self, queue, tmp_path, *, stop_at_budget: bool = False):
        self.queue = queue
        queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(4))))
        queue.store.set_team("vision", TeamPolicy(budget=BUDGET, stop_at_budget=stop_at_budget))
        self.records = SqliteBudgetRecords(queue.store.path)
        self.notifier = RecordingNotifier()
        self.utilisation = FixedUtilisation()
        self.metrics = RecordingMetrics()
        self.watch = self.another_watch()

    def another_watch(self, records: SqliteBudgetRecords | None = None) -> BudgetWatch:
        return BudgetWatch(self.queue.store, records or self.records, self.notifier, self.queue.clock,
                           utilisation=self.utilisation, metrics=self.metrics, waker=self.queue.waker)

    def kinds(self) -> list[str]:
        return [kind for _, _, kind, _ in self.notifier.sent]

    def subjects(self) -> list[str]:
        return [subject for subject, _, _, _ in self.notifier.sent]


@pytest.fixture
def watched(queue, tmp_path):
    w = Watched(queue, tmp_path)
    yield w
    w.records.close()


def test_live_spend_is_settled_plus_running_and_is_overwritten_not_added(watched):
    queue = watched.queue
    done = queue.start(team="vision", limits={"wall_time": "2h"})
    queue.clock.advance(HOUR)
    queue.exit(done.id, 0)                                           # settled: $10
    queue.start(team="vision", limits={"wall_time": "2h"})
    queue.clock.advance(HOUR / 2)                                     # running: $5 so far
    period = period_of(queue.clock.now())
    watched.watch.tick()
    watched.watch.tick()
    live = watched.records.live_spend(period)["vision"]
    assert (live.settled, live.running, live.amount) == (pytest.approx(10.0), pytest.approx(5.0), pytest.approx(15.0))
    assert queue.store.spend(period) == {"vision": pytest.approx(10.0)}   # the settled ledger is untouched


def test_each_threshold_alerts_once_and_at_100_percent_the_queue_is_held_then_released(watched):
    queue = watched.queue
    queue.start(team="vision", limits={"wall_time": "10h"})          # may cost $100: fits the $100 budget
    queue.clock.advance(5 * HOUR)                                     # $50
    assert watched.watch.tick().sent[0].key.endswith("#vision#50")
    assert watched.watch.tick().sent == []                            # the next tick sends nothing again
    queue.clock.advance(3 * HOUR)                                     # $80
    watched.watch.tick()
    waiting = queue.submit_one(team="vision", limits={"wall_time": "1h"})
    queue.clock.advance(2 * HOUR)                                     # $100
    tick = watched.watch.tick()
    assert tick.held == [waiting.id]
    assert watched.kinds() == ["budget"] * 3
    assert watched.subjects()[-1] == "gqa: team vision at 100% of its 1970-01 budget"
    held = queue.get(waiting.id)
    assert held.state == JobState.HELD
    assert held.reason == "team vision spent $100.00 of $100.00 this month (100%)"
    assert queue.supervisor.dispatch() == [] and queue.get(waiting.id).state == JobState.HELD   # the pass agrees

    queue.store.set_team("vision", replace(queue.store.teams()["vision"], budget=1000.0))
    wakes = queue.waker.wakes
    assert watched.watch.tick().released == [waiting.id]
    assert queue.get(waiting.id).state == JobState.QUEUED and queue.waker.wakes == wakes + 1
    assert len(watched.notifier.sent) == 3                           # no threshold alert of the new budget yet


def test_stop_at_budget_requeues_running_jobs_which_then_wait_held(queue, tmp_path):
    watched = Watched(queue, tmp_path, stop_at_budget=True)
    job = queue.start(team="vision", limits={"wall_time": "10h"})
    queue.clock.advance(10 * HOUR)
    tick = watched.watch.tick()
    assert tick.stopped == [job.id]
    assert queue.get(job.id).request == Request.REQUEUE
    assert watched.watch.tick().stopped == []                         # asked once

    queue.supervisor.carry_out_requests()                             # the dispatcher stops it: SIGTERM
    assert [j for j, _ in queue.compute.terminated] == [job.id]
    queue.exit(job.id, 143)                                           # it checkpointed and exited
    assert queue.get(job.id).state == JobState.QUEUED                 # back in the queue, not lost
    queue.supervisor.dispatch()
    stopped = queue.get(job.id)
    assert stopped.state == JobState.HELD and stopped.reason.startswith("team vision spent $100.00 of $100.00")
    watched.records.close()


def test_without_stop_at_budget_running_jobs_run_on(watched):
    queue = watched.queue
    job = queue.start(team="vision", limits={"wall_time": "10h"})
    queue.clock.advance(11 * HOUR)
    assert watched.watch.tick().stopped == [] and queue.get(job.id).request is None


def test_a_job_waiting_too_long_alerts_once(watched):
    queue = watched.queue
    queue.store.set_policy(replace(queue.store.policy(), alert_pending_after=4 * HOUR))
    blocker = queue.start(team="nlp", resources={"gpus": 4})
    waiting = queue.submit_one(team="nlp", resources={"gpus": 2})
    queue.supervisor.dispatch()
    queue.clock.advance(4 * HOUR - 1)
    assert [a.kind for a in watched.watch.tick().sent] == []
    queue.clock.advance(1)
    [alert] = watched.watch.tick().sent
    assert alert.key == f"pending#{waiting.id}" and alert.team == "nlp"
    assert "has waited 4h00m, longer than 4h00m" in alert.message
    assert watched.watch.tick().sent == []
    assert queue.get(blocker.id).state == JobState.RUNNING


def test_a_pending_alert_gives_the_reason_the_queue_gives_now_not_the_one_stored_at_the_hold(watched):
    queue = watched.queue
    queue.store.set_policy(replace(queue.store.policy(), alert_pending_after=HOUR))
    job = queue.submit_one(team="vision", limits={"wall_time": "20h"})      # may cost $200: over $100
    queue.supervisor.dispatch()
    assert queue.get(job.id).reason.endswith("= $200.00, over $100.00 this period")
    queue.store.set_team("vision", replace(queue.store.teams()["vision"], budget=150.0))   # still over
    queue.clock.advance(HOUR)
    [alert] = watched.watch.tick().sent
    [entry] = queue.queries.queue().pending
    assert entry.reason.endswith("= $200.00, over $150.00 this period")
    assert alert.message.endswith(f"longer than 1h00m: {entry.reason}")


def test_a_requeued_job_waits_from_its_requeue_not_from_its_submission(queue):
    job = queue.start()
    queue.clock.advance(10 * HOUR)
    queue.control.requeue([job.id])
    queue.supervisor.carry_out_requests()
    queue.exit(job.id, 143)
    assert waiting_since(queue.get(job.id)) == queue.clock.now()


def test_idle_gpus_alert_once_per_attempt(watched):
    queue = watched.queue
    busy = queue.start(team="vision", limits={"wall_time": "10h"})
    idle = queue.start(team="nlp")
    watched.utilisation.percent = {busy.id: 80.0, idle.id: 1.5}
    queue.clock.advance(20 * 60)
    watched.watch.tick()
    assert watched.utilisation.asked == []                            # nobody has run a whole window yet
    queue.clock.advance(15 * 60)
    [alert] = [a for a in watched.watch.tick().sent if a.kind == "idle"]
    assert alert.key == f"idle#{idle.id}#1" and "averaging 1.5% utilisation" in alert.message
    watched.watch.tick()
    assert watched.utilisation.asked[-1] == [busy.id]                 # the idle one is not asked about again


def test_an_alert_that_could_not_be_sent_is_sent_by_the_next_tick(watched):
    queue = watched.queue
    queue.start(team="vision", limits={"wall_time": "10h"})
    queue.clock.advance(5 * HOUR)
    watched.notifier.fail = 1
    tick = watched.watch.tick()
    assert [a.key for a in tick.failed] == ["budget#1970-01#vision#50"] and tick.sent == []
    assert [a.key for a in watched.watch.tick().sent] == ["budget#1970-01#vision#50"]


def test_overlapping_ticks_send_each_alert_once(watched):
    """A second tick (another connection) runs while the first is publishing."""
    queue = watched.queue
    queue.start(team="vision", limits={"wall_time": "10h"})
    queue.clock.advance(5 * HOUR)
    other = SqliteBudgetRecords(queue.store.path)
    second = watched.another_watch(other)
    nested: list = []
    real = watched.notifier.notify

    def notify(*args, **kwargs):
        if not nested:
            nested.append(second.tick())
        real(*args, **kwargs)
    watched.notifier.notify = notify
    first = watched.watch.tick()
    assert len(first.sent) == 1 and nested[0].sent == []
    assert len(watched.notifier.sent) == 1
    other.close()


def test_metrics_per_team_and_for_the_queue(watched):
    queue = watched.queue
    queue.start(team="vision", limits={"wall_time": "10h"})
    queue.submit_one(team="nlp", resources={"gpus": 4})   # 3 GPUs free: waits
    queue.clock.advance(2 * HOUR)
    watched.watch.tick()
    by_team = {d.get("team"): m for d, m in watched.metrics.flushed}
    assert by_team["vision"] == {"TeamSpend": pytest.approx(20.0), "BudgetUsed": pytest.approx(20.0)}
    assert by_team[None]["OldestPendingAge"] == pytest.approx(2 * HOUR)
    assert (by_team[None]["PendingJobs"], by_team[None]["AlertsSent"]) == (1, 0)


def test_a_job_waiting_by_its_owner_s_choice_never_alerts(watched):
    queue = watched.queue
    queue.store.set_policy(replace(queue.store.policy(), alert_pending_after=4 * HOUR))
    blocker = queue.start(team="nlp", resources={"gpus": 4})
    held = queue.submit_one(team="nlp", hold=True)
    chained = queue.submit_one(team="nlp", after=f"afterok:{blocker.id}")
    later = queue.submit_one(team="nlp", begin=queue.clock.now() + 10 * HOUR)
    waiting = queue.submit_one(team="nlp")
    queue.supervisor.dispatch()
    queue.clock.advance(4 * HOUR)

    sent = watched.watch.tick().sent

    # only the job that waits for GPUs: not the held one, the chained one, nor the one not due yet
    assert [a.key for a in sent] == [f"pending#{waiting.id}"]
    assert {held.id, chained.id, later.id} <= {j.id for j in queue.store.list([JobState.QUEUED, JobState.HELD])}


def test_a_submission_waiting_too_long_for_approval_alerts_the_approvers_once(watched):
    queue = watched.queue
    queue.start(team="nlp", resources={"gpus": 4})                        # every GPU busy
    queue.store.set_policy(replace(queue.store.policy(), alert_pending_after=2.0, approval_gpus=1))
    queued = queue.submit_one(team="nlp")                                 # waits for GPUs
    big = queue.submit_one(team="nlp", name="llm", resources={"gpus": 2})
    sweep = queue.submit(team="nlp", name="sweep", resources={"gpus": 2}, array="0-2")
    assert {queue.get(j.id).state for j in [big, *sweep]} == {JobState.PENDING_APPROVAL}
    queue.clock.advance(1.0)
    assert watched.watch.tick().sent == []
    queue.clock.advance(1.0)

    sent = watched.watch.tick().sent

    group = sweep[0].group
    assert [(a.key, a.kind, a.team) for a in sent] == [
        (f"pending#{queued.id}", "pending", "nlp"),
        (f"pending#{big.id}", "approval", "nlp"),             # to the approvers, as the request went
        (f"pending#{group}", "approval", "nlp")]              # an array is one message, as its request was
    assert sent[1].subject == f"gqa: job {big.id} (llm) from {big.owner} has waited 2s for approval"
    assert "it still waits for an approver, longer than 2s" in sent[1].message
    assert f"gqa approve {big.id}" in sent[1].message and f"gqa deny {big.id}" in sent[1].message
    assert sent[2].subject.startswith(f"gqa: array {group} (sweep, 3 jobs) from ")
    queue.clock.advance(HOUR)
    assert watched.watch.tick().sent == []                                # once per job

    queue.control.approve([big.id])                                       # approved, then queued: no second alert
    queue.clock.advance(HOUR)
    assert [a.key for a in watched.watch.tick().sent if a.key == f"pending#{big.id}"] == []
