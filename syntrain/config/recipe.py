"""Configuration read from files: a recipe TOML ([data], [model], [train]; a run folder's config.toml is one),
`--set SECTION.FIELD=VALUE`, and the configurations a checkpoint stores; every key and value checked against its
declaration before anything is loaded or written (`syntrain.config.sections`)."""

from __future__ import annotations

import os
import tomllib
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from synprep.tables import did_you_mean

from .sections import check_model_value, check_value, model_keys
from .train import DATA_KEYS, MODEL_TABLE_KEYS, TrainConfig, train_keys
from .values import ConfigError, parse_value, unknown_key

if TYPE_CHECKING:
    from .model import ModelConfig

SECTIONS = ("data", "model", "train", "synprep")  # [synprep]: the data's signature in a run's config.toml (read-only)


def stored_model_config(ckpt: dict, path: str) -> ModelConfig:
    """The ModelConfig of a checkpoint, checked by the declarations; a bad value is a ValueError naming the file."""
    from ..switches import registered
    from .model import ModelConfig  # imports torch: only when a checkpoint is read

    stored = ckpt.get("model_config")
    if not isinstance(stored, dict):
        raise ValueError(f"{path}: stored model configuration: not a table (got {type(stored).__name__}): the "
                         "checkpoint is damaged or not syntrain's")
    stored = dict(stored)
    for switch in registered():  # options added since: the value the older code had (not the new default)
        for name, value in switch.stored_defaults.items():
            stored.setdefault(name, value)
    try:
        return ModelConfig.from_dict(stored)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: stored model configuration: {err}") from None


def stored_train_config(ckpt: dict, path: str) -> TrainConfig:
    """The TrainConfig of a checkpoint (keys of other syntrain versions left out), checked by the declarations."""
    known = {f.name for f in fields(TrainConfig)}
    stored = ckpt.get("train_config", {})
    try:
        return TrainConfig.from_dict({k: v for k, v in stored.items() if k in known} if isinstance(stored, dict)
                                     else stored)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: stored training configuration: {err}") from None


def read_toml(path: str) -> dict[str, Any]:
    """A TOML file as a dict; not UTF-8, not TOML or unreadable is a ConfigError naming the file (and line)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 (a recipe is UTF-8 TOML)") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None


def _resolve(path: str, here: str) -> str:
    path = os.path.expanduser(path)
    return path if not path or os.path.isabs(path) else os.path.normpath(os.path.join(here, path))


def load_run_config(path: str) -> dict[str, Any]:
    """A recipe TOML ([data] train/valid/test, [model] preset + model options, [train] the rest) -> TrainConfig
    values, every key and value checked against its declaration; relative paths resolve against the file's
    folder. A run's config.toml is a recipe too ([synprep]: the data's signature, not read)."""
    table = read_toml(path)
    for section, value in table.items():
        if section not in SECTIONS:
            hint = did_you_mean(f"[{section}]", [f"[{name}]" for name in SECTIONS[:3]])
            raise ConfigError(f"{path}: unknown section [{section}]" + (hint or " (use [data], [model], [train])"))
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {section} must be a table ([{section}]), got {value!r}")
    here = os.path.dirname(os.path.abspath(path))
    values: dict[str, Any] = {}
    for key, value in table.get("data", {}).items():
        if key not in DATA_KEYS:
            raise unknown_key(key, list(DATA_KEYS), f"{path}: [data]")
        values[DATA_KEYS[key]] = _resolve(check_value("train", DATA_KEYS[key], value, f"{path}: [data] {key}"), here)
    known = train_keys()
    for key, value in table.get("train", {}).items():
        if key not in known:
            raise unknown_key(key, known, f"{path}: [train]", {"model": [*MODEL_TABLE_KEYS, *model_keys()],
                                                              "data": ["data", "valid", "test"]})
        values[key] = check_value("train", key, value, f"{path}: [train] {key}")
    if values.get("out"):
        values["out"] = _resolve(values["out"], here)
    model = {key: check_model_value(key, value, f"{path}: [model] ") for key, value in table.get("model", {}).items()}
    for key in MODEL_TABLE_KEYS:
        if key in model:
            values[key] = model.pop(key)
    if values.get("pretrained"):
        values["pretrained"] = _resolve(values["pretrained"], here)
    values["model"] = model
    return values


def parse_set(item: str) -> tuple[str, str, Any]:
    """`--set SECTION.FIELD=VALUE` (VALUE a TOML value: true, 100, 1e-3, [2, 0], "text"; bare text is a string)
    -> (section, field, checked value)."""
    key, sep, text = item.partition("=")
    section, dot, name = key.strip().partition(".")
    if not sep or not dot or section not in ("model", "train"):
        raise ConfigError(f"--set {item}: expected model.FIELD=VALUE or train.FIELD=VALUE (data: --data, --valid, "
                          "--test)")
    label = f"--set {section}."
    if section == "model":
        return section, name, check_model_value(name, parse_value(text.strip()), label)
    if name not in train_keys():
        raise unknown_key(name, train_keys(), "--set train:", {"model": model_keys()})
    return section, name, check_value("train", name, parse_value(text.strip()), f"{label}{name}")
