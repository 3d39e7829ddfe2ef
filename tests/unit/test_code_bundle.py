"""The bundle of a submitter's directory (gqa.adapters.local.code_bundle):
the same tree gives the same bytes, .gitignore decides what travels inside a
git work tree and outside one, links stay inside, and past the limit the
build stops with the figures."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile

import pytest

from gqa.adapters.local.code_bundle import build, listing
from gqa.models import gitignore
from gqa.models.errors import SpecError

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def tree(root, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


def members(bundle) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(bundle.data), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


def git(root, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})


# -- the same tree, the same bytes --------------------------------------------------------------------
def test_an_unchanged_tree_has_the_same_digest_whatever_its_times_owners_and_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    files = {"train.py": "print(1)\n", "lib/model.py": "X = 2\n", "run.sh": "#!/bin/sh\necho hi\n"}
    tree(a, files)
    tree(b, dict(reversed(files.items())))      # written in another order
    os.chmod(a / "run.sh", 0o755)
    os.chmod(b / "run.sh", 0o700)               # an exec bit either way: 0755 in the bundle
    os.utime(b / "train.py", (1_000_000, 1_000_000))
    first, second = build(a), build(b)
    assert first.digest == second.digest == f"sha256:{hashlib.sha256(first.data).hexdigest()}"
    assert first.data[4:8] == b"\0\0\0\0"       # gzip's modification time is zero
    got = members(first)
    assert list(got) == sorted(got) == ["lib/model.py", "run.sh", "train.py"]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in got.values()} == {(0, 0, 0, "", "")}
    assert (got["run.sh"].mode, got["train.py"].mode) == (0o755, 0o644)


def test_a_changed_file_changes_the_digest(tmp_path):
    tree(tmp_path, {"train.py": "print(1)\n"})
    before = build(tmp_path).digest
    tree(tmp_path, {"train.py": "print(2)\n"})
    assert build(tmp_path).digest != before


# -- what travels ----------------------------------------------------------------------------------------
@needs_git
def test_in_a_git_work_tree_git_decides_tracked_untracked_and_ignored(tmp_path):
    tree(tmp_path, {".gitignore": "data/\n*.ckpt\n", "train.py": "1", "data/big.bin": "x" * 100,
                    "model.ckpt": "w", "notes.txt": "untracked but not ignored", "sub/.gitignore": "local.cfg\n",
                    "sub/local.cfg": "secret", "sub/keep.py": "2"})
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "train.py", ".gitignore")
    git(tmp_path, "commit", "-qm", "first")
    tree(tmp_path, {"train.py": "changed, not committed"})
    bundle = build(tmp_path)
    assert sorted(members(bundle)) == [".gitignore", "notes.txt", "sub/.gitignore", "sub/keep.py", "train.py"]
    with tarfile.open(fileobj=io.BytesIO(bundle.data), mode="r:gz") as tar:
        assert tar.extractfile("train.py").read() == b"changed, not committed"   # the working tree runs


@needs_git
def test_a_subdirectory_of_a_work_tree_sends_only_itself(tmp_path):
    tree(tmp_path, {"top.py": "0", "proj/train.py": "1", "proj/out/log.txt": "2", ".gitignore": "out/\n"})
    git(tmp_path, "init", "-q")
    assert [e.path for e in listing(tmp_path / "proj")] == ["train.py"]


def test_outside_git_the_gitignore_files_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))   # no work tree above the test's
    tree(tmp_path, {".gitignore": "# comment\n/build\n*.pyc\n!keep.pyc\nlogs/\n",
                    "train.py": "1", "build/x.o": "o", "lib/build/y.py": "kept: /build is anchored",
                    "lib/a.pyc": "c", "lib/keep.pyc": "kept", "logs/1.txt": "l", ".git/HEAD": "ref",
                    "venv/.gitignore": "*\n", "venv/bin/python": "p", "data/.gitignore": "*.bin\n",
                    "data/a.bin": "b", "data/readme.md": "r"})
    assert [e.path for e in listing(tmp_path)] == [
        ".gitignore", "data/.gitignore", "data/readme.md", "lib/build/y.py", "lib/keep.pyc", "train.py"]


@pytest.mark.parametrize("pattern, path, is_dir, expected", [
    ("*.log", "a/b/c.log", False, True),
    ("/top.txt", "a/top.txt", False, False),
    ("/top.txt", "top.txt", False, True),
    ("doc/*.md", "doc/a.md", False, True),
    ("doc/*.md", "doc/x/a.md", False, False),
    ("**/cache", "a/b/cache", True, True),
    ("a/**/z", "a/z", False, True),
    ("a/**/z", "a/b/c/z", False, True),
    ("out/", "out", False, False),
    ("out/", "out", True, True),
    ("file[0-9].txt", "file7.txt", False, True),
    ("file[!0-9].txt", "file7.txt", False, False),
    ("?.py", "ab.py", False, False),
])
def test_gitignore_patterns(pattern, path, is_dir, expected):
    assert gitignore.ignored(path, is_dir, gitignore.parse(pattern)) is expected


# -- links ---------------------------------------------------------------------------------------------------
def test_a_link_inside_the_tree_travels_as_a_link(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    tree(tmp_path, {"conf/base.yaml": "a: 1"})
    os.symlink("conf/base.yaml", tmp_path / "config.yaml")
    got = members(build(tmp_path))
    assert got["config.yaml"].issym() and got["config.yaml"].linkname == "conf/base.yaml"


@pytest.mark.parametrize("target", ["/etc/passwd", "../outside", "conf/../../outside"])
def test_a_link_leading_out_of_the_tree_is_refused_with_what_to_do(tmp_path, monkeypatch, target):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    (tmp_path / "conf").mkdir()
    os.symlink(target, tmp_path / "data")
    with pytest.raises(SpecError) as refused:
        build(tmp_path)
    assert f"data is a link to {target}, outside {tmp_path}" in str(refused.value)
    assert ".gitignore" in str(refused.value) and "--no-code" in str(refused.value)


# -- the limits ----------------------------------------------------------------------------------------------
def test_past_the_size_limit_one_line_names_the_limit_the_size_and_the_largest_parts(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    tree(tmp_path, {"train.py": "print(1)\n", "data/a.bin": os.urandom(300_000), "data/b.bin": os.urandom(200_000),
                    "weights.pt": os.urandom(150_000)})
    with pytest.raises(SpecError) as refused:
        build(tmp_path, max_bytes=256 * 1024)
    message = str(refused.value)
    assert "\n" not in message
    assert f"the job's code from {tmp_path} (4 files, 634.8Ki) passes 256Ki compressed" in message
    assert "--code-max-size" in message and ".gitignore" in message and "--no-code" in message
    assert "largest: data/ 488.3Ki, data/a.bin 293.0Ki, data/b.bin 195.3Ki, weights.pt 146.5Ki" in message
    assert build(tmp_path, max_bytes=1024 * 1024).files == 4      # under a higher limit it is built


def test_past_the_file_limit_it_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    tree(tmp_path, {f"f{i}.txt": "x" for i in range(6)})
    with pytest.raises(SpecError, match="holds 6 files to send as the job's code, over the limit of 5"):
        build(tmp_path, max_files=5)
