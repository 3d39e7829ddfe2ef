""".gitignore patterns, for a directory that is not a git work tree (inside
one, git itself lists the files: gqa.adapters.local.code_bundle).

What is read, as git reads it: one pattern a line; blank lines and `#`
comments skipped; `!` re-includes; a trailing `/` matches directories only;
a pattern with a `/` elsewhere is anchored to its .gitignore's directory,
one without matches a name at any depth below it; `*`, `?`, `[...]` stay
within a path component and `**` spans components. Each directory's
.gitignore applies below it, the deeper and later pattern winning; what is
in an ignored directory stays ignored. Not read: trailing-space escapes,
`core.excludesFile` and `.git/info/exclude` (outside a work tree there are none)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    base: str                 # the .gitignore's directory, relative to the tree ("" at its top)
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool


def parse(text: str, base: str = "") -> list[Rule]:
    rules = []
    for line in text.splitlines():
        line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith("\\"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        rules.append(Rule(base.strip("/"), re.compile(_translate(line.lstrip("/"))), negate, dir_only, anchored))
    return rules


def _translate(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape("["))
                i += 1
                continue
            body = pattern[i + 1:end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out) + r"\Z"


def ignored(path: str, is_dir: bool, rules: list[Rule]) -> bool:
    """Whether `path` (relative to the tree, '/'-separated) is ignored: the last rule that matches decides."""
    verdict = False
    for rule in rules:
        if rule.dir_only and not is_dir:
            continue
        if rule.base:
            if not path.startswith(rule.base + "/"):
                continue
            rel = path[len(rule.base) + 1:]
        else:
            rel = path
        subject = rel if rule.anchored else rel.rpartition("/")[2]
        if rule.regex.match(subject):
            verdict = not rule.negate
    return verdict
