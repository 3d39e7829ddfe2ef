"""A second Unix user at a queue (root only: the test creates gqa-chaos-bob
and removes it after). On a single-user queue root started, bob's `gqa
submit` is refused in one clear line, never "lost contact", and nothing is
recorded; on a shared box (`gqa local start --system`) bob's cancel of
another user's job is refused and his own job runs as bob."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.host_locks import host_lock

from .harness import ROOT, Chaos, kill_tagged, one_line_error

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"),
                                 reason="needs root, useradd and runuser to play a second Unix user")]
BOB = "gqa-chaos-bob"


def _run(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture
def bob():
    with host_lock("unix-users"):   # one test at a time plays bob (test_slurm_as_owner.py too)
        yield from _bob()


def _bob():
    _run("userdel", BOB)      # left by a run that was killed before its own clean-up: start afresh
    made = _run("useradd", "--no-create-home", "--shell", "/bin/sh", BOB).returncode == 0
    if not made:
        pytest.skip(f"cannot create the user {BOB}")
    try:
        yield BOB
    finally:
        kill_tagged("USER", BOB)   # nothing of bob's may outlive the test
        _run("userdel", BOB)


@pytest.fixture
def shared_dir():
    """A directory every user may pass through (pytest's own is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="gqa-chaos-", dir="/tmp"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def python_for_others() -> list[str]:
    """An interpreter other users may run: this one, unless it lives where they cannot reach."""
    here = Path(sys.executable).resolve()
    if all(os.stat(p).st_mode & 0o001 for p in here.parents):
        return [sys.executable]
    return [f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"]


def as_bob(chaos: Chaos, *args: str) -> subprocess.CompletedProcess:
    """`gqa ARGS` through the light client, as bob, in the chaos queue's home."""
    import sysconfig

    code = "import sys; from cli.client import run; sys.argv[0] = 'gqa'; run()"
    env = {"GQA_HOME": str(chaos.home), "PYTHONPATH": os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]]),
           "CHAOS_TAG": chaos.tag, "USER": BOB, "HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}
    proc = _run("runuser", "-u", BOB, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
                *python_for_others(), "-c", code, *args, cwd=str(chaos.work))
    if "No module named" in proc.stderr:
        pytest.skip(f"{BOB} cannot run this interpreter: {proc.stderr.strip()[-200:]}")
    chaos.stderr.append((f"as {BOB}: gqa {' '.join(args)}", proc.stderr))
    return proc


def test_bob_is_refused_in_one_line_by_a_single_user_queue(bob, shared_dir):
    chaos = Chaos(shared_dir / "q")
    os.chmod(chaos.base, 0o755)
    os.chmod(chaos.work, 0o777)
    try:
        chaos.start()
        mine = chaos.submit(1, 0.1)
        refused = as_bob(chaos, "submit", "--", "true")
        assert one_line_error(refused), (refused.returncode, refused.stderr)
        assert "lost contact" not in refused.stderr
        print(f"bob was told: {refused.stderr.strip()}")
        chaos.check("bob at a single-user queue", mine, refused=1)
    finally:
        chaos.close()


@pytest.mark.parametrize("name", ["q", "q" * 90], ids=["socket file", "abstract socket (a long home)"])
def test_bob_is_told_whose_queue_it_is(bob, shared_dir, name):
    """A short home's socket is a file in it, which bob may not stat; a long
    home's is an abstract socket, whose daemon answers him itself."""
    chaos = Chaos(shared_dir / name)
    os.chmod(chaos.base, 0o755)
    os.chmod(chaos.work, 0o777)
    try:
        chaos.start()
        refused = as_bob(chaos, "submit", "--", "true")
        assert one_line_error(refused) and "belongs to root" in refused.stderr, refused.stderr
    finally:
        chaos.close()


def test_on_a_shared_box_bob_runs_as_bob_and_may_not_cancel_roots_job(bob, shared_dir):
    chaos = Chaos(shared_dir / "q", gpus=2)
    os.chmod(chaos.base, 0o755)
    os.chmod(chaos.work, 0o777)
    os.chmod(chaos.runs.parent, 0o777)
    chaos.home.rmdir()   # --system lays out its home itself
    try:
        started = chaos.cli("local", "start", "--system", "--home", str(chaos.home), "--gpus", "2", "--grace", "1",
                            "--detach")
        assert started.returncode == 0, started.stderr
        chaos.runs.touch()
        os.chmod(chaos.runs, 0o666)
        roots = chaos.cli("submit", "--", "sleep", "30", light=True)
        assert roots.returncode == 0, roots.stderr
        root_job = roots.stdout.strip()

        refused = as_bob(chaos, "cancel", root_job)
        assert one_line_error(refused) and "may not cancel" in refused.stderr, refused.stderr
        submitted = as_bob(chaos, "submit", "-o", "json", "--", "sh", "-c", f"id -un >> {chaos.runs.parent}/whoami")
        assert submitted.returncode == 0, submitted.stderr
        bobs = json.loads(submitted.stdout)["id"]
        deadline = time.monotonic() + 20
        whoami = chaos.runs.parent / "whoami"
        while not (whoami.exists() and whoami.read_text().endswith("\n")) and time.monotonic() < deadline:
            time.sleep(0.1)   # the shell opens the file before `id` writes to it
        assert (chaos.runs.parent / "whoami").read_text().split() == [BOB]
        assert chaos.cli("cancel", root_job).returncode == 0
        jobs = chaos.drain(20)
        assert {i: j.state.value for i, j in jobs.items()} == {root_job: "CANCELLED", bobs: "SUCCEEDED"}
        assert jobs[bobs].owner == BOB and pwd.getpwnam(BOB)
        assert "Traceback" not in chaos.daemon_log() and not any("Traceback" in e for _, e in chaos.stderr)
    finally:
        chaos.close()
