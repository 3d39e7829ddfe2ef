"""The dispatch Lambda handler, called directly with a wake-up (SQS) and a
scheduled (EventBridge) event, on moto DynamoDB, Batch (no Docker: an API
stub) and S3. SubmitJob calls are counted with a botocore hook."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.resources import Pool
from gqa.adapters.aws.tables import CHANGE_SHARDS, TableNames
from gqa.adapters.clock import SystemClock
from gqa.models.job import JobState
from gqa.services.submit import SubmitService
from tests.aws.deployed import create_tables
from tests.aws.fake_batch import VirtualClock
from tests.aws.lagging_index import lag
from tests.aws.moto_support import LambdaContext, capture, create_batch, emf, metric, session
from tests.builders import spec
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
NAMES = TableNames.prefixed("gqa-dispatch-")
BUCKET = "gqa-dispatch-checkpoints"
POOLS = (Pool("a10g", spot=True, max_gpus=4, price=0.5), Pool("a10g", spot=False, max_gpus=2, price=1.2))
WAKEUP = {"Records": [{"messageId": "w-1", "body": '{"wake": true}', "eventSource": "aws:sqs",
                       "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:gqa-wakeup"}]}
SCHEDULE = {"version": "0", "id": "tick-1", "detail-type": "Scheduled Event", "source": "aws.events",
            "account": "123456789012", "time": "2024-01-01T00:00:00Z", "region": "us-east-1",
            "resources": ["arn:aws:events:us-east-1:123456789012:rule/gqa-dispatch-tick"], "detail": {}}


CONTEXT = LambdaContext(function_name="gqa-dispatch")


@pytest.fixture
def module():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws(config={"batch": {"use_docker": False}}):
        create_tables(session().client("dynamodb"), NAMES)
        create_batch(session(), POOLS)
        session().client("s3").create_bucket(Bucket=BUCKET)
        pools = [{"gpu_type": p.gpu_type, "spot": p.spot, "max_gpus": p.max_gpus, "price": p.price} for p in POOLS]
        env = {"GQA_JOBS_TABLE": NAMES.jobs, "GQA_SETTINGS_TABLE": NAMES.settings,
               "GQA_LEDGER_TABLE": NAMES.ledger, "GQA_POOLS": json.dumps(pools),
               "GQA_JOB_DEFINITION": "gqa-train", "GQA_CHECKPOINT_BUCKET": BUCKET}
        with mock.patch.dict(os.environ, env):
            from lambdas import dispatch
            dispatch.container.cache_clear()     # a fresh "container" per test: its clients are moto's
            yield dispatch
            dispatch.container.cache_clear()


@pytest.fixture
def store(module) -> DynamoDBStore:
    return DynamoDBStore(session().client("dynamodb"), NAMES)


def submit(store: DynamoDBStore, count: int) -> list[str]:
    service = SubmitService(store, SystemClock())
    return [job.id for _ in range(count) for job in service.submit(spec(resources={"gpus": 1}))]


def test_a_cold_start_registers_the_pools_as_the_inventory(module, store):
    module.container()
    inventory = store.inventory()
    assert [(g.type, g.spot, g.price) for g in inventory.gpus] == [("a10g", True, 0.5)] * 4 + [("a10g", False, 1.2)] * 2


@pytest.mark.parametrize("event", [WAKEUP, SCHEDULE], ids=["wakeup", "schedule"])
def test_a_pass_starts_queued_jobs_with_one_submit_each_and_the_next_submits_nothing(module, store, event):
    submits = capture(module.container().compute.client, "SubmitJob")
    ids = submit(store, 2)      # the on-demand pool's two GPUs (the spec does not allow spot)
    answer = module.handler(event, CONTEXT)
    assert sorted(answer["started"]) == sorted(ids)
    assert len(submits) == 2
    # launched, not started: each waits for Batch's RUNNING event, its Batch job recorded
    assert all(store.get(i).state == JobState.STARTING and store.get(i).proc_token for i in ids)
    assert module.handler(event, CONTEXT) == {"started": []}
    assert len(submits) == 2


def test_two_dispatchers_at_once_submit_each_job_to_batch_once(module, store):
    first, second = module.build(), module.build()     # two containers, each with its own clients
    submits = capture(first.compute.client, "SubmitJob")
    second_submits = capture(second.compute.client, "SubmitJob")
    ids = submit(store, 2)
    raced: list[list[str]] = []

    def race(**_):
        # the second pass runs after the first planned (it saw the same queued jobs) and before it claims
        if not raced:
            raced.append(second.run_pass())
    first.store.client.meta.events.register("before-call.dynamodb.TransactWriteItems", race)
    started_by_first = first.run_pass()
    assert sorted(raced[0]) == sorted(ids)
    assert started_by_first == []            # its claim met jobs no longer QUEUED: Conflict, nothing launched
    assert len(submits) + len(second_submits) == 2
    assert len(submits) == 0


@pytest.mark.parametrize("text", ["[]", '{"gpu_type": "a10g"}', '[{"gpu_type": "a10g", "spot": true}]',
                                  '[{"gpu_type": "a10g", "spot": true, "max_gpus": 1, "price": 1, "colour": 1}]'])
def test_invalid_pools_fail_loudly(text):
    from gqa.adapters.aws.resources import pools_from_json
    with pytest.raises(ValueError):
        pools_from_json(text)


# -- what a pass costs in calls --------------------------------------------------------------------

def calls_of(dispatcher) -> Counter:
    """'service.Operation' -> calls, for every client the dispatcher's container uses."""
    seen: Counter = Counter()
    for client in (dispatcher.store.client, dispatcher.compute.client, dispatcher.compute.checkpoints.client):
        client.meta.events.register(
            "before-call", lambda model, **_: seen.update([f"{model.service_model.service_id.hyphenize()}."
                                                           f"{model.name}"]))
    return seen


@pytest.mark.parametrize("event", [WAKEUP, SCHEDULE], ids=["wakeup", "schedule"])
def test_a_pass_with_nothing_queued_is_a_query_a_shard(module, store, event):
    calls = calls_of(module.container())
    assert module.handler(event, CONTEXT) == {"started": []}
    assert calls == Counter({"dynamodb.Query": CHANGE_SHARDS})


def woken_for(*job_ids: str) -> dict:
    """A wake-up as a settlement or a cancel sends it: naming the jobs its writer wrote."""
    body = json.dumps({"wake": True, "jobs": list(job_ids)})
    return {"Records": [{**WAKEUP["Records"][0], "body": body}]}


def test_a_wakeup_right_after_a_write_starts_the_job_however_far_the_index_lags(module, store):
    dispatcher = module.container()
    module.handler(SCHEDULE, CONTEXT)                 # a warm container
    lag(dispatcher.store, 10, store.client)           # the index has none of the next ten writes yet
    calls = calls_of(dispatcher)
    [job] = submit(store, 1)

    assert module.handler(WAKEUP, CONTEXT) == {"started": []}     # a wake-up naming nothing: the index's view
    assert module.handler(woken_for(job), CONTEXT) == {"started": [job]}
    assert store.get(job).state == JobState.STARTING
    # the named job read once from the table (and so known when claimed); the index read only when
    # nothing was named; the settings, the ledger and the run-time samples once, by the pass that starts it
    assert calls["dynamodb.BatchGetItem"] == 1 and calls["dynamodb.Query"] == CHANGE_SHARDS + 3


def test_a_pass_reads_each_table_once_and_writes_its_starts_in_two_transactions(module, store):
    calls = calls_of(module.container())       # its cold start registers the GPUs
    ids = submit(store, 2)                      # through the test's own client: not counted

    assert sorted(module.handler(WAKEUP, CONTEXT)["started"]) == sorted(ids)

    # live jobs (a Query a shard of the changes index), settings, the ledger, run-time samples; the
    # claimed jobs' whole items; the claims, then the launches; no checkpoint lookup for a first attempt
    assert calls == Counter({"dynamodb.Query": CHANGE_SHARDS + 3, "dynamodb.BatchGetItem": 1,
                             "dynamodb.TransactWriteItems": 2, "batch.SubmitJob": 2})
    submit(store, 1)
    calls.clear()
    module.handler(WAKEUP, CONTEXT)       # settings and samples are kept: the next pass reads less
    assert calls["dynamodb.Query"] == CHANGE_SHARDS + 1


def test_a_pass_emits_its_starts_queue_waits_and_gpus(module, store, capsys):
    module.container()
    ids = submit(store, 3)                     # two fit the on-demand pool's GPUs, one waits
    capsys.readouterr()
    module.handler(WAKEUP, CONTEXT)
    docs = emf(capsys.readouterr().out)
    assert {d["service"] for d in docs} == {"gqa-dispatch"}
    assert metric(docs, "JobsStarted") == [2] and metric(docs, "PendingJobs") == [1]
    assert metric(docs, "HeldGpus") == [2] and metric(docs, "FreeGpus") == [4]    # of six: four spot ones idle
    waits = metric(docs, "QueueWait")
    assert len(waits) == 2 and all(0 <= w < 60 for w in waits)                  # one per started job
    assert len(metric(docs, "PassDuration")) == 1
    assert metric(docs, "RepairedLaunches") == [0] and metric(docs, "LostEventsRecovered") == [0]
    assert store.get(ids[2]).state == JobState.QUEUED


def test_a_cpu_only_job_starts_with_every_gpu_slot_taken_and_asks_batch_for_no_gpu(module, store):
    """It holds no GPU slot, so it starts while every GPU slot is taken, and its
    SubmitJob asks Batch for no GPU, in the cheapest on-demand pool."""
    new = SubmitService(store, SystemClock()).submit
    submits = capture(module.container().compute.client, "SubmitJob")
    gpu_jobs = submit(store, 2)                                      # both on-demand slots
    [cpu_job] = new(spec(resources={"gpus": 0, "cpus": 2}))

    answer = module.handler(WAKEUP, CONTEXT)

    assert sorted(answer["started"]) == sorted([*gpu_jobs, cpu_job.id])
    [request] = [r for r in submits if r["jobName"].startswith(f"gqa-{cpu_job.id}-")]
    assert request["jobQueue"] == "gqa-a10g-ondemand"
    assert {r["type"]: r["value"] for r in request["containerOverrides"]["resourceRequirements"]} == \
        {"VCPU": "2", "MEMORY": str(2 * 14 * 1024 // 4)}
    started = store.get(cpu_job.id)
    assert (started.state, started.assigned) == (JobState.STARTING, ())

    [another] = new(spec(resources={"gpus": 0}))        # the GPU slots are all held: it starts all the same
    assert module.handler(WAKEUP, CONTEXT)["started"] == [another.id]


# -- a pass's time: the invocation's remaining time, less what recording needs ---------------------

@dataclass
class EndingContext(LambdaContext):
    """An invocation with `remaining` seconds to go."""

    remaining: float = 60.0

    def get_remaining_time_in_millis(self) -> int:
        return int(self.remaining * 1000)


def test_a_pass_stops_at_its_time_with_its_launches_recorded_and_wakes_the_next(module, store):
    """Each SubmitJob takes 0.25 s (on the control plane's clock): of six starts, the pass begins
    four within its second; the two claimed but not launched go back to the queue, and a wake-up
    asks for the next pass, which launches them."""
    url = session().client("sqs").create_queue(QueueName="gqa-dispatch-wakeup")["QueueUrl"]
    clock = VirtualClock(1_700_000_000.0)
    with mock.patch.dict(os.environ, {"GQA_WAKEUP_QUEUE_URL": url}), \
            mock.patch.object(SystemClock, "now", lambda self: clock.now()):
        dispatcher = module.container()
        dispatcher.compute.client.meta.events.register("before-call.batch.SubmitJob",
                                                       lambda **_: clock.advance(0.25))
        submits = capture(dispatcher.compute.client, "SubmitJob")
        new = SubmitService(store, SystemClock()).submit
        ids = [job.id for _ in range(6) for job in new(spec(spot=True, resources={"gpus": 1}))]
        began = clock.now()

        # a second left past the reserve the pass keeps for recording its launches
        ending = EndingContext(function_name="gqa-dispatch", remaining=module.PASS_RESERVE + 1.0)
        started = module.handler(WAKEUP, ending)["started"]

        assert len(started) == len(submits) == 4 and clock.now() <= began + 1.0
        assert all(store.get(i).state == JobState.STARTING and store.get(i).proc_token for i in started)
        back = [i for i in ids if i not in started]
        assert {store.get(i).state for i in back} == {JobState.RETRY_WAIT}
        woken = session().client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        assert [json.loads(m["Body"]) for m in woken] == [{"wake": True}]

        assert sorted(module.handler(WAKEUP, CONTEXT)["started"]) == sorted(back)
        assert len(submits) == 6 and all(store.get(i).proc_token for i in ids)
