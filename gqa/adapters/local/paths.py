"""Where the local queue keeps its state (GQA_HOME, default ~/.gqa)."""

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StatePaths:
    home: Path

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "StatePaths":
        env = os.environ if env is None else env
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

    def ensure(self) -> None:
        for d in (self.home, self.logs, self.checkpoints, self.exits):
            d.mkdir(parents=True, exist_ok=True)
