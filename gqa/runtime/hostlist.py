"""Slurm's host-list syntax: `node[1-3,7],gpu-[01-02]-a` names node1, node2,
node3, node7, gpu-01-a and gpu-02-a. A range keeps the width of its low
bound (`[08-10]` is 08, 09, 10); several brackets in one name multiply.
What `scontrol show hostnames` and `show hostlist` read and write."""

from __future__ import annotations

import itertools
import re

MAX_HOSTS = 65_536      # a list that expands past this is a typo, not a cluster


class HostListError(ValueError):
    """The text is not a host list; the message says where, in one line."""


def expand(text: str) -> list[str]:
    """Every host a host list names, in its order."""
    hosts: list[str] = []
    for item in _top_level_items(text):
        if "[]" in item:
            raise HostListError(f"{item!r}: an empty [] names no host")
        pieces: list[list[str]] = []
        for literal, inside in re.findall(r"([^\[\]]*)(?:\[([^\[\]]*)\])?", item):
            if literal:
                pieces.append([literal])
            if inside:
                pieces.append(_bracket(inside, item))
        count = 1
        for piece in pieces:
            count *= len(piece)
        if len(hosts) + count > MAX_HOSTS:
            raise HostListError(f"{text!r} names more than {MAX_HOSTS} hosts")
        hosts.extend("".join(parts) for parts in itertools.product(*pieces))
    return hosts


def compress(hosts: list[str]) -> str:
    """The shortest usual spelling of `hosts`, in their order: neighbours that differ only
    in a trailing number of one width share a bracket (node1,node2,node4 -> node[1-2,4])."""
    groups: list[tuple[str, int, list[int]]] = []     # prefix, width of the number, numbers
    for host in hosts:
        match = re.fullmatch(r"(.*?)(\d+)", host)
        if match is None:
            groups.append((host, -1, []))
            continue
        prefix, digits = match.groups()
        if groups and groups[-1][0] == prefix and groups[-1][1] >= 0 and f"{int(digits):0{groups[-1][1]}d}" == digits:
            groups[-1][2].append(int(digits))     # same prefix, and the number reads the same at its width
        else:
            groups.append((prefix, len(digits) if digits.startswith("0") else 0, [int(digits)]))
    out = []
    for prefix, width, numbers in groups:
        if width < 0:
            out.append(prefix)
        elif len(numbers) == 1:
            out.append(f"{prefix}{numbers[0]:0{width}d}")
        else:
            out.append(f"{prefix}[{_ranges(numbers, width)}]")
    return ",".join(out)


def _top_level_items(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for at, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostListError(f"{text!r}: brackets do not nest in a host list")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostListError(f"{text!r}: ']' at {at + 1} closes no '['")
        elif char == "," and depth == 0:
            items.append(text[start:at])
            start = at + 1
    if depth:
        raise HostListError(f"{text!r}: a '[' is never closed")
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _bracket(inside: str, item: str) -> list[str]:
    values: list[str] = []
    for part in inside.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise HostListError(f"{item!r}: [{inside}] holds {part!r}, not a number or a range like 1-3")
        if not dash:
            values.append(low)
            continue
        if int(high) < int(low):
            raise HostListError(f"{item!r}: the range {part} runs backwards")
        if int(high) - int(low) >= MAX_HOSTS:
            raise HostListError(f"{item!r}: the range {part} names more than {MAX_HOSTS} hosts")
        values.extend(f"{n:0{len(low)}d}" for n in range(int(low), int(high) + 1))
    return values


def _ranges(numbers: list[int], width: int) -> str:
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}" for lo, hi in spans)
