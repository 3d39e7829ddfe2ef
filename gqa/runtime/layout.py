"""How a checkpoint store names what it holds, whatever holds it (a directory,
an S3 prefix): checkpoints are ckpt-<step>[.<serial>], and `latest` names the
newest committed one."""

import re

POINTER = "latest"
_NAME = re.compile(r"ckpt-(\d+)(?:\.(\d+))?")


def parse_name(name: str) -> tuple[int, int] | None:
    """Sort key (step, serial) of a checkpoint name, or None if it is not one."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return int(match[1]), int(match[2] or 0)
