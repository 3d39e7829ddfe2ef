"""The functions' configuration (lambdas/environment.py): each setting read
in one format, and a missing or malformed one refused with its name."""

from __future__ import annotations

import json

import pytest

from lambdas import environment
from gqa.models.trigger import TriggerBucket, TriggerPlaces
from lambdas.environment import MisconfiguredFunction

URLS = {"high": "https://sqs/h", "normal": "https://sqs/n", "low": "https://sqs/l"}
POOL = {"gpu_type": "a10g", "spot": True, "max_gpus": 4, "price": 0.5}


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in ("GQA_JOBS_TABLE", "GQA_SETTINGS_TABLE", "GQA_LEDGER_TABLE", "GQA_INTAKE_URLS", "GQA_POOLS",
                 "GQA_IMAGES", "GQA_WAKEUP_QUEUE_URL", "GQA_ACCESS", "GQA_MANIFEST_BUCKET", "GQA_CHECKPOINT_BUCKET",
                 "GQA_CHECKPOINT_PREFIX", "GQA_CHECKPOINT_GRACE", "GQA_TRIGGER_BUCKETS"):
        monkeypatch.delenv(name, raising=False)


def test_table_names_come_from_the_three_variables(monkeypatch):
    for name, value in (("GQA_JOBS_TABLE", "j"), ("GQA_SETTINGS_TABLE", "s"), ("GQA_LEDGER_TABLE", "l")):
        monkeypatch.setenv(name, value)
    names = environment.table_names()
    assert (names.jobs, names.settings, names.ledger) == ("j", "s", "l")


@pytest.mark.parametrize("missing", ["GQA_JOBS_TABLE", "GQA_SETTINGS_TABLE", "GQA_LEDGER_TABLE"])
def test_a_missing_table_name_is_refused_by_name(monkeypatch, missing):
    for name in ("GQA_JOBS_TABLE", "GQA_SETTINGS_TABLE", "GQA_LEDGER_TABLE"):
        if name != missing:
            monkeypatch.setenv(name, "t")
    monkeypatch.setenv(missing, "  ")          # blank is as good as missing
    with pytest.raises(MisconfiguredFunction, match=f"^{missing} is not set"):
        environment.table_names()


def test_intake_urls_are_one_json_object_by_tier(monkeypatch):
    monkeypatch.setenv("GQA_INTAKE_URLS", json.dumps(URLS))
    assert environment.intake_urls() == {0: URLS["high"], 1: URLS["normal"], 2: URLS["low"]}


@pytest.mark.parametrize("value, says", [
    (None, "GQA_INTAKE_URLS is not set"),
    ("high=x", "GQA_INTAKE_URLS is not JSON"),
    (json.dumps({"high": "h", "normal": "n"}), r"must map each of high, normal, low .*got high, normal"),
    (json.dumps({**URLS, "low": ""}), "must map each of high, normal, low"),
    (json.dumps(["h", "n", "l"]), r"got list"),
])
def test_malformed_intake_urls_are_refused(monkeypatch, value, says):
    if value is not None:
        monkeypatch.setenv("GQA_INTAKE_URLS", value)
    with pytest.raises(MisconfiguredFunction, match=says):
        environment.intake_urls()


def test_pools_are_parsed_and_a_bad_list_names_the_variable(monkeypatch):
    monkeypatch.setenv("GQA_POOLS", json.dumps([POOL]))
    [pool] = environment.pools()
    assert (pool.gpu_type, pool.spot, pool.max_gpus) == ("a10g", True, 4)
    monkeypatch.setenv("GQA_POOLS", "[]")
    with pytest.raises(MisconfiguredFunction, match="^GQA_POOLS: the pools must be a non-empty JSON list"):
        environment.pools()


def test_optional_settings_have_their_defaults(monkeypatch):
    assert environment.wakeup_url() is None
    assert environment.images() == {}
    assert environment.checkpoint_prefix() == "checkpoints"
    assert environment.manifest_bucket() is None
    monkeypatch.setenv("GQA_CHECKPOINT_BUCKET", "ckpt")
    assert environment.manifest_bucket() == "ckpt"             # large bursts' key lists go with checkpoints
    monkeypatch.setenv("GQA_MANIFEST_BUCKET", "manifests")
    assert environment.manifest_bucket() == "manifests"


def test_a_needed_wakeup_queue_and_bad_json_settings_are_refused(monkeypatch):
    with pytest.raises(MisconfiguredFunction, match="^GQA_WAKEUP_QUEUE_URL is not set"):
        environment.wakeup_url(needed=True)
    monkeypatch.setenv("GQA_IMAGES", json.dumps({"pytorch:2": 7}))
    with pytest.raises(MisconfiguredFunction, match="^GQA_IMAGES must be a JSON object"):
        environment.images()
    monkeypatch.setenv("GQA_ACCESS", json.dumps({"owners": ["x"]}))
    with pytest.raises(MisconfiguredFunction, match="^GQA_ACCESS: unknown access setting"):
        environment.access()


@pytest.mark.parametrize("value, grace", [(None, 10), ("", 10), ("90", 90), (" 45 ", 45)])
def test_the_checkpoint_grace_is_whole_seconds_with_a_default(monkeypatch, value, grace):
    if value is not None:
        monkeypatch.setenv("GQA_CHECKPOINT_GRACE", value)
    assert environment.checkpoint_grace(10) == grace


@pytest.mark.parametrize("value", ["90s", "1.5", "0", "-5", "ninety"])
def test_a_malformed_checkpoint_grace_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv("GQA_CHECKPOINT_GRACE", value)
    with pytest.raises(MisconfiguredFunction, match=f"^GQA_CHECKPOINT_GRACE must be a whole number .*{value!r}"):
        environment.checkpoint_grace(10)


def test_trigger_places_are_the_listed_buckets_less_gqas_own(monkeypatch):
    monkeypatch.setenv("GQA_TRIGGER_BUCKETS", json.dumps(["data", {"name": "raw", "prefixes": ["in/"]}]))
    monkeypatch.setenv("GQA_CHECKPOINT_BUCKET", "ckpt")
    assert environment.trigger_places() == TriggerPlaces(
        (TriggerBucket("data"), TriggerBucket("raw", ("in/",))),
        (("ckpt", "the jobs' checkpoints and the trigger manifests"),))   # manifests default to the checkpoints'
    monkeypatch.setenv("GQA_MANIFEST_BUCKET", "manifests")
    assert environment.trigger_places().own == (("ckpt", "the jobs' checkpoints"),
                                                ("manifests", "the trigger manifests"))


def test_no_trigger_buckets_allow_no_trigger():
    places = environment.trigger_places()
    assert places.buckets == ()
    assert "this deployment lists no trigger buckets" in places.refusal("data", "in/")


@pytest.mark.parametrize("value, says", [
    ("data", "GQA_TRIGGER_BUCKETS is not JSON: 'data'"),
    ('{"data": []}', "GQA_TRIGGER_BUCKETS: must be a JSON list of buckets, got dict"),
    ('["Data"]', "GQA_TRIGGER_BUCKETS: entry 0: 'Data' is not an S3 bucket name"),
    ('[7]', "GQA_TRIGGER_BUCKETS: entry 0 must be a bucket name or"),
    ('[{"name": "data", "prefix": ["in/"]}]', "GQA_TRIGGER_BUCKETS: entry 0 must be a bucket name or"),
    ('[{"name": "data", "prefixes": []}]', "GQA_TRIGGER_BUCKETS: entry 0: prefixes must be a non-empty list"),
    ('[{"name": "data", "prefixes": "in/"}]', "GQA_TRIGGER_BUCKETS: entry 0: prefixes must be a non-empty list"),
])
def test_malformed_trigger_buckets_are_refused_by_name(monkeypatch, value, says):
    monkeypatch.setenv("GQA_TRIGGER_BUCKETS", value)
    with pytest.raises(MisconfiguredFunction) as info:
        environment.trigger_places()
    assert str(info.value).startswith(says)
