"""The sections of a recipe ([data], [model], [train]) and their keys: the declaration of each key (`declaration`:
TrainConfig's fields, the generic model's and every registered switch's), a value checked against it
(`check_value`, `check_model_value`: old spellings read, data-derived keys refused), the keys of [model]."""

from __future__ import annotations

import functools
import typing
from dataclasses import fields
from typing import Any

from .train import MODEL_TABLE_KEYS, TrainConfig, train_keys
from .values import ConfigError, check_field, unknown_key


def _model_parts() -> list[type]:
    """The dataclasses ModelConfig is composed of: the generic model's parts, then each switch's section (no switch may
    declare a [train] name: `syntrain run` flags and --set are flat)."""
    from .model import config_parts  # imports torch: only when a model value is checked

    parts = list(config_parts().values())  # reserves the generic model's names first (max_len is [train]'s too)
    _reserve_train_names()
    return parts


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


def check_value(section: str, name: str, value: Any, label: str) -> Any:
    """`value` checked against the declaration of [section] field `name`; a ConfigError names `label`."""
    return check_field(declaration(section, name)[0], name, value, label)  # type: ignore[index]


def trainer_filled() -> list[str]:
    """The [model] fields the trainer sets from the training data (declared `option(filled=True)`)."""
    return [f.name for cls in _model_parts() for f in fields(cls) if f.metadata.get("filled")]


def model_keys() -> list[str]:
    """The keys of a recipe's [model] table besides preset."""
    return [f.name for cls in _model_parts() for f in fields(cls) if not f.metadata.get("filled")]


def check_model_value(name: str, value: Any, label: str) -> Any:
    """One [model] value (recipe, flag or --set) checked against its declaration; `label` names where it came
    from, without the field ('recipe.toml: [model]', '--set model.')."""
    if name in MODEL_TABLE_KEYS:
        return check_value("train", name, value, f"{label}{name}")
    from ..switches import current_names

    name = next(iter(current_names({name: None}, label.rstrip(". :"))))  # an old spelling: checked as its name now
    if name in trainer_filled():
        raise ConfigError(f"{label}{name} is set by the trainer from the training data: remove it")
    if declaration("model", name) is None:
        raise unknown_key(name, [*MODEL_TABLE_KEYS, *model_keys()],
                          label.rstrip(". ") + ("" if label.endswith("] ") else ":"), {"train": train_keys()})
    return check_value("model", name, value, f"{label}{name}")
