"""Code bundles on AWS, on moto: stored once under their SHA-256 (a listing
first, an upload only when absent or near expiry), the api function's GET
/code and its refusal of a submission whose bundle is missing, and the Batch
request that fetches it (GQA_CODE_URI and the fetcher in front of the command)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tarfile
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.batch_compute import BatchCompute
from gqa.adapters.aws.batch_payload import spec_bytes
from gqa.adapters.aws.code_store import S3CodeStore, checked_location
from gqa.adapters.aws.s3_checkpoints import S3Checkpoints
from gqa.adapters.aws.sqs_intake import parse_submission
from gqa.adapters.local.code_bundle import build
from gqa.models import code
from gqa.models.errors import BackendUnavailable, LaunchFailed, Misconfigured, NotFound
from tests.aws.moto_support import capture, create_batch, refuse, session
from tests.aws.test_api_handler import CHECKPOINTS, api  # noqa: F401  (the api fixture)
from tests.aws.test_batch_compute import POOLS, clock, env_of, job, launched_request  # noqa: F401  (fixtures)
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
BUCKET = "gqa-code-test"
DAY = 86400.0


def bundle_of(tmp_path, **files: str):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return build(tmp_path)


@pytest.fixture
def s3():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        client = session().client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))   # not inside the test's work tree
    return tmp_path


# -- stored once --------------------------------------------------------------------------------------
def test_an_unchanged_tree_is_uploaded_once_with_its_checksum(s3, tree):
    bundle = bundle_of(tree, **{"train.py": "print(1)\n"})
    store = S3CodeStore(s3, BUCKET)
    puts, lists = capture(s3, "PutObject"), capture(s3, "ListObjectsV2")
    assert store.ensure(bundle.digest, bundle.data) == "uploaded"
    assert build(tree).digest == bundle.digest
    assert store.ensure(bundle.digest, bundle.data) == "present"        # found: no second upload
    assert len(puts) == 1 and len(lists) == 2
    assert puts[0]["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(bundle.data).digest()).decode()
    got = s3.get_object(Bucket=BUCKET, Key=f"code/{code.hex_of(bundle.digest)}.tar.gz", ChecksumMode="ENABLED")
    assert got["Body"].read() == bundle.data and got["ChecksumSHA256"] == puts[0]["ChecksumSHA256"]


def test_a_changed_tree_is_a_new_bundle(s3, tree):
    store = S3CodeStore(s3, BUCKET)
    first = bundle_of(tree, **{"train.py": "print(1)\n"})
    second = bundle_of(tree, **{"train.py": "print(2)\n"})
    assert first.digest != second.digest
    assert [store.ensure(b.digest, b.data) for b in (first, second)] == ["uploaded", "uploaded"]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert sorted(keys) == sorted(code.key_of(b.digest) for b in (first, second))


def test_a_bundle_near_its_expiry_is_uploaded_again(s3, tree):
    bundle = bundle_of(tree, **{"train.py": "print(1)\n"})
    store = S3CodeStore(s3, BUCKET)
    store.put(bundle.digest, bundle.data)
    [stored] = s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    uploaded = stored["LastModified"].timestamp()                     # as S3 dated it
    puts = capture(s3, "PutObject")
    assert store.ensure(bundle.digest, bundle.data, now=uploaded + (code.REFRESH_DAYS - 1) * DAY) == "present"
    assert store.ensure(bundle.digest, bundle.data, now=uploaded + code.REFRESH_DAYS * DAY + 1) == "refreshed"
    assert len(puts) == 1


def test_bytes_that_are_not_the_named_bundle_are_never_stored(s3, tree):
    bundle = bundle_of(tree, **{"train.py": "print(1)\n"})
    with pytest.raises(ValueError, match="are not sha256:"):
        S3CodeStore(s3, BUCKET).put(bundle.digest, bundle.data + b"x")
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


def test_a_caller_who_may_not_list_the_prefix_is_told_which_right_is_missing(s3, tree):
    bundle = bundle_of(tree, **{"train.py": "print(1)\n"})
    refuse(s3, "ListObjectsV2", "AccessDenied", 1)
    with pytest.raises(Misconfigured, match=f"s3://{BUCKET}/code/: access denied; the caller needs s3:ListBucket"):
        S3CodeStore(s3, BUCKET, attempts=1).ensure(bundle.digest, bundle.data)


def test_get_code_answers_are_checked():
    assert checked_location({"bucket": "b", "prefix": "code/", "kept_days": 30}) == ("b", "code/")
    with pytest.raises(BackendUnavailable, match="is the CLI as new as the deployment"):
        checked_location({"bucket": "b"})


# -- the api function ------------------------------------------------------------------------------------
def test_get_code_names_the_checkpoint_bucket(api):  # noqa: F811
    assert api("GET", "/code") == (200, {"bucket": CHECKPOINTS, "prefix": "code/", "kept_days": code.KEPT_DAYS,
                                         "refresh_days": code.REFRESH_DAYS})


def test_a_submission_whose_bundle_is_missing_is_refused_and_nothing_is_written(api, tree):  # noqa: F811
    s3 = session().client("s3")
    s3.create_bucket(Bucket=CHECKPOINTS)
    bundle = bundle_of(tree, **{"train.py": "print(1)\n"})
    spec = {"command": ["python", "train.py"], "workdir": str(tree), "code": bundle.digest}
    before = api.tables()
    status, answer = api("POST", "/jobs", body={"spec": spec, "environment": None})
    assert status == 400 and answer["error"] == "SpecError"
    assert answer["message"] == (f"the job's code {bundle.digest} is not in s3://{CHECKPOINTS}/code/ (bundles "
                                 f"expire {code.KEPT_DAYS} days after their upload): submit again with gqa submit, "
                                 "which uploads it")
    assert api.tables() == before and api.messages() == []

    S3CodeStore(s3, CHECKPOINTS).ensure(bundle.digest, bundle.data)
    status, answer = api("POST", "/jobs", body={"spec": spec, "environment": None})
    assert status == 202, answer
    [message] = api.messages()
    assert json.loads(parse_submission(message["Body"]).spec_json)["code"] == bundle.digest


# -- the Batch request ------------------------------------------------------------------------------------
@pytest.fixture
def batch():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws(config={"batch": {"use_docker": False}}):
        create_batch(session(), POOLS, ("gqa-train",))
        session().client("s3").create_bucket(Bucket=BUCKET)
        yield session().client("batch"), session().client("s3")


DIGEST = "sha256:" + "5e" * 32


def test_a_job_with_code_fetches_it_before_its_command_on_every_attempt(batch, clock):  # noqa: F811
    client, s3 = batch
    compute = BatchCompute(client, POOLS, "gqa-train", S3Checkpoints(s3, BUCKET), clock, code_bucket=BUCKET)
    record = job(spec={"command": ["python", "train.py", "--lr", "3e-4"], "workdir": "/home/alice/proj",
                       "code": DIGEST})
    for attempt in (1, 2):
        request, _ = launched_request(compute, record, (0,), attempt=attempt)
        assert request["containerOverrides"]["command"] == [
            "python3", "-c", code.BOOT, "--root", "/home/alice/proj", "--", "python", "train.py", "--lr", "3e-4"]
        assert env_of(request)["GQA_CODE_URI"] == f"s3://{BUCKET}/code/{'5e' * 32}.tar.gz"

    plain = job(spec={"command": ["python", "train.py"]})
    request, _ = launched_request(compute, plain, (0,))
    assert request["containerOverrides"]["command"] == ["python", "train.py"]
    assert "GQA_CODE_URI" not in env_of(request)


def test_a_shell_job_with_code_runs_its_shell_behind_the_fetcher(batch, clock):  # noqa: F811
    client, s3 = batch
    compute = BatchCompute(client, POOLS, "gqa-train", S3Checkpoints(s3, BUCKET), clock, code_bucket=BUCKET)
    record = job(spec={"command": "python train.py > out.txt", "shell": True, "code": DIGEST})
    request, _ = launched_request(compute, record, (0,))
    assert request["containerOverrides"]["command"][-4:] == ["--", "/bin/sh", "-c", "python train.py > out.txt"]


def test_without_a_code_bucket_a_job_with_code_cannot_launch(batch, clock):  # noqa: F811
    client, s3 = batch
    compute = BatchCompute(client, POOLS, "gqa-train", S3Checkpoints(s3, BUCKET), clock)
    with pytest.raises(LaunchFailed, match="needs a bucket for code bundles"):
        compute.launch(job(spec={"code": DIGEST}), (0,), 1)


def test_the_fetcher_counts_against_batchs_payload():
    from gqa.models.loader import validate

    plain = validate({"command": ["python", "train.py"], "workdir": "/w"})
    with_code = validate({"command": ["python", "train.py"], "workdir": "/w", "code": DIGEST})
    added = len(json.dumps(["python3", "-c", code.BOOT, "--root", "/w", "--"], separators=(",", ":")).encode()) - 2
    assert spec_bytes(with_code) - spec_bytes(plain) == added + 1      # +1: the comma before the argv
    assert 300 < added < 1024                                          # far inside gqa's 8 KiB allowance


def test_what_the_job_fetches_from_s3_is_what_was_submitted(s3, tree, tmp_path_factory):
    from gqa.runtime.code import prepare

    bundle = bundle_of(tree, **{"train.py": "print(1)\n", "README": "hi"})
    store = S3CodeStore(s3, BUCKET)
    store.ensure(bundle.digest, bundle.data)
    copy = prepare(store.uri(bundle.digest), parent=str(tmp_path_factory.mktemp("job")), client=s3)
    assert sorted(os.listdir(copy)) == ["README", "train.py"]
    with tarfile.open(fileobj=io.BytesIO(bundle.data), mode="r:gz") as tar:
        assert tar.extractfile("train.py").read() == open(os.path.join(copy, "train.py"), "rb").read()


# -- a trigger's copy -------------------------------------------------------------------------------------
def keys_of(s3) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def test_a_trigger_keeps_its_own_copy_from_which_each_burst_makes_the_bundle_ready(s3, tree):
    bundle = bundle_of(tree, **{"train.py": "print(1)\n"})
    store = S3CodeStore(s3, BUCKET)
    store.ensure(bundle.digest, bundle.data)
    kept = code.trigger_key_of("tr-0001", bundle.digest)
    store.keep("tr-0001", bundle.digest)
    assert keys_of(s3) == sorted([code.key_of(bundle.digest), kept])
    assert kept.startswith("gqa-trigger-code/tr-0001/")          # under no lifecycle rule (infra/checkpoints.py)
    copies = capture(s3, "CopyObject")
    assert store.ready("tr-0001", bundle.digest) == "present" and copies == []

    s3.delete_object(Bucket=BUCKET, Key=code.key_of(bundle.digest))     # expired 30 days after its upload
    assert store.ready("tr-0001", bundle.digest) == "restored"
    got = s3.get_object(Bucket=BUCKET, Key=code.key_of(bundle.digest))["Body"].read()
    assert got == bundle.data                                            # what the job checks against its name

    [stored] = s3.list_objects_v2(Bucket=BUCKET, Prefix="code/")["Contents"]
    later = stored["LastModified"].timestamp() + code.REFRESH_DAYS * DAY + 1
    assert store.ready("tr-0001", bundle.digest, now=later) == "refreshed"   # near its expiry: dated anew
    # S3's own copy from the trigger's (botocore writes the source as "bucket/key")
    assert [(c["CopySource"], c["Key"]) for c in copies] == [(f"{BUCKET}/{kept}", code.key_of(bundle.digest))] * 2

    store.release("tr-0001", bundle.digest)
    assert keys_of(s3) == [code.key_of(bundle.digest)]


def test_a_trigger_without_a_copy_gets_one_and_a_bundle_stored_nowhere_is_not_found(s3, tree):
    bundle = bundle_of(tree, **{"train.py": "print(1)\n"})
    store = S3CodeStore(s3, BUCKET)
    with pytest.raises(NotFound, match="nor the trigger's copy"):
        store.ready("tr-0001", bundle.digest)
    store.ensure(bundle.digest, bundle.data)                            # a code: written by hand, still there
    assert store.ready("tr-0001", bundle.digest) == "present"
    assert code.trigger_key_of("tr-0001", bundle.digest) in keys_of(s3)


def test_a_trigger_whose_bundle_is_missing_is_refused_and_one_added_keeps_a_copy_until_removed(api, tree):  # noqa: F811
    s3 = session().client("s3")
    s3.create_bucket(Bucket=CHECKPOINTS)
    bundle = bundle_of(tree, **{"train.py": "print(1)\n"})
    body = {"bucket": "data", "prefix": "in/",
            "spec": {"command": ["python", "train.py"], "workdir": str(tree), "code": bundle.digest}}
    before = api.tables()
    status, answer = api("POST", "/triggers", body=body)
    assert status == 400 and answer["error"] == "SpecError"
    assert answer["message"].endswith("days after their upload): add the trigger again with gqa trigger add, "
                                      "which uploads it")
    assert api.tables() == before

    S3CodeStore(s3, CHECKPOINTS).ensure(bundle.digest, bundle.data)
    status, added = api("POST", "/triggers", body=body)
    assert status == 201, added
    kept = code.trigger_key_of(added["id"], bundle.digest)
    assert s3.get_object(Bucket=CHECKPOINTS, Key=kept)["Body"].read() == bundle.data
    status, _ = api("DELETE", f"/triggers/{added['id']}")
    assert status == 200
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=CHECKPOINTS)["Contents"]] == [code.key_of(bundle.digest)]
