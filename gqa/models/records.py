"""Copies of frozen records with some fields changed: dataclasses.replace, cheaper.

replace reads the class's field list and sets every field through the frozen
__init__, one object.__setattr__ each; a 100,000-task array is given its ids
and cancelled a copy per task, and a scheduling pass copies every waiting job.
Both copies here check the changed names against the class's fields, as
replace does, and leave out what a cached_property kept of the old record (a
parsed spec), which replace's fresh instance would not have either."""

from collections.abc import Callable
from dataclasses import fields
from functools import cached_property
from operator import attrgetter
from typing import NamedTuple, TypeVar

T = TypeVar("T")


class _Layout(NamedTuple):
    positions: dict[str, int]       # each field's place in __init__'s arguments
    values_of: Callable[[object], tuple]   # every field's value, in that order
    cached: tuple[str, ...]         # the class's cached properties, dropped from a copy
    names: frozenset[str]           # the fields, for the check of a change's names


_LAYOUTS: dict[type, _Layout] = {}


def with_changes(record: T, **changes: object) -> T:
    """A copy through __dict__, a tenth of replace's cost, for a record read once or twice.
    Its fields sit in a __dict__ handed out, which reads each several times slower than
    an instance __init__ built (see `rebuilt_with`)."""
    layout = _checked(type(record), changes)
    copy = object.__new__(type(record))
    state = copy.__dict__
    state.update(record.__dict__)
    state.update(changes)
    for name in layout.cached:
        state.pop(name, None)
    return copy


def rebuilt_with(record: T, **changes: object) -> T:
    """A copy built by the class's own __init__, at half replace's cost, for a record
    kept and read pass after pass (the replay's waiting jobs): each field then reads
    as fast as on any instance."""
    layout = _checked(type(record), changes)
    values = list(layout.values_of(record))
    for name, value in changes.items():
        values[layout.positions[name]] = value
    return type(record)(*values)


def _checked(cls: type, changes: dict[str, object]) -> _Layout:
    """The class's layout, once `changes` names only its fields (else TypeError, as replace)."""
    layout = _LAYOUTS.get(cls)
    if layout is not None and changes.keys() <= layout.names:
        return layout
    if layout is None:
        if any(not f.init or f.kw_only for f in fields(cls)):
            raise TypeError(f"{cls.__name__} is not a plain record: its __init__ does not take every field in order")
        names = [f.name for f in fields(cls)]
        cached = tuple(name for klass in cls.__mro__ for name, value in vars(klass).items()
                       if isinstance(value, cached_property))
        get = attrgetter(*names) if len(names) > 1 else lambda record: (getattr(record, names[0]),)
        layout = _LAYOUTS[cls] = _Layout({name: at for at, name in enumerate(names)}, get, cached, frozenset(names))
    unknown = changes.keys() - layout.names
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(map(repr, sorted(unknown)))}")
    return layout
