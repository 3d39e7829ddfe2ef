"""gqa.runtime: job context, atomic checkpoints, pruning, resume, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from gqa.runtime import (
    EXIT_CODE,
    Checkpointer,
    JobContext,
    LocalStorage,
    install_sigterm_handler,
    job,
)
from gqa.runtime.checkpoint import resume_order
from gqa.runtime.storage import parse_name

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests may themselves run inside a gqa job; its variables must not leak in.
    for name in list(os.environ):
        if name.startswith("GQA_"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def restore_sigterm():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    import gqa.runtime.signals as signals

    signals._active = None
    signals._save_depth = 0
    signal.signal(signal.SIGTERM, previous)


def entries(root: Path) -> set[str]:
    """What a checkpoint folder holds, gqa's own aside: the lock `latest` moves under, and this
    process's staging room while it holds nothing but its lock (no temp file left in it)."""
    own = {".gqa-lock"}
    for path in root.glob(".tmp-*"):
        if path.is_dir() and [p.name for p in path.iterdir()] == ["lock"]:
            own.add(path.name)
    return {p.name for p in root.iterdir()} - own


def pointer(root: Path) -> str:
    return (root / "latest").read_text().strip()


# --- job context --------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, JobContext()),
        (
            {
                "GQA_JOB_ID": "41",
                "GQA_ATTEMPT": "3",
                "GQA_CHECKPOINT_DIR": "/ckpt/41",
                "GQA_RESUME_FROM": "/ckpt/41/ckpt-20",
            },
            JobContext("41", 3, Path("/ckpt/41"), None, "/ckpt/41/ckpt-20", None),
        ),
        (
            {"GQA_JOB_ID": "41_3", "GQA_ARRAY_INDEX": "3", "GQA_RESUME_FROM": ""},
            JobContext(job_id="41_3", array_index=3, resume_from=None),
        ),
        (
            {"GQA_CHECKPOINT_URI": "s3://bucket/jobs/41"},
            JobContext(checkpoint_dir=None, checkpoint_uri="s3://bucket/jobs/41"),
        ),
        (
            {"GQA_CHECKPOINT_URI": "s3://b/p", "GQA_CHECKPOINT_DIR": "/local"},
            JobContext(checkpoint_dir=Path("/local")),
        ),
        ({"GQA_ATTEMPT": " 2 ", "GQA_JOB_ID": ""}, JobContext(attempt=2)),
    ],
    ids=["outside-gqa", "full", "array-task", "aws-uri", "dir-wins", "blank-and-spaces"],
)
def test_job_context_from_env(env: dict[str, str], expected: JobContext) -> None:
    assert job(env) == expected
    assert job(env).under_gqa is (expected.job_id is not None)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GQA_ATTEMPT": "two"}, "GQA_ATTEMPT must be an integer"),
        ({"GQA_ATTEMPT": "0"}, "GQA_ATTEMPT must be 1 or more"),
        ({"GQA_ARRAY_INDEX": "x"}, "GQA_ARRAY_INDEX must be an integer"),
        ({"GQA_ARRAY_INDEX": "-1"}, "GQA_ARRAY_INDEX must be 0 or more"),
    ],
)
def test_job_context_rejects_bad_values(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        job(env)


def test_job_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GQA_JOB_ID", "7")
    monkeypatch.setenv("GQA_ATTEMPT", "2")
    assert (job().job_id, job().attempt) == ("7", 2)


# --- save, load, latest -------------------------------------------------------


def test_nothing_saved_yet(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path / "ckpts")
    assert (ckpt.latest(), ckpt.load(), ckpt.load_state()) == (None, None, None)
    assert not (tmp_path / "ckpts").exists()  # reading creates nothing


def test_save_bytes_and_load(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    first = ckpt.save(b"one", step=10)
    second = ckpt.save(b"two", step=20)
    assert (first.name, second.name) == ("ckpt-10", "ckpt-20")
    assert pointer(tmp_path) == "ckpt-20"
    assert ckpt.latest() == second
    assert ckpt.load() == b"two"
    assert entries(tmp_path) == {"ckpt-10", "ckpt-20", "latest"}  # no temp files left


def test_save_with_write_fn(tmp_path: Path) -> None:
    def write(d: Path) -> None:
        (d / "weights.bin").write_bytes(b"\x00" * 100)
        (d / "meta").mkdir()
        (d / "meta" / "info.txt").write_text("hi")

    path = Checkpointer(tmp_path).save(write, step=5)
    assert (path / "weights.bin").read_bytes() == b"\x00" * 100
    assert (path / "meta" / "info.txt").read_text() == "hi"


@pytest.mark.parametrize(
    "state",
    [
        {"step": 0},
        {"step": 12, "seed": 42, "lr": 0.001, "history": [1.5, 1.25], "name": "run-ü"},
        {"step": 3, "nested": {"a": [1, {"b": None}]}, "done": False},
    ],
)
def test_state_round_trip(tmp_path: Path, state: dict) -> None:
    ckpt = Checkpointer(tmp_path)
    path = ckpt.save_state(state)
    assert path.name == f"ckpt-{state['step']}"
    assert Checkpointer(tmp_path).load_state() == state


def test_save_state_explicit_step(tmp_path: Path) -> None:
    path = Checkpointer(tmp_path).save_state({"epoch": 2}, step=7)
    assert path.name == "ckpt-7"
    assert json.loads((path / "state.json").read_text()) == {"epoch": 2}


@pytest.mark.parametrize(
    ("state", "error"),
    [
        ({"epoch": 1}, ValueError),
        ({"step": "3"}, ValueError),
        ({"step": 1, "f": object()}, TypeError),
    ],
)
def test_save_state_rejects_without_touching_disk(tmp_path: Path, state: dict, error: type) -> None:
    ckpt = Checkpointer(tmp_path / "c")
    with pytest.raises(error):
        ckpt.save_state(state)
    assert not (tmp_path / "c").exists() or entries(tmp_path / "c") == set()


def test_same_step_twice_gets_a_new_name(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.save(b"a", step=4)
    again = ckpt.save(b"b", step=4)
    assert again.name == "ckpt-4.1"
    assert pointer(tmp_path) == "ckpt-4.1"
    assert ckpt.load() == b"b"
    assert sorted(["ckpt-4.1", "ckpt-10", "ckpt-4", "ckpt-9"], key=parse_name) == [
        "ckpt-4",
        "ckpt-4.1",
        "ckpt-9",
        "ckpt-10",
    ]


def test_negative_step_rejected(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    with pytest.raises(ValueError, match="step"):
        ckpt.save(b"x", step=-1)
    assert ckpt.latest() is None


# --- crashes mid-save ---------------------------------------------------------


def test_write_fn_that_raises_leaves_previous_checkpoint(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.save(b"good", step=1)

    def half_write(d: Path) -> None:
        (d / "data").write_bytes(b"par")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        ckpt.save(half_write, step=2)
    assert pointer(tmp_path) == "ckpt-1"
    assert ckpt.load() == b"good"
    assert entries(tmp_path) == {"ckpt-1", "latest"}


def test_crash_between_commit_and_pointer_resumes_from_the_commit(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    ckpt = Checkpointer(storage=storage)
    ckpt.save(b"good", step=1)

    def die(name: str) -> None:
        raise KeyboardInterrupt  # killed between the rename and the pointer

    storage.write_latest = die  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        ckpt.save(b"newer", step=2)
    assert pointer(tmp_path) == "ckpt-1"
    # the rename is the commit: ckpt-2 is whole, and newer than where the pointer stayed
    fresh = Checkpointer(tmp_path)
    assert fresh.latest() == tmp_path / "ckpt-2"
    assert fresh.load() == b"newer"


def test_leftovers_of_an_earlier_gqas_killed_save_are_ignored_then_swept_once_a_day_old(tmp_path: Path) -> None:
    Checkpointer(tmp_path).save(b"good", step=1)
    # What an earlier gqa killed mid-save left: a staging dir and a pointer temp, without a lock
    (tmp_path / ".tmp-deadbeef-0001").mkdir()
    (tmp_path / ".tmp-deadbeef-0001" / "data").write_bytes(b"partial")
    (tmp_path / ".tmp-deadbeef-latest-0002").write_text("ckpt-2\n")
    (tmp_path / ".tmp-cafef00d-0003").mkdir()      # a day old by its time
    day_old = time.time() - 2 * 24 * 3600
    for name in (".tmp-deadbeef-0001", ".tmp-deadbeef-latest-0002"):
        os.utime(tmp_path / name, (day_old, day_old))

    ckpt = Checkpointer(tmp_path)  # the next attempt
    assert ckpt.load() == b"good"
    assert ckpt.storage.names() == ["ckpt-1"]
    ckpt.save(b"next", step=2)
    # the young one may be an earlier gqa's save in progress: kept until it is a day old
    assert entries(tmp_path) == {"ckpt-1", "ckpt-2", "latest", ".tmp-cafef00d-0003"}


CONCURRENT_SAVER = textwrap.dedent(
    """
    import sys, time
    from gqa.runtime import Checkpointer

    def slow(d):
        for i in range(int(sys.argv[3])):
            (d / f"part{i}").write_bytes(b"x" * 1000)
            time.sleep(0.002)

    ckpt = Checkpointer(sys.argv[1], keep=100)
    for step in range(int(sys.argv[2]), int(sys.argv[2]) + 5):
        ckpt.save(slow, step=step)
    """
)


def test_two_processes_saving_at_once_never_cut_each_others_saves(tmp_path: Path) -> None:
    # a trainer saving 100-file checkpoints while short-lived eval processes each save once: a
    # process's first save once swept every other process's staging, live ones included, and
    # committed checkpoints with files missing (0 of 100, 39 of 100)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    trainer = subprocess.Popen([sys.executable, "-c", CONCURRENT_SAVER, str(tmp_path), "100", "100"],
                               env=env, stderr=subprocess.PIPE, text=True)
    hooks = [subprocess.run([sys.executable, "-c", CONCURRENT_SAVER, str(tmp_path), str(start), "1"],
                            env=env, capture_output=True, text=True, timeout=60) for start in range(0, 40, 5)]
    _, err = trainer.communicate(timeout=120)
    assert trainer.returncode == 0, err
    assert [h.returncode for h in hooks] == [0] * len(hooks), [h.stderr for h in hooks]
    names = Checkpointer(tmp_path).storage.names()
    assert len(names) == 5 + 5 * len(hooks)
    for name in names:
        step = parse_name(name)[0]  # type: ignore[index]
        assert len(list((tmp_path / name).iterdir())) == (100 if step >= 100 else 1), name
    assert pointer(tmp_path) == "ckpt-104"


def test_a_dead_processs_staging_is_swept_and_a_live_ones_is_not(tmp_path: Path) -> None:
    from gqa.runtime import staging

    live = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from gqa.runtime import staging; "
         "r = staging.room(Path(sys.argv[1])); (r / 'part').write_bytes(b'x'); print(r.name, flush=True); "
         "sys.stdin.read()", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        live_room = live.stdout.readline().strip()  # type: ignore[union-attr]
        dead = subprocess.run(
            [sys.executable, "-c", "import sys; from pathlib import Path; from gqa.runtime import staging; "
             "r = staging.room(Path(sys.argv[1])); (r / 'part').write_bytes(b'x'); print(r.name)", str(tmp_path)],
            env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, check=True)
        assert staging.sweep(tmp_path) == [dead.stdout.strip()]
        assert (tmp_path / live_room / "part").exists()
    finally:
        live.communicate("", timeout=10)
    assert staging.sweep(tmp_path) == [live_room]          # once it has gone


def test_a_room_killed_before_it_was_named_is_swept_once_a_day_old(tmp_path: Path) -> None:
    # made, then killed between its lock and its rename to .tmp-: never a live save's once a day old
    from gqa.runtime import staging

    young, old = tmp_path / ".gqa-new-0badc0de-0001", tmp_path / ".gqa-new-0badc0de-0002"
    for room in (young, old):
        room.mkdir()
        (room / staging.LOCK).touch()
    day_old = time.time() - staging.UNLOCKED_AGE - 60
    os.utime(old, (day_old, day_old))
    assert staging.sweep(tmp_path) == [old.name]
    assert young.exists()


def test_two_processes_saving_one_step_at_once_each_get_a_name(tmp_path: Path, monkeypatch) -> None:
    # the name looked free to both: the one whose rename lost takes the next serial (it raised ENOTEMPTY)
    storage = LocalStorage(tmp_path)
    first, second = storage.stage(), storage.stage()
    (first / "data").write_bytes(b"a")
    (second / "data").write_bytes(b"b")
    real_lexists = os.path.lexists
    monkeypatch.setattr(os.path, "lexists", lambda p: False if str(p).endswith("ckpt-7") else real_lexists(p))
    assert storage.commit(first, 7) == "ckpt-7"
    assert storage.commit(second, 7) == "ckpt-7.1"
    assert (tmp_path / "ckpt-7" / "data").read_bytes() == b"a"


def test_latest_moves_under_a_lock_so_a_slower_older_save_never_moves_it_back(tmp_path: Path) -> None:
    # two processes: one saved step 145 and read the folder; the other committed 146 and moved
    # `latest` meanwhile. The slower one's move, chosen under the lock, sees 146
    ckpt = Checkpointer(tmp_path)
    ckpt.save(b"a", step=145)
    storage = LocalStorage(tmp_path)
    chosen = []

    def choose(current: str | None, names: list[str]) -> str | None:
        chosen.append(max(names, key=parse_name))
        return chosen[-1] if chosen[-1] != current else None

    other = None
    real_names = storage.names

    def names_then_another_save() -> list[str]:
        nonlocal other
        seen = real_names()
        if other is None:   # another process saves 146 while this one holds the lock: it waits
            other = subprocess.Popen(
                [sys.executable, "-c", "import sys; from gqa.runtime import Checkpointer; "
                 "Checkpointer(sys.argv[1]).save(b'b', step=146)", str(tmp_path)],
                env={**os.environ, "PYTHONPATH": str(REPO)})
            time.sleep(1.0)
            assert other.poll() is None, "the other save did not wait for the lock"
        return seen

    storage.names = names_then_another_save  # type: ignore[method-assign]
    try:
        storage.write_latest("ckpt-145") if pointer(tmp_path) != "ckpt-145" else None
        assert storage.update_latest(choose) is None or pointer(tmp_path) == "ckpt-145"
    finally:
        assert other is not None and other.wait(timeout=30) == 0
    assert pointer(tmp_path) == "ckpt-146"   # moved by the other once this one let go, never back


@pytest.mark.parametrize("step", [True, 2.5, 1e20, "3", None])
def test_a_step_that_is_not_a_whole_number_is_refused_before_anything_is_written(tmp_path: Path, step) -> None:
    with pytest.raises(TypeError, match="step must be a whole number"):
        Checkpointer(tmp_path).save(b"x", step=step)
    assert not tmp_path.exists() or entries(tmp_path) == set()


@pytest.mark.parametrize("state", [{"step": 2, 1: "a"}, {"step": 2, "layers": {0: 1.0}}, {"step": 2, "l": [{None: 1}]}])
def test_a_state_with_keys_json_would_not_give_back_is_refused_saying_which(tmp_path: Path, state) -> None:
    with pytest.raises(TypeError, match="state keys must be strings"):
        Checkpointer(tmp_path).save_state(state)
    assert not tmp_path.exists() or entries(tmp_path) == set()


def test_an_empty_checkpoint_folder_is_passed_over(tmp_path: Path) -> None:
    Checkpointer(tmp_path).save_state({"step": 20})
    (tmp_path / "ckpt-50").mkdir()                         # named as one, holding nothing
    assert Checkpointer(tmp_path).load_state() == {"step": 20}
    with pytest.warns(RuntimeWarning, match="not a checkpoint"):
        assert Checkpointer(tmp_path, resume_from=str(tmp_path / "ckpt-50")).load_state() == {"step": 20}


@pytest.mark.parametrize("folder", [".tmp-deadbeef-0001", "ckpt-3-partial", "outputs"])
def test_resume_from_a_non_checkpoint_folder_is_refused(tmp_path: Path, folder: str) -> None:
    (tmp_path / folder).mkdir()
    with pytest.warns(RuntimeWarning, match="not a checkpoint"):
        assert Checkpointer(tmp_path, resume_from=str(tmp_path / folder)).latest() is None


SAVER = textwrap.dedent(
    """
    import hashlib, sys
    from gqa.runtime import Checkpointer
    ckpt = Checkpointer(sys.argv[1], keep=2)
    step = 0
    while True:
        step += 1
        body = bytes([step % 251]) * 2_000_000
        ckpt.save(hashlib.sha256(body).digest() + body, step=step)
    """
)


@pytest.mark.parametrize("delay", [0.15, 0.3, 0.45])
def test_sigkill_at_any_moment_leaves_a_complete_latest(tmp_path: Path, delay: float) -> None:
    import hashlib

    proc = subprocess.Popen(
        [sys.executable, "-c", SAVER, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "latest").exists():
            assert proc.poll() is None, "saver died"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(delay)
    finally:
        proc.kill()
        proc.wait()

    ckpt = Checkpointer(tmp_path)
    data = ckpt.load()
    assert data is not None
    assert hashlib.sha256(data[32:]).digest() == data[:32]
    step = parse_name(ckpt.latest().name)[0]  # type: ignore[union-attr]
    assert data[32] == step % 251
    for name in ckpt.storage.names():  # every committed checkpoint is whole
        blob = (tmp_path / name / "data").read_bytes()
        assert hashlib.sha256(blob[32:]).digest() == blob[:32]


# --- pruning ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keep", "saves", "left"),
    [
        (1, [1, 2, 3], {"ckpt-3"}),
        (2, [1, 2, 3, 4], {"ckpt-3", "ckpt-4"}),
        (3, [5, 10, 15, 20, 25], {"ckpt-15", "ckpt-20", "ckpt-25"}),
        (3, [1, 2], {"ckpt-1", "ckpt-2"}),
        # Newest by step, plus the save just made, however old (2 outlives its own save's prune).
        (2, [10, 9, 100, 2], {"ckpt-100", "ckpt-10", "ckpt-2"}),
    ],
)
@pytest.mark.filterwarnings("ignore:saved ckpt-:RuntimeWarning")
def test_prune_keeps_newest(tmp_path: Path, keep: int, saves: list[int], left: set[str]) -> None:
    ckpt = Checkpointer(tmp_path, keep=keep)
    for step in saves:
        ckpt.save(b"x", step=step)
    assert entries(tmp_path) - {"latest"} == left
    assert pointer(tmp_path) == f"ckpt-{max(saves)}"


def test_prune_never_deletes_latest(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, keep=2)
    for step in range(1, 6):
        ckpt.save(b"x", step=step)
    ckpt.storage.write_latest("ckpt-4")  # e.g. a newer one was found bad
    for name in ("ckpt-1", "ckpt-2"):
        (tmp_path / name).mkdir()
    assert sorted(ckpt.prune()) == ["ckpt-1", "ckpt-2"]
    ckpt.storage.write_latest("ckpt-1")
    (tmp_path / "ckpt-1").mkdir()
    assert ckpt.prune() == []
    assert entries(tmp_path) == {"ckpt-1", "ckpt-4", "ckpt-5", "latest"}


def test_keep_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep"):
        Checkpointer(tmp_path, keep=0)


# --- which checkpoint is latest -------------------------------------------------


@pytest.mark.parametrize(
    ("names", "pointer_name", "resume_from", "order"),
    [
        ([], None, None, []),
        (["ckpt-9", "ckpt-10.1", "ckpt-10"], "ckpt-10.1", None, ["ckpt-10.1", "ckpt-10", "ckpt-9"]),
        # the attempt started at 100; 200 and 300 were saved since, by any process of it
        (["ckpt-100", "ckpt-300", "ckpt-200"], "ckpt-300", "/c/ckpt-100",
         ["ckpt-300", "ckpt-200", "ckpt-100", "/c/ckpt-100"]),
        # the attempt's first process on a fresh local folder, the checkpoint kept elsewhere (S3)
        ([], None, "s3://b/jobs/7/ckpt-100", ["s3://b/jobs/7/ckpt-100"]),
        (["ckpt-5"], "ckpt-5", "s3://b/jobs/7/ckpt-100/", ["s3://b/jobs/7/ckpt-100/", "ckpt-5"]),
        (["ckpt-200"], "ckpt-200", "s3://b/jobs/7/ckpt-100", ["ckpt-200", "s3://b/jobs/7/ckpt-100"]),
        # a pointer left behind (a crash after the commit, or one moved back by an earlier gqa)
        (["ckpt-18.1", "ckpt-55"], "ckpt-18.1", "/c/ckpt-15", ["ckpt-55", "ckpt-18.1", "/c/ckpt-15"]),
        # a pointer to a checkpoint gone since: tried, then passed over by latest()
        (["ckpt-1", "ckpt-2"], "ckpt-77", None, ["ckpt-77", "ckpt-2", "ckpt-1"]),
        # the same step in two places: the storage's own copy first; a name given twice once
        (["ckpt-3"], "ckpt-3", "/elsewhere/ckpt-3", ["ckpt-3", "/elsewhere/ckpt-3"]),
        (["ckpt-4", "ckpt-4.1"], "ckpt-4.1", "ckpt-4", ["ckpt-4.1", "ckpt-4"]),
        # what names no checkpoint is never a candidate
        (["ckpt-1"], "../../etc", "/c/outputs", ["ckpt-1"]),
        ([], "", ".tmp-dead-01", []),
    ],
    ids=["empty", "by-step-then-serial", "saved-since-in-the-attempt", "fresh-folder",
         "fresh-folder-older-leftover", "fresh-folder-saved-since", "pointer-behind", "dangling-pointer",
         "tie", "same-name", "not-checkpoints", "nothing-valid"],
)
def test_resume_order(names: list[str], pointer_name: str | None, resume_from: str | None,
                      order: list[str]) -> None:
    assert resume_order(names, pointer_name, resume_from) == order


# What a folder holds ({"ckpt-N": data}, `latest`, staging leftovers), where
# resume_from points ({dir}: the job's folder, {other}: a copy elsewhere), and
# what latest() loads. Every process of an attempt sees the same folder and
# resume_from, so this is what each of them resumes from.
@pytest.mark.parametrize(
    ("saved", "pointer_name", "leftovers", "resume_from", "loads", "warns"),
    [
        ({"ckpt-100": b"100"}, "ckpt-100", [], "{dir}/ckpt-100", b"100", False),
        ({"ckpt-100": b"100", "ckpt-200": b"200", "ckpt-300": b"300"}, "ckpt-300", [], "{dir}/ckpt-100",
         b"300", False),
        ({}, None, [], "{other}/ckpt-100", b"other 100", False),
        ({"ckpt-200": b"200"}, "ckpt-200", [], "{other}/ckpt-100", b"200", False),
        # a save killed half way, newer than anything committed, is never chosen
        ({"ckpt-100": b"100"}, "ckpt-100", [".tmp-deadbeef-0001", ".tmp-deadbeef-0002"], "{dir}/ckpt-100",
         b"100", False),
        ({"ckpt-18.1": b"18", "ckpt-55": b"55"}, "ckpt-18.1", [], "{dir}/ckpt-15", b"55", False),
        ({"ckpt-1": b"1", "ckpt-2": b"2"}, "ckpt-77", [], None, b"2", False),
        # pruned since the attempt started: superseded, not an error
        ({"ckpt-300": b"300"}, "ckpt-300", [], "{dir}/ckpt-100", b"300", False),
        # named but not there, and nothing newer: said, then the newest there is
        ({"ckpt-3": b"3"}, "ckpt-3", [], "/no/such/ckpt-30", b"3", True),
        ({}, None, [], "{other}/ckpt-9", None, True),
        ({"ckpt-1": b"1"}, "ckpt-1", [], "", b"1", False),   # as the queue sets it without a checkpoint
    ],
    ids=["attempt-start", "saved-since", "fresh-folder", "fresh-folder-saved-since", "half-written",
         "pointer-behind", "dangling-pointer", "resume-pruned", "resume-missing", "nothing", "empty-resume"],
)
def test_latest_loads_the_newest_complete_checkpoint(
    tmp_path: Path, saved: dict[str, bytes], pointer_name: str | None, leftovers: list[str],
    resume_from: str | None, loads: bytes | None, warns: bool,
) -> None:
    folder, other = tmp_path / "job", tmp_path / "other"
    folder.mkdir()
    (other / "ckpt-100").mkdir(parents=True)
    (other / "ckpt-100" / "data").write_bytes(b"other 100")
    for name, data in saved.items():
        (folder / name).mkdir()
        (folder / name / "data").write_bytes(data)
    for name in leftovers:
        (folder / name).mkdir()
        (folder / name / "data").write_bytes(b"partial")
    if pointer_name is not None:
        (folder / "latest").write_text(pointer_name + "\n")
    resume = None if resume_from is None else resume_from.format(dir=folder, other=other)
    ckpt = Checkpointer(folder, resume_from=resume)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ckpt.load() == loads
    assert [str(w.message) for w in caught] == ([f"ignoring resume_from {resume!r}: not a checkpoint"]
                                                if warns else [])


def test_every_checkpointer_of_an_attempt_resumes_from_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GQA_RESUME_FROM is set once per attempt; a checkpoint saved since, by this
    process or another (a restarted worker, the next stage of the script), is newer."""
    Checkpointer(tmp_path, keep=100).save_state({"step": 100})
    monkeypatch.setenv("GQA_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("GQA_RESUME_FROM", str(tmp_path / "ckpt-100"))

    first = Checkpointer(keep=100)
    assert first.load_state() == {"step": 100}
    first.save_state({"step": 200})
    first.save_state({"step": 300})

    second = Checkpointer(keep=100)
    assert second.latest() == tmp_path / "ckpt-300"
    assert second.load_state() == {"step": 300}
    second.save_state({"step": 301})
    assert first.load_state() == {"step": 301}
    assert pointer(tmp_path) == "ckpt-301"


def test_env_resume_from_and_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = Checkpointer(tmp_path / "fetched").save(b"ten", step=10)
    monkeypatch.setenv("GQA_CHECKPOINT_DIR", str(tmp_path / "job"))
    monkeypatch.setenv("GQA_RESUME_FROM", str(elsewhere))

    assert Checkpointer().load() == b"ten"
    assert Checkpointer(tmp_path / "job").load() is None  # explicit dir: env resume ignored


@pytest.mark.parametrize("resume_from", ["", "/no/such/ckpt-30", "ckpt-99"])
def test_invalid_resume_from_falls_back_to_pointer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resume_from: str
) -> None:
    Checkpointer(tmp_path).save(b"good", step=3)
    monkeypatch.setenv("GQA_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("GQA_RESUME_FROM", resume_from)
    ckpt = Checkpointer()
    if resume_from:
        with pytest.warns(RuntimeWarning, match="not a checkpoint"):
            assert ckpt.load() == b"good"
    else:
        assert ckpt.load() == b"good"


# --- `latest` never moves back; rewind() goes back on purpose --------------------


def test_an_older_save_never_moves_latest_back(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, keep=2)
    for step in (15, 55):
        ckpt.save(b"%d" % step, step=step)
    rewound = Checkpointer(tmp_path, keep=2, resume_from=str(tmp_path / "ckpt-15"))
    with pytest.warns(RuntimeWarning, match=r"saved ckpt-18, older than ckpt-55: `latest` stays on ckpt-55"):
        older = rewound.save(b"18", step=18)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once, not at every save
        rewound.save(b"19", step=19)

    assert older == tmp_path / "ckpt-18"
    assert pointer(tmp_path) == "ckpt-55"
    assert Checkpointer(tmp_path).load() == b"55"
    assert entries(tmp_path) == {"ckpt-55", "ckpt-19", "latest"}  # keep=2: 15 and 18 pruned
    ckpt.save(b"56", step=56)
    assert pointer(tmp_path) == "ckpt-56"


@pytest.mark.filterwarnings("ignore:saved ckpt-:RuntimeWarning")
def test_an_older_save_repairs_a_pointer_left_behind(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, keep=100)
    for step in (15, 18, 55):
        ckpt.save(b"%d" % step, step=step)
    ckpt.storage.write_latest("ckpt-18")  # as an earlier gqa left it
    ckpt.save(b"16", step=16)
    assert pointer(tmp_path) == "ckpt-55"


def test_rewind_goes_back_for_every_later_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = Checkpointer(tmp_path, keep=10)
    for step in (10, 20, 20, 30, 40):
        writer.save(b"%d" % step, step=step)
    monkeypatch.setenv("GQA_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("GQA_RESUME_FROM", str(tmp_path / "ckpt-40"))
    ckpt = Checkpointer(keep=10)
    assert ckpt.load() == b"40"

    assert ckpt.rewind(20) == ["ckpt-30", "ckpt-40"]

    assert entries(tmp_path) == {"ckpt-10", "ckpt-20", "ckpt-20.1", "latest"}
    assert pointer(tmp_path) == "ckpt-20.1"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the attempt's start, gone on purpose, is not looked for
        assert ckpt.load() == b"20"
    ckpt.save(b"21", step=21)
    assert pointer(tmp_path) == "ckpt-21"
    assert Checkpointer(tmp_path).load() == b"21"
    with pytest.raises(ValueError, match="step"):
        ckpt.rewind(-1)


def test_a_rewind_killed_part_way_resumes_where_the_job_was(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    ckpt = Checkpointer(storage=storage, keep=10)
    for step in (10, 20, 30, 40):
        ckpt.save(b"%d" % step, step=step)
    deleted: list[str] = []
    delete = storage.delete

    def delete_then_die(name: str) -> None:
        if deleted:
            raise KeyboardInterrupt  # killed after the first delete
        deleted.append(name)
        delete(name)

    storage.delete = delete_then_die  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        ckpt.rewind(10)
    assert deleted == ["ckpt-20"]  # oldest first: the newest goes last
    assert Checkpointer(tmp_path).load() == b"40"


@pytest.mark.parametrize("pointer_text", [None, "ckpt-77", ""])
def test_missing_or_dangling_pointer_uses_newest(tmp_path: Path, pointer_text: str | None) -> None:
    writer = Checkpointer(tmp_path)
    writer.save(b"a", step=1)
    writer.save(b"b", step=2)
    if pointer_text is None:
        (tmp_path / "latest").unlink()
    else:
        (tmp_path / "latest").write_text(pointer_text)
    assert Checkpointer(tmp_path).load() == b"b"


def test_default_dir_outside_gqa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Checkpointer().save(b"x", step=1)
    assert pointer(tmp_path / "checkpoints") == "ckpt-1"


def test_s3_uri_selects_s3_storage_without_importing_boto3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GQA_CHECKPOINT_URI", "s3://bucket/jobs/1/")
    monkeypatch.setitem(sys.modules, "boto3", None)  # any import of boto3 now fails
    storage = Checkpointer().storage
    assert repr(storage) == "S3Storage('s3://bucket/jobs/1/')"


def test_other_uri_schemes_are_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GQA_CHECKPOINT_URI", "gs://bucket/jobs/1")
    with pytest.raises(NotImplementedError, match="gs://"):
        Checkpointer()


def test_dir_and_storage_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        Checkpointer(tmp_path, storage=LocalStorage(tmp_path))


# --- SIGTERM ------------------------------------------------------------------


def test_flag_mode_sets_requested_and_exit_is_143(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    preempt = ckpt.on_preempt()
    assert (preempt.requested, ckpt.preempted) == (False, False)
    os.kill(os.getpid(), signal.SIGTERM)
    assert (preempt.requested, ckpt.preempted) == (True, True)
    with pytest.raises(SystemExit) as exited:
        preempt.exit()
    assert exited.value.code == EXIT_CODE == 143


def test_callback_saves_then_exits_143(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.on_preempt(lambda: ckpt.save_state({"step": 9}))
    with pytest.raises(SystemExit) as exited:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)  # the handler runs before this returns
    assert exited.value.code == 143
    assert Checkpointer(tmp_path).load_state() == {"step": 9}


def test_callback_failure_still_exits_143(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    def broken() -> None:
        raise RuntimeError("cannot save")

    install_sigterm_handler(broken)
    with pytest.raises(SystemExit) as exited:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert exited.value.code == 143
    assert "cannot save" in capsys.readouterr().err


@pytest.mark.parametrize("with_callback", [False, True])
def test_sigterm_during_save_does_not_cut_it_short(tmp_path: Path, with_callback: bool) -> None:
    ckpt = Checkpointer(tmp_path)
    calls: list[str] = []
    preempt = ckpt.on_preempt((lambda: calls.append("callback")) if with_callback else None)

    def write(d: Path) -> None:
        (d / "data").write_bytes(b"first half ")
        os.kill(os.getpid(), signal.SIGTERM)
        calls.append("still writing")
        with open(d / "data", "ab") as f:
            f.write(b"second half")

    if with_callback:
        with pytest.raises(SystemExit) as exited:
            ckpt.save(write, step=1)
        assert exited.value.code == 143
    else:
        ckpt.save(write, step=1)
    assert calls == ["still writing"]  # the callback never ran: the save just did its job
    assert preempt.requested
    assert Checkpointer(tmp_path).load() == b"first half second half"


def test_sigterm_during_a_failing_save_runs_callback(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.on_preempt(lambda: ckpt.save(b"fallback", step=2))

    def write(d: Path) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        raise OSError("disk hiccup")

    with pytest.raises(SystemExit) as exited:
        ckpt.save(write, step=1)
    assert exited.value.code == 143
    assert Checkpointer(tmp_path).load() == b"fallback"


def test_uninstall_restores_previous_handler() -> None:
    seen: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    with install_sigterm_handler() as preempt:
        os.kill(os.getpid(), signal.SIGTERM)
        assert preempt.requested and seen == []
    os.kill(os.getpid(), signal.SIGTERM)
    assert seen == [signal.SIGTERM]


def test_second_install_replaces_first() -> None:
    first = install_sigterm_handler()
    second = install_sigterm_handler()
    os.kill(os.getpid(), signal.SIGTERM)
    assert (first.requested, second.requested) == (False, True)


# --- packaging ----------------------------------------------------------------


def test_import_uses_only_the_standard_library() -> None:
    code = textwrap.dedent(
        """
        import sys
        before = set(sys.modules)
        import gqa.runtime, gqa.runtime.torch
        new = {m.split(".")[0] for m in set(sys.modules) - before}
        print(sorted(new - set(sys.stdlib_module_names) - {"gqa"}))
        print("torch" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    assert out[:2] == ["[]", "False"]


def test_runtime_imports_nothing_else_from_gqa() -> None:
    for source in (REPO / "gqa" / "runtime").glob("*.py"):
        for line in source.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import gqa", "from gqa")):
                assert stripped.startswith(("import gqa.runtime", "from gqa.runtime")), (
                    f"{source.name}: {stripped}"
                )


# --- PyTorch helpers --------------------------------------------------------------


def test_torch_training_state_round_trip(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from gqa.runtime.torch import load_training_state, save_training_state

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    ckpt = Checkpointer(tmp_path)
    assert load_training_state(ckpt, model, optimizer) is None
    path = save_training_state(ckpt, model, optimizer, 7, epoch=1, best=0.5)
    assert path.name == "ckpt-7"

    fresh = torch.nn.Linear(4, 2)
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    extra = load_training_state(Checkpointer(tmp_path), fresh, fresh_opt)
    assert extra == {"step": 7, "epoch": 1, "best": 0.5}
    for a, b in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b)
    assert fresh_opt.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()
