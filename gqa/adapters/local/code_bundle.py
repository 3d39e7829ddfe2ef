"""The submitter's directory as one bundle: the files git would commit, in a
tar.gz whose bytes depend only on their names, contents, exec bits and links,
so an unchanged tree always has the same SHA-256 (its name on S3).

What goes in:
- inside a git work tree, `git ls-files --cached --others --exclude-standard`
  under the directory: tracked files as they are on disk now, and untracked
  ones that .gitignore (and .git/info/exclude, core.excludesFile) does not
  exclude; submodules the same way, in their own repository;
- elsewhere, every file but those the .gitignore files in the directory
  exclude (gqa.models.gitignore says which patterns are read);
- never `.git`; links as links when they lead to a place inside the
  directory; a link leading out of it, or an absolute one, is refused, since
  the job's copy would not hold its target.

The archive: names sorted, mtime, uid and gid zero, no user or group names,
modes 0755 (any exec bit) or 0644, gzip without a name or time. Past
`max_bytes` compressed, or MAX_FILES files, the build stops with one line
naming the limit, the size and the largest parts, and how to leave them out."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ...models.code import DEFAULT_MAX_BYTES, MAX_FILES
from ...models.errors import SpecError
from ...models.gitignore import Rule, ignored, parse
from ...models.units import format_size

SHOWN_LARGEST = 4


@dataclass(frozen=True)
class Entry:
    path: str                 # relative, '/'-separated
    size: int                 # bytes on disk (0 for a link)
    executable: bool = False
    link: str | None = None   # a link's target, as written


@dataclass(frozen=True)
class Bundle:
    directory: str
    digest: str               # sha256:<hex>
    data: bytes
    files: int
    unpacked: int             # the files' bytes before compression

    @property
    def size(self) -> int:
        return len(self.data)


class _TooLarge(Exception):
    pass


class _Counted(io.RawIOBase):
    """Where the gzip stream goes: kept, hashed and stopped past the limit."""

    def __init__(self, limit: int):
        self.buffer, self.limit, self.sha = io.BytesIO(), limit, hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        data = bytes(data)
        if self.buffer.tell() + len(data) > self.limit:
            raise _TooLarge
        self.sha.update(data)
        return self.buffer.write(data)


def build(directory: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
          max_files: int = MAX_FILES) -> Bundle:
    """The bundle of `directory`; SpecError when it cannot or should not be made."""
    root = Path(directory)
    if not root.is_dir():
        raise SpecError(f"the job's code directory {root} is not a directory")
    entries = listing(root)
    total = sum(e.size for e in entries)
    if len(entries) > max_files:
        raise SpecError(f"{root} holds {len(entries):,} files to send as the job's code, over the limit of "
                        f"{max_files:,}; {_advice(entries)}")
    out = _Counted(max_bytes)
    try:
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as zipped, \
                tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for entry in entries:
                _add(tar, root, entry)
    except _TooLarge:
        raise SpecError(f"the job's code from {root} ({len(entries):,} files, {format_size(total)}) passes "
                        f"{format_size(max_bytes)} compressed, the limit (--code-max-size); "
                        f"{_advice(entries)}") from None
    data = out.buffer.getvalue()
    return Bundle(str(root), f"sha256:{out.sha.hexdigest()}", data, len(entries), total)


def listing(root: Path) -> list[Entry]:
    """What the bundle of `root` holds, sorted by path."""
    paths = _git_paths(root)
    if paths is None:
        paths = _walk(root)
    entries = []
    for rel in sorted(set(paths)):
        if ".git" in rel.split("/"):
            continue
        try:
            info = os.lstat(root / rel)
        except FileNotFoundError:
            continue   # tracked but deleted: the working tree is what runs
        if stat.S_ISLNK(info.st_mode):
            entries.append(Entry(rel, 0, link=_inside_link(root, rel)))
        elif stat.S_ISREG(info.st_mode):
            entries.append(Entry(rel, info.st_size, bool(info.st_mode & 0o111)))
        # anything else (a socket, a fifo) is not code
    return entries


def _git_paths(root: Path) -> list[str] | None:
    """The files git would commit under `root`, relative to it; None outside a work tree (or without git)."""
    try:
        inside = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True)
    except FileNotFoundError:     # no git here: the .gitignore files are read instead
        return None
    if listed.returncode != 0:
        raise SpecError(f"git could not list the files of {root} (exit {listed.returncode}): "
                        f"{listed.stderr.decode(errors='replace').strip()[:200]}")
    out = []
    for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if not name:
            continue
        path = root / name
        if path.is_dir() and not path.is_symlink():    # a submodule: its own repository's files
            out += [f"{name}/{inner}" for inner in _git_paths(path) or []]
        else:
            out.append(name)
    return out


def _walk(root: Path) -> list[str]:
    out: list[str] = []
    rules: dict[str, list[Rule]] = {}
    for here, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(here, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir
        inherited = rules.get(rel_dir.rpartition("/")[0] if "/" in rel_dir else "", []) if rel_dir else []
        mine = list(inherited)
        ignore_file = Path(here) / ".gitignore"
        if ignore_file.is_file():
            mine += parse(ignore_file.read_text(errors="replace"), rel_dir)
        rules[rel_dir] = mine

        prefix = f"{rel_dir}/" if rel_dir else ""
        kept = []
        for name in sorted(dirs):
            path = prefix + name
            if name == ".git" or ignored(path, True, mine):
                continue
            if os.path.islink(os.path.join(here, name)):
                out.append(path)      # a link to a directory is kept as a link, not followed
            else:
                kept.append(name)
        dirs[:] = kept
        out += [prefix + name for name in files if not ignored(prefix + name, False, mine)]
    return out


def _inside_link(root: Path, rel: str) -> str:
    target = os.readlink(root / rel)
    resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    if os.path.isabs(target) or resolved == ".." or resolved.startswith("../"):
        raise SpecError(f"{rel} is a link to {target}, outside {root}: the job's copy of the directory would "
                        f"not hold it; list {rel} in .gitignore (and have the job read its data from S3), make it "
                        f"a relative link inside the directory, or submit with --no-code")
    return target


def _add(tar: tarfile.TarFile, root: Path, entry: Entry) -> None:
    info = tarfile.TarInfo(entry.path)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    if entry.link is not None:
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.link, 0o777
        tar.addfile(info)
        return
    info.mode = 0o755 if entry.executable else 0o644
    with open(root / entry.path, "rb") as source:
        size = os.fstat(source.fileno()).st_size
        if size != entry.size:
            raise SpecError(f"{entry.path} changed while the job's code was packed; submit again")
        info.size = size
        tar.addfile(info, source)


def _advice(entries: list[Entry]) -> str:
    """The largest files and top-level directories, and how to leave them out."""
    by_dir: dict[str, int] = {}
    for e in entries:
        if "/" in e.path:
            top = e.path.split("/", 1)[0] + "/"
            by_dir[top] = by_dir.get(top, 0) + e.size
    parts = sorted([(size, name) for name, size in by_dir.items()] + [(e.size, e.path) for e in entries],
                   reverse=True)[:SHOWN_LARGEST]
    largest = ", ".join(f"{name} {format_size(size)}" for size, name in parts)
    return (f"largest: {largest}; list what the job does not need in .gitignore, raise --code-max-size, "
            f"or submit with --no-code and an image that holds the code")
