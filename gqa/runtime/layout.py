"""How a checkpoint store names what it holds, whatever holds it (a directory,
an S3 prefix): checkpoints are ckpt-<step>[.<serial>], and `latest` names the
newest committed one."""

import re
from collections.abc import Callable

POINTER = "latest"
_NAME = re.compile(r"ckpt-(\d+)(?:\.(\d+))?")


def parse_name(name: str) -> tuple[int, int] | None:
    """Sort key (step, serial) of a checkpoint name, or None if it is not one."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return int(match[1]), int(match[2] or 0)


# what moves `latest`: (what it names now, the committed names) -> what it should name (None: as it is)
Choose = Callable[[str | None, list[str]], str | None]


def check_step(step: object) -> None:
    """A checkpoint's step: a whole number, 0 or more (ckpt-<step> is its name)."""
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError(f"step must be a whole number, got {step!r} ({type(step).__name__})")
    if step < 0:
        raise ValueError(f"step must be 0 or more, got {step}")
