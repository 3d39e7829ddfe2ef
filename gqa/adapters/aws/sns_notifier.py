"""Notifier on SNS: alerts and approval requests go to one topic.

`kind` and `team` travel as message attributes, so each subscription can
take only what it wants with a filter policy (`{"kind": ["approval"]}` for
the approvers, `{"team": ["vision"]}` for a team's channel), with no topic
per audience.
"""

from __future__ import annotations

from typing import Any

from .errors import Retrying

SUBJECT_LIMIT = 100            # SNS: "less than 100 characters", ASCII, no line breaks
MESSAGE_LIMIT = 256 * 1024     # SNS: bytes of UTF-8 per message
_CUT = " [...]"


class SnsNotifier:
    def __init__(self, client: Any, topic_arn: str, *, attempts: int = 5, **retry: Any):
        self.client = client
        self.topic_arn = topic_arn
        self.call = Retrying.for_service(client, "SNS", attempts=attempts, **retry)

    def notify(self, subject: str, message: str, *, kind: str, team: str | None = None) -> None:
        attributes = {"kind": {"DataType": "String", "StringValue": kind}}
        if team:   # an empty string attribute is refused by SNS; no team, no attribute
            attributes["team"] = {"DataType": "String", "StringValue": team}
        kwargs: dict[str, Any] = {"TopicArn": self.topic_arn, "Message": fit_message(message or "(no message)"),
                                  "MessageAttributes": attributes}
        short = fit_subject(subject)
        if short:
            kwargs["Subject"] = short
        self.call("Publish", **kwargs)


def fit_subject(subject: str) -> str:
    """A subject SNS accepts: printable ASCII on one line, under 100 characters
    (a longer one fails the whole publish, so it is cut, not refused)."""
    text = " ".join("".join(c if " " <= c <= "~" else " " for c in subject).split())
    if len(text) < SUBJECT_LIMIT:
        return text
    return text[:SUBJECT_LIMIT - 1 - 3].rstrip() + "..."


def fit_message(message: str) -> str:
    raw = message.encode("utf-8")
    if len(raw) <= MESSAGE_LIMIT:
        return message
    # cut on a character boundary, leaving room for the marker
    return raw[:MESSAGE_LIMIT - len(_CUT)].decode("utf-8", "ignore") + _CUT
