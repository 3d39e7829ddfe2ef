"""Domain errors. Adapters translate backend errors into these; nothing above
them matches on message text."""


class GqaError(Exception):
    """Base of every error gqa reports to a user."""


def one_line(text: str) -> str:
    """`text` with control characters written as escapes: a message quotes what
    the user typed (a key, a file name), and must stay one line whatever it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class SpecError(GqaError):
    """A job spec or a command-line value is invalid. `line` is the YAML line when known.
    The message is always one line (see one_line)."""

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
        super().__init__(one_line(f"{where}{message}"))


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


class Misconfigured(BackendUnavailable):
    """The backend refuses gqa's own credentials (access denied): a deployment
    to mend, not an outage to wait out. Asking again the same way fails the
    same way, so callers must not retry it at a steady pace."""


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


class StorageUnavailable(BackendUnavailable):
    """The queue's files cannot be used: read-only, permission denied, cannot
    be opened or created, an I/O error. The user must fix it; nothing was changed."""


class StorageFull(StorageUnavailable):
    """The disk (or the user's quota) holding the queue's files is full; nothing was changed."""


class StorageBusy(StorageUnavailable):
    """Another process held the queue database locked past the busy timeout.
    Transient: the same command may succeed when retried."""

    exit_code = 1


class StorageCorrupt(StorageUnavailable):
    """The queue database is damaged, or is not a gqa database at all."""


class QueueMismatch(StorageUnavailable):
    """The queue database is not the one this home's queue wrote (missing,
    empty, another queue's, or gone while its logs and checkpoints remain):
    using it would hand out job ids again next to the old jobs' files."""
