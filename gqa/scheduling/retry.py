"""Retry backoff: capped exponential with full jitter (pure; the caller
passes the random draw)."""


def backoff_delay(retry_number: int, base: float, cap: float, draw: float) -> float:
    """Delay before retry `retry_number` (1 = first retry); `draw` in [0, 1)."""
    ceiling = min(cap, base * (2 ** max(0, retry_number - 1)))
    return ceiling * draw
