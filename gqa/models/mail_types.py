"""Slurm's --mail-type words as gqa's notify.events (what each one tells is
models/notices.py's table). Its own module: the spec's reader needs it, and
the notices need the job record, which needs the spec."""

from __future__ import annotations

from .errors import SpecError

# Slurm's --mail-type words -> notify.events; None: accepted, nothing is sent for it
MAIL_TYPES: dict[str, str | None] = {
    "BEGIN": "begin", "END": "end", "FAIL": "fail", "REQUEUE": "requeue", "ALL": "all",
    "TIME_LIMIT": "time_limit", "TIME_LIMIT_90": "time_limit", "TIME_LIMIT_80": "time_limit",
    "TIME_LIMIT_50": "time_limit", "ARRAY_TASKS": "array_tasks",
    "INVALID_DEPEND": None, "STAGE_OUT": None,
}


def mail_types(value: str, option: str = "--mail-type") -> tuple[list[str], list[str]]:
    """--mail-type A,B,...: the spec's events, and the words gqa sends nothing for
    (noted). NONE clears what came before it, as in Slurm. SpecError for a word
    Slurm does not have."""
    events: list[str] = []
    noted: list[str] = []
    for word in (w.strip().upper() for w in value.split(",") if w.strip()):
        if word == "NONE":
            events, noted = [], []
        elif word not in MAIL_TYPES:
            raise SpecError(f"{option} {word!r}: use NONE, BEGIN, END, FAIL, REQUEUE, ALL, ARRAY_TASKS "
                            "or TIME_LIMIT[_90|_80|_50]")
        elif MAIL_TYPES[word] is None:
            noted.append(word)
        else:
            events.append(MAIL_TYPES[word])  # type: ignore[arg-type]
    return list(dict.fromkeys(events)), noted
