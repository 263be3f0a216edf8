"""One configuration value checked against its declaration, wherever it comes from (a recipe, a `syntrain run`
flag, `--set`, `--help`): the declaration of a [train] or [model] field (`declaration`), a value checked against
it (`check_value`, `check_model_value`), a flag's text as a value (`parse_value`), the keys of the [model] table.
A bad value is one line naming the file or flag, the section and the field, and what is allowed:

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

from .train import TrainConfig, train_keys


class ConfigError(ValueError):
    """A configuration value that is not allowed; the message names the file or flag and the field."""


def _model_parts() -> list[type]:
    """The dataclasses ModelConfig is composed of: the sizes, then each registered switch's slice (no switch may
    declare a [train] name: `syntrain run` flags and --set are flat)."""
    from .model import config_parts  # imports torch: only when a model value is checked

    _reserve_train_names()
    return list(config_parts().values())


@functools.cache
def _reserve_train_names() -> None:
    """The [train] names reserved against the switches' options, once per process."""
    from ..switches import reserve

    reserve("the training options ([train])", [spec.name for spec in fields(TrainConfig)])


def declaration(section: str, name: str) -> tuple[type, Any, Any] | None:
    """(config class, dataclass field, type hint) of a [train] or [model] field; None when there is no such field."""
    classes = [TrainConfig] if section == "train" else _model_parts()
    cls = next((c for c in classes if any(f.name == name for f in fields(c))), classes[0])
    spec = {f.name: f for f in fields(cls)}.get(name)
    return (cls, spec, typing.get_type_hints(cls)[name]) if spec else None


@functools.cache
def _one_field(section: str, name: str) -> type:
    """A dataclass of field `name` alone (its declaration, no checks across fields)."""
    cls, spec, hint = declaration(section, name)  # type: ignore[misc]
    copy = field(default=None, metadata=spec.metadata)
    return dataclass(type(cls.__name__, (), {"__annotations__": {name: hint}, name: copy}))


def check_value(section: str, name: str, value: Any, label: str) -> Any:
    """`value` checked against the declaration of field `name` (type, range, choices; NaN, infinity and strings as
    booleans refused); a ConfigError names `label` ('recipe.toml: [train] warmup', '--warmup')."""
    try:
        return getattr(config_from_dict(_one_field(section, name), {name: value}, ""), name)
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


def trainer_filled() -> list[str]:
    """The [model] fields the trainer sets from the training data (declared `option(filled=True)`)."""
    return [f.name for cls in _model_parts() for f in fields(cls) if f.metadata.get("filled")]


def model_keys() -> list[str]:
    """The keys of a recipe's [model] table besides preset."""
    return [f.name for cls in _model_parts() for f in fields(cls) if not f.metadata.get("filled")]


def check_model_value(name: str, value: Any, label: str) -> Any:
    """One [model] value (recipe, flag or --set) checked against its declaration; `label` names where it came
    from, without the field ('recipe.toml: [model]', '--set model.')."""
    if name == "preset":
        return check_value("train", "preset", value, f"{label}{name}")
    from ..switches import current_names

    name = next(iter(current_names({name: None}, label.rstrip(". :"))))  # an old spelling: checked as its name now
    if name in trainer_filled():
        raise ConfigError(f"{label}{name} is set by the trainer from the training data: remove it")
    if declaration("model", name) is None:
        raise unknown_key(name, ["preset", *model_keys()], label.rstrip(". ") + ("" if label.endswith("] ") else ":"),
                       {"train": train_keys()})
    return check_value("model", name, value, f"{label}{name}")
