"""Containment with real processes: a job that escapes its process group three
ways (setsid, a double fork, setpgid) leaves nothing behind after kill().

The subreaper tests run in a helper process (this file run as a script):
prctl(PR_SET_CHILD_SUBREAPER) would otherwise stay set on the test runner.
Every process a test starts carries GQA_TEST_TAG=<uuid> in its environment,
so the teardown finds and kills whatever survived a failed test; every cgroup
lives below a root of the test's own, removed at teardown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:   # run as a script
    sys.path.insert(0, str(ROOT))

from gqa.adapters.local.containment import (  # noqa: E402
    CgroupContainment, SubreaperContainment, choose_containment,
)

pytestmark = pytest.mark.e2e

# what the launcher's wrapper runs first, then three ways out of the process group;
# each escapee writes its pid to $PIDS once it runs
WRAPPER_LINE = '[ -z "$GQA_CGROUP_PROCS" ] || echo $$ > "$GQA_CGROUP_PROCS" || exit 125\n'
JOB = WRAPPER_LINE + r"""setsid sh -c 'echo $$ >> "$PIDS"; exec sleep 1000' &
(sh -c 'echo $$ >> "$PIDS"; exec sleep 1000' &) &
"$PY" -c 'import os, time; os.setpgid(0, 0); open(os.environ["PIDS"], "a").write(f"{os.getpid()}\n")
time.sleep(1000)' &
"""
RUNS_ON = JOB + "wait\n"   # the main process lives until killed (cancel, wall time)
ENDS = JOB + "exit 0\n"    # the main process ends normally, its escapees stay
ESCAPEES = 3


# -- what the tests look at, independent of the module under test -----------------------
def tagged(tag: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries the test's tag."""
    needle = f"\0GQA_TEST_TAG={tag}\0".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                environ = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in b"\0" + environ + b"\0" and state not in (b"Z", b"X"):
            pids.append(int(entry))
    return pids


def kill_tagged(tag: str) -> None:
    for _ in range(50):
        pids = tagged(tag)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def start_job(cell, tag: str, work: Path, script: str) -> subprocess.Popen:
    pids = work / f"pids-{cell.name}"
    env = dict(os.environ, GQA_TEST_TAG=tag, PIDS=str(pids), PY=sys.executable, **cell.env)
    with open(work / f"log-{cell.name}", "ab") as log:   # not the helper's stdout: the escapees keep it open
        return subprocess.Popen(["/bin/sh", "-c", script], env=env, start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def escapees(cell, work: Path, timeout: float = 10.0) -> list[int]:
    path = work / f"pids-{cell.name}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = path.read_text().split() if path.exists() else []
        if len(pids) >= ESCAPEES:
            return [int(p) for p in pids]
        time.sleep(0.02)
    raise AssertionError(f"the job's escapees never all started: {path}")


def kill_cost(containment, cell, calls: int = 200) -> float:
    """Mean seconds of kill() on a cell with nothing left in it."""
    started = time.perf_counter()
    for _ in range(calls):
        containment.kill(cell)
    return (time.perf_counter() - started) / calls


# -- cgroup v2 ---------------------------------------------------------------------------
def _remove_cgroup_tree(path: Path) -> None:
    if not path.is_dir():
        return
    for child in path.iterdir():
        if child.is_dir():
            _remove_cgroup_tree(child)
    try:
        (path / "cgroup.kill").write_text("1")
    except OSError:
        pass
    for _ in range(100):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def _cgroup_parent() -> Path | None:
    from gqa.adapters.local.containment import cgroup2_mount, own_cgroup

    mount = cgroup2_mount(Path("/proc/self/mountinfo").read_text())
    own = own_cgroup(Path("/proc/self/cgroup").read_text())
    if mount is None or own is None or mount[1] != "/":
        return None
    return Path(mount[0] + own.rstrip("/")) if own != "/" else Path(mount[0])


@pytest.fixture
def tag():
    tag = uuid.uuid4().hex
    yield tag
    kill_tagged(tag)


@pytest.fixture
def cgroup(tag):
    parent = _cgroup_parent()
    if parent is None:
        pytest.skip("no cgroup v2 mount here")
    root = parent / f"gqa-test-{tag[:12]}"
    try:
        containment = choose_containment(root, instance=tag)
        if containment.kind != "cgroup":
            pytest.skip(f"no writable cgroup v2 here: {containment.describe()}")
        yield containment
    finally:
        kill_tagged(tag)
        _remove_cgroup_tree(root)


@pytest.mark.parametrize("script", [RUNS_ON, ENDS], ids=["cancelled", "ended"])
def test_cgroup_kill_ends_every_escapee(cgroup, tag, tmp_path, script):
    cell = cgroup.prepare("12_3", 2, cpus=None, memory=None)
    assert cell.name == "12_3.2" and cell.env["GQA_CGROUP_PROCS"] == str(cgroup.root / "12_3.2" / "cgroup.procs")
    main = start_job(cell, tag, tmp_path, script)
    escaped = escapees(cell, tmp_path)
    assert any(os.getsid(pid) != main.pid for pid in escaped)   # the setsid one left the session
    assert any(os.getpgid(pid) == pid for pid in escaped)       # setsid and setpgid: groups of their own
    assert set(escaped) <= {int(p) for p in (cgroup.root / cell.name / "cgroup.procs").read_text().split()}
    if script is ENDS:
        assert main.wait(timeout=5) == 0   # a normal end: only the escapees are left

    cgroup.kill(cgroup.cell("12_3", 2))   # rebuilt from the name, as after a restart

    if script is RUNS_ON:
        assert main.wait(timeout=5) == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert tagged(tag) == []
    cgroup.release(cell)
    assert not (cgroup.root / cell.name).exists()


def test_cgroup_kill_without_cgroup_kill_file_freezes_and_kills(cgroup, tag, tmp_path):
    """The path for kernels before 5.14."""
    old_kernel = CgroupContainment(cgroup.root, instance=tag, has_kill=False)
    cell = old_kernel.prepare("7", 1, cpus=None, memory=None)
    main = start_job(cell, tag, tmp_path, RUNS_ON)
    escapees(cell, tmp_path)
    old_kernel.kill(cell)
    assert main.wait(timeout=5) == -signal.SIGKILL
    assert tagged(tag) == []
    assert (cgroup.root / cell.name / "cgroup.freeze").read_text().strip() == "0"   # left thawed
    old_kernel.release(cell)
    assert not (cgroup.root / cell.name).exists()


def test_cgroup_kill_of_a_cell_without_directory_finds_the_marker(cgroup, tag, tmp_path):
    """A daemon restarted from another cgroup looks for its predecessor's cells
    elsewhere: the marker still finds their processes."""
    cell = cgroup.prepare("8", 1, cpus=None, memory=None)
    main = start_job(cell, tag, tmp_path, RUNS_ON)
    escapees(cell, tmp_path)
    elsewhere = CgroupContainment(cgroup.root / "missing", instance=tag, has_kill=True)
    elsewhere.kill(elsewhere.cell("8", 1))
    assert main.wait(timeout=5) == -signal.SIGKILL
    assert tagged(tag) == []
    cgroup.release(cell)


def test_cgroup_empty_cell_kill_is_cheap_and_harmless(cgroup, tag, tmp_path):
    cell = cgroup.prepare("9", 1, cpus=None, memory=None)
    main = start_job(cell, tag, tmp_path, "exit 3")
    assert main.wait(timeout=5) == 3
    cost = kill_cost(cgroup, cell)
    print(f"cgroup kill() of an empty cell: {cost * 1e6:.0f} us")
    assert cost < 0.005
    cgroup.release(cell)
    assert not (cgroup.root / cell.name).exists()
    cgroup.kill(cell)      # after release: nothing to do, nothing raised
    cgroup.release(cell)
    cgroup.close()         # the daemon's stop: no cell left, so the root goes too
    assert not cgroup.root.exists()


def test_cgroup_describe_is_one_line(cgroup):
    line = cgroup.describe()
    assert "\n" not in line and line.startswith(f"containment: cgroup v2 at {cgroup.root} (")
    assert ("memory and cpu limits enforced" in line) == ({"memory", "cpu"} <= cgroup.controllers)


def test_cgroup_out_of_memory_is_reported(cgroup, tag, tmp_path):
    if "memory" not in cgroup.controllers:
        pytest.skip("memory controller unavailable (oom_killed() is unit-tested on a fake cgroup)")
    cell = cgroup.prepare("10", 1, cpus=1, memory=64 * 2**20)
    assert (cgroup.root / cell.name / "memory.max").read_text().strip() == str(64 * 2**20)
    hog = WRAPPER_LINE + """exec "$PY" -c 'x = b"1" * (512 * 2**20)'\n"""
    main = start_job(cell, tag, tmp_path, hog)
    assert main.wait(timeout=30) == -signal.SIGKILL
    assert cgroup.oom_killed(cell)
    cgroup.release(cell)


def test_unwritable_cgroup_root_falls_back_to_the_subreaper(tmp_path):
    """A directory that is no cgroup: the subreaper is chosen (in a helper: prctl)."""
    result = _helper("choose-fallback", "-", "-", str(tmp_path / "not-a-cgroup" / "gqa"))
    assert result["kind"] == "subreaper"
    assert result["describe"].startswith("containment: child subreaper (no writable cgroup v2")
    assert "\n" not in result["describe"]


# -- subreaper, in a helper process ------------------------------------------------------
def _helper(scenario: str, tag: str, work: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, scenario, tag, work, *args], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("scenario", ["cancelled", "ended"])
def test_subreaper_kill_ends_every_escapee(tag, tmp_path, scenario):
    result = _helper(scenario, tag, str(tmp_path))
    assert result["describe"] == ("containment: child subreaper (cgroups not allowed); "
                                  "memory and cpu limits not enforced")
    assert result["main"] == (-signal.SIGKILL if scenario == "cancelled" else 0)
    assert result["left"] == []            # no tagged process survived kill()
    assert result["zombies"] == []         # kill() and reap_strays() left no zombie child behind
    assert tagged(tag) == []


def test_subreaper_kill_after_a_restart_scans_proc(tag, tmp_path):
    """The daemon that started the job died; its orphans went elsewhere; the next
    daemon rebuilds the cell from its name and still finds them by the marker."""
    first = _helper("crash", tag, str(tmp_path))
    assert len(first["escaped"]) == ESCAPEES and tagged(tag)
    second = _helper("restart", tag, str(tmp_path))
    assert second["left"] == []
    assert tagged(tag) == []


def test_subreaper_empty_cell_kill_is_cheap(tag, tmp_path):
    result = _helper("empty", tag, str(tmp_path))
    print(f"subreaper kill() of an empty cell: {result['own_us']:.0f} us (own), "
          f"{result['scan_us']:.0f} us (after a restart: /proc scan)")
    assert result["main"] == 3
    assert result["own_us"] < 5000
    assert result["zombies"] == []


def _main(scenario: str, tag: str, work: str, *args: str) -> dict:
    if scenario == "choose-fallback":
        containment = choose_containment(args[0], instance=tag)
        return {"kind": containment.kind, "describe": containment.describe()}
    containment = choose_containment(allow_cgroup=False, instance=tag)
    assert isinstance(containment, SubreaperContainment) and containment.subreaper
    work_dir = Path(work)
    result = {"describe": containment.describe()}
    if scenario == "restart":
        cell = containment.cell("5", 1)   # not prepared here: its processes need not descend from us
        containment.kill(cell)
        result["left"] = tagged(tag)
        return result
    cell = containment.prepare("5", 1, cpus=2, memory=2**30)
    assert set(cell.env) == {"GQA_CELL"}
    if scenario == "empty":
        main = start_job(cell, tag, work_dir, "exit 3")
        result["main"] = main.wait(timeout=10)
        result["own_us"] = kill_cost(containment, cell) * 1e6
        result["scan_us"] = kill_cost(containment, containment.cell("6", 1), calls=20) * 1e6
        result["zombies"] = _zombie_children()
        return result
    main = start_job(cell, tag, work_dir, RUNS_ON if scenario in ("cancelled", "crash") else ENDS)
    result["escaped"] = escapees(cell, work_dir)
    if scenario == "crash":
        print(json.dumps(result), flush=True)
        os._exit(0)   # as a crashed daemon: no kill, no reaping
    if scenario == "ended":
        result["main"] = main.wait(timeout=10)
    containment.kill(containment.cell("5", 1))
    if scenario == "cancelled":
        result["main"] = main.wait(timeout=10)   # kill() left the main process's status to us
    result["left"] = tagged(tag)
    containment.reap_strays(keep=())
    result["zombies"] = _zombie_children()
    containment.release(cell)
    return result


def _zombie_children() -> list[int]:
    me = str(os.getpid())
    zombies = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == b"Z" and fields[1].decode() == me:
            zombies.append(int(entry))
    return zombies


if __name__ == "__main__":
    print(json.dumps(_main(*sys.argv[1:])), flush=True)
