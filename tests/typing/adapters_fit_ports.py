"""Each adapter, as the port it implements. mypy checks this module (pyproject.toml's [tool.mypy]):
an adapter whose methods drift from its Protocol (a renamed method, another argument, another
result) fails here, before any wiring runs. Nothing here is called; add a line with each new adapter."""

from gqa import ports
from gqa.adapters.aws.admissions import DynamoDBAdmissions
from gqa.adapters.aws.batch_compute import BatchCompute
from gqa.adapters.aws.batch_logs import BatchLogs
from gqa.adapters.aws.budget_ledger import DynamoDBBudgetRecords
from gqa.adapters.aws.burst_timer import SqsBurstTimer
from gqa.adapters.aws.code_store import S3CodeStore
from gqa.adapters.aws.cloudwatch_utilization import CloudWatchGpuUtilization
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.metrics import EmfMetrics
from gqa.adapters.aws.s3_checkpoints import S3Checkpoints
from gqa.adapters.aws.s3_manifests import S3Manifests
from gqa.adapters.aws.sns_notifier import SnsNotifier
from gqa.adapters.aws.sqs_intake import SqsIntake
from gqa.adapters.aws.triggers import DynamoDBTriggerStore
from gqa.adapters.aws.wakeups import WakeDispatcher
from gqa.adapters.clock import SystemClock, SystemRandom
from gqa.adapters.local.budget_records import SqliteBudgetRecords
from gqa.adapters.local.containment.cells import Containment
from gqa.adapters.local.containment.cgroup import CgroupContainment
from gqa.adapters.local.containment.subreaper import SubreaperContainment
from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.log_notifier import LogNotifier
from gqa.adapters.local.log_pages import LocalLogFiles
from gqa.adapters.local.notice_outbox import OutboxNotifier
from gqa.adapters.local.nvml import NvmlGpus
from gqa.adapters.local.store import SqliteStore
from gqa.adapters.local.wake import SocketWaker
from gqa.ports.observe import GpuReadings
from gqa.runtime.s3 import S3Storage
from gqa.runtime.storage import CheckpointStorage, LocalStorage


def clock(adapter: SystemClock) -> ports.Clock:
    return adapter


def random(adapter: SystemRandom) -> ports.Random:
    return adapter


def local_store(adapter: SqliteStore) -> ports.JobStore:
    return adapter


def aws_store(adapter: DynamoDBStore) -> ports.JobStore:
    return adapter


def local_history(adapter: SqliteStore) -> ports.HistoryReads:
    return adapter


def aws_history(adapter: DynamoDBStore) -> ports.HistoryReads:
    return adapter


def local_recent_events(adapter: SqliteStore) -> ports.RecentEvents:
    return adapter


def aws_recent_events(adapter: DynamoDBStore) -> ports.RecentEvents:
    return adapter


def local_compute(adapter: LocalExecutor) -> ports.Compute:
    return adapter


def aws_compute(adapter: BatchCompute) -> ports.Compute:
    return adapter


def aws_launch_lookup(adapter: BatchCompute) -> ports.LaunchLookup:
    return adapter


def aws_attempt_status(adapter: BatchCompute) -> ports.AttemptStatus:
    return adapter


def local_waker(adapter: SocketWaker) -> ports.Waker:
    return adapter


def aws_waker(adapter: WakeDispatcher) -> ports.Waker:
    return adapter


def aws_intake(adapter: SqsIntake) -> ports.Intake:
    return adapter


def aws_admissions(adapter: DynamoDBAdmissions) -> ports.Admissions:
    return adapter


def aws_notifier(adapter: SnsNotifier) -> ports.Notifier:
    return adapter


def local_outbox_notifier(adapter: OutboxNotifier) -> ports.Notifier:
    return adapter


def aws_checkpoints(adapter: S3Checkpoints) -> ports.Checkpoints:
    return adapter


def local_logs(adapter: LocalLogFiles) -> ports.JobLogs:
    return adapter


def aws_logs(adapter: BatchLogs) -> ports.JobLogs:
    return adapter


def local_budget_records(adapter: SqliteBudgetRecords) -> ports.BudgetRecords:
    return adapter


def aws_budget_records(adapter: DynamoDBBudgetRecords) -> ports.BudgetRecords:
    return adapter


def aws_utilization(adapter: CloudWatchGpuUtilization) -> ports.GpuUtilization:
    return adapter


def local_gpu_readings(adapter: NvmlGpus) -> GpuReadings:
    return adapter


def local_notifier(adapter: LogNotifier) -> ports.Notifier:
    return adapter


def aws_metrics(adapter: EmfMetrics) -> ports.Metrics:
    return adapter


def aws_triggers(adapter: DynamoDBTriggerStore) -> ports.TriggerStore:
    return adapter


def aws_burst_timer(adapter: SqsBurstTimer) -> ports.BurstTimer:
    return adapter


def aws_manifests(adapter: S3Manifests) -> ports.Manifests:
    return adapter


def aws_trigger_code(adapter: S3CodeStore) -> ports.TriggerCode:
    return adapter


# Protocols outside gqa/ports: the local executor's process containment, and where a job's
# runtime keeps its checkpoints


def cgroup_containment(adapter: CgroupContainment) -> Containment:
    return adapter


def subreaper_containment(adapter: SubreaperContainment) -> Containment:
    return adapter


def local_checkpoint_storage(adapter: LocalStorage) -> CheckpointStorage:
    return adapter


def s3_checkpoint_storage(adapter: S3Storage) -> CheckpointStorage:
    return adapter
