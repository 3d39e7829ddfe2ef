"""The local backend as a user's own CLI runs it: the SQLite store and the
services, in this process (a shared box's queue goes through its daemon
instead, daemon_backend.py)."""

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from gqa.models.errors import GqaError


class NoQueue(GqaError):
    """A read found no queue at the home (exit 2, as every user error)."""


@dataclass
class LocalBackend:
    """Opened lazily: commands that need nothing do not pay for SQLite.
    `home` overrides GQA_HOME."""

    home: Path | None = None

    local = True
    poll_interval = 0.2            # seconds between reads while waiting

    @cached_property
    def paths(self):
        from gqa.adapters.local.system import private_home

        paths = self._where()
        if not paths.home.exists():
            private_home(paths.home)     # a user's own queue: nobody else reads its jobs' environments
        paths.ensure()
        return paths

    def _where(self):
        from gqa.adapters.local.paths import StatePaths

        return StatePaths(self.home) if self.home else StatePaths.from_env()

    def require_queue(self) -> None:
        """A read makes no queue: where none is, it says so (NoQueue) instead of creating an empty
        one, which would also hide a shared box's system queue from every later command (the CLI
        takes an existing ~/.gqa for the user's own queue)."""
        paths = self._where()
        try:
            paths.db.stat()
        except FileNotFoundError:
            if paths.home.is_dir() and paths.leftovers():
                return   # a lost queue's files: opening it says so, and how to mend it
            raise NoQueue(f"no queue at {paths.home}: `gqa local start` starts one there "
                          "(GQA_HOME names another home)") from None
        except OSError:   # any other fault (a file in the way, no access) is said where the queue is opened
            pass

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
        from gqa.models.code import local_problem
        from gqa.services.submit import SubmitService

        return SubmitService(self.store, self.clock, self.waker, spec_check=local_problem)

    def control(self):
        from gqa.services.control import ControlService

        return ControlService(self.store, self.clock, self.waker)

    def queries(self):
        self.require_queue()
        from gqa.services.queries import QueryService

        return QueryService(self.store, self.clock)

    def kept_queue(self, group: str | None = None) -> dict | None:
        """The queue listing the daemon keeps in the home, while it is current
        (gqa/adapters/local/kept_queue.py); None: compute it with queries()."""
        from gqa.adapters.local import kept_queue
        from gqa.http.queue_listing import current, of_group

        self.require_queue()

        kept = kept_queue.read_current(self.paths, current)
        return None if kept is None else of_group(kept, group)

    def triggers(self):
        raise triggers_unavailable()

    def logs(self):
        """Pages of a job's output (the shared daemon's GET /jobs/{id}/logs; a user's
        own CLI reads the file itself, see cli/logs.py)."""
        from gqa.adapters.local.log_pages import LocalLogFiles
        from gqa.services.logs import LogService

        self.require_queue()

        return LogService(self.store, LocalLogFiles(self.paths))

    def history(self):
        self.require_queue()
        from gqa.services.history import HistoryService

        return HistoryService(self.store, self.clock, self.store.inventory)

    def quota(self) -> "LocalQuota":
        return LocalQuota(self)

    def cost(self):
        self.require_queue()
        from gqa.services.cost import CostService

        return CostService(self.store, self.clock, history=self.store)

    def overview(self):
        self.require_queue()
        from gqa.services.overview import OverviewService

        return OverviewService(self.store, self.store, self.clock)

    def whoami(self) -> dict:
        import getpass

        from .context import caller_user

        # the queue's files are the user's own: whoever can run gqa on them may do everything
        return {"owner": caller_user() or getpass.getuser(), "arn": None, "account": None,
                "roles": ["owner", "approver", "admin"]}

    def troubles(self) -> list[dict]:
        """What this queue's running daemon says is failing now (GET /daemon, 2 s at most); none
        when no daemon runs, it does not answer, or this runs inside it."""
        from .context import CALLER
        from .daemon_socket import daemon_says, told_troubles

        if CALLER.get() is not None or self.daemon_pid() is None:
            return []
        return told_troubles(daemon_says(str(self._where().home), timeout=2.0))

    def daemon_pid(self) -> int | None:
        from gqa.adapters.local.lock import daemon_running

        return daemon_running(self.paths)


class LocalQuota:
    """The quota service, opened when first used: a look (show, policy) where no queue is says so, as
    every read does; a change makes the queue where none is, as a submission does (teams set before
    `gqa local start` hold from its first job)."""

    def __init__(self, backend: LocalBackend):
        self.backend = backend

    @cached_property
    def service(self):
        from gqa.services.quota import QuotaService

        return QuotaService(self.backend.store, self.backend.waker)   # a raised budget starts held jobs at once

    def show(self):
        self.backend.require_queue()
        return self.service.show()

    def policy(self):
        self.backend.require_queue()
        return self.service.policy()

    def set(self, team: str, **changes):
        return self.service.set(team, **changes)

    def set_members(self, team: str, members: Iterable[str]):
        return self.service.set_members(team, members)

    def set_policy(self, **changes):
        return self.service.set_policy(**changes)


def triggers_unavailable():
    from gqa.models.errors import BackendUnavailable

    return BackendUnavailable(
        "triggers watch S3 for new objects and run on the AWS backend only; this CLI uses the local queue. "
        "Point it at gqa on AWS: `gqa config set backend aws`, `gqa config set region REGION` and "
        "`gqa config set endpoint https://...` (the API's invoke URL), with AWS credentials as usual")
