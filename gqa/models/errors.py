"""Domain errors. Adapters translate backend errors into these; nothing above
them matches on message text."""


class GqaError(Exception):
    """Base of every error gqa reports to a user."""


class SpecError(GqaError):
    """A job spec or a command-line value is invalid. `line` is the YAML line when known."""

    def __init__(self, message: str, *, line: int | None = None, source: str | None = None):
        self.line = line
        self.source = source
        where = ""
        if source and line:
            where = f"{source}:{line}: "
        elif source:
            where = f"{source}: "
        elif line:
            where = f"line {line}: "
        super().__init__(f"{where}{message}")


class Rejected(GqaError):
    """A valid spec the queue will never run here (over a hard limit)."""


class NotFound(GqaError):
    """No job, group or team by that name."""


class InvalidTransition(GqaError):
    """A state change the lifecycle does not allow."""


class Conflict(GqaError):
    """The record changed under us: the guard on its current state failed."""


class NotPermitted(GqaError):
    """The caller may not do this."""


class BackendUnavailable(GqaError):
    """The queue's backend (daemon, database, cloud API) cannot be reached."""


class LaunchFailed(GqaError):
    """An attempt could not be started (bad workdir, missing executable)."""


class NotStarted(NotFound):
    """The job exists but has not started yet, so it has no output; it may
    still start (a follower waits, where an unknown job is an error)."""


class NotAuthenticated(NotPermitted):
    """The request carries no identity to check (unsigned, or no credentials found)."""


class LaunchUncertain(GqaError):
    """The backend failed while taking an attempt (a server error, a lost
    answer): it may or may not hold it. Never launch that attempt again until
    the backend has been asked (see services/repair.py)."""


class NotAdmitted(NotStarted):
    """The job was accepted (its id is reserved) but is not recorded yet: on
    AWS the admit function writes a submission's jobs a moment after the API
    answers. Like NotStarted, a follower waits for it."""
