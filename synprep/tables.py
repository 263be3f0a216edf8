"""TOML/JSON tables -> config dataclasses, checked: unknown keys, values of the wrong type and values out of
their declared range are errors that name them (pipeline files, training recipes, flags, checkpoints).

A field declares its range once, with `option(...)`; `config_from_dict` checks it wherever values come from,
and `describe_option` words it for `--help` and the docs:

    @dataclass
    class TrainConfig:
        warmup: int = option(4000, ge=1, help="warm-up steps")

NaN and infinity are refused in every float field; strings are never taken as booleans; an empty string is
refused where the field's default is None (`model = ""`: leave the key out).
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, Field, field, fields
from typing import Any

_BOUNDS = (("ge", ">=", lambda v, b: v >= b), ("gt", ">", lambda v, b: v > b), ("le", "<=", lambda v, b: v <= b),
           ("lt", "<", lambda v, b: v < b))


class LiveChoices(Sequence[str]):
    """Allowed values read from a registry each time they are asked for (a value registered after the field was
    declared is allowed too): `option(choices=LiveChoices(registry.names))`."""

    def __init__(self, read: Callable[[], Sequence[str]]) -> None:
        self.read = read

    def __getitem__(self, index: Any) -> Any:
        return self.read()[index]

    def __len__(self) -> int:
        return len(self.read())


def option(default: Any = MISSING, *, default_factory: Any = MISSING, help: str = "",  # noqa: A002
           ge: float | None = None, gt: float | None = None, le: float | None = None, lt: float | None = None,
           choices: Sequence[Any] | None = None, filled: bool = False, flag: bool = False,
           requires: dict[str, Any] | None = None, conflicts: tuple[str, ...] = ()) -> Any:
    """A dataclass field with its help text and allowed values (bounds apply to each item of a list); `filled`:
    the trainer sets it from the training data (not a recipe key); `flag`: a [model] option that is also a
    `syntrain run --NAME` flag. `requires` and `conflicts` say what it needs of the fields of its own dataclass,
    as `synprep.arguments.Arg` does of a command's options: `requires={"joint": False}` (set, it does nothing
    unless joint is false; a tuple: one of those values; None: unless the other is set), `conflicts=("overwrite",)`
    (the two set together contradict each other); `check_together` refuses such values."""
    metadata = {"help": help, "ge": ge, "gt": gt, "le": le, "lt": lt,
                "choices": choices if choices is None or isinstance(choices, tuple | LiveChoices) else tuple(choices),
                "filled": filled, "flag": flag, "requires": dict(requires or {}), "conflicts": tuple(conflicts)}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def has_type(value: Any, hint: Any) -> bool:
    """Whether a TOML/JSON value fits a dataclass field's type (int for float is fine, bool for int is not)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(has_type(value, arg) for arg in args)
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
            return len(value) == len(args) and all(map(has_type, value, args))
        return all(has_type(v, args[0]) for v in value) if args else True
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    return True


def _type_words(hint: Any) -> str:
    """A type hint in words: 'an integer', 'a list of integers', 'a string or nothing'."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_words(arg) for arg in args if arg is not type(None))
    if origin in (list, tuple):
        inner = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}.get(args[0] if args else None)
        return f"a list of {inner}" if inner else "a list"
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a table"}
    return words.get(hint, str(hint))


def describe_option(cls: type, name: str) -> str:
    """The allowed values of a field declared with `option`, in words: 'an integer >= 1', 'one of a, b'."""
    meta = {f.name: f for f in fields(cls)}[name].metadata
    if meta.get("choices"):
        return "one of " + ", ".join(map(str, meta["choices"]))
    words = _type_words(typing.get_type_hints(cls)[name])
    bounds = [f"{sign} {meta[key]:g}" for key, sign, _ in _BOUNDS if meta.get(key) is not None]
    return words + (" " + " and ".join(bounds) if bounds else "")


def _range_error(name: str, value: Any, spec: Field) -> str | None:
    """Why `value` is outside the field's declared values (None if it is fine)."""
    items = value if isinstance(value, list | tuple) else [value]
    for item in items:
        if isinstance(item, float) and not math.isfinite(item):
            return f"{name} must be a finite number, got {item!r}"
    twice = repeated(items) if isinstance(value, list | tuple) and all(isinstance(v, str) for v in items) else []
    if twice:
        return f"{name} lists {twice[0]!r} twice"
    meta = spec.metadata
    if meta.get("choices") is not None and value not in meta["choices"]:
        return f"{name} must be one of {', '.join(map(str, meta['choices']))}, got {value!r}"
    for item in items:
        if not isinstance(item, int | float) or isinstance(item, bool):
            continue
        for key, sign, ok in _BOUNDS:
            if meta.get(key) is not None and not ok(item, meta[key]):
                return f"{name} must be {sign} {meta[key]:g}, got {item!r}"
    return None


def repeated(items: Iterable[Any]) -> list[Any]:
    """The items listed more than once, in order of their second appearance (`en, de, en` -> [en]): a list of
    names (languages, feature groups, formats) that names one twice is a mistake, refused rather than merged."""
    seen: set = set()
    twice = []
    for item in items:
        if item in seen and item not in twice:
            twice.append(item)
        seen.add(item)
    return twice


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """' (did you mean KNOWN?)' for the closest known key, or '' when none is close: the one hint both CLIs give
    for a mistyped key (recipes, pipeline files)."""
    close = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def toml_words(value: Any) -> str:
    """A value as a TOML file writes it: `false`, `"tsv"`, `3` (None: none, not set)."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "none"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _default(spec: Field) -> Any:
    return spec.default_factory() if spec.default is MISSING and spec.default_factory is not MISSING \
        else spec.default


def is_set(cls: type, values: dict, name: str) -> bool:
    """Whether field `name` is set in `values`: given, and neither nothing (None, an empty list) nor its default."""
    value = values.get(name)
    return value not in (None, (), []) and value != _default({f.name: f for f in fields(cls)}[name])


def clash(rules: dict[str, tuple[dict, Iterable[str]]], is_given: Callable[[str], bool], value: Callable[[str], Any],
          name: Callable[[str], str], setting: Callable[[str, tuple, bool], str]) -> str | None:
    """The first broken rule among settings, worded, or None: `rules` maps each setting to its declared `requires`
    (other -> the value or tuple of values it needs; None: any value, the other only has to be set) and
    `conflicts`; `is_given` says whether a setting is set, `value` what it holds, `name` how to name one and
    `setting(other, values, named)` how to word values of another. The one rule behind a file's keys
    (`check_together`) and a command's options (`synprep.arguments.check_together`)."""
    for key, (requires, conflicts) in rules.items():
        if not is_given(key):
            continue
        for other, wanted in requires.items():
            allowed = wanted if isinstance(wanted, tuple) else (wanted,)
            if wanted is None and not is_given(other):
                return f"{name(key)} does nothing without {name(other)}"
            if wanted is not None and value(other) not in allowed:
                return f"{name(key)} is for {setting(other, allowed, True)}, not " \
                       f"{setting(other, (value(other),), False)}"
        for other in conflicts:
            if is_given(other):
                return f"{name(key)} and {name(other)} exclude each other"
    return None


def check_together(cls: type, values: dict, what: str = "", name: Callable[[str], str] = str) -> None:
    """The declared `requires` and `conflicts` of the fields set in `values` (`is_set`): a ValueError in one line
    that starts with `what` and words each field by `name` ('[bpe] src_symbols is for joint = false, not true',
    '[parser.src] preset does nothing without train_conllu', '--resume and --overwrite exclude each other')."""
    specs = {f.name: f for f in fields(cls)}

    def setting(other: str, allowed: tuple, named: bool) -> str:
        return f"{name(other)} = " * named + " or ".join(map(toml_words, allowed))

    problem = clash({key: (spec.metadata.get("requires", {}), spec.metadata.get("conflicts", ()))
                     for key, spec in specs.items()}, lambda key: is_set(cls, values, key),
                    lambda key: values[key] if key in values else _default(specs[key]), name, setting)
    if problem:
        raise ValueError(f"{what} {problem}".strip())


def config_from_dict(cls: type, values: dict, what: str) -> Any:
    """A config dataclass from a dict (a recipe table, flags, a checkpoint): unknown keys, values of the wrong
    type, values outside the declared range and values that need or contradict others (`check_together`) are a
    ValueError naming them ('[train] warmup must be >= 1, got 0'); lists become tuples where the field is a
    tuple."""
    hints = typing.get_type_hints(cls)
    specs = {f.name: f for f in fields(cls)}
    unknown = set(values) - set(specs)
    if unknown:
        raise ValueError(f"unknown {what} option(s): {', '.join(sorted(unknown))}")
    values = dict(values)
    for name, value in values.items():
        if not has_type(value, hints[name]):
            raise ValueError(f"{what} {name} must be {_type_words(hints[name])}, got {value!r}")
        if isinstance(value, str) and not value.strip() and has_type(None, hints[name]) \
                and _default(specs[name]) is None:
            raise ValueError(f"{what} {name} is empty: leave the key out for none")  # an unset $VARIABLE, a slip
        problem = _range_error(name, value, specs[name])
        if problem:
            raise ValueError(f"{what} {problem}")
        if typing.get_origin(hints[name]) is tuple and isinstance(value, list):
            values[name] = tuple(value)
    check_together(cls, values, what)
    return cls(**values)
