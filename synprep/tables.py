"""TOML/JSON tables -> config dataclasses, checked: unknown keys and values of the wrong type are errors that
name them (pipeline files, training recipes, checkpoints)."""

from __future__ import annotations

import types
import typing
from dataclasses import fields
from typing import Any


def _has_type(value: Any, hint: Any) -> bool:
    """Whether a TOML/JSON value fits a dataclass field's type (int for float is fine, bool for int is not)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_has_type(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):
        return isinstance(value, int | float) and not isinstance(value, bool) and (hint is float or
                                                                                  isinstance(value, int))
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(map(_has_type, value, args))
        return all(_has_type(v, args[0]) for v in value) if args else True
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    return True


def config_from_dict(cls: type, values: dict, what: str) -> Any:
    """A config dataclass from a dict (a recipe table, a checkpoint): unknown keys and values of the wrong type
    are a ValueError naming them; lists become tuples where the field is a tuple."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = set(values) - known
    if unknown:
        raise ValueError(f"unknown {what} option(s): {', '.join(sorted(unknown))}")
    values = dict(values)
    for name, value in values.items():
        if not _has_type(value, hints[name]):
            raise ValueError(f"{what} option {name} = {value!r}: expected {hints[name]}")
        if typing.get_origin(hints[name]) is tuple and isinstance(value, list):
            values[name] = tuple(value)
    return cls(**values)
