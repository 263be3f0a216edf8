"""One configuration value checked against its declaration, wherever it comes from (a recipe, a `syntrain run`
flag, `--set`, a config built in Python): `check_field` (one field of a config dataclass), a flag's text as a
value (`parse_value`), the error of an unknown key. A bad value is a `ConfigError`, one line naming the file or
flag, the section and the field, and what is allowed:

    recipe.toml: [train] warmup must be >= 1, got 0
    --lr must be a finite number, got nan
"""

from __future__ import annotations

import functools
import tomllib
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any

from synprep.tables import config_from_dict, did_you_mean


class ConfigError(ValueError):
    """A configuration value that is not allowed; the message names the file or flag and the field."""


@functools.cache
def _one_field(cls: type, name: str) -> type:
    """A dataclass of field `name` of `cls` alone (its declaration, no checks across fields: no `requires` or
    `conflicts`, which name the others)."""
    spec, hint = {f.name: f for f in fields(cls)}[name], typing.get_type_hints(cls)[name]
    copy = field(default=None, metadata={**spec.metadata, "requires": {}, "conflicts": ()})
    return dataclass(type(cls.__name__, (), {"__annotations__": {name: hint}, name: copy}))


def check_field(cls: type, name: str, value: Any, label: str) -> Any:
    """`value` checked against the declaration of field `name` of the config dataclass `cls` (type, range,
    choices; NaN, infinity and strings as booleans refused); a ConfigError names `label` ('recipe.toml: [train]
    warmup', '--warmup')."""
    try:
        return getattr(config_from_dict(_one_field(cls, name), {name: value}, ""), name)
    except ValueError as err:
        message = str(err).strip()
        rest = message[len(name):].lstrip() if message.startswith(name) else message
        raise ConfigError(f"{label} {rest}") from None


def parse_value(text: str, hint: Any = None) -> Any:
    """A flag's text as a value: a number for a number field ('1e-3', 'nan'), '2,0,1' for a list of integers,
    else a TOML value ('true', '[2, 0]', '"x"'), else the text itself (so 'yes' stays a string, never a
    boolean)."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    base = [arg for arg in typing.get_args(hint) if arg is not type(None)] if union else [hint]
    try:
        if base[0] is int:
            return int(text)
        if base[0] is float:
            return float(text)
        if typing.get_origin(base[0]) is list and not text.strip().startswith("["):
            return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        pass
    if base[0] is str:
        return text
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def unknown_key(key: str, known: list[str], label: str, elsewhere: dict[str, list[str]] | None = None) -> ConfigError:
    """'LABEL unknown key KEY (did you mean ...?)', or '(a [train] key)' when it belongs to another section."""
    other = [section for section, keys in (elsewhere or {}).items() if key in keys]
    hint = f" (a [{other[0]}] key)" if other else did_you_mean(key, known) or f" (known: {', '.join(known)})"
    return ConfigError(f"{label} unknown key {key}{hint}")
