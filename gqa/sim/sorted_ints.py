"""Distinct ints in sorted order, for a replay's queue: the LAS replay keeps its waiting jobs'
ranks in one, and its pass walks them in place."""

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator


class SortedInts:
    """Distinct ints in sorted order, in buckets of at most 2 x LOAD: an insert moves one bucket's
    keys, not every key behind it. Unlike a general sorted container it keeps no index of positions,
    which every insert and delete would update: a walk reads the buckets in place, by (bucket, index),
    and finds its place again with `take` or `after` once the keys change under it. Each key is
    added once (a replay's ranks are distinct)."""

    LOAD = 500

    def __init__(self) -> None:
        self.buckets: list[list[int]] = []   # never rebound: a walk holds it
        self.maxes: list[int] = []           # each bucket's last key
        self.count = 0

    def __bool__(self) -> bool:
        return self.count > 0

    def __len__(self) -> int:
        return self.count

    def first(self) -> int:
        return self.buckets[0][0]

    def add(self, key: int) -> None:
        buckets, maxes = self.buckets, self.maxes
        self.count += 1
        if not buckets:
            buckets.append([key])
            maxes.append(key)
            return
        at = bisect_left(maxes, key)
        if at == len(maxes):
            at -= 1
            buckets[at].append(key)
            maxes[at] = key
        else:
            insort(buckets[at], key)
        bucket = buckets[at]
        if len(bucket) > 2 * self.LOAD:
            buckets.insert(at + 1, bucket[self.LOAD:])
            del bucket[self.LOAD:]
            maxes.insert(at, bucket[-1])

    def remove(self, key: int) -> None:
        buckets, maxes = self.buckets, self.maxes
        at = bisect_left(maxes, key)
        bucket = buckets[at] if at < len(maxes) else []
        i = bisect_left(bucket, key)
        if i == len(bucket) or bucket[i] != key:
            raise KeyError(key)
        del bucket[i]
        self.count -= 1
        if not bucket:
            del buckets[at], maxes[at]
        elif i == len(bucket):
            maxes[at] = bucket[-1]

    def take(self, at: int, i: int) -> tuple[int, int]:
        """Removes the key at (bucket, index), and says where the keys after it now begin."""
        bucket = self.buckets[at]
        del bucket[i]
        self.count -= 1
        if not bucket:
            del self.buckets[at], self.maxes[at]
            return at, 0
        if i == len(bucket):
            self.maxes[at] = bucket[-1]
            return at + 1, 0
        return at, i

    def after(self, key: int) -> tuple[int, int]:
        """The place of the first key above `key`: (bucket, index), the bucket past the last if none."""
        at = bisect_right(self.maxes, key)
        return at, (bisect_right(self.buckets[at], key) if at < len(self.buckets) else 0)

    def __iter__(self) -> Iterator[int]:
        for bucket in self.buckets:
            yield from bucket
