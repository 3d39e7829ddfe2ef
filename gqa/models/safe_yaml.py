"""YAML read without trusting it. PyYAML's safe loader builds no objects it
should not, but a few hundred bytes of aliases still expand to billions of
values, deep nesting overflows its recursive composer, and a repeated key
silently keeps the last value. This loader counts while it composes, before
anything is built, and turns every problem into one SpecError with the line.

Scalars are read by YAML 1.2's core schema, not PyYAML's YAML 1.1 rules,
which silently change what people write: `wall_time: 1:30:00` was the
sexagesimal 5400 (read as minutes: 90 hours), `0755` the octal 493, `no` and
`on` booleans. Under 1.2 only true/false are booleans, numbers are decimal
(0o and 0x for octal and hex), and `1:30:00` is text. A number keeps the text
it was written as (`yaml_text`), so `A: 1.10` in an environment and
`lr: [1e-4]` in a sweep reach the job as written."""

import re
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode

from .errors import SpecError
from .limits import MAX_NUMBER_CHARS, MAX_YAML_DEPTH, MAX_YAML_NODES, MAX_YAML_TEXT, size_text

_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOOL_TAG, _INT_TAG, _FLOAT_TAG = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_NUMBER_TAGS = (_INT_TAG, _FLOAT_TAG)
# YAML 1.2's core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution)
_CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_CORE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_CORE_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


class YamlInt(int):
    """An int that remembers how it was written (`0755`, `0x1F`)."""
    yaml_text: str


class YamlFloat(float):
    """A float that remembers how it was written (`1.10`, `1e-4`)."""
    yaml_text: str


def _written(number: Any, text: str) -> Any:
    number.yaml_text = text
    return number


class _Refused(Exception):
    """A limit or a rule broken at `mark` (PyYAML's own errors are YAMLErrors)."""

    def __init__(self, message: str, mark):
        super().__init__(message)
        self.message, self.mark = message, mark


class _Counted:
    """What a node stands for once its aliases are expanded."""
    __slots__ = ("nodes", "text")

    def __init__(self, nodes: int, text: int):
        self.nodes, self.text = nodes, text


class BoundedLoader(yaml.SafeLoader):
    """A SafeLoader that reads YAML 1.2's core schema and refuses, while composing:
    nesting deeper than MAX_YAML_DEPTH, more than MAX_YAML_NODES values or
    MAX_YAML_TEXT characters with every alias counted as what it refers to, an
    alias inside the node it names; and, while constructing, a key given twice
    in one mapping and a number too long to be one."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._text = 0
        self._anchored: dict[str, _Counted] = {}   # anchor -> size, once its node is complete

    # -- scanning --------------------------------------------------------------------
    def fetch_flow_collection_start(self, TokenClass):
        # Looking ahead for a possible key, the scanner visits every open flow level at every
        # token for up to 1024 characters: deep `[[[[` costs it quadratic time before the
        # composer sees a node. A flow level is a node level, so this refuses nothing more.
        if self.flow_level >= MAX_YAML_DEPTH:
            raise _Refused(f"nested deeper than {MAX_YAML_DEPTH} levels", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    # -- composing: counted before the composer recurses ---------------------------
    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            size = self._anchored.get(event.anchor)
            if size is None and event.anchor in self.anchors:
                raise _Refused(f"alias *{event.anchor} is inside the node it refers to", event.start_mark)
            if size is not None:  # an undefined alias is PyYAML's error
                self._count(size.nodes, size.text, event.start_mark)
            return super().compose_node(parent, index)
        nested = isinstance(event, CollectionStartEvent)
        if nested:
            self._depth += 1
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(f"nested deeper than {MAX_YAML_DEPTH} levels", event.start_mark)
        nodes_before, text_before = self._nodes, self._text
        self._count(1, len(event.value) if isinstance(event, ScalarEvent) else 0, event.start_mark)
        node = super().compose_node(parent, index)
        if nested:
            self._depth -= 1
        if event.anchor is not None:
            self._anchored[event.anchor] = _Counted(self._nodes - nodes_before, self._text - text_before)
        return node

    def _count(self, nodes: int, text: int, mark) -> None:
        self._nodes += nodes
        self._text += text
        if self._nodes > MAX_YAML_NODES:
            raise _Refused(f"more than {MAX_YAML_NODES} values (each alias counted as what it refers to)", mark)
        if self._text > MAX_YAML_TEXT:
            raise _Refused(f"more than {size_text(MAX_YAML_TEXT)} of text (each alias counted as what it refers to)",
                           mark)

    # -- constructing ----------------------------------------------------------------
    def construct_object(self, node: Node, deep: bool = False) -> Any:
        if isinstance(node, ScalarNode) and node.tag in _NUMBER_TAGS and len(node.value) > MAX_NUMBER_CHARS:
            # int() of sexagesimal "1:2:3:..." is quadratic, and long ints overflow str() and float()
            raise _Refused(f"number {_short(node.value)} is longer than {MAX_NUMBER_CHARS} characters; "
                           "quote it to make it text", node.start_mark)
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, LookupError, ArithmeticError) as exc:
            # PyYAML lets these through for e.g. `2024-13-45`, `!!bool maybe`, `!!int x`, `!!int ""`
            kind = node.tag.rpartition(":")[2] or node.tag
            what = f" {_short(node.value)}" if isinstance(node, ScalarNode) else ""
            why = f": {_one_line(str(exc))}" if isinstance(exc, ValueError) else ""
            raise _Refused(f"invalid {kind}{what}{why}", node.start_mark) from None

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node)
        digits = text.lstrip("+-")
        base = 8 if digits.startswith("0o") else 16 if digits.startswith("0x") else 10
        value = int(digits[2:] if base != 10 else digits, base)
        return _written(YamlInt(-value if text.startswith("-") else value), text)

    def construct_yaml_float(self, node):
        text = self.construct_scalar(node)
        lowered = text.lower()     # .inf, -.Inf, .NaN: float() reads them without the dot
        return _written(YamlFloat(float(lowered.replace(".", "") if lowered.lstrip("+-") in (".inf", ".nan")
                                        else text)), text)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, MappingNode):
            self._refuse_duplicate_keys(node)
        return super().construct_mapping(node, deep)

    def _refuse_duplicate_keys(self, node: MappingNode) -> None:
        # Only keys written in this mapping: keys brought in by a merge (<<) may be overridden.
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = key in first_line
            except TypeError:
                continue  # an unhashable key: SafeConstructor says so
            if seen:
                raise _Refused(f"duplicate key {_short(key)} (first at line {first_line[key]})", key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1


# YAML 1.1's implicit booleans, ints and floats out, the core schema's in (nulls, timestamps and merges stay)
BoundedLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_BOOL_TAG, _INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
BoundedLoader.add_implicit_resolver(_BOOL_TAG, _CORE_BOOL, list("tTfF"))
BoundedLoader.add_implicit_resolver(_INT_TAG, _CORE_INT, list("-+0123456789"))
BoundedLoader.add_implicit_resolver(_FLOAT_TAG, _CORE_FLOAT, list("-+0123456789."))
BoundedLoader.add_constructor(_INT_TAG, BoundedLoader.construct_yaml_int)
BoundedLoader.add_constructor(_FLOAT_TAG, BoundedLoader.construct_yaml_float)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def load(text: str, *, source: str | None = None) -> tuple[Any, Node | None]:
    """The data in a one-document YAML text and its root node (for lines)."""
    try:
        loader = BoundedLoader(text)   # reads the whole text for characters YAML forbids
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except _Refused as exc:
        raise SpecError(exc.message, line=exc.mark.line + 1 if exc.mark else None, source=source) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "not YAML"
        if exc.context and not exc.context.startswith("while "):  # "while parsing a flow sequence" adds nothing
            problem = f"{exc.context}, {problem}"
        raise SpecError(f"malformed YAML: {_one_line(problem)}", line=mark.line + 1 if mark else None,
                        source=source) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, e.g. a NUL
        line = text.count("\n", 0, exc.position) + 1
        raise SpecError(f"malformed YAML: character U+{exc.character:04X} is not allowed", line=line,
                        source=source) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"malformed YAML: {_one_line(str(exc))}", source=source) from None
    return data, node
