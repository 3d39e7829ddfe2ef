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
