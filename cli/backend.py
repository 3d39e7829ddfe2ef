"""Wiring: the local backend's adapters handed to the services, or the AWS
backend's API proxies (aws_backend.py), as `gqa config` says. The one place
the CLI chooses adapters."""

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


@dataclass
class LocalBackend:
    """Opened lazily: commands that need nothing do not pay for SQLite.
    `home` overrides GQA_HOME."""

    home: Path | None = None

    local = True
    poll_interval = 0.2            # seconds between reads while waiting

    @cached_property
    def paths(self):
        from gqa.adapters.local.paths import StatePaths

        from gqa.adapters.local.system import private_home

        paths = StatePaths(self.home) if self.home else StatePaths.from_env()
        if not paths.home.exists():
            private_home(paths.home)     # a user's own queue: nobody else reads its jobs' environments
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
        from gqa.models.code import local_problem
        from gqa.services.submit import SubmitService

        return SubmitService(self.store, self.clock, self.waker, spec_check=local_problem)

    def control(self):
        from gqa.services.control import ControlService

        return ControlService(self.store, self.clock, self.waker)

    def queries(self):
        from gqa.services.queries import QueryService

        return QueryService(self.store, self.clock)

    def triggers(self):
        raise triggers_unavailable()

    def logs(self):
        """Pages of a job's output (the shared daemon's GET /jobs/{id}/logs; a user's
        own CLI reads the file itself, see cli/logs.py)."""
        from gqa.adapters.local.log_pages import LocalLogFiles
        from gqa.services.logs import LogService

        return LogService(self.store, LocalLogFiles(self.paths))

    def quota(self):
        from gqa.services.quota import QuotaService

        return QuotaService(self.store)

    def cost(self):
        from gqa.services.cost import CostService

        return CostService(self.store, self.clock)

    def whoami(self) -> dict:
        import getpass

        from .context import caller_user

        # the queue's files are the user's own: whoever can run gqa on them may do everything
        return {"owner": caller_user() or getpass.getuser(), "arn": None, "account": None,
                "roles": ["owner", "approver", "admin"]}

    def daemon_pid(self) -> int | None:
        from gqa.adapters.local.lock import daemon_running

        return daemon_running(self.paths)


def triggers_unavailable():
    from gqa.models.errors import BackendUnavailable

    return BackendUnavailable(
        "triggers watch S3 for new objects and run on the AWS backend only; this CLI uses the local queue. "
        "Point it at gqa on AWS: `gqa config set backend aws`, `gqa config set region REGION` and "
        "`gqa config set endpoint https://...` (the API's invoke URL), with AWS credentials as usual")


def local_backend():
    """This machine's queue: a user's own (SQLite, read here), or a shared box's
    system queue, where every command goes through the daemon (users cannot read
    its database). Which home: gqa.adapters.local.system.state_home."""
    from gqa.adapters.local.system import is_system, state_home

    home = state_home()
    if is_system(home):
        from .daemon_backend import DaemonBackend

        return DaemonBackend(home)
    return LocalBackend(home)


def backend():
    """The backend the configuration chooses (`gqa config`; `--profile`)."""
    from gqa.models.errors import SpecError

    from .config_file import ConfigError, resolve
    from .context import CALLER, PROFILE

    if CALLER.get() is not None:   # run by the local daemon for a client: its own queue
        return LocalBackend()
    try:
        settings = resolve(PROFILE.get())
    except ConfigError as exc:
        raise SpecError(str(exc)) from None
    if not settings.remote:
        return local_backend()
    if not settings.endpoint:
        raise SpecError(f"the AWS backend needs the API's URL: `gqa config set endpoint URL"
                        f"{'' if settings.profile == 'default' else ' --profile ' + settings.profile}` "
                        "(the invoke URL of the gqa API)")
    from .aws_backend import AwsBackend

    return AwsBackend(settings.endpoint, settings.region, settings.aws_profile)
