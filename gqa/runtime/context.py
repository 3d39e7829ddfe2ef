"""The job's view of the queue: who it is and where its checkpoints live."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CHECKPOINT_DIR = Path("checkpoints")


@dataclass(frozen=True)
class JobContext:
    """What the queue told this attempt. Outside gqa every field has a default."""

    job_id: str | None = None
    attempt: int = 1
    checkpoint_dir: Path | None = DEFAULT_CHECKPOINT_DIR
    checkpoint_uri: str | None = None  # set instead of checkpoint_dir on AWS
    resume_from: str | None = None
    array_index: int | None = None

    @property
    def under_gqa(self) -> bool:
        return self.job_id is not None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JobContext:
        env = os.environ if environ is None else environ
        uri = _text(env, "GQA_CHECKPOINT_URI")
        local = _text(env, "GQA_CHECKPOINT_DIR")
        if local is not None:
            checkpoint_dir: Path | None = Path(local)
        elif uri is not None:
            checkpoint_dir = None
        else:
            checkpoint_dir = DEFAULT_CHECKPOINT_DIR
        attempt = _int(env, "GQA_ATTEMPT")
        if attempt is not None and attempt < 1:
            raise ValueError(f"GQA_ATTEMPT must be 1 or more, got {attempt}")
        array_index = _int(env, "GQA_ARRAY_INDEX")
        if array_index is not None and array_index < 0:
            raise ValueError(f"GQA_ARRAY_INDEX must be 0 or more, got {array_index}")
        return cls(
            job_id=_text(env, "GQA_JOB_ID"),
            attempt=1 if attempt is None else attempt,
            checkpoint_dir=checkpoint_dir,
            checkpoint_uri=uri if local is None else None,
            resume_from=_text(env, "GQA_RESUME_FROM"),
            array_index=array_index,
        )


def job(environ: Mapping[str, str] | None = None) -> JobContext:
    """Read this attempt's context from the environment (or `environ`)."""
    return JobContext.from_env(environ)


def _text(env: Mapping[str, str], name: str) -> str | None:
    # The queue sets variables it has no value for to "", so empty means unset.
    value = env.get(name, "").strip()
    return value or None


def _int(env: Mapping[str, str], name: str) -> int | None:
    value = _text(env, name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
