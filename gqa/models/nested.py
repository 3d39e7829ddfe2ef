"""Nested dicts of raw spec fields, as files, directives and flags give them."""

from typing import Any


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `extra` into `base` (in place); None values in `extra` are ignored."""
    for key, value in extra.items():
        if value is None:
            continue
        if isinstance(value, dict):
            if not isinstance(base.get(key), dict):
                base[key] = {}
            merge(base[key], value)
        else:
            base[key] = value
    return base
