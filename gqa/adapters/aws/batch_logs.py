"""A job's output on AWS: each attempt is one Batch job (batch_compute.job_name
calls it gqa-<id>-<attempt>-<name>) whose container writes stdout and stderr
to CloudWatch Logs, through the awslogs driver.

Finding an attempt's stream:
- the current attempt's Batch job id is the job record's proc_token (what
  BatchCompute.launch returned); earlier attempts are found by name, with
  ListJobs' JOB_NAME filter `gqa-<id>-<attempt>-*` on each pool's job queue
  (a filter lists every status, not only RUNNING);
- DescribeJobs then gives `container.logStreamName` (set once the container
  starts) and the log group: the job definition's `awslogs-group` option, or
  Batch's default /aws/batch/job.

An attempt's stream never changes once Batch names it, so that answer is
kept (its status is then as first read: only an attempt without a stream
needs a fresh one): following a job costs GetLogEvents calls and no Batch
call once its stream is known, which keeps the account's Batch request rate
for the control plane.
Batch forgets ended jobs after some days; the logs outlive that, but the
stream of an attempt Batch forgot can no longer be found (attempt() answers
None).

Reading: GetLogEvents from the head (startFromHead), then from each
nextForwardToken; the token coming back unchanged means "no more for now".
CloudWatch may answer empty pages before the end, so reading goes on until
the token repeats, the limit is reached, `max_calls` calls were made, or the
lines read hold `max_bytes` of UTF-8 (an answer carries each byte at least
once: more could not travel with them).

A position within what one call answered is its request's token and how many
of its events were given (`<token>#<n>`; CloudWatch's tokens hold no `#`):
read again, the call answers the same events first, and the n are skipped.
So a reader that keeps only the first lines of a chunk (an answer's size,
services/logs.py) continues exactly after the last it kept (`LogChunk.after`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from ...models.errors import NotFound, SpecError
from ...models.job import JobRecord
from ...ports import AttemptLog, LogChunk
from .batch_compute import parse_job_name
from .errors import Retrying, code_of, is_service_transient
from .resources import Pool

DEFAULT_GROUP = "/aws/batch/job"   # where Batch's awslogs driver writes unless the job definition says
ENDED = frozenset({"SUCCEEDED", "FAILED"})
MAX_EVENTS = 10_000                # GetLogEvents' own ceiling per call
GIVEN = "#"                        # between a call's token and how many of its events were given
KEEP = 1024                        # attempts remembered


def _logs_transient(error: ClientError) -> bool:
    # CloudWatch Logs spells "unavailable" ServiceUnavailableException
    return is_service_transient(error) or code_of(error) == "ServiceUnavailableException"


class BatchLogs:
    def __init__(self, batch: Any, logs: Any, pools: Iterable[Pool], *, log_group: str = DEFAULT_GROUP,
                 max_calls: int = 10, max_bytes: int | None = None, attempts: int = 5, **retry: Any):
        self.queues = tuple(dict.fromkeys(p.queue_name for p in pools))
        self.log_group = log_group
        self.max_calls = max(1, max_calls)
        self.max_bytes = max_bytes
        self._batch = Retrying.for_service(batch, "Batch", attempts=attempts, **retry)
        # the one parameter of ours CloudWatch can find invalid is the token we pass back
        self._logs = Retrying.for_service(logs, "CloudWatch Logs", {"InvalidParameterException": SpecError},
                                          transient=_logs_transient, attempts=attempts, **retry)
        # (job id, attempt) -> its Batch job id and log, once it has a stream or has ended
        self._known: dict[tuple[str, int], tuple[str, AttemptLog]] = {}

    # -- JobLogs port -----------------------------------------------------------------------------------
    def attempt(self, job: JobRecord, attempt: int) -> AttemptLog | None:
        current = job.proc_token if attempt == job.attempts else None
        known = self._known.get((job.id, attempt))
        if known is not None and current in (None, known[0]):
            return known[1]
        batch_id = current or self.find(job.id, attempt)
        if batch_id is None:
            return None
        found = self._batch("DescribeJobs", jobs=[batch_id]).get("jobs", [])
        if not found:
            return None
        log = self.attempt_log(attempt, found[0])
        if log.stream is not None or log.status in ENDED:
            self._known[(job.id, attempt)] = (batch_id, log)
            while len(self._known) > KEEP:
                del self._known[next(iter(self._known))]
        return log

    def read(self, log: AttemptLog, token: str | None, limit: int) -> LogChunk:
        if log.stream is None or log.group is None:
            raise NotFound(f"attempt {log.attempt} has no log stream")
        base, skip = _position(token)
        lines: list[str] = []
        after: list[str] = []
        size = 0
        for _ in range(self.max_calls):
            request: dict[str, Any] = {"logGroupName": log.group, "logStreamName": log.stream, "startFromHead": True,
                                       "limit": max(1, min(MAX_EVENTS, skip + limit - len(lines)))}
            if base is not None:
                request["nextToken"] = base
            try:
                out = self._logs("GetLogEvents", **request)
            except SpecError:
                raise SpecError(f"the log token does not fit log stream {log.stream}; start again without it") \
                    from None
            events = out.get("events", [])
            taken = min(len(events), skip + limit - len(lines))   # the events of this answer given or skipped
            for n in range(min(skip, taken), taken):
                line = events[n].get("message", "").removesuffix("\n")
                lines.append(line)
                after.append(_within(base, n + 1))
                size += len(line.encode("utf-8", "surrogatepass"))
            skip -= min(skip, taken)
            following = out.get("nextForwardToken")
            if following is None or following == base:
                return LogChunk(tuple(lines), _at(base, taken + skip), caught_up=True, after=tuple(after))
            if taken < len(events):     # a page answered more than asked for: resume within it
                return LogChunk(tuple(lines), _at(base, taken), caught_up=False, after=tuple(after))
            base = following
            if len(lines) >= limit or (self.max_bytes is not None and size >= self.max_bytes):
                break
        return LogChunk(tuple(lines), _at(base, skip), caught_up=False, after=tuple(after))

    # -- finding the attempts -----------------------------------------------------------------------------
    def find(self, job_id: str, attempt: int) -> str | None:
        """The Batch job id of attempt `attempt` of job `job_id`, by its name;
        the latest created if a crash ever launched it twice."""
        pattern = f"gqa-{job_id}-{attempt}-*"
        best: tuple[int, str] | None = None
        for queue in self.queues:
            request: dict[str, Any] = {"jobQueue": queue, "filters": [{"name": "JOB_NAME", "values": [pattern]}]}
            while True:
                out = self._batch("ListJobs", **request)
                for summary in out.get("jobSummaryList", []):
                    if parse_job_name(summary.get("jobName", "")) != (job_id, attempt):
                        continue
                    created = int(summary.get("createdAt") or 0)
                    if best is None or created > best[0]:
                        best = (created, summary["jobId"])
                if not out.get("nextToken"):
                    break
                request["nextToken"] = out["nextToken"]
        return best[1] if best else None

    def attempt_log(self, attempt: int, raw: Mapping[str, Any]) -> AttemptLog:
        """What one job of a DescribeJobs answer says about the attempt's output."""
        container = raw.get("container") or {}
        tries = raw.get("attempts") or []
        stream = container.get("logStreamName")
        if not stream and tries:   # the last attempt's container names it too
            stream = (tries[-1].get("container") or {}).get("logStreamName")
        config = container.get("logConfiguration") or {}
        driver = config.get("logDriver", "awslogs")
        group = (config.get("options") or {}).get("awslogs-group") or self.log_group
        detail = raw.get("statusReason") or container.get("reason") or ""
        if driver != "awslogs":
            stream, detail = None, f"its output goes to the {driver} log driver, not CloudWatch Logs"
        started = raw.get("startedAt")
        return AttemptLog(attempt=attempt, source=f"Batch job {raw['jobId']}", status=raw.get("status", "UNKNOWN"),
                          started_at=started / 1000 if started else None, group=group, stream=stream or None,
                          detail=detail)


def _position(token: str | None) -> tuple[str | None, int]:
    """A token this reader gave (CloudWatch's, or within an answer) as (CloudWatch's token, events to skip)."""
    if token is None:
        return None, 0
    base, mark, given = token.rpartition(GIVEN)
    if mark and given.isdigit():
        return base or None, int(given)
    return token, 0


def _at(base: str | None, given: int) -> str | None:
    """The position `given` events into the answer to a call with token `base`."""
    return base if given == 0 else _within(base, given)


def _within(base: str | None, given: int) -> str:
    return f"{base or ''}{GIVEN}{given}"
