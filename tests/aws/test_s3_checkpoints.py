"""Checkpoints on S3 (moto): the job's side (gqa.runtime's S3Storage under a
Checkpointer) and the control plane's (S3Checkpoints: location and latest)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.s3_checkpoints import S3Checkpoints
from gqa.models.errors import BackendUnavailable, Misconfigured, NotFound
from gqa.runtime import Checkpointer
from gqa.runtime.s3 import CLAIM, MANIFEST, POINTER_TRIES, S3Storage
from gqa.runtime.staging import UNLOCKED_AGE
from tests.aws.aws_limits import deny_missing_keys
from tests.aws.moto_support import refuse, session
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
BUCKET = "gqa-ckpt-test"


@pytest.fixture
def s3():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        client = session().client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client


def keys(s3, prefix: str = "") -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []))


def read(s3, key: str) -> str:
    return s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()


class FailingUploads:
    """An S3 client whose upload_file raises from the `after`-th call on: a job
    killed in the middle of uploading a checkpoint."""

    def __init__(self, client: Any, after: int):
        self._client, self.after, self.uploads = client, after, 0

    def upload_file(self, *args: Any, **kwargs: Any) -> None:
        self.uploads += 1
        if self.uploads >= self.after:
            raise KeyboardInterrupt("killed mid-upload")
        self._client.upload_file(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def two_files(step: int):
    def write(d: Path) -> None:
        (d / "model.bin").write_bytes(b"m" * 10 + bytes([step]))
        (d / "sub").mkdir()
        (d / "sub" / "optim.bin").write_bytes(b"o%d" % step)
    return write


# -- the job's side: gqa.runtime on S3 ---------------------------------------------------------------

def test_a_checkpointer_saves_and_resumes_through_s3(s3, tmp_path):
    uri = f"s3://{BUCKET}/checkpoints/7/"
    ckpt = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "a"))
    assert ckpt.load_state() is None

    ckpt.save_state({"step": 100, "loss": 0.5})

    assert keys(s3) == [f"checkpoints/7/ckpt-100/{CLAIM}", "checkpoints/7/ckpt-100/.gqa-manifest.json",
                        "checkpoints/7/ckpt-100/state.json", "checkpoints/7/latest"]
    assert read(s3, "checkpoints/7/latest").strip() == "ckpt-100"
    # a fresh attempt (another container, an empty cache) reads it back from S3
    again = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "b"))
    assert again.load_state() == {"step": 100, "loss": 0.5}


def test_resume_from_a_full_uri_as_the_queue_hands_it_over(s3, tmp_path, monkeypatch):
    uri = f"s3://{BUCKET}/checkpoints/7/"
    Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path)).save(two_files(3), step=3)
    resume = S3Checkpoints(s3, BUCKET, "checkpoints").latest("7")
    assert resume == f"s3://{BUCKET}/checkpoints/7/ckpt-3"

    storage = S3Storage(uri, client=s3, cache_dir=tmp_path / "fresh")
    path = Checkpointer(storage=storage, resume_from=resume).latest()

    assert path is not None and (path / "sub" / "optim.bin").read_bytes() == b"o3"
    assert sorted(p.name for p in path.iterdir()) == ["model.bin", "sub"]   # the manifest stays in S3


def test_every_process_of_an_attempt_resumes_from_the_newest_on_s3(s3, tmp_path):
    """GQA_RESUME_FROM is the attempt's start: the first process (an empty local cache) fetches it;
    a later process of the same attempt (the script's next stage, a restarted worker) finds the
    checkpoints saved since, never a half-uploaded one."""
    uri = f"s3://{BUCKET}/checkpoints/8/"
    Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "attempt-1")).save(two_files(3), step=3)
    resume = S3Checkpoints(s3, BUCKET, "checkpoints").latest("8")

    first = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "first"), resume_from=resume)
    assert (first.latest() / "sub" / "optim.bin").read_bytes() == b"o3"
    first.save(two_files(4), step=4)
    first.save(two_files(5), step=5)
    dying = S3Storage(uri, client=FailingUploads(s3, after=2), cache_dir=tmp_path / "dying")
    with pytest.raises(KeyboardInterrupt):
        Checkpointer(storage=dying, resume_from=resume).save(two_files(6), step=6)

    second = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "second"), resume_from=resume)
    assert (second.latest() / "sub" / "optim.bin").read_bytes() == b"o5"
    assert read(s3, "checkpoints/8/latest").strip() == "ckpt-5"


def test_env_selects_s3_and_boto3_is_imported_only_then(s3, monkeypatch, tmp_path):
    monkeypatch.setenv("GQA_CHECKPOINT_URI", f"s3://{BUCKET}/jobs/9/")
    monkeypatch.delenv("GQA_CHECKPOINT_DIR", raising=False)
    monkeypatch.setenv("GQA_RESUME_FROM", "")
    ckpt = Checkpointer()
    assert isinstance(ckpt.storage, S3Storage) and ckpt.storage._client is None   # nothing made yet

    ckpt.save_state({"step": 1})

    assert "jobs/9/latest" in keys(s3)


def test_a_kill_mid_upload_never_moves_latest(s3, tmp_path):
    uri = f"s3://{BUCKET}/c/1/"
    good = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "good"))
    good.save(two_files(1), step=1)
    dying = Checkpointer(storage=S3Storage(uri, client=FailingUploads(s3, after=2), cache_dir=tmp_path / "dying"))

    with pytest.raises(KeyboardInterrupt):
        dying.save(two_files(2), step=2)

    assert read(s3, "c/1/latest").strip() == "ckpt-1"
    assert "c/1/ckpt-2/model.bin" in keys(s3)             # half a checkpoint is there...
    assert f"c/1/ckpt-2/{MANIFEST}" not in keys(s3)       # ...but never committed
    fresh = S3Storage(uri, client=s3, cache_dir=tmp_path / "fresh")
    assert fresh.names() == ["ckpt-1"]
    assert (Checkpointer(storage=fresh).latest() / "model.bin").read_bytes()[-1] == 1
    assert S3Checkpoints(s3, BUCKET, "c").latest("1") == f"s3://{BUCKET}/c/1/ckpt-1"
    # the next attempt commits the step afresh beside the leftover, which may be another process's
    # upload in progress until it is a day old; a save a day later sweeps it
    Checkpointer(storage=fresh).save(two_files(2), step=2)
    assert keys(s3, "c/1/ckpt-2.1/") == [f"c/1/ckpt-2.1/{CLAIM}", f"c/1/ckpt-2.1/{MANIFEST}",
                                         "c/1/ckpt-2.1/model.bin", "c/1/ckpt-2.1/sub/optim.bin"]
    assert keys(s3, "c/1/ckpt-2/") == [f"c/1/ckpt-2/{CLAIM}", "c/1/ckpt-2/model.bin"]
    S3Storage(uri, client=s3, cache_dir=tmp_path / "later")._sweep(now=time.time() + UNLOCKED_AGE + 60)
    assert keys(s3, "c/1/ckpt-2/") == []


def test_a_missing_pointer_falls_back_to_the_newest_committed_checkpoint(s3, tmp_path):
    uri = f"s3://{BUCKET}/c/2/"
    ckpt = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "a"))
    ckpt.save_state({"step": 5})
    ckpt.save_state({"step": 6})
    s3.delete_object(Bucket=BUCKET, Key="c/2/latest")

    assert Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "b")).load_state() == {"step": 6}
    assert S3Checkpoints(s3, BUCKET, "c").latest("2") is None   # the queue trusts the pointer only


def test_pruning_keeps_the_newest_and_the_one_latest_points_at(s3, tmp_path):
    uri = f"s3://{BUCKET}/c/3/"
    ckpt = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path), keep=2)
    for step in (1, 2, 3, 4):
        ckpt.save(two_files(step), step=step)

    assert sorted(ckpt.storage.names()) == ["ckpt-3", "ckpt-4"]
    assert [k for k in keys(s3, "c/3/") if "ckpt-1/" in k or "ckpt-2/" in k] == []
    assert len(list(tmp_path.iterdir())) == 2          # local copies of the pruned ones are gone too


def test_saving_a_step_twice_never_replaces_a_committed_checkpoint(s3, tmp_path):
    ckpt = Checkpointer(storage=S3Storage(f"s3://{BUCKET}/c/4", client=s3, cache_dir=tmp_path))
    ckpt.save(b"first", step=10)
    ckpt.save(b"second", step=10)

    assert sorted(ckpt.storage.names()) == ["ckpt-10", "ckpt-10.1"]
    assert read(s3, "c/4/latest").strip() == "ckpt-10.1"
    assert read(s3, "c/4/ckpt-10/data") == "first"


class SaveMeanwhile:
    """An S3 client that, at its `at`-th call of `method`, first lets `meanwhile()` run: another
    process of the attempt acting between this one's steps."""

    def __init__(self, client: Any, method: str, meanwhile, at: int = 1):
        self._client, self.method, self.meanwhile, self.at, self.calls = client, method, meanwhile, at, 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if name != self.method:
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.at:
                self.meanwhile()
            return real(*args, **kwargs)
        return call


def test_another_processs_first_save_leaves_an_upload_in_progress_whole(s3, tmp_path):
    # A has uploaded model.bin of step 2 when B, an eval hook, saves for the first time: B's sweep
    # once deleted A's upload as a killed one's, and A then committed a checkpoint without model.bin
    uri = f"s3://{BUCKET}/c/8/"
    hook = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "b"))
    trainer = Checkpointer(storage=S3Storage(
        uri, client=SaveMeanwhile(s3, "upload_file", lambda: hook.save_state({"step": 1}), at=2),
        cache_dir=tmp_path / "a"))
    trainer.save(two_files(2), step=2)

    assert keys(s3, "c/8/ckpt-2/") == [f"c/8/ckpt-2/{CLAIM}", f"c/8/ckpt-2/{MANIFEST}", "c/8/ckpt-2/model.bin",
                                       "c/8/ckpt-2/sub/optim.bin"]
    fresh = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "c"))
    assert (fresh.latest() / "model.bin").read_bytes()[-1] == 2
    assert read(s3, "c/8/latest").strip() == "ckpt-2"


def test_two_processes_saving_one_step_at_once_upload_to_names_of_their_own(s3, tmp_path):
    # both looked and saw ckpt-5 free; the one whose claim lost takes ckpt-5.1 (they once shared a
    # prefix, one's files overwriting the other's under either manifest)
    uri = f"s3://{BUCKET}/c/9/"
    other = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "b"))
    first = Checkpointer(storage=S3Storage(
        uri, client=SaveMeanwhile(s3, "put_object", lambda: other.save(b"other", step=5)), cache_dir=tmp_path / "a"))
    first.save(b"first", step=5)

    assert sorted(first.storage.names()) == ["ckpt-5", "ckpt-5.1"]
    assert {read(s3, "c/9/ckpt-5/data"), read(s3, "c/9/ckpt-5.1/data")} == {"first", "other"}


def test_latest_moves_only_if_no_other_process_moved_it_since_it_was_read(s3, tmp_path):
    # this process saved step 145 and read the pointer; another committed 146 and moved it meanwhile:
    # the conditional write fails and the move is chosen again, so `latest` never goes back
    uri = f"s3://{BUCKET}/c/10/"
    other = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "b"))
    other.save(b"a", step=144)
    slow = S3Storage(uri, client=s3, cache_dir=tmp_path / "a")
    real_names = slow.names
    moved = []

    def names_then_another_save() -> list[str]:
        seen = real_names()
        if not moved:
            moved.append(other.save(b"b", step=146))
        return seen

    slow.names = names_then_another_save  # type: ignore[method-assign]
    with pytest.warns(RuntimeWarning, match="older than ckpt-146"):
        Checkpointer(storage=slow).save(b"c", step=145)
    assert read(s3, "c/10/latest").strip() == "ckpt-146"


class Conditions:
    """An S3 client whose conditional PUTs (If-None-Match, If-Match) are answered `code`: a store
    without conditional writes (NotImplemented), or a pointer another process keeps moving
    (PreconditionFailed)."""

    def __init__(self, client: Any, code: str):
        self._client, self.code, self.refused = client, code, 0

    def put_object(self, **kwargs: Any) -> Any:
        if "IfNoneMatch" in kwargs or "IfMatch" in kwargs:
            from botocore.exceptions import ClientError

            self.refused += 1
            raise ClientError({"Error": {"Code": self.code, "Message": "refused by the test"}}, "PutObject")
        return self._client.put_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_store_without_conditional_writes_gets_plain_ones(s3, tmp_path):
    uri = f"s3://{BUCKET}/c/12/"
    client = Conditions(s3, "NotImplemented")
    ckpt = Checkpointer(storage=S3Storage(uri, client=client, cache_dir=tmp_path / "a"))
    ckpt.save(b"one", step=1)
    ckpt.save(b"two", step=2)

    assert client.refused == 4                       # two claims, two moves of `latest`
    assert read(s3, "c/12/latest").strip() == "ckpt-2" and read(s3, "c/12/ckpt-2/data") == "two"


def test_a_pointer_that_keeps_moving_leaves_the_checkpoint_saved_and_says_so(s3, tmp_path):
    uri = f"s3://{BUCKET}/c/13/"
    Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "a")).save(b"one", step=1)
    storage = S3Storage(uri, client=s3, cache_dir=tmp_path / "b")
    storage._claim = lambda key: True   # type: ignore[method-assign]   # the name is this save's
    storage._client = Conditions(s3, "PreconditionFailed")

    with pytest.raises(RuntimeError, match="kept changing while being moved .* the checkpoint is saved"):
        Checkpointer(storage=storage).save(b"two", step=2)
    assert storage._client.refused == POINTER_TRIES
    assert sorted(storage.names()) == ["ckpt-1", "ckpt-2"] and read(s3, "c/13/latest").strip() == "ckpt-1"


def test_a_checkpoint_whose_file_went_missing_is_passed_over(s3, tmp_path):
    uri = f"s3://{BUCKET}/c/11/"
    Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "a")).save(two_files(1), step=1)
    Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "b")).save(two_files(2), step=2)
    s3.delete_object(Bucket=BUCKET, Key="c/11/ckpt-2/model.bin")      # pruned by another process as it was read
    fresh = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "c"))
    assert (fresh.latest() / "model.bin").read_bytes()[-1] == 1


def test_fetch_refuses_what_is_not_a_committed_checkpoint(s3, tmp_path):
    storage = S3Storage(f"s3://{BUCKET}/c/5/", client=s3, cache_dir=tmp_path)
    s3.put_object(Bucket=BUCKET, Key="c/5/ckpt-1/data", Body=b"partial")
    assert storage.fetch("ckpt-1") is None
    assert storage.fetch("latest") is None
    assert storage.fetch(f"s3://{BUCKET}/c/5/.tmp-x") is None
    assert storage.names() == []


def test_the_manifest_name_is_reserved(s3, tmp_path):
    ckpt = Checkpointer(storage=S3Storage(f"s3://{BUCKET}/c/6/", client=s3, cache_dir=tmp_path))
    with pytest.raises(ValueError, match="manifest"):
        ckpt.save(lambda d: (d / MANIFEST).write_text("{}"), step=1)
    assert keys(s3) == []


def test_a_first_attempt_finds_no_checkpoint_under_the_job_roles_rights(s3, tmp_path):
    """The job role lists only under checkpoints/ (an s3:prefix condition), so S3 answers the GET of
    a missing `latest` with 403: that is no checkpoint yet, not a crash of the job's first attempt."""
    deny_missing_keys(s3, listable=("checkpoints/",))
    uri = f"s3://{BUCKET}/checkpoints/12/"
    ckpt = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "first"))
    assert ckpt.latest() is None and ckpt.load_state() is None

    ckpt.save_state({"step": 1})

    again = Checkpointer(storage=S3Storage(uri, client=s3, cache_dir=tmp_path / "again"))
    assert again.load_state() == {"step": 1}
    assert again.storage.fetch("ckpt-2") is None          # a missing manifest reads as absent too


def test_a_pointer_denied_to_a_job_that_may_not_list_is_refused_naming_it(s3, tmp_path):
    """Without a listing S3 may be hiding a pointer that exists: that is not "no checkpoint yet"."""
    deny_missing_keys(s3)
    storage = S3Storage(f"s3://{BUCKET}/checkpoints/13/", client=s3, cache_dir=tmp_path)
    with pytest.raises(PermissionError, match=f"s3://{BUCKET}/checkpoints/13/latest"):
        storage.read_latest()


# -- the control plane's side: S3Checkpoints ---------------------------------------------------------

def test_location_is_the_jobs_folder(s3):
    assert S3Checkpoints(s3, BUCKET, "/checkpoints/").location("12_3") == f"s3://{BUCKET}/checkpoints/12_3/"
    assert S3Checkpoints(s3, BUCKET, "").location("12") == f"s3://{BUCKET}/12/"
    with pytest.raises(ValueError):
        S3Checkpoints(s3, BUCKET).location("../x/y")


def test_latest_needs_a_pointer_to_a_complete_checkpoint(s3):
    checkpoints = S3Checkpoints(s3, BUCKET, "checkpoints")
    assert checkpoints.latest("1") is None                                     # nothing yet
    s3.put_object(Bucket=BUCKET, Key="checkpoints/1/latest", Body=b"ckpt-4\n")
    s3.put_object(Bucket=BUCKET, Key="checkpoints/1/ckpt-4/data", Body=b"x")
    assert checkpoints.latest("1") is None                                     # no manifest: not complete
    s3.put_object(Bucket=BUCKET, Key=f"checkpoints/1/ckpt-4/{MANIFEST}", Body=b"{}")
    assert checkpoints.latest("1") == f"s3://{BUCKET}/checkpoints/1/ckpt-4"
    s3.put_object(Bucket=BUCKET, Key="checkpoints/1/latest", Body=b"../../etc")
    assert checkpoints.latest("1") is None                                     # not a checkpoint name


def test_a_missing_bucket_is_not_found_not_no_checkpoint(s3):
    with pytest.raises(NotFound):
        S3Checkpoints(s3, "no-such-bucket").latest("1")


def test_s3_throttling_is_retried_then_unavailable(s3):
    sleeps: list[float] = []
    checkpoints = S3Checkpoints(s3, BUCKET, attempts=3, sleep=sleeps.append)
    refuse(s3, "GetObject", "SlowDown", times=2)
    assert checkpoints.latest("1") is None and len(sleeps) == 2
    refuse(s3, "GetObject", "SlowDown", times=10)
    with pytest.raises(BackendUnavailable):
        checkpoints.latest("1")


def test_a_pointer_s3_denies_is_a_deployment_problem_not_no_checkpoint(s3):
    """Without s3:ListBucket, S3 answers a missing `latest` with 403: that is not "nothing to resume"
    (resuming from scratch would throw the job's progress away), and says which right is missing."""
    deny_missing_keys(s3)
    checkpoints = S3Checkpoints(s3, BUCKET, "checkpoints")
    with pytest.raises(Misconfigured) as denied:
        checkpoints.latest("1")
    assert "s3:ListBucket" in str(denied.value) and "checkpoints/1/latest" in str(denied.value)
    s3.put_object(Bucket=BUCKET, Key="checkpoints/1/latest", Body=b"ckpt-4\n")
    s3.put_object(Bucket=BUCKET, Key=f"checkpoints/1/ckpt-4/{MANIFEST}", Body=b"{}")
    assert checkpoints.latest("1") == f"s3://{BUCKET}/checkpoints/1/ckpt-4"   # what exists is read as before


def test_a_missing_pointer_is_no_checkpoint_to_a_reader_listing_only_under_the_prefix(s3):
    """The dispatch role lists only under checkpoints/: S3 answers a missing `latest` (GET) and a
    missing manifest (HEAD) with 403, and the listing tells them absent, not denied."""
    deny_missing_keys(s3, listable=("checkpoints/",))
    checkpoints = S3Checkpoints(s3, BUCKET, "checkpoints")
    assert checkpoints.latest("1") is None
    s3.put_object(Bucket=BUCKET, Key="checkpoints/1/latest", Body=b"ckpt-4\n")
    assert checkpoints.latest("1") is None                                     # no manifest: not complete
    s3.put_object(Bucket=BUCKET, Key=f"checkpoints/1/ckpt-4/{MANIFEST}", Body=b"{}")
    assert checkpoints.latest("1") == f"s3://{BUCKET}/checkpoints/1/ckpt-4"
