"""A shared box with real Unix users (root only: the tests create gqa-t-*
users and a group, and remove them after): each job's files belong to its
user and nobody else reads them; roles come from Unix groups; a system
queue's home is laid out root-only; and the whole path, a root daemon
running alice's job as alice while bob's cancel is refused."""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.host_locks import host_lock

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"),
                                 reason="needs root, useradd and runuser to play several Unix users")]

ROOT = Path(__file__).resolve().parents[2]
ALICE, BOB, CAROL, ADMINS = "gqa-t-alice", "gqa-t-bob", "gqa-t-carol", "gqa-t-admins"


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=120)


@pytest.fixture(scope="module")
def users():
    """alice, bob, and carol in the admin group; removed afterwards."""
    with host_lock("unix-users"):   # never at once with another test's useradd or userdel
        yield from _users()


def _users():
    made_group = _run("groupadd", ADMINS, check=False).returncode == 0
    made = []
    try:
        for name, extra in ((ALICE, ()), (BOB, ()), (CAROL, ("-G", ADMINS))):
            if _run("useradd", "--no-create-home", "--shell", "/bin/sh", *extra, name, check=False).returncode == 0:
                made.append(name)
        yield
    finally:
        for name in made:
            _run("userdel", name, check=False)
        if made_group:
            _run("groupdel", ADMINS, check=False)


def as_user(user: str, *argv: str, cwd: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    extra = [f"{k}={v}" for k, v in (env or {}).items()]
    return subprocess.run(["runuser", "-u", user, "--", "env", *extra, *argv], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


@pytest.fixture
def shared_dir():
    """A directory every test user may pass through (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="gqa-box-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- a job's files -------------------------------------------------------------------------------

def test_a_jobs_files_are_its_users_and_nobody_elses(users, shared_dir):
    from gqa.adapters.local.accounts import Account, own_dir, own_file

    alice = Account.for_user(ALICE)
    with own_file(shared_dir / "12.log", alice) as log:
        log.write(b"HF_TOKEN=secret\n")
    own_dir(shared_dir / "ckpt", alice)
    (shared_dir / "ckpt" / "weights").write_bytes(b"w")
    for path, mode in ((shared_dir / "12.log", 0o600), (shared_dir / "ckpt", 0o700)):
        st = os.stat(path)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (alice.uid, alice.gid, mode)
    assert as_user(ALICE, "cat", str(shared_dir / "12.log")).stdout == "HF_TOKEN=secret\n"
    assert as_user(BOB, "cat", str(shared_dir / "12.log")).returncode != 0
    assert as_user(BOB, "ls", str(shared_dir / "ckpt")).returncode != 0


def test_a_planted_symlink_is_refused_not_followed(users, shared_dir):
    from gqa.adapters.local.accounts import Account, own_dir, own_file

    target = shared_dir / "precious"
    target.write_text("root's")
    os.symlink(target, shared_dir / "13.log")
    os.symlink(shared_dir, shared_dir / "13-ckpt")
    alice = Account.for_user(ALICE)
    with pytest.raises(OSError):
        own_file(shared_dir / "13.log", alice)
    with pytest.raises(OSError):
        own_dir(shared_dir / "13-ckpt", alice)
    assert os.stat(target).st_uid == 0 and os.stat(shared_dir).st_uid == 0


def test_an_account_carries_what_popen_needs(users):
    from gqa.adapters.local.accounts import Account
    from gqa.models.errors import NotFound

    carol = Account.for_user(CAROL)
    assert ADMINS in carol.group_names() and carol.gid in carol.groups
    assert carol.popen_identity() == {"user": carol.uid, "group": carol.gid, "extra_groups": list(carol.groups)}
    assert Account.for_uid(carol.uid) == carol
    with pytest.raises(NotFound, match="no Unix user named 'gqa-t-nobody'"):
        Account.for_user("gqa-t-nobody")


@pytest.mark.parametrize("user, admin", [("root", True), (CAROL, True), (ALICE, False)])
def test_admins_are_root_and_the_admin_groups_members(users, shared_dir, user, admin):
    from daemon.callers import local_access, principal_for
    from gqa.adapters.local.accounts import Account
    from gqa.adapters.local.system import SystemSettings, lay_out_system

    lay_out_system(shared_dir, SystemSettings(admin_groups=(ADMINS,)))
    account = Account.for_user(user)
    assert principal_for(account.uid, account.gid, local_access(shared_dir)).admin is admin


def test_a_system_home_is_laid_out_root_only(users, shared_dir):
    from gqa.adapters.local.system import SystemSettings, lay_out_system, read_system, socket_mode

    home = shared_dir / "gqa"
    lay_out_system(home, SystemSettings(admin_groups=(ADMINS,)))
    modes = {name: stat.S_IMODE(os.stat(home / name).st_mode) for name in ("", "system", "exits", "logs",
                                                                          "checkpoints")}
    assert modes == {"": 0o755, "system": 0o644, "exits": 0o700, "logs": 0o711, "checkpoints": 0o711}
    assert read_system(home).admin_groups == (ADMINS,) and socket_mode(home) == 0o666
    assert as_user(ALICE, "ls", str(home / "logs")).returncode != 0


def test_system_mode_needs_root(users, shared_dir):
    proc = as_user(ALICE, *_python(), "-m", "cli.main", "local", "start", "--system", "--home",
                   str(shared_dir / "q"), "--gpus", "1", env={"PYTHONPATH": _pythonpath()})
    if "No module named" in proc.stderr or "Permission denied" in proc.stderr:
        pytest.skip(f"the test users cannot run this interpreter: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 2 and "needs root" in proc.stderr, proc.stderr
    assert not (shared_dir / "q").exists()


# -- the whole path, through the daemon ----------------------------------------------------------------

def _python() -> list[str]:
    """An interpreter the test users may run: this one, unless it lives where they cannot reach
    (a pyenv under /root); then the system's of the same version, with this one's packages."""
    here = Path(sys.executable).resolve()
    if all(stat.S_IMODE(os.stat(p).st_mode) & 0o001 for p in here.parents):
        return [sys.executable]
    return [f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"]


def _pythonpath() -> str:
    import sysconfig

    return os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])


@pytest.fixture
def box(users, shared_dir):
    """`gqa local start --system` on 2 GPUs in a fresh home; stopped after."""
    home = shared_dir / "gqa"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GQA_HOME", None)
    proc = subprocess.run([sys.executable, "-m", "cli.main", "local", "start", "--system", "--home", str(home),
                           "--admin-group", ADMINS, "--gpus", "2", "--grace", "1", "--detach"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    work = shared_dir / "work"
    work.mkdir()
    os.chmod(work, 0o777)
    yield home, work
    subprocess.run([sys.executable, "-m", "cli.main", "local", "stop", "--timeout", "20"],
                   env=dict(env, GQA_HOME=str(home)), capture_output=True, timeout=60)


def gqa(user: str, home: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    code = "import sys; from cli.client import run; sys.argv[0] = 'gqa'; run()"
    return as_user(user, *_python(), "-c", code, *args, cwd=str(work),
                   env={"GQA_HOME": str(home), "PYTHONPATH": _pythonpath(), "SECRET_OF_ALICE": "s3cret",
                        "HOME": str(work), "GQA_CONFIG": str(work / "no-config")})


@pytest.mark.slow
def test_alice_submits_her_job_runs_as_her_and_bob_may_not_touch_it(box):
    home, work = box
    submitted = gqa(ALICE, home, work, "submit", "-o", "json", "--", "sh", "-c",
                    'id -un; echo "$SECRET_OF_ALICE"; sleep 30')
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)["id"]

    deadline = time.monotonic() + 20
    while True:
        status = json.loads(gqa(BOB, home, work, "status", job, "-o", "json").stdout)
        state = (status[0] if isinstance(status, list) else status).get("state")
        if state == "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert state == "RUNNING"

    log = home / "logs" / f"{job}.log"
    assert os.stat(log).st_uid == pwd_uid(ALICE) and stat.S_IMODE(os.stat(log).st_mode) == 0o600
    time.sleep(0.5)
    out = gqa(ALICE, home, work, "logs", job)
    assert ALICE in out.stdout and "s3cret" in out.stdout, out.stderr       # ran as alice, with her environment

    # bob reads the queue, but not alice's output, environment or database, and may not cancel her job
    assert "s3cret" not in gqa(BOB, home, work, "status", job, "-o", "json").stdout
    refused = gqa(BOB, home, work, "logs", job)
    assert refused.returncode == 2 and "may not read its output" in refused.stderr
    assert as_user(BOB, "cat", str(log)).returncode != 0
    assert as_user(BOB, "cat", str(home / "gqa.db")).returncode != 0
    refused = gqa(BOB, home, work, "cancel", job)
    assert refused.returncode == 2 and f"job {job} belongs to {ALICE}; {BOB} may not cancel it" in refused.stderr
    refused = gqa(BOB, home, work, "quota", "set", "vision", "--max-gpus", "1")
    assert refused.returncode == 2 and "only admins may" in refused.stderr

    # carol administers the queue through her group; alice cancels her own job
    assert gqa(CAROL, home, work, "quota", "set", "vision", "--max-gpus", "1").returncode == 0
    cancelled = gqa(ALICE, home, work, "cancel", job)
    assert cancelled.returncode == 0, cancelled.stderr


def pwd_uid(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid


@pytest.mark.slow
def test_teams_are_rights_on_the_box(box):
    """Members by user and by Unix group, set by an admin through the daemon; `gqa submit`
    (the light client, served by the daemon) refuses a team the caller is not in."""
    home, work = box
    refused = gqa(BOB, home, work, "quota", "set", "vision", "--members", BOB)
    assert refused.returncode == 2 and "only admins may" in refused.stderr
    members = gqa(CAROL, home, work, "quota", "set", "vision", "--members", f"{ALICE},@{ADMINS}")
    assert members.returncode == 0, members.stderr
    assert members.stdout == f"team vision: members {ALICE}, @{ADMINS}\n"

    refused = gqa(BOB, home, work, "submit", "--team", "vision", "--", "true")
    assert refused.returncode == 2
    assert f"{BOB} is not a member of team vision (members: {ALICE}, @{ADMINS})" in refused.stderr
    for user in (ALICE, CAROL):                  # by name; by group; naming no team: their only one
        submitted = gqa(user, home, work, "submit", "-o", "json", "--", "true")
        assert submitted.returncode == 0, submitted.stderr
        status = json.loads(gqa(user, home, work, "status", json.loads(submitted.stdout)["id"], "-o", "json").stdout)
        assert (status[0] if isinstance(status, list) else status)["team"] == "vision"
    queued = json.loads(gqa(BOB, home, work, "submit", "-o", "json", "--", "true").stdout)   # in no team: default
    status = json.loads(gqa(BOB, home, work, "status", queued["id"], "-o", "json").stdout)
    assert (status[0] if isinstance(status, list) else status)["team"] == "default"


# the request an older or hand-made client sends: a file's path, not its bytes
RAW_SUBMIT = """
import json, os, sys
from cli.daemon_socket import address, exchange
body = {"argv": ["submit", "-o", "json", "--gpus", "0", sys.argv[1]], "cwd": os.getcwd(), "env": {}}
answer = exchange(address(sys.argv[2]), json.dumps({"v": 1, "method": "POST", "path": "/cli/submit",
                                                    "body": body}).encode() + b"\\n")
print(json.dumps(answer))
"""


@pytest.mark.slow
def test_nobody_reads_a_file_through_the_daemon_they_could_not_read_themselves(box):
    """The daemon runs as root; bob names root's 0600 file as his job's script. His own client
    cannot read it, and the daemon opens no file for him, so nothing is queued and no job of
    his ever holds its text. His own script goes through and runs as him."""
    home, work = box
    secret = work / "secret.sh"
    secret.write_text("#!/bin/sh\necho TOKEN=root-only\n")
    secret.chmod(0o600)

    refused = gqa(BOB, home, work, "submit", "--gpus", "0", "secret.sh")
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    assert refused.stderr == "gqa: error: cannot read secret.sh: Permission denied\n"

    raw = as_user(BOB, *_python(), "-c", RAW_SUBMIT, str(secret), str(home), cwd=str(work),
                  env={"PYTHONPATH": _pythonpath()})
    answer = json.loads(raw.stdout)["body"]
    assert answer["code"] == 2 and "did not come with the submission" in answer["stderr"], (answer, raw.stderr)

    from cli.local_backend import LocalBackend

    assert LocalBackend(home).store.list() == []

    mine = work / "mine.sh"
    mine.write_text("#!/bin/sh\necho ran as $(id -un)\n")
    os.chown(mine, pwd_uid(BOB), -1)
    mine.chmod(0o600)
    submitted = gqa(BOB, home, work, "submit", "-o", "json", "--gpus", "0", "mine.sh")
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)["id"]
    out = work / f"slurm-{job}.out"
    deadline = time.monotonic() + 20
    while not (out.exists() and out.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert out.read_text() == f"ran as {BOB}\n"
    assert "TOKEN" not in out.read_text()
