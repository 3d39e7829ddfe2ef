"""Nested dicts of raw spec fields, as files, directives and flags give them."""

from typing import Any


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `extra` into `base` (in place); None values in `extra` are ignored,
    and so is a map in `extra` that holds nothing but None (flags not given): it
    changes nothing, so what `base` holds there (a scalar where a map belongs,
    say) stands and validation says what is wrong with it."""
    for key, value in extra.items():
        if unset(value):
            continue
        if isinstance(value, dict):
            if not isinstance(base.get(key), dict):
                base[key] = {}
            merge(base[key], value)
        else:
            base[key] = value
    return base


def unset(value: Any) -> bool:
    """None, or a map of nothing but unset values (`{"wall_time": None}`, `{}`)."""
    return value is None or isinstance(value, dict) and all(unset(v) for v in value.values())
