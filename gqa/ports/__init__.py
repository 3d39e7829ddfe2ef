"""What the services need from the outside world. One adapter per backend
implements each; services receive them, never import them. Grouped by
concern: the job store (store.py), where attempts run (compute.py), the AWS
intake (intake.py), alerts, logs and records (observe.py), triggers
(triggers.py); every name is importable from here."""

from .compute import (AttemptClock, AttemptStatus, Clock, Compute, Exit, FoundLaunch, LaunchLookup, Launched, Random,
                      Waker)
from .intake import AdmissionProgress, Admissions, Intake, Submission
from .observe import (AttemptLog, BudgetRecords, Checkpoints, GpuUtilization, JobLogs, LiveSpend, LogChunk, Metrics,
                      Notifier)
from .store import (BETWEEN_ATTEMPTS, HISTORY_STATES, WAITING_STATES, Change, GroupPages, HistoryQuery, HistoryReads,
                    Inventory, JobEvent, JobRecords, JobsAndSettings, JobStore, PendingChanges, PendingFeed, QueueReads,
                    RecentEvents, SchedulingInputs, Settings, UsageLedger, apply_all_else_each, has_run)
from .triggers import BurstTimer, Manifests, TriggerCode, TriggerStore

__all__ = [
    "AdmissionProgress", "Admissions", "AttemptClock", "AttemptLog", "AttemptStatus", "BETWEEN_ATTEMPTS",
    "BudgetRecords",
    "BurstTimer", "Change", "Checkpoints", "Clock", "Compute", "Exit", "FoundLaunch", "GpuUtilization", "GroupPages",
    "HISTORY_STATES", "HistoryQuery", "HistoryReads", "Intake", "Inventory", "JobEvent", "JobLogs", "JobRecords",
    "JobsAndSettings", "JobStore",
    "LaunchLookup", "Launched", "LiveSpend", "LogChunk", "Manifests", "Metrics", "Notifier", "PendingChanges",
    "PendingFeed", "QueueReads", "Random",
    "RecentEvents", "SchedulingInputs", "Settings", "Submission", "TriggerCode", "TriggerStore", "UsageLedger",
    "Waker", "WAITING_STATES", "apply_all_else_each", "has_run",
]
