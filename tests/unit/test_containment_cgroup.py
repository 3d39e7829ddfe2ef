"""The cgroup containment against a fake cgroup directory (a tmp dir laid out
like one), and the parsing that finds the real one."""

import pytest

from gqa.adapters.local.containment import (
    CgroupContainment, cell_name, cgroup2_mount, instance_token, own_cgroup,
)

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
UNIFIED = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
V1_ONLY = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"


def test_finds_the_cgroup2_mount_in_hybrid_and_unified_layouts():
    assert cgroup2_mount(HYBRID) == ("/sys/fs/cgroup/unified", "/")
    assert cgroup2_mount(UNIFIED) == ("/sys/fs/cgroup", "/")
    assert cgroup2_mount(V1_ONLY) is None
    assert cgroup2_mount("41 31 0:38 / /mnt/c\\040g rw - cgroup2 cgroup2 rw\n") == ("/mnt/c g", "/")


def test_own_cgroup_is_the_unified_line():
    assert own_cgroup("4:memory:/x\n0::/user.slice/user-1000.slice/gqa.service\n") == \
        "/user.slice/user-1000.slice/gqa.service"
    assert own_cgroup("4:memory:/x\n") is None


def test_cell_names_are_stable_and_safe():
    assert cell_name("12_3", 2) == "12_3.2"
    assert cell_name("../x y", 1) == ".._x_y.1"
    assert "/" not in cell_name("a/b", 1)


def test_a_cell_rebuilt_from_its_name_is_the_same(tmp_path):
    first = CgroupContainment(tmp_path, instance="/home/a/.gqa", has_kill=True)
    cell = first.prepare("12_3", 2, cpus=None, memory=None)
    after_restart = CgroupContainment(tmp_path, instance="/home/a/.gqa", has_kill=True)
    assert after_restart.cell("12_3", 2) == cell
    assert cell.env == {"GQA_CGROUP_PROCS": str(tmp_path / "12_3.2" / "cgroup.procs"),
                        "GQA_CELL": f"12_3.2.{instance_token('/home/a/.gqa')}"}
    other_queue = CgroupContainment(tmp_path, instance="/home/b/.gqa", has_kill=True)
    assert other_queue.cell("12_3", 2).env["GQA_CELL"] != cell.env["GQA_CELL"]


def test_prepare_sets_limits_when_the_controllers_are_enabled(tmp_path):
    containment = CgroupContainment(tmp_path, controllers={"memory", "cpu"}, has_kill=True)
    cell = containment.prepare("4", 1, cpus=3, memory=2 * 2**30)
    path = tmp_path / cell.name
    assert (path / "memory.max").read_text() == str(2 * 2**30)
    assert (path / "memory.oom.group").read_text() == "1"
    assert (path / "cpu.max").read_text() == "300000 100000"


def test_prepare_without_controllers_writes_no_limit(tmp_path):
    containment = CgroupContainment(tmp_path, has_kill=True)
    cell = containment.prepare("4", 1, cpus=3, memory=2**30)
    assert list((tmp_path / cell.name).iterdir()) == []


@pytest.mark.parametrize("events, killed", [
    ("low 0\nhigh 0\nmax 4\noom 1\noom_kill 0\noom_group_kill 0\n", False),
    ("low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\noom_group_kill 1\n", True),
    ("oom_kill 12\n", True),
])
def test_oom_killed_reads_memory_events(tmp_path, events, killed):
    containment = CgroupContainment(tmp_path, has_kill=True)
    cell = containment.prepare("5", 1, cpus=None, memory=None)
    (tmp_path / cell.name / "memory.events").write_text(events)
    assert containment.oom_killed(cell) is killed


def test_oom_killed_is_false_without_memory_events(tmp_path):
    containment = CgroupContainment(tmp_path, has_kill=True)
    assert containment.oom_killed(containment.prepare("5", 1, cpus=None, memory=None)) is False
    assert containment.oom_killed(containment.cell("never", 1)) is False


def test_kill_of_an_empty_cell_writes_nothing(tmp_path):
    containment = CgroupContainment(tmp_path, has_kill=True)
    cell = containment.prepare("6", 1, cpus=None, memory=None)
    (tmp_path / cell.name / "cgroup.events").write_text("populated 0\nfrozen 0\n")
    containment.kill(cell)
    assert not (tmp_path / cell.name / "cgroup.kill").exists()


def test_kill_of_a_populated_cell_writes_cgroup_kill(tmp_path):
    containment = CgroupContainment(tmp_path, has_kill=True)
    cell = containment.prepare("6", 1, cpus=None, memory=None)
    (tmp_path / cell.name / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    containment.kill(cell)
    assert (tmp_path / cell.name / "cgroup.kill").read_text() == "1"


def test_release_removes_the_cell_and_never_raises(tmp_path):
    containment = CgroupContainment(tmp_path, has_kill=True)
    cell = containment.prepare("7", 1, cpus=None, memory=None)
    containment.release(cell)
    assert not (tmp_path / cell.name).exists()
    containment.release(cell)                      # already gone
    stuck = containment.prepare("7", 2, cpus=None, memory=None)
    (tmp_path / stuck.name / "some file").write_text("x")
    containment.release(stuck)                     # rmdir fails: no exception


@pytest.mark.parametrize("controllers, has_kill, expected", [
    (set(), True, "containment: cgroup v2 at {root} (kill); memory and cpu limits not enforced: "
                  "controllers unavailable"),
    ({"memory", "cpu"}, True, "containment: cgroup v2 at {root} (kill); memory and cpu limits enforced"),
    ({"memory"}, False, "containment: cgroup v2 at {root} (freeze and SIGKILL); memory limits enforced; "
                        "cpu limits not enforced: controllers unavailable"),
])
def test_describe_is_one_line(tmp_path, controllers, has_kill, expected):
    containment = CgroupContainment(tmp_path, controllers=controllers, has_kill=has_kill)
    assert containment.describe() == expected.format(root=tmp_path)


def test_close_removes_an_empty_root_only(tmp_path):
    root = tmp_path / "gqa-x"
    containment = CgroupContainment(root, has_kill=True)
    cell = containment.prepare("8", 1, cpus=None, memory=None)
    containment.close()                  # a cell is left (a job kept running): the root stays
    assert root.is_dir()
    containment.release(cell)
    containment.close()
    assert not root.exists()
    containment.close()                  # already gone: no exception


@pytest.mark.parametrize("mountinfo, favoured", [
    ("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,favordynmods", True),
    ("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw", False),
    ("41 31 0:38 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot", False),
    ("22 1 0:21 / /proc rw - proc proc rw", False),
])
def test_a_mount_that_favours_dynamic_changes_is_told_apart(mountinfo, favoured):
    from gqa.adapters.local.containment import favours_dynamic_changes

    assert favours_dynamic_changes(mountinfo) is favoured


def test_describe_names_the_cost_of_moves_when_the_mount_does_not_favour_them(tmp_path):
    from gqa.adapters.local.containment import CgroupContainment

    slow = CgroupContainment(tmp_path, has_kill=True, slow_moves="; a job started ... favordynmods")
    assert slow.describe().endswith("favordynmods") and "\n" not in slow.describe()
    assert "favordynmods" not in CgroupContainment(tmp_path, has_kill=True).describe()
