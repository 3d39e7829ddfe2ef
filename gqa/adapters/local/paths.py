"""Where the local queue keeps its state (GQA_HOME, default ~/.gqa)."""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StatePaths:
    home: Path

    @classmethod
    def from_env(cls, given: Mapping[str, str] | None = None) -> "StatePaths":
        env = os.environ if given is None else given
        home = env.get("GQA_HOME") or os.path.join(os.path.expanduser("~"), ".gqa")
        return cls(Path(home).absolute())

    @property
    def db(self) -> Path:
        return self.home / "gqa.db"

    @property
    def socket(self) -> Path:
        return self.home / "daemon.sock"

    @property
    def pidfile(self) -> Path:
        return self.home / "daemon.pid"

    @property
    def daemon_log(self) -> Path:
        return self.home / "daemon.log"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def checkpoints(self) -> Path:
        return self.home / "checkpoints"

    @property
    def exits(self) -> Path:
        return self.home / "exits"

    def log_for(self, job_id: str) -> Path:
        return self.logs / f"{job_id}.log"

    def checkpoint_for(self, job_id: str) -> Path:
        return self.checkpoints / job_id

    def exit_for(self, job_id: str, attempt: int) -> Path:
        return self.exits / f"{job_id}.{attempt}"

    @property
    def queue_view(self) -> Path:
        """The queue as the daemon last listed it (kept_queue.py)."""
        return self.home / "queue-view.json"

    @property
    def queue_id(self) -> Path:
        """The identity marker: the queue id its database also holds (see SqliteStore)."""
        return marker_for(self.db)

    def ensure(self) -> None:
        """Create the state directories; a home that cannot be created is a
        StorageUnavailable (StorageFull) naming the path and the reason."""
        from .storage_errors import storage_errors

        with storage_errors(self.home):
            for d in (self.home, self.logs, self.checkpoints, self.exits):
                d.mkdir(parents=True, exist_ok=True)

    def leftovers(self) -> list[Path]:
        """The state directories that hold files of jobs (logs, checkpoints, exit records)."""
        found = []
        for d in (self.logs, self.checkpoints, self.exits):
            try:
                with os.scandir(d) as entries:
                    if next(entries, None) is not None:
                        found.append(d)
            except (FileNotFoundError, NotADirectoryError):
                pass
        return found


def marker_for(db: Path) -> Path:
    """Where the identity marker of a queue database lives: GQA_HOME/queue-id
    beside the home's gqa.db, `<file>.queue-id` beside any other database file
    (so several databases can share a directory)."""
    db = Path(db)
    return db.with_name("queue-id" if db.name == "gqa.db" else db.name + ".queue-id")
