"""The data stack's resources and the properties a platform engineer relies
on: tables on demand with point-in-time recovery, encryption and TTL; the
checkpoint bucket private, TLS-only, encrypted, versioned, with old versions
expiring; every queue encrypted, TLS-only and backed by a dead-letter queue."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from gqa.adapters.aws import resources as r
from gqa.adapters.aws import tables as t
from infra.checkpoints import OLD_VERSIONS_KEPT_DAYS
from infra.stacks import DataStack
from tests.infra.support import deployment, nagged_app, template


def _data(**changes):
    app = nagged_app()
    config = deployment(**changes)
    return config, template(DataStack(app, f"gqa-{config.name}-data", config=config))


@pytest.fixture(scope="module")
def dev():
    return _data()


@pytest.fixture(scope="module")
def prod():
    return _data(name="prod", retain_data=True)


@pytest.mark.parametrize("definition", t.TABLES, ids=lambda d: d.logical)
def test_each_table_on_demand_recoverable_encrypted_with_its_ttl(dev, definition):
    config, built = dev
    expected = {
        "TableName": f"{config.prefix}{definition.logical}",
        "BillingMode": "PAY_PER_REQUEST",
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "SSESpecification": {"SSEEnabled": True},
    }
    if definition.ttl:
        expected["TimeToLiveSpecification"] = {"AttributeName": definition.ttl, "Enabled": True}
    built.has_resource_properties("AWS::DynamoDB::Table", expected)


def test_prod_tables_are_protected_from_deletion(prod):
    _, built = prod
    tables = built.find_resources("AWS::DynamoDB::Table")
    assert len(tables) == len(t.TABLES)
    for table in tables.values():
        assert table["Properties"]["DeletionProtectionEnabled"] is True
        assert table["DeletionPolicy"] == "Retain" and table["UpdateReplacePolicy"] == "Retain"


def test_the_checkpoint_bucket_is_private_tls_only_encrypted_and_versioned(dev):
    _, built = dev
    built.has_resource_properties("AWS::S3::Bucket", {
        "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                           "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
        "BucketEncryption": {"ServerSideEncryptionConfiguration": [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
        "VersioningConfiguration": {"Status": "Enabled"},
        "LoggingConfiguration": Match.object_like({"LogFilePrefix": "checkpoints/"}),
        "LifecycleConfiguration": {"Rules": Match.array_with([Match.object_like({
            "Id": "old-versions", "Status": "Enabled",
            "NoncurrentVersionExpiration": {"NoncurrentDays": OLD_VERSIONS_KEPT_DAYS}})])},
    })
    for policy in built.find_resources("AWS::S3::BucketPolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
                   for s in statements)


def test_code_bundles_expire_after_the_days_a_refresh_leaves_them(dev):
    from gqa.models import code

    _, built = dev
    [bucket] = [b for b in built.find_resources("AWS::S3::Bucket").values()
                if "VersioningConfiguration" in b["Properties"]]
    rules = {r["Id"]: r for r in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert rules["code"] == {"Id": "code", "Prefix": "code/", "Status": "Enabled", "ExpirationInDays": code.KEPT_DAYS}
    # a submitter uploads again past REFRESH_DAYS: a job submitted then still finds its code for the rest
    assert 0 < code.REFRESH_DAYS <= code.KEPT_DAYS - 7


def test_no_rule_expires_the_copies_triggers_keep_of_their_code(dev):
    from gqa.models import code

    _, built = dev
    [bucket] = [b for b in built.find_resources("AWS::S3::Bucket").values()
                if "VersioningConfiguration" in b["Properties"]]
    kept = code.trigger_key_of("tr-0001", "sha256:" + "0" * 64)
    expiring = [r for r in bucket["Properties"]["LifecycleConfiguration"]["Rules"] if "ExpirationInDays" in r]
    assert expiring and not [r for r in expiring if kept.startswith(r.get("Prefix", ""))]


def _queues(built):
    return {q["Properties"]["QueueName"]: q["Properties"] for q in built.find_resources("AWS::SQS::Queue").values()}


def test_every_queue_has_its_dead_letter_queue_and_is_encrypted(dev):
    config, built = dev
    queues = _queues(built)
    assert len(queues) == 2 * len(r.QUEUES)
    for queue in r.QUEUES:
        main, dead = queues[queue.name(config.prefix)], queues[queue.dead_letter_name(config.prefix)]
        assert main["SqsManagedSseEnabled"] is True and dead["SqsManagedSseEnabled"] is True
        assert main["RedrivePolicy"]["maxReceiveCount"] == queue.max_receive_count
        assert main["VisibilityTimeout"] == r.VISIBILITY_PER_TIMEOUT * queue.consumer_timeout
        assert dead["MessageRetentionPeriod"] == 14 * 86400


def test_every_queue_refuses_plain_http(dev):
    _, built = dev
    policies = built.find_resources("AWS::SQS::QueuePolicy")
    assert len(policies) == 2 * len(r.QUEUES)
    for policy in policies.values():
        text = json.dumps(policy["Properties"]["PolicyDocument"])
        assert '"aws:SecureTransport": "false"' in text and '"Effect": "Deny"' in text


def test_the_data_stack_refers_to_nothing_outside_it(dev):
    _, built = dev
    assert "Fn::ImportValue" not in json.dumps(built.to_json())
