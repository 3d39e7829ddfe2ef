"""Pages of the API's long listings (the queue, an array's jobs): a Lambda
answers in at most 6 MB, and one pending job is about 1 KB on the wire, so a
10,000-job sweep is read a page at a time. A job's history grows with its
attempts (8 KB at 20), so a page holds at most `limit` items and at most what
ANSWER_BYTES holds of them, as they travel (`encoded_bytes`): it ends early,
its `next` naming the rest, whatever the limit asked.

A page is a run of the listing in job `seq` order (seq is unique and only
grows), and its `next` token names the last seq it held: the next page is the
jobs after it. So a job that stays listed while a reader pages through
appears exactly once, whatever else moves; a job that arrives meanwhile
appears if its seq is past the page being read; a job that leaves meanwhile
may or may not appear. The entries of a page keep the listing's own order
(for the queue: the scheduling pass's, computed over the whole queue on every
request), and each carries its rank in that order so that a reader can put
the pages back together. A token pins nothing else: positions and reasons
are those of the listing that answered the page, so if the queue moved
between pages two entries may share a position or a position may be
skipped (the API keeps a queue's listing a minute, named by its token, so
pages read within it share one pass's positions). Pure: lists in, a slice out."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..models.errors import SpecError

DEFAULT_LIMIT = MAX_LIMIT = 1000
# what a page's answer may take as it travels: Lambda answers at most 6 MB (6,291,456 bytes, API
# Gateway then says 502), the status, headers and the rest of its envelope counted in; 1 MiB is left for those
ANSWER_BYTES = 5 * 1024 * 1024

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[tuple[int, T]]       # (rank in the whole listing, item), in listing order
    next: int | None                 # the last seq on this page when more follow; None at the end


def page_of(listing: Sequence[T], seq: Callable[[T], int], *, limit: int, after: int | None,
            size: Callable[[T], int] | None = None, budget: int = ANSWER_BYTES) -> Page[T]:
    """The first `limit` items of `listing` whose seq is past `after`, taken in seq order;
    with `size` (an item's `encoded_bytes` in the answer), only as many as `budget` bytes
    hold, and at least one, or a reader would never get past it."""
    ranked = sorted(enumerate(listing), key=lambda ri: (seq(ri[1]), ri[0]))
    later = [ri for ri in ranked if after is None or seq(ri[1]) > after]
    taken = later[:limit]
    if size is not None:
        taken = taken[:fitting((size(item) for _, item in taken), budget)]
    more = len(later) > len(taken)
    return Page(sorted(taken, key=lambda ri: ri[0]), seq(taken[-1][1]) if more else None)


def fitting(sizes: Iterable[int], budget: int = ANSWER_BYTES) -> int:
    """How many of the items whose answers take `sizes` bytes (in order) `budget` holds, each with
    the comma after it: at least one, or a reader would never get past it."""
    used = n = 0
    for n, item in enumerate(sizes):
        used += item + 1
        if used > budget and n:
            return n
    return n + 1 if used else 0


def encoded_bytes(data: Any) -> int:
    """What `data` takes in an answer: its JSON as the API writes it (ASCII, no spaces), which
    Lambda's answer carries as a JSON string, each quote and backslash escaped once more."""
    text = json.dumps(data, separators=(",", ":"))
    return len(text) + text.count('"') + text.count("\\")


def check_limit(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_LIMIT
    if not 1 <= limit <= MAX_LIMIT:
        raise SpecError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def token(listing: str, after: int | None, view: str | None = None, *, running: int | None = None) -> str | None:
    """The opaque `next` token of a page of `listing` ("queue", "jobs"); `view`
    names the listing as computed for the first page, where the server keeps
    it a while (the queue: its order is a whole scheduling pass). `running`:
    the last seq of a page of the queue's running jobs when more of them
    follow (they come first, on as many pages as they take; then the pending)."""
    if after is None and running is None:
        return None
    raw = json.dumps({"of": listing, **({"after": after} if after is not None else {}),
                      **({"running": running} if running is not None else {}), **({"view": view} if view else {})},
                     separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def view_of(text: str | None) -> str | None:
    """The listing a valid `next` token names (token's `view`), if any."""
    if text is None:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error):
        return None
    view = data.get("view") if isinstance(data, dict) else None
    return view if isinstance(view, str) else None


def after_of(listing: str, text: str | None) -> int | None:
    """The seq a `next` token of `listing` names; SpecError for anything else."""
    after, _ = position_of(listing, text)
    if text is not None and after is None:
        raise _not_a_token(listing, text)
    return after


def position_of(listing: str, text: str | None) -> tuple[int | None, int | None]:
    """What a `next` token of `listing` names: (the seq the listing goes on after, or None for its
    start; the seq its running jobs go on after, or None where none are left to give), both None
    without a token; SpecError for anything else."""
    if text is None:
        return None, None
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error):
        data = None
    if not isinstance(data, dict) or data.get("of") != listing:
        raise _not_a_token(listing, text)
    after, running = data.get("after"), data.get("running")
    if (after is None and running is None) or not all(
            n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 0) for n in (after, running)):
        raise _not_a_token(listing, text)
    return after, running


def _not_a_token(listing: str, text: str) -> SpecError:
    return SpecError(f"next {text!r} is not a page token of this {listing} listing; pass the `next` of "
                     "the previous page as it came, or leave it out for the first page")
