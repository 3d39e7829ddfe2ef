"""The job side of a code bundle (gqa.runtime.code): what it unpacks and what
it refuses, the check of what it fetched, the command it becomes
(gqa.models.code.launch_command), and what it adds around the command as a
Batch job's first process (gqa.runtime.job_process): the warning signal, the
host's SLURM_* variables."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import tarfile

import pytest

from gqa.models import code as model
from gqa.models.errors import SpecError
from gqa.models.loader import validate
from gqa.models.signals import warning_signal
from gqa.runtime import code as runtime
from gqa.runtime import job_process
from gqa.runtime.code import CodeError


def archive(*members: tuple[str, str, str | bytes]) -> bytes:
    """A tar.gz of (kind, name, content or link target); kind: file, dir, sym, hard, fifo."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for kind, name, content in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = content.encode() if isinstance(content, str) else content
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE}[kind]
            if kind in ("sym", "hard"):
                info.linkname = content
            tar.addfile(info)
    return out.getvalue()


def test_a_plain_bundle_unpacks_with_its_links(tmp_path):
    data = archive(("file", "train.py", "print(1)"), ("dir", "lib", ""), ("file", "lib/m.py", "X=1"),
                   ("sym", "cfg.yaml", "lib/m.py"))
    assert runtime.unpack(io.BytesIO(data), tmp_path) == 4
    assert (tmp_path / "train.py").read_text() == "print(1)"
    assert os.readlink(tmp_path / "cfg.yaml") == "lib/m.py" and (tmp_path / "cfg.yaml").read_text() == "X=1"


@pytest.mark.parametrize("members, why", [
    ((("file", "/etc/cron.d/x", "evil"),), "'/etc/cron.d/x' is not a plain relative path"),
    ((("file", "../outside.txt", "evil"),), "'../outside.txt' is not a plain relative path"),
    ((("file", "a/../../outside.txt", "evil"),), "is not a plain relative path"),
    ((("sym", "up", "../.."),), "link 'up' leads out of the directory (to '../..')"),
    ((("sym", "abs", "/etc"),), "link 'abs' leads out of the directory (to '/etc')"),
    ((("sym", "d", "."), ("file", "d/x", "through the link")), "'d/x' lies behind a link"),
    ((("hard", "h", "train.py"),), "'h' is neither a file, a directory nor a link"),
    ((("fifo", "p", ""),), "'p' is neither a file, a directory nor a link"),
])
def test_unsafe_members_are_refused_before_anything_is_written(tmp_path, members, why):
    data = archive(("file", "train.py", "print(1)"), *members)
    with pytest.raises(CodeError) as refused:
        runtime.unpack(io.BytesIO(data), tmp_path)
    assert why in str(refused.value)
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / "outside.txt").exists()


def bundle_file(tmp_path, data: bytes, name: str | None = None):
    path = tmp_path / f"{name or hashlib.sha256(data).hexdigest()}.tar.gz"
    path.write_bytes(data)
    return path


def test_prepare_fetches_checks_and_unpacks_into_a_fresh_directory(tmp_path):
    data = archive(("file", "train.py", "print(1)"))
    uri = bundle_file(tmp_path, data).as_uri()
    first, second = runtime.prepare(uri, parent=str(tmp_path)), runtime.prepare(uri, parent=str(tmp_path))
    assert first != second                       # each attempt gets its own copy
    assert os.listdir(first) == ["train.py"] and os.path.basename(first).startswith("gqa-code-")


def test_a_bundle_that_does_not_hash_to_its_name_is_refused_and_nothing_is_left(tmp_path):
    data = archive(("file", "train.py", "print(1)"))
    uri = bundle_file(tmp_path, data, name="0" * 64).as_uri()
    with pytest.raises(CodeError, match=f"has SHA-256 {hashlib.sha256(data).hexdigest()}, not the 0000"):
        runtime.prepare(uri, parent=str(tmp_path))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("gqa-code-")]


@pytest.mark.parametrize("uri, why", [
    ("s3://bucket/code/abc.tar.gz", "does not name a bundle"),
    ("https://example.com/" + "a" * 64 + ".tar.gz", "only s3:// and file:// sources"),
    ("file:///nonexistent/" + "a" * 64 + ".tar.gz", "cannot read the job's code at file:///nonexistent/"),
])
def test_a_source_that_cannot_be_used_says_why(tmp_path, uri, why):
    with pytest.raises(CodeError, match=why):
        runtime.prepare(uri, parent=str(tmp_path))


def test_arguments_naming_the_submitters_directory_are_read_in_the_copy():
    argv = ["/home/a/proj/train.sh", "--data", "/home/a/proj/data/x", "/home/a/project2/y", "/home/a/proj", "-v"]
    assert runtime.in_copy(argv, "/home/a/proj/", "/tmp/gqa-code-1") == [
        "/tmp/gqa-code-1/train.sh", "--data", "/tmp/gqa-code-1/data/x", "/home/a/project2/y", "/tmp/gqa-code-1", "-v"]
    assert runtime.in_copy(argv, None, "/tmp/c") == argv


def test_the_command_line_of_the_fetcher():
    assert runtime.parse(["--root", "/w", "--", "python", "t.py"]) == ("/w", ["python", "t.py"])
    assert runtime.parse(["--", "sh", "-c", "x"]) == (None, ["sh", "-c", "x"])
    with pytest.raises(CodeError, match="usage"):
        runtime.parse(["python"])


# -- the spec's field and the launched command ------------------------------------------------------------
DIGEST = "sha256:" + "ab" * 32


def spec(**fields):
    return validate({"command": ["python", "train.py"], "workdir": "/home/a/proj", **fields})


def test_the_spec_takes_a_sha256_digest_only():
    assert spec(code=DIGEST).code == DIGEST
    for bad in ("sha256:" + "AB" * 32, "ab" * 32, "sha256:abc", "md5:" + "ab" * 16):
        with pytest.raises(SpecError, match="code: .*must be sha256: and 64 lowercase hex digits"):
            spec(code=bad)


def test_with_code_the_command_runs_behind_the_fetcher_and_without_it_as_given():
    assert model.launch_command(spec()) == ["python", "train.py"]
    assert model.launch_command(spec(code=DIGEST)) == ["python3", "-c", model.BOOT, "--root", "/home/a/proj", "--",
                                                       "python", "train.py"]
    shell = spec(code=DIGEST, command="echo $GQA_JOB_ID > out", shell=True)
    assert model.launch_command(shell)[-3:] == ["/bin/sh", "-c", "echo $GQA_JOB_ID > out"]
    assert model.uri_of("b", DIGEST) == f"s3://b/code/{'ab' * 32}.tar.gz"
    assert runtime.expected_hex(model.uri_of("b", DIGEST)) == "ab" * 32


def test_the_runtime_and_the_model_agree_on_the_exit_code_and_the_variable():
    assert runtime.FETCH_FAILED == model.FETCH_FAILED and runtime.URI_ENV == model.URI_ENV
    assert f"sys.exit({model.FETCH_FAILED})" in model.BOOT
    compile(model.BOOT, "<boot>", "exec")


def test_the_local_queue_refuses_a_spec_with_code():
    assert model.local_problem(spec()) is None
    assert model.local_problem(spec(code=DIGEST)) == (
        f"code: {DIGEST} names a code bundle, which jobs on AWS fetch; the local queue runs a job in its "
        "workdir (/home/a/proj): remove code: from the spec")


def test_the_local_queue_refuses_a_spec_with_an_image():
    problem = model.local_problem(spec(image="nvcr.io/nvidia/pytorch:24.01-py3"))
    assert problem is not None
    assert problem.startswith("image: nvcr.io/nvidia/pytorch:24.01-py3 names a container image, which jobs on AWS "
                              "run in; the local queue runs a job on this machine without one")


# -- the warning signal and the host's variables on AWS -------------------------------------------------------
def test_the_warning_signal_is_read_as_the_spec_writes_it():
    assert job_process.parse_warning("B:USR1@90") == job_process.WarningSignal(signal.SIGUSR1, 90, True)
    assert job_process.parse_warning("SIGTERM@300") == job_process.WarningSignal(signal.SIGTERM, 300, False)
    assert job_process.parse_warning("10@5").signum == 10
    for bad in ("USR9@5", "USR1", "USR1@soon"):
        with pytest.raises(ValueError, match="GQA_WARN_SIGNAL"):
            job_process.parse_warning(bad)
    planned = job_process.warning_delay({"GQA_WARN_SIGNAL": "USR1@90", "GQA_WALL_END": "1000"}, now=400)
    assert planned is not None and planned[1] == 510
    late = job_process.warning_delay({"GQA_WARN_SIGNAL": "USR1@90", "GQA_WALL_END": "1000"}, now=950)
    assert late is not None and late[1] == 0                   # already inside the window: at once
    assert job_process.warning_delay({"GQA_WARN_SIGNAL": "USR1@90"}, now=0) is None


def test_the_host_fills_only_the_variables_nothing_set():
    env = {"SLURM_JOB_NODELIST": "", "SLURM_SUBMIT_HOST": "laptop", "GQA_WALL_END": "5000"}
    job_process.fill_host_variables(env, "ip-10-0-0-7", now=1234.5, here="/tmp/gqa-code-1")
    assert env["SLURM_JOB_NODELIST"] == env["SLURMD_NODENAME"] == env["SLURM_NODELIST"] == "ip-10-0-0-7"
    assert (env["SLURM_SUBMIT_HOST"], env["SLURM_SUBMIT_DIR"]) == ("laptop", "/tmp/gqa-code-1")
    assert (env["SLURM_JOB_START_TIME"], env["SLURM_JOB_END_TIME"]) == ("1234", "5000")


def test_a_wall_time_in_seconds_ends_that_long_after_the_start():
    env = {"GQA_WALL_SECONDS": "3600", "GQA_WARN_SIGNAL": "USR1@60"}
    job_process.fill_host_variables(env, "h", now=1000.0, here="/w")
    assert (env["GQA_WALL_END"], env["SLURM_JOB_END_TIME"]) == ("4600", "4600")
    planned = job_process.warning_delay(env, now=1000.0)
    assert planned is not None and planned[1] == 3540


@pytest.mark.parametrize("asked", ["USR1@90", "B:USR2", "sigterm@300", "B:10@5", "HUP@0"])
def test_the_runtime_reads_every_warning_signal_the_spec_writes(asked):
    spec_side = warning_signal(asked)
    runtime_side = job_process.parse_warning(spec_side.text())
    assert (runtime_side.signum, runtime_side.before, runtime_side.batch_only) == (
        spec_side.number, spec_side.before, spec_side.batch_only)


def test_a_warning_goes_to_the_steps_else_to_the_scripts_processes_else_to_the_command():
    steps = {20, 30}
    is_step = steps.__contains__
    assert job_process.warning_targets(10, [10, 20, 25, 30], False, is_step) == [20, 30]   # 25: a `| tee`
    assert job_process.warning_targets(10, [10, 25], False, is_step) == [25]
    assert job_process.warning_targets(10, [10], False, is_step) == [10]
    assert job_process.warning_targets(10, [10, 20, 25], True, is_step) == [10]
