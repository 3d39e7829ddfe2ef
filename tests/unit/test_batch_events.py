"""gqa.models.batch_events.classify: an ended Batch job's reasons, as AWS
writes them, mapped to an exit kind; and what a BatchJobEvent says about
its attempt."""

import pytest

from gqa.models.batch_events import BatchJobEvent, classify
from gqa.models.outcome import ExitKind

K = ExitKind
ESSENTIAL = "Essential container in task exited"
OOM = "OutOfMemoryError: Container killed due to memory usage"
PULL = ("CannotPullContainerError: Error response from daemon: pull access denied for train, repository does "
        "not exist or may require 'docker login'")
INIT = ("ResourceInitializationError: unable to pull secrets or registry auth: execution resource retrieval "
        "failed: unable to retrieve ecr registry auth")
START = ("CannotStartContainerError: Error response from daemon: failed to create shim task: OCI runtime create "
         "failed: exec: \"python\": executable file not found in $PATH")
NO_CAPACITY = "Canceled by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
MISFIT = "Canceled by JobStateTimeLimit action due to reason: MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT"


@pytest.mark.parametrize("status, status_reason, exit_code, container_reason, kind, detail", [
    # success: the exit code (0) decides
    ("SUCCEEDED", ESSENTIAL, 0, None, K.APP, ""),
    ("SUCCEEDED", None, None, None, K.APP, ""),
    # the job's own exit code
    ("FAILED", ESSENTIAL, 1, None, K.APP, ESSENTIAL),
    ("FAILED", ESSENTIAL, 137, None, K.APP, ESSENTIAL),              # 137 alone: a SIGKILL, not known to be OOM
    ("FAILED", "Terminated by user", 143, None, K.APP, "Terminated by user"),
    # out of memory: the container reason says so, with or without the exit code
    ("FAILED", ESSENTIAL, 137, OOM, K.OOM, OOM),
    ("FAILED", ESSENTIAL, None, OOM, K.OOM, OOM),
    # the instance went away: spot reclaim or host loss (EC2), Fargate Spot
    ("FAILED", "Host EC2 (instance i-0abc123def456) terminated.", None, None, K.RECLAIMED,
     "Host EC2 (instance i-0abc123def456) terminated."),
    ("FAILED", "Host EC2 (instance i-0abc123def456) terminated.", 143, None, K.RECLAIMED,
     "Host EC2 (instance i-0abc123def456) terminated."),
    ("FAILED", "Your Spot Task was interrupted.", None, None, K.RECLAIMED, "Your Spot Task was interrupted."),
    # Batch's own attempt timeout
    ("FAILED", "Job attempt duration exceeded timeout", None, None, K.TIMEOUT, "Job attempt duration exceeded timeout"),
    ("FAILED", "Job attempt duration exceeded timeout", 137, None, K.TIMEOUT, "Job attempt duration exceeded timeout"),
    # the platform failed before the container ran
    ("FAILED", "Task failed to start", None, PULL, K.CAPACITY, PULL),
    ("FAILED", "Task failed to start", None, INIT, K.CAPACITY, INIT),
    ("FAILED", "Task failed to start", None, None, K.CAPACITY, "Task failed to start"),
    ("FAILED", "Task failed to start", None, "DockerTimeoutError: Could not transition to started", K.CAPACITY,
     "DockerTimeoutError: Could not transition to started"),
    # the queue cancelled it after waiting RUNNABLE for an instance (its job state time limit action)
    ("FAILED", NO_CAPACITY, None, None, K.CAPACITY, NO_CAPACITY),
    # ... but a job that fits no instance of the pool is the job's error: no retry mends it
    ("FAILED", MISFIT, None, None, K.APP, MISFIT),
    # ... and the words alone, with an exit code, are not the action's
    ("FAILED", NO_CAPACITY, 1, None, K.APP, NO_CAPACITY),
    # ... but not when the container's own reason is the job's (its command is not in the image)
    ("FAILED", "Task failed to start", None, START, K.APP, START),
    # a container that exited has run: its exit code decides, whatever the reason
    ("FAILED", "Task failed to start", 2, None, K.APP, "Task failed to start"),
    # a reason gqa does not know, no exit code: the job's, said as Batch says it
    ("FAILED", "Dependent job failed", None, None, K.APP, "Dependent job failed"),
    ("FAILED", None, None, None, K.APP, ""),
], ids=["succeeded", "succeeded-no-code", "exit-1", "exit-137", "terminated-by-user", "oom-137", "oom-no-code",
        "host-terminated", "host-terminated-with-code", "fargate-spot", "timeout", "timeout-with-code",
        "cannot-pull", "resource-init", "failed-to-start", "docker-timeout", "no-capacity-wait",
        "misfit-cancelled", "no-capacity-words-with-code", "cannot-start", "ran-then-failed",
        "unknown-reason", "no-reason"])
def test_classify(status, status_reason, exit_code, container_reason, kind, detail):
    assert classify(status, status_reason, exit_code, container_reason) == (kind, detail)


def event(status, *, exit_code=None, started_at=None):
    return BatchJobEvent("b-1", "7", 1, status, None, exit_code, None, 100.0, started_at=started_at)


@pytest.mark.parametrize("status, exit_code, started_at, code, ran, ended", [
    ("RUNNING", None, 90.0, None, True, False),
    ("SUCCEEDED", 0, 90.0, 0, True, True),
    ("SUCCEEDED", None, None, 0, True, True),        # a success ran, and exited 0, even if the event omits it
    ("FAILED", 3, None, 3, True, True),
    ("FAILED", None, None, None, False, True),       # failed before its container started
    ("RUNNABLE", None, None, None, False, False),
])
def test_what_an_event_says_about_its_attempt(status, exit_code, started_at, code, ran, ended):
    e = event(status, exit_code=exit_code, started_at=started_at)
    assert (e.code, e.ran, e.ended) == (code, ran, ended)
