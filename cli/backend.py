"""Wiring: the local backend's adapters handed to the services. The one
place the CLI chooses adapters."""

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


@dataclass
class LocalBackend:
    """Opened lazily: commands that need nothing do not pay for SQLite.
    `home` overrides GQA_HOME."""

    home: Path | None = None

    @cached_property
    def paths(self):
        from gqa.adapters.local.paths import StatePaths

        paths = StatePaths(self.home) if self.home else StatePaths.from_env()
        paths.ensure()
        return paths

    @cached_property
    def store(self):
        from gqa.adapters.local.store import SqliteStore

        return SqliteStore(self.paths.db)

    @cached_property
    def clock(self):
        from gqa.adapters.clock import SystemClock

        return SystemClock()

    @cached_property
    def waker(self):
        from gqa.adapters.local.wake import SocketWaker

        return SocketWaker(self.paths)

    def submitter(self):
        from gqa.services.submit import SubmitService

        return SubmitService(self.store, self.clock, self.waker)

    def control(self):
        from gqa.services.control import ControlService

        return ControlService(self.store, self.clock, self.waker)

    def queries(self):
        from gqa.services.queries import QueryService

        return QueryService(self.store, self.clock)

    def triggers(self):
        from gqa.models.errors import BackendUnavailable

        raise BackendUnavailable(
            "triggers watch S3 for new objects and run on the AWS backend only; this CLI uses the local queue. "
            "Point it at gqa on AWS: `gqa config set backend aws`, `gqa config set region REGION` and "
            "`gqa config set endpoint https://...` (the API's invoke URL), with AWS credentials as usual")

    def daemon_pid(self) -> int | None:
        from gqa.adapters.local.lock import daemon_running

        return daemon_running(self.paths)


def backend() -> LocalBackend:
    return LocalBackend()
