"""Triggers and bursts, the pure rules: matching, validation, the wire form,
what an arriving object does to a burst, the caps, and the job's environment."""

import pytest

from gqa.models.burst import (ENV_COUNT, ENV_KEYS, ENV_MANIFEST, INLINE_KEY_BYTES, OVERDUE_AFTER, RECORD_KEY_BYTES,
                              RECORD_KEYS, StepKind, inline_keys, job_environment, manifest_name, manifest_text,
                              needs_manifest, open_burst, plan)
from gqa.models.errors import SpecError
from gqa.models.trigger import (DEFAULT_DEBOUNCE, MANIFEST_ROOT, S3Object, Trigger, check_pattern,
                                parse_debounce)
from tests.builders import NOW, burst, trigger


@pytest.mark.parametrize("bucket, key, suffix, matches", [
    ("data", "incoming/a.csv", None, True),
    ("data", "incoming/", None, True),                       # the prefix itself is a key under it
    ("data", "incoming", None, False),
    ("data", "other/incoming/a.csv", None, False),
    ("other", "incoming/a.csv", None, False),
    ("data", "incoming/a.csv", ".csv", True),
    ("data", "incoming/a.csv.tmp", ".csv", False),
    ("data", "incoming/sub/deep/x.parquet", ".parquet", True),
])
def test_a_trigger_matches_its_bucket_prefix_and_suffix(bucket, key, suffix, matches):
    assert trigger(suffix=suffix).matches(bucket, key) is matches


def test_an_empty_prefix_matches_the_whole_bucket_except_gqa_manifests():
    whole = trigger(prefix="")
    assert whole.matches("data", "anything/at/all")
    assert not whole.matches("data", f"{MANIFEST_ROOT}tr-0001/b1.txt")


@pytest.mark.parametrize("bucket, prefix, suffix, problem", [
    ("Data", "in/", None, "not an S3 bucket name"),
    ("ab", "in/", None, "not an S3 bucket name"),
    ("a..b", "in/", None, "not an S3 bucket name"),
    ("-data", "in/", None, "not an S3 bucket name"),
    ("data", "x" * 1025, None, "1025 bytes"),
    ("data", MANIFEST_ROOT + "x/", None, "gqa's own trigger manifests"),
    ("data", "in/", "", "suffix must be 1 to 1024 bytes"),
])
def test_bad_patterns_are_refused_with_the_reason(bucket, prefix, suffix, problem):
    with pytest.raises(SpecError, match=problem):
        check_pattern(bucket, prefix, suffix)


@pytest.mark.parametrize("text, seconds", [(None, DEFAULT_DEBOUNCE), ("2m", 120), ("90s", 90), ("15m", 900),
                                           ("45", 45), (30, 30), ("1s", 1)])
def test_debounce_windows_parse_in_human_units(text, seconds):
    assert parse_debounce(text) == seconds


@pytest.mark.parametrize("text, problem", [("16m", "1s to 15m00s"), ("1h", "1s to 15m00s"), ("0", "positive"),
                                           ("soon", "invalid duration")])
def test_debounce_windows_past_sqs_delay_or_nonsense_are_refused(text, problem):
    with pytest.raises(SpecError, match=problem):
        parse_debounce(text)


def test_the_wire_form_round_trips():
    original = trigger(suffix=".csv", debounce=300, owner_arn="arn:aws:iam::123456789012:user/alice")
    assert Trigger.from_dict(original.to_dict()) == original


def test_a_trigger_stored_before_its_owners_arn_was_kept_loads_without_one():
    stored = trigger().to_dict()
    del stored["owner_arn"]
    assert Trigger.from_dict(stored) == trigger(owner_arn="")


@pytest.mark.parametrize("change, problem", [
    ({"bucket": None}, "bucket must be a string"),
    ({"debounce": "2m"}, "debounce must be a whole number"),
    ({"debounce": True}, "debounce must be a whole number"),
    ({"debounce": 3600}, "debounce window"),
    ({"id": "42"}, "not a trigger id"),
    ({"owner": ""}, "owner must not be empty"),
    ({"colour": "red"}, "unknown field 'colour'"),
    ({"created_at": "yesterday"}, "created_at must be a number"),
    ({"owner_arn": "alice"}, "owner_arn must be an IAM ARN"),
    ({"owner_arn": None}, "owner_arn must be an IAM ARN"),
])
def test_a_bad_wire_form_names_its_first_bad_field(change, problem):
    data = {**trigger().to_dict(), **change}
    with pytest.raises(SpecError, match=problem):
        Trigger.from_dict(data)


def test_an_event_token_tells_writes_apart_and_repeats_for_a_redelivery():
    first = S3Object("data", "incoming/a.csv", sequencer="0A1")
    assert first.token == S3Object("data", "incoming/a.csv", sequencer="0A1", size=5).token
    assert first.token != S3Object("data", "incoming/a.csv", sequencer="0A2").token     # an overwrite
    assert first.token != S3Object("data", "incoming/a.csv", sequencer="0A1", version="v2").token


# -- what an object does to the open burst ------------------------------------------------------------

FULL_BY_COUNT = burst([f"k{i}" for i in range(RECORD_KEYS)])
FULL_BY_BYTES = burst(["x" * 1000] * (RECORD_KEY_BYTES // 1000))


@pytest.mark.parametrize("open_, key, now, kind", [
    (None, "incoming/a.csv", NOW, StepKind.OPEN),
    (burst(["incoming/a.csv"]), "incoming/b.csv", NOW + 60, StepKind.APPEND),
    (burst(["incoming/a.csv"]), "incoming/a.csv", NOW + 60, StepKind.ABSORB),       # overwritten in the window
    # past its window but before its timer ran: still joins (the timer closes it)
    (burst(["incoming/a.csv"]), "incoming/b.csv", NOW + 121, StepKind.APPEND),
    (burst(["incoming/a.csv"]), "incoming/b.csv", NOW + 120 + OVERDUE_AFTER, StepKind.CLOSE_OVERDUE),
    (FULL_BY_COUNT, "incoming/z", NOW, StepKind.OVERFLOW),
    (FULL_BY_BYTES, "y" * 1000, NOW, StepKind.OVERFLOW),
    (FULL_BY_COUNT, "k7", NOW, StepKind.ABSORB),
])
def test_plan(open_, key, now, kind):
    assert plan(open_, key, now) is kind


def test_the_record_cap_counts_the_rest():
    b = burst(["a"], more=0)
    for kind, key in ((StepKind.APPEND, "b"), (StepKind.OVERFLOW, "c"), (StepKind.OVERFLOW, "d"),
                      (StepKind.ABSORB, "a")):
        b = b.with_object(kind, key)
    assert (b.keys, b.key_bytes, b.more, b.count) == (("a", "b"), 2, 2, 4)


def test_the_byte_cap_is_exact():
    almost = burst(["x" * 1000] * 65)                # 65,000 bytes: 536 left of 64 KiB
    assert almost.has_room("y" * (RECORD_KEY_BYTES - 65_000))
    assert not almost.has_room("y" * (RECORD_KEY_BYTES - 65_000 + 1))


def test_a_burst_closes_one_window_after_its_first_object():
    opened = open_burst(trigger(debounce=300), "b9", "incoming/a.csv", NOW)
    assert (opened.id, opened.opened_at, opened.closes_at, opened.keys, opened.key_bytes) == (
        "b9", NOW, NOW + 300, ("incoming/a.csv",), 14)


# -- what the job sees ---------------------------------------------------------------------------

def test_a_small_burst_passes_every_key_inline():
    env = job_environment(trigger(), burst(["incoming/a.csv", "incoming/b.csv"]))
    assert env == {"GQA_TRIGGER_ID": "tr-0001", "GQA_TRIGGER_BUCKET": "data",
                   "GQA_TRIGGER_KEYS": "incoming/a.csv\nincoming/b.csv", "GQA_TRIGGER_COUNT": "2"}
    assert not needs_manifest(burst(["incoming/a.csv", "incoming/b.csv"]))


def test_a_large_burst_passes_the_first_keys_inline_and_a_manifest():
    keys = [f"incoming/part-{i:05d}.parquet" for i in range(400)]     # 27 bytes + a newline each
    big = burst(keys, more=3)
    assert needs_manifest(big)
    env = job_environment(trigger(), big, "s3://ckpt/m.txt")
    inline = env[ENV_KEYS].split("\n")
    assert inline == keys[:len(inline)] and len(env[ENV_KEYS].encode()) <= INLINE_KEY_BYTES
    assert len(inline) == (INLINE_KEY_BYTES + 1) // 28                  # as many whole keys as fit
    assert env[ENV_COUNT] == "403" and env[ENV_MANIFEST] == "s3://ckpt/m.txt"
    assert manifest_text(big).splitlines() == keys
    assert manifest_name("tr-0001", "b1") == f"{MANIFEST_ROOT}tr-0001/b1.txt"


@pytest.mark.parametrize("keys, budget, fit", [((), 10, 0), (("abcde",), 5, 1), (("abcde",), 4, 0),
                                                (("ab", "cd"), 5, 2), (("ab", "cd"), 4, 1)])
def test_inline_keys_counts_the_separators(keys, budget, fit):
    assert inline_keys(keys, budget) == keys[:fit]
