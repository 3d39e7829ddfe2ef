"""A fresh deployment accepts its first submission: the settings the deploy
writes (its custom resources' writes, taken from the synthesized template)
are all the API and the admit function need; no dispatch pass has run."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.clock import SystemClock
from gqa.models.errors import BackendUnavailable
from gqa.models.job import JobState
from gqa.services.submit import SubmitService
from tests.aws.deployed import create_queues, create_tables
from tests.aws.moto_support import session
from tests.aws.test_admit_handler import CONTEXT, record
from tests.builders import spec
from tests.contract.conftest import FAKE_AWS
from tests.infra.support import deployment
from tests.infra.test_settings_registration import NAMES, _synthesized_writes, deploy
from tests.services.fakes import RecordingIntake

pytestmark = pytest.mark.aws


@pytest.fixture(scope="module")
def items():
    return _synthesized_writes(deployment())


@pytest.fixture
def fresh():
    """The deployed tables and queues, nothing written yet, and the admit function's settings."""
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        urls = create_queues(session().client("sqs"), prefix="gqa-first-")
        env = {"GQA_JOBS_TABLE": NAMES.jobs, "GQA_SETTINGS_TABLE": NAMES.settings,
               "GQA_LEDGER_TABLE": NAMES.ledger, "GQA_WAKEUP_QUEUE_URL": urls.wakeup}
        with mock.patch.dict(os.environ, env):
            from lambdas import admit
            admit.container.cache_clear()
            yield admit, DynamoDBStore(session().client("dynamodb"), NAMES)
            admit.container.cache_clear()


def _accept(store, job_spec):
    intake = RecordingIntake()
    SubmitService(store, SystemClock()).accept(job_spec, owner="alice", environment=None, intake=intake)
    return intake.sent[0]


def test_without_the_deploys_settings_a_submission_is_refused_with_what_to_do(fresh):
    _, store = fresh
    with pytest.raises(BackendUnavailable, match="`cdk deploy` registers the pools"):
        _accept(store, spec(resources={"gpus": 1, "gpu_type": "a10g"}))


def test_with_them_the_first_submission_is_admitted_before_any_dispatch(fresh, items):
    admit, store = fresh
    deploy(session().client("dynamodb"), items)
    small = _accept(store, spec(team="vision", resources={"gpus": 1, "gpu_type": "a10g"}, limits={"wall_time": "4h"}))
    large = _accept(store, spec(team="speech", resources={"gpus": 12, "gpu_type": "a10g"},   # over approval.gpus 8
                                limits={"wall_time": "4h"}))
    answer = admit.handler({"Records": [record(small, message_id="m-1"), record(large, message_id="m-2")]},
                           CONTEXT)
    assert answer == {"batchItemFailures": []}
    assert store.get(small.job_ids[0]).state == JobState.QUEUED
    assert store.get(large.job_ids[0]).state == JobState.PENDING_APPROVAL
