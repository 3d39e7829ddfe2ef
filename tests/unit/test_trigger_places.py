"""Where a deployment lets triggers watch (gqa.models.trigger.TriggerPlaces),
the GQA_TRIGGER_BUCKETS form of it, and the deployment file's
triggers.buckets it comes from: plain names, or {name, prefixes}."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from gqa.models.deployment import validate_deployment
from gqa.models.errors import SpecError
from gqa.models.trigger import MANIFEST_ROOT, TriggerBucket, TriggerPlaces, trigger_buckets_from_json

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deployment.yaml"
PLACES = TriggerPlaces.of([TriggerBucket("data"), TriggerBucket("curated", ("ready/", "late/"))],
                          checkpoint_bucket="gqa-ckpt", manifest_bucket="gqa-manifests")
CHECKPOINTS = "s3://gqa-ckpt holds the jobs' checkpoints, which gqa's jobs write: a trigger there would start a job"


@pytest.mark.parametrize("bucket, prefix, refusal", [
    # allowed: a listed bucket, anywhere in it or under one of its prefixes
    ("data", "", None),
    ("data", "incoming/2026/", None),
    ("curated", "ready/", None),
    ("curated", "late/x/", None),
    # another bucket: its objects never reach gqa
    ("raw", "incoming/", "'raw' is not one of this deployment's 2 trigger bucket(s) (data, curated): its new "
                         "objects send no events to gqa"),
    # a listed bucket outside its prefixes
    ("curated", "", "in curated, triggers may watch only under 2 prefix(es): 'ready/', 'late/'; '' is not under one"),
    ("curated", "read", "in curated, triggers may watch only under 2 prefix(es)"),
    ("curated", "other/ready/", "in curated, triggers may watch only under 2 prefix(es)"),
    # gqa's own buckets, whatever the prefix
    ("gqa-ckpt", "", CHECKPOINTS),
    ("gqa-ckpt", "checkpoints/", CHECKPOINTS),
    ("gqa-ckpt", "incoming/", CHECKPOINTS),
    ("gqa-manifests", "", "s3://gqa-manifests holds the trigger manifests"),
    # the manifest prefix in any bucket
    ("data", MANIFEST_ROOT, f"keys under {MANIFEST_ROOT} are gqa's own trigger manifests"),
    ("data", f"{MANIFEST_ROOT}tr-1/", f"keys under {MANIFEST_ROOT} are gqa's own trigger manifests"),
])
def test_where_a_trigger_may_watch(bucket, prefix, refusal):
    problem = PLACES.refusal(bucket, prefix)
    if refusal is None:
        assert problem is None
        PLACES.check(bucket, prefix)
    else:
        assert problem is not None and problem.startswith(refusal), problem
        with pytest.raises(SpecError, match=re.escape(refusal)):
            PLACES.check(bucket, prefix)


def test_gqas_own_bucket_is_refused_even_when_listed():
    listed = TriggerPlaces.of([TriggerBucket("gqa-ckpt")], checkpoint_bucket="gqa-ckpt", manifest_bucket="gqa-ckpt")
    assert listed.refusal("gqa-ckpt", "incoming/").startswith(
        "s3://gqa-ckpt holds the jobs' checkpoints and the trigger manifests")


def test_a_deployment_without_trigger_buckets_allows_none():
    assert TriggerPlaces.of([]).refusal("data", "in/") == (
        "this deployment lists no trigger buckets (triggers.buckets in its deployment file), so no object event "
        "reaches gqa: no trigger can be added until one is listed and deployed")


@pytest.mark.parametrize("raw, buckets", [
    ([], ()),
    (["data"], (TriggerBucket("data"),)),
    ([{"name": "data"}, {"name": "raw", "prefixes": ["in/", "late/"]}],
     (TriggerBucket("data"), TriggerBucket("raw", ("in/", "late/")))),
])
def test_trigger_buckets_from_json(raw, buckets):
    assert trigger_buckets_from_json(raw) == buckets


@pytest.mark.parametrize("raw, problem", [
    ("data", "must be a JSON list of buckets, got str"),
    ([7], "entry 0 must be a bucket name or"),
    ([{"name": "data", "teams": []}], "entry 0 must be a bucket name or"),
    (["data", "Bad_Name"], "entry 1: 'Bad_Name' is not an S3 bucket name"),
    ([{"prefixes": ["in/"]}], "entry 0: None is not an S3 bucket name"),
    ([{"name": "data", "prefixes": []}], "entry 0: prefixes must be a non-empty list of strings, or left out"),
    ([{"name": "data", "prefixes": [1]}], "entry 0: prefixes must be a non-empty list of strings, or left out"),
])
def test_malformed_trigger_buckets_json_names_the_entry(raw, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        trigger_buckets_from_json(raw)


# -- the deployment file's triggers.buckets -------------------------------------------------------------
def _with_buckets(buckets) -> dict:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["triggers"] = {"buckets": buckets}
    return raw


def test_names_and_mappings_reach_the_functions_as_the_file_says():
    config = validate_deployment(_with_buckets(["data", {"name": "raw", "prefixes": ["in/", "late/"]},
                                               {"name": "logs-archive"}]))
    assert config.triggers.bucket_names == ["data", "raw", "logs-archive"]
    allowed = (TriggerBucket("data"), TriggerBucket("raw", ("in/", "late/")), TriggerBucket("logs-archive"))
    assert config.triggers.allowed() == allowed
    text = config.function_settings()["GQA_TRIGGER_BUCKETS"]
    assert trigger_buckets_from_json(json.loads(text)) == allowed
    assert json.loads(text) == ["data", {"name": "raw", "prefixes": ["in/", "late/"]}, "logs-archive"]


def test_no_trigger_buckets_is_an_empty_list_the_functions_read_as_none():
    raw = yaml.safe_load(EXAMPLE.read_text())
    del raw["triggers"]
    assert validate_deployment(raw).function_settings()["GQA_TRIGGER_BUCKETS"] == "[]"


@pytest.mark.parametrize("buckets, message", [
    ([7], "triggers.buckets[0]: must be a bucket name or a mapping {name, prefixes}"),
    ([{"name": "raw", "prefix": ["in/"]}], "unknown field 'triggers.buckets[0].prefix'; did you mean 'prefixes'?"),
    ([{"prefixes": ["in/"]}], "triggers.buckets[0].name: is required"),
    ([{"name": "Raw"}], "triggers.buckets[0].name: 'Raw' is not a valid S3 bucket name"),
    ([{"name": "raw", "prefixes": []}], "triggers.buckets[0].prefixes: must not be empty"),
    ([{"name": "raw", "prefixes": "in/"}], "triggers.buckets[0].prefixes: must be a list, got 'in/'"),
    ([{"name": "raw", "prefixes": ["in/", "in/"]}], "triggers.buckets[0].prefixes[1]: prefix 'in/' is given twice"),
    ([{"name": "raw", "prefixes": [f"{MANIFEST_ROOT}x/"]}],
     f"triggers.buckets[0].prefixes[0]: keys under {MANIFEST_ROOT} are gqa's own trigger manifests"),
    ([{"name": "raw", "prefixes": ["x" * 1025]}], "triggers.buckets[0].prefixes[0]: is 1025 bytes; an S3 key has "
                                                  "at most 1024"),
    ([{"name": "raw", "prefixes": [f"p{i}/" for i in range(11)]}], "triggers.buckets[0].prefixes: has 11 entries"),
    (["raw", {"name": "raw"}], "triggers.buckets[1]: bucket 'raw' is given twice"),
])
def test_a_bad_bucket_entry_is_refused_naming_its_field(buckets, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        validate_deployment(_with_buckets(buckets), source="deployment.yaml")


def test_long_prefixes_count_against_the_functions_environment():
    long = [{"name": f"data-{i}", "prefixes": [f"{'p' * 300}-{j}/" for j in range(3)]} for i in range(4)]
    with pytest.raises(SpecError, match=r"the functions' settings from this file take [\d,]+ bytes as Lambda "
                                        r"counts them \(GQA_TRIGGER_BUCKETS [\d,]+"):
        validate_deployment(_with_buckets(long))
