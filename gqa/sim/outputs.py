"""The files a replay writes besides its table (`gqa simulate --plot`, `--report`): each checked by
writing where it will go before the replays (minutes on a whole trace), then written under a
temporary name and put in place with the others once all are written. Whatever fails, the run
leaves nothing of its own behind: no half-written file, no folder it made."""

import os
import shutil
import tempfile
from pathlib import Path

STAGED = ".gqa-"   # how the temporary names begin: hidden, and told apart from a user's files


def cannot_write(folder: Path, name: str) -> OSError | None:
    """Why a file named `name` cannot be written in `folder` (an existing folder), or None: a
    temporary file of a name as long as the writer's is made there and removed."""
    try:
        handle, probe = tempfile.mkstemp(prefix=f"{STAGED}{name}.", dir=folder)
    except OSError as exc:
        return exc
    os.close(handle)
    os.unlink(probe)
    return None


def cannot_make(folder: Path) -> OSError | None:
    """Why `folder` cannot be made, or be written in where it exists, or None: the folders missing
    are made and removed again, the deepest first."""
    made: list[Path] = []
    try:
        if folder.is_dir():
            return cannot_write(folder, "report")
        made = [p for p in (folder, *folder.parents) if not p.exists()]
        folder.mkdir(parents=True)
    except OSError as exc:
        return exc
    finally:
        for path in made:   # the deepest first
            try:
                path.rmdir()
            except OSError:
                pass
    return None


def _umask() -> int:
    """The process's umask (read by setting it, and set back at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


class Outputs:
    """One run's files, staged beside where they go (`file`, `folder`), then all put in place
    (`commit`), or all removed with the folders the run made (`discard`)."""

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path]] = []   # (temporary, final), in the order staged
        self._made: list[Path] = []                  # folders this run made, the outermost first
        self._placed: list[Path] = []                # what the commit put in place so far

    def file(self, final: str | os.PathLike[str]) -> Path:
        """A temporary name in `final`'s folder to write `final`'s content to."""
        target = Path(final)
        handle, staged = tempfile.mkstemp(prefix=f"{STAGED}{target.name}.", dir=target.parent)
        self._staged.append((Path(staged), target))
        try:   # mkstemp's 0600 would be kept by the rename: the file gets what the umask gives a new one
            os.fchmod(handle, 0o666 & ~_umask())
        finally:
            os.close(handle)
        return Path(staged)

    def folder(self, final: str | os.PathLike[str]) -> Path:
        """A temporary folder beside `final` to write `final`'s files in; the folders above it are made."""
        target = Path(final)
        for path in [p for p in reversed((target.parent, *target.parent.parents)) if not p.exists()]:
            path.mkdir()
            self._made.append(path)
        staged = Path(tempfile.mkdtemp(prefix=f"{STAGED}{target.name}.", dir=target.parent))
        self._staged.append((staged, target))
        staged.chmod(0o777 & ~_umask())   # mkdtemp's 0700, kept by the rename, as the umask gives a new folder
        return staged

    def final_name(self, path: str | os.PathLike[str] | None) -> str | None:
        """The name a temporary path stands for (a file in a staged folder too), for a message."""
        if path is None:
            return None
        text = os.fsdecode(path)
        for staged, final in self._staged:
            if text == str(staged) or text.startswith(f"{staged}{os.sep}"):
                return str(final) + text[len(str(staged)):]
        return text

    def commit(self) -> None:
        """Each staged file renamed over its final name; a staged folder renamed to its, or, where
        that folder is there already (an earlier run's), its files moved into it. OSError, naming the
        final path, where one cannot be put in place."""
        for staged, final in self._staged:
            try:
                if staged.is_dir() and final.is_dir():
                    for entry in sorted(staged.iterdir()):
                        os.replace(entry, final / entry.name)
                        self._placed.append(final / entry.name)
                    staged.rmdir()
                elif staged.is_dir() and final.exists():
                    raise NotADirectoryError(20, os.strerror(20), str(final))
                else:
                    os.replace(staged, final)
                    self._placed.append(final)
            except OSError as exc:
                raise type(exc)(exc.errno, exc.strerror, str(final)) from None

    def discard(self) -> None:
        """Everything this run wrote removed: what was staged, what was put in place, the folders made."""
        for path in [s for s, _ in self._staged] + self._placed:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        for path in reversed(self._made):   # the deepest first; one holding what another wrote is kept
            try:
                path.rmdir()
            except OSError:
                pass
        self._staged, self._placed, self._made = [], [], []
