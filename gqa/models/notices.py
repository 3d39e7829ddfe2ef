"""Job notices: which of a job's moves its owner is told about (Slurm's
--mail-type), under which key, and in what words. Pure: the local sender
and the AWS publisher both build a notice here from the job and the
transition that entered the state.

The events, Slurm's mail types and gqa's, in one table (`MAIL_TYPES`, mail_types.py):

| mail type    | spec's notify.events | sent when the job                                     |
|--------------|----------------------|-------------------------------------------------------|
| BEGIN        | begin                | starts an attempt (RUNNING)                           |
| END          | end                  | ends: succeeded, failed, timed out, cancelled (Slurm), rejected |
| FAIL         | fail                 | fails, times out, or is denied by an approver (REJECTED) |
| TIME_LIMIT*  | time_limit           | times out (at the limit; _90/_80/_50 are not sent early) |
| REQUEUE      | requeue              | goes back to wait: retry, reclaim, preemption, requeue |
| ALL          | all                  | any of the above                                      |
| ARRAY_TASKS  | array_tasks          | each task of an array is told of; without it an array's are not |
| NONE         | (none)               | nothing                                               |

A notice's key is the job, its attempt and the state it entered (`12_3.2.running`):
the same move is never told twice, however often it is read or delivered."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from .accounting import summarise
from .errors import SpecError
from .job import JobRecord, JobState
from .mail_types import MAIL_TYPES, mail_types  # noqa: F401 (the table is read from here too)
from .units import format_duration

# the state a move enters -> the event it is, as subscribers filter on it (SNS's `event`)
EVENT_OF_STATE = {
    JobState.RUNNING: "begin", JobState.SUCCEEDED: "end", JobState.CANCELLED: "end",
    JobState.FAILED: "fail", JobState.TIMED_OUT: "fail", JobState.RETRY_WAIT: "requeue",
    JobState.REJECTED: "fail",   # denied by an approver: it will never run, as a failure would not
}
ENDS = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED, JobState.REJECTED})
APPROVAL = "approval"   # the approvers' notice (services/approvals.py), sent through the Notifier port


def notify_option(text: str) -> dict:
    """`gqa submit --notify EVENTS[:TO]` (begin,end:me@example.org; fail:https://hooks...):
    the spec's `notify`. TO is an address, a webhook URL or a user; the owner when left out."""
    words, _, to = text.partition(":")
    if words.strip().upper() == "NONE" and not to.strip():
        return {"events": [], "to": None}      # Slurm's NONE: no notices, whatever a job file asked for
    events, noted = mail_types(words, "--notify")
    if noted:
        raise SpecError(f"--notify {words!r}: gqa sends no {', '.join(noted)} notice")
    if not events:
        raise SpecError(f"--notify {text!r}: name the events, e.g. begin,end,fail[:TO]")
    if ":" in text and not to.strip():
        raise SpecError(f"--notify {text!r}: nothing after ':'; give an address or URL, or leave out the ':'")
    return {"events": events, "to": to.strip() or None}


def selected(events: list[str], state: JobState, *, array_task: bool) -> bool:
    """Whether a move into `state` is told, for these notify.events."""
    if state not in EVENT_OF_STATE or (array_task and "array_tasks" not in events):
        return False
    chosen = set(events)
    if "all" in chosen:
        return True
    if state in ENDS and "end" in chosen:
        return True
    if state == JobState.TIMED_OUT and "time_limit" in chosen:
        return True
    return EVENT_OF_STATE[state] in chosen


def notice_key(job_id: str, attempt: int, state: JobState | str) -> str:
    return f"{job_id}.{attempt}.{str(state).lower()}"


def channel_of(to: str) -> str:
    """`webhook` for an http(s) URL, `email` for an address, `user` for a user name
    (whose address the backend knows: a mail domain, or its subscription on AWS)."""
    lowered = to.lower()
    if lowered.startswith(("https://", "http://")):
        return "webhook"
    return "email" if "@" in to else "user"


@dataclass(frozen=True)
class Notice:
    key: str
    event: str          # begin, end, fail, requeue, approval, or an alert's kind
    to: str | None      # notify.to, None: the owner's default
    user: str           # whom it is about: the job's owner
    team: str | None
    subject: str
    text: str

    @property
    def slack(self) -> dict:
        """The webhook body: Slack's (and Mattermost's, Teams' incoming) {"text": ...}, with `&`, `<`
        and `>` escaped throughout: a job's name, owner, team or reason is the user's, and Slack reads
        `<!channel>`, `<@U123>` or `<mailto:x|approve here>` in it as a ping, a mention or a link."""
        return {"text": slack_escaped(f"{self.subject}\n{self.text}")}


def slack_escaped(text: str) -> str:
    """Text Slack shows as it is written (https://api.slack.com/reference/surfaces/formatting#escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def job_notice(job: JobRecord, state: JobState, at: float, reason: str, attempt: int) -> Notice | None:
    """The notice of `job` entering `state` at `at` (`reason`: the transition's),
    or None when its notify settings do not ask for it."""
    notify = job.spec.notify
    if notify is None or not selected(list(notify.events), state, array_task=job.array_index is not None):
        return None
    what = f"job {job.id} ({job.name})"
    outcome = _outcome(job, state, reason)
    # a job ended before any launch (cancelled while pending) has no attempt 0 to name
    which = f"attempt {attempt}" if attempt else "before it started"
    lines = [f"{what} of {job.owner} (team {job.team}) {outcome} at {_clock(at)}, {which}."]
    if reason:
        lines.append(f"Reason: {reason}")
    ran = _ran(job, at) if state in ENDS else None
    if ran:
        lines.append(f"{ran} on {job.gpus} GPU{'s' if job.gpus != 1 else ''}; "
                     f"{job.gpu_seconds / 3600:.2f} GPU-hours in all.")
    lines.append(f"gqa status {job.id}    gqa logs {job.id}")
    return Notice(notice_key(job.id, attempt, state), EVENT_OF_STATE[state], notify.to, job.owner, job.team,
                  f"gqa: {what} {outcome}", "\n".join(lines))


def _ran(job: JobRecord, at: float) -> str | None:
    """'Ran 3m05s', or over several attempts 'Ran 1h02m over its 3 attempts (the last 3m05s)':
    the total from its transitions where the record has them all, else from the GPU-seconds
    each settlement added; a CPU-only job's without either, the last attempt's alone, said so."""
    runs = summarise(job, at).runs            # from its transitions, where the record has them
    if runs:
        last = runs[-1][1] - runs[-1][0]
    elif job.started_at is not None and job.ended_at is not None:
        last = max(0.0, job.ended_at - job.started_at)
    else:
        return None
    total: float | None = None
    if job.history and job.history[0].state == JobState.SUBMITTED:   # none moved out of the record (AWS)
        total = sum(end - start for start, end in runs)
    elif job.gpus:
        total = job.gpu_seconds / job.gpus
    if job.attempts <= 1 or (total is not None and round(total) == round(last)):
        return f"Ran {format_duration(last)}"
    if total is None:
        return f"Its last attempt (of {job.attempts}) ran {format_duration(last)}"
    return f"Ran {format_duration(total)} over its {job.attempts} attempts (the last {format_duration(last)})"


def _outcome(job: JobRecord, state: JobState, reason: str) -> str:
    if state == JobState.RUNNING:
        return "began"
    if state == JobState.SUCCEEDED:
        return "completed"
    if state == JobState.RETRY_WAIT:
        return "was requeued"
    if state == JobState.CANCELLED:
        return "was cancelled"
    if state == JobState.TIMED_OUT:
        return "timed out"
    if state == JobState.REJECTED:
        return "was rejected"
    if job.signal:
        return f"failed (signal {job.signal})"
    return f"failed (exit {job.exit_code})" if job.exit_code is not None else "failed"


def _clock(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
