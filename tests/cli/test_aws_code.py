"""`gqa submit` on AWS sends the directory it runs in: the real CLI, the API
(GET /code, POST /jobs), admit and dispatch on moto. The bundle is stored
once, the Batch job fetches it before its command, and what it fetches is
what was submitted. Locally a bundle is refused, never ignored."""

from __future__ import annotations

import json
import os

import pytest

from gqa.models import code
from tests.aws.fake_batch import BUCKET
from tests.aws.moto_support import capture

pytestmark = [pytest.mark.aws, pytest.mark.slow]


def code_objects(aws) -> list[str]:
    listed = aws.world.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="code/")
    return [o["Key"] for o in listed.get("Contents", [])]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The researcher's directory: not a git work tree, with a .gitignore."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "train.py").write_text("print('training')\n")
    (proj / "data" / "big.bin").write_bytes(os.urandom(64 * 1024))
    (proj / ".gitignore").write_text("data/\n")
    monkeypatch.chdir(proj)
    return proj


def test_the_directory_reaches_the_job_and_is_uploaded_once(aws, project, tmp_path):
    from gqa.runtime.code import prepare

    code_, out, err = aws("alice", "submit", "--", "python", "train.py")
    assert (code_, out) == (0, "1\n"), err
    assert f"code: {project}, 2 files" in err and "uploaded (sha256:" in err
    [key] = code_objects(aws)
    digest = "sha256:" + key[len("code/"):-len(".tar.gz")]
    assert aws.gateway.seen[-2]["url"].endswith("/code") and aws.gateway.seen[-1]["url"].endswith("/jobs")

    code_, out, err = aws("alice", "submit", "--", "python", "train.py", "--epochs", "2")
    assert (code_, out) == (0, "2\n") and "present (sha256:" in err
    assert code_objects(aws) == [key]                     # an unchanged tree: one object

    aws.admit()
    first, second = aws.dispatch()
    command = first.request["containerOverrides"]["command"]
    assert command == ["python3", "-c", code.BOOT, "--root", str(project), "--", "python", "train.py"]
    assert first.environment["GQA_CODE_URI"] == f"s3://{BUCKET}/{key}" == code.uri_of(BUCKET, digest)
    assert second.request["containerOverrides"]["command"][-4:] == ["python", "train.py", "--epochs", "2"]

    # in the job: what it fetches is what was submitted, without what .gitignore leaves out
    copy = prepare(first.environment["GQA_CODE_URI"], parent=str(tmp_path), client=aws.world.client("s3"))
    assert sorted(os.listdir(copy)) == [".gitignore", "train.py"]
    assert open(os.path.join(copy, "train.py")).read() == "print('training')\n"


def test_no_code_sends_nothing_and_the_command_runs_as_given(aws, project):
    code_, out, err = aws("alice", "submit", "--no-code", "--", "python", "train.py")
    assert (code_, out) == (0, "1\n") and "code:" not in err
    assert code_objects(aws) == [] and not any(s["url"].endswith("/code") for s in aws.gateway.seen)
    aws.admit()
    [submitted] = aws.dispatch()
    assert submitted.request["containerOverrides"]["command"] == ["python", "train.py"]
    assert "GQA_CODE_URI" not in submitted.environment


def test_past_the_limit_nothing_is_uploaded_or_submitted(aws, project):
    (project / "weights.pt").write_bytes(os.urandom(40 * 1024))
    puts = capture(aws.world.client("s3"), "PutObject")
    seen = len(aws.gateway.seen)
    code_, out, err = aws("alice", "submit", "--code-max-size", "16Ki", "--", "python", "train.py")
    assert (code_, out) == (2, "")
    assert err.startswith("gqa: error: the job's code from ") and err.count("\n") == 1
    assert "passes 16Ki compressed, the limit (--code-max-size); largest: weights.pt 40Ki" in err
    assert code_objects(aws) == [] and puts == []
    assert not any(s["url"].endswith("/jobs") for s in aws.gateway.seen[seen:])


def test_a_job_file_that_names_a_bundle_keeps_it_and_the_api_checks_it(aws, project):
    (project / "job.yaml").write_text(json.dumps({"command": ["python", "train.py"],
                                                  "code": "sha256:" + "0" * 64}))
    code_, out, err = aws("alice", "submit", "job.yaml")
    assert (code_, out) == (2, "")
    assert f"the job's code sha256:{'0' * 64} is not in s3://{BUCKET}/code/" in err
    assert code_objects(aws) == []


def test_the_local_queue_refuses_a_spec_with_a_bundle(cli):
    (cli.home / "job.yaml").write_text(json.dumps({"command": ["python", "train.py"],
                                                   "code": "sha256:" + "0" * 64}))
    code_, out, err = cli("submit", "job.yaml")
    assert (code_, out) == (2, "")
    assert "names a code bundle, which jobs on AWS fetch; the local queue runs a job in its workdir" in err
    assert cli.job_count() == 0
    assert cli("submit", "--no-code", "job.yaml")[0] == 0 and cli.job_count() == 1
