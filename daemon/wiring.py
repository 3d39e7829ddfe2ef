"""The local backend's adapters handed to the services: one store, one
executor, one supervisor for the daemon's life. The routes and the submit
command get their services here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from gqa.adapters.clock import SystemClock, SystemRandom
from gqa.adapters.local.containment.cells import Containment
from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.notice_channels import NoticeSettings
from gqa.adapters.local.notice_outbox import NoticeOutbox, OutboxNotifier
from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.store import SqliteStore
from gqa.ports import Inventory, Notifier
from gqa.services.supervisor import Supervisor

if TYPE_CHECKING:   # the services below load when first asked for
    from gqa.services.control import ControlService
    from gqa.services.cost import CostService
    from gqa.services.history import HistoryService
    from gqa.services.retention import Retention
    from gqa.services.logs import LogService
    from gqa.services.overview import OverviewService
    from gqa.services.queries import QueryService
    from gqa.services.quota import QuotaService

    from .queue_keeper import QueueKeeper
    from gqa.services.submit import SubmitService


@dataclass
class DaemonWiring:
    paths: StatePaths
    inventory: Inventory
    grace: float
    containment: Containment | None = None
    system: bool = False
    probe: Callable[[str], None] | None = None   # the chaos tests' fault injection (faults.py)
    clock: SystemClock = field(default_factory=SystemClock)
    keep_history: float = 90.0   # days a finished job is kept; 0: for good

    @cached_property
    def retention(self) -> Retention | None:
        from gqa.services.retention import DAY, Retention

        return Retention(self.store, self.clock, self.keep_history * DAY) if self.keep_history > 0 else None
    notices: NoticeSettings = field(default_factory=NoticeSettings)   # how notices are delivered

    @cached_property
    def troubles(self):
        """The loop's steps failing now (loop.Troubles), told by GET /health."""
        from .loop import Troubles

        return Troubles()

    @cached_property
    def store(self) -> SqliteStore:
        store = SqliteStore(self.paths.db)
        store.set_inventory(self.inventory)
        return store

    @cached_property
    def queue_keeper(self) -> QueueKeeper:
        """The queue's view, kept after the passes (queue_keeper.py); a personal queue's in a file too."""
        from .queue_keeper import QueueKeeper

        return QueueKeeper(self, write_file=not self.system)

    @cached_property
    def executor(self) -> LocalExecutor:
        return LocalExecutor(self.paths, self.inventory, containment=self.containment, as_owner=self.system)

    @cached_property
    def notifier(self) -> OutboxNotifier:
        """Alerts and approval requests: queued in the outbox, sent by the daemon's
        notice sender to --alerts-to (the Notifier port, for every service that alerts)."""
        return OutboxNotifier(NoticeOutbox(self.paths.db), self.clock, self.notices.alerts_to)

    @cached_property
    def alerts(self) -> Notifier:
        """Where alerts and approval requests go: --alerts-to, else the daemon's log, as the budget
        watch's alerts do (daemon/observers.py), so an approval request is never dropped unsaid."""
        if self.notices.alerts_to:
            return self.notifier
        from gqa.adapters.local.log_notifier import LogNotifier

        return LogNotifier()

    @cached_property
    def supervisor(self) -> Supervisor:
        return Supervisor(self.store, self.executor, self.clock, SystemRandom(), grace=self.grace, probe=self.probe)

    # what the routes and the submit command use; no waker: every turn of the loop ends in a tick
    def submitter(self) -> SubmitService:
        from gqa.models.code import local_problem
        from gqa.services.submit import SubmitService

        # a code bundle is for AWS: a local job runs in its workdir
        return SubmitService(self.store, self.clock, spec_check=local_problem, notifier=self.alerts)

    def control(self) -> ControlService:
        from gqa.services.control import ControlService

        return ControlService(self.store, self.clock)

    def queries(self) -> QueryService:
        from gqa.services.queries import QueryService

        # ranked by the ratios the passes plan by: `gqa queue` shows what the daemon will do
        return QueryService(self.store, self.clock, ratios=self.supervisor.ratios_in_use)

    def history(self) -> HistoryService:
        from gqa.services.history import HistoryService

        return HistoryService(self.store, self.clock, self.store.inventory)

    def quota(self) -> QuotaService:
        from gqa.services.quota import QuotaService

        return QuotaService(self.store)

    def cost(self) -> CostService:
        from gqa.services.cost import CostService

        return CostService(self.store, self.clock, history=self.store)

    def overview(self) -> OverviewService:
        from gqa.services.overview import OverviewService

        return OverviewService(self.store, self.store, self.clock, ratios=self.supervisor.ratios_in_use)

    def logs(self) -> LogService:
        from gqa.adapters.local.log_pages import LocalLogFiles
        from gqa.services.logs import LogService

        return LogService(self.store, LocalLogFiles(self.paths))
