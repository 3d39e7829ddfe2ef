"""Who is calling and from where: the OS process for a plain `gqa`, or the
client process when the daemon runs a command on its behalf."""

import contextvars
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    user: str | None            # verified by the socket's peer credentials
    environment: dict[str, str]


CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("gqa_caller", default=None)
# `gqa submit [FILE] [flags] -- CMD ARGS...`: everything after the first `--` is the job's command,
# verbatim, so cli/main.py splits it off before option parsing and leaves it here
TRAILING_COMMAND: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("gqa_command", default=None)
# `gqa --profile P ...`: the config profile this command uses (None: GQA_PROFILE, else default)
PROFILE: contextvars.ContextVar[str | None] = contextvars.ContextVar("gqa_profile", default=None)
_STARTING_ENVIRONMENT: dict[str, str] = {}


def remember_environment() -> None:
    if not _STARTING_ENVIRONMENT:
        _STARTING_ENVIRONMENT.update(os.environ)


def caller_environment() -> dict[str, str]:
    caller = CALLER.get()
    if caller:
        return dict(caller.environment)
    return dict(_STARTING_ENVIRONMENT or os.environ)


def caller_user() -> str | None:
    caller = CALLER.get()
    return caller.user if caller else None
