"""Job notices on AWS: published to the notices topic after the write that
makes the move, by the functions that make moves (reconcile: starts and
ends; dispatch: timeouts, requeues, cancels carried out, lost attempts;
api: a pending job it cancels).

Each message carries the attributes `user` (the job's owner), `event`
(begin, end, fail, requeue), `team` and `key` (job.attempt.state), so each
person subscribes once with a filter policy on `user` (README's
"Notifications"), and a reader can drop a repeat by its key.

Never in the way of a settlement: the store's write is made first and stands;
a publish that fails (SNS throttling or down past the client's retries) is
logged and kept in the container, tried again before the next notices it
publishes (the next invocation, usually), up to KEPT of them. A container
that is recycled meanwhile loses those, with the log line saying which: a
notice is at most once on AWS, where the local queue's outbox makes it at
least once."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ...models.job import JobRecord
from ...models.notices import Notice, job_notice
from ...ports import Change
from .dynamodb_store import DynamoDBStore
from .sns_notifier import fit_message, fit_subject

log = logging.getLogger("gqa.notices")
BATCH = 10          # SNS PublishBatch's most entries
KEPT = 1000         # unsent notices a container keeps for its next invocation


class SnsNotices:
    def __init__(self, client: Any, topic_arn: str):
        self.client, self.topic_arn = client, topic_arn
        self.unsent: list[Notice] = []

    def publish(self, notices: Sequence[Notice]) -> int:
        """Publish these and those kept from before; how many went out. Never raises."""
        todo, self.unsent = [*self.unsent, *notices], []
        sent = 0
        for start in range(0, len(todo), BATCH):
            chunk = todo[start:start + BATCH]
            try:
                answer = self.client.publish_batch(TopicArn=self.topic_arn, PublishBatchRequestEntries=[
                    _entry(str(i), notice) for i, notice in enumerate(chunk)])
            except Exception as exc:   # noqa: BLE001 (whatever went wrong, the settlement stands)
                log.warning("notices: publishing %d failed, kept for the next try: %s", len(chunk), exc)
                self.unsent += chunk
                continue
            failed = {int(f["Id"]) for f in answer.get("Failed", [])}
            if failed:
                log.warning("notices: SNS refused %d of %d, kept for the next try: %s", len(failed), len(chunk),
                            answer["Failed"][0].get("Message", ""))
            self.unsent += [chunk[i] for i in sorted(failed)]
            sent += len(chunk) - len(failed)
        if len(self.unsent) > KEPT:
            dropped, self.unsent = self.unsent[:-KEPT], self.unsent[-KEPT:]
            log.error("notices: dropped %d unsent notices (%s ...)", len(dropped), dropped[0].key)
        return sent


def _entry(entry_id: str, notice: Notice) -> dict:
    attributes = {"user": notice.user, "event": notice.event, "key": notice.key, "team": notice.team,
                  "to": notice.to}
    entry: dict[str, Any] = {
        "Id": entry_id, "Message": fit_message(notice.text),
        # an empty string attribute is refused by SNS: an unset one is left out
        "MessageAttributes": {k: {"DataType": "String", "StringValue": v} for k, v in attributes.items() if v}}
    subject = fit_subject(notice.subject)
    if subject:
        entry["Subject"] = subject
    return entry


class NoticingStore(DynamoDBStore):
    """The DynamoDB store that tells of the moves it writes: after apply()
    (and apply_each(), built on it) and record_start() have written, each
    move a job asked to be told of is published; a failure to publish never
    undoes or fails the write."""

    def __init__(self, *args: Any, notices: SnsNotices, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.notices = notices

    def apply(self, changes: list[Change]) -> list[JobRecord]:
        written = super().apply(changes)
        self._tell([(job, change.at, change.reason) for change, job in zip(changes, written)
                    if change.to is not None and job is not None])
        return written

    def record_start(self, job_id: str, attempt: int, token: str, started_at: float,
                     reason: str) -> JobRecord | None:
        job = super().record_start(job_id, attempt, token, started_at, reason)
        if job is not None:
            self._tell([(job, started_at, reason)])
        return job

    def _tell(self, moves: list[tuple[JobRecord, float, str]]) -> None:
        try:
            notices = [n for n in (job_notice(job, job.state, at, reason, job.attempts) for job, at, reason in moves)
                       if n is not None]
        except Exception:   # a spec that no longer parses must not fail the write made
            log.exception("notices: could not build the notices of %d moves", len(moves))
            return
        if notices or self.notices.unsent:
            self.notices.publish(notices)
