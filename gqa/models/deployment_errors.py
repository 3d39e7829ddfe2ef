"""A deployment file's validation errors as one SpecError each, in the
file's terms: the field path, the line it is on, and what was wanted
(`deployment.yaml:12: pools[1].max_gpus: must be greater than 0`); an
unknown field names the nearest valid one."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from .deployment_shapes import _AT
from .errors import SpecError


def spec_error(exc: ValidationError, lines: dict[tuple, int], source: str | None, raw: Any,
               fields: dict[str, type[BaseModel]]) -> SpecError:
    """The first of `exc`'s errors, an unknown field first; `fields` maps a
    section's dotted path to its model, for the valid names near a typo."""
    from .loader import _real_loc

    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = _real_loc(err["loc"], raw)
    if err["type"] == _AT:
        loc += tuple(err["ctx"]["path"])
    line = _line_for(loc, lines)
    field = _path_text(loc)
    if err["type"] == "extra_forbidden":
        model = fields.get(".".join(p for p in loc[:-1] if isinstance(p, str)))
        valid = sorted(model.model_fields) if model else []
        near = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.5)
        hint = f"; did you mean {near[0]!r}?" if near else (f"; valid fields: {', '.join(valid)}" if valid else "")
        return SpecError(f"unknown field {field!r}{hint}", line=line, source=source)
    message = _message(err)
    return SpecError(f"{field}: {message}" if field else message, line=line, source=source)


def _message(err: ErrorDetails) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "missing":
        return "is required"
    if kind == "too_short" and err.get("ctx", {}).get("min_length") == 1:
        return "must not be empty"
    if kind == "too_long":
        ctx = err.get("ctx", {})
        given = err.get("input")
        count = len(given) if isinstance(given, (list, dict)) else ctx.get("actual_length")
        return (f"has {count} entries, at most {ctx.get('max_length')} in one deployment "
                f"(CloudFormation allows 500 resources in a stack; split teams or pools across deployments)")
    if kind in ("bool_type", "int_type", "float_type", "string_type", "list_type", "dict_type", "model_type",
                "model_attributes_type"):
        want = {"bool_type": "true or false", "int_type": "a whole number", "float_type": "a number",
                "string_type": "text", "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
                "model_attributes_type": "a mapping"}[kind]
        return f"must be {want}, got {_shown(err.get('input'))}"
    msg = msg.removeprefix("Value error, ")
    if err["loc"] and err["loc"][-1] in SECONDS_FIELDS and kind in ("greater_than_equal", "less_than_equal"):
        bound = err["ctx"]["ge" if kind == "greater_than_equal" else "le"]
        return f"must be {'at least' if kind == 'greater_than_equal' else 'at most'} {_duration_text(bound)}, " \
               f"got {_duration_text(_given_seconds(err['input']))}"
    if msg.startswith("Input should be "):
        msg = "must be " + msg.removeprefix("Input should be ")
    return msg


# fields given as durations ("90s", "4h"), whose bounds are told in the same words
SECONDS_FIELDS = ("checkpoint_grace", "capacity_wait")


def _given_seconds(value: Any) -> Any:
    """What the file gave, in seconds where it was a bare number (minutes, as in job specs)."""
    return value * 60 if isinstance(value, int) and not isinstance(value, bool) else value


def _duration_text(seconds: Any) -> str:
    if isinstance(seconds, str):
        return seconds[:40]   # as the file says it
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return _shown(seconds)
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _path_text(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_for(loc: tuple, lines: dict[tuple, int]) -> int | None:
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
