"""A run's configuration (`resolve_run`: recipe < --set < flags < the declared defaults) and every check that
needs no training data loaded, before anything is written (`check_run`): the splits are split folders of one
signature, the model builds, the options fit each other and the machine, no earlier run is in the way."""

from __future__ import annotations

import json
import os
from typing import Any

from synprep.tables import check_together

from .recipe import load_run_config, parse_set
from .train import CONFIG_FILE, DATA_KEYS, LANGUAGE_KEYS, MODEL_TABLE_KEYS, TrainConfig, inverse_sqrt
from .values import ConfigError

SIGNATURE_KEYS = {  # what makes shards incompatible
    "parsers": "parsers", "bpe_codes_sha256": "BPE codes", "bpe_codes_sha256_src": "source BPE codes",
    "bpe_codes_sha256_tgt": "target BPE codes", "normalize": "normalization"}


def split_signature(path: str) -> dict[str, Any]:
    """The synprep signature of a split folder (from its manifest)."""
    from synprep.shards import load_manifest

    return load_manifest(path).signature


def empty_split(path: str, role: str) -> None:
    """Refuse a split of 0 pairs before anything is written (a run would stop at its first batch, validation or
    test score)."""
    from synprep.errors import InputError
    from synprep.shards import load_manifest

    if not load_manifest(path).rows:
        flag = {"training": "--data", "validation": "--valid", "test": "--test"}[role]
        raise InputError(f"the {role} split has 0 pairs (all rejected when it was converted? see its "
                         f"rejected.tsv): give another {flag}" + (" or --" + flag[2:] + " ''" if flag != "--data"
                                                                   else ""), path)


def signature_differences(trained: dict[str, Any], given: dict[str, Any]) -> list[str]:
    """What makes two splits' shards incompatible: ['parsers', 'BPE codes'] where their signatures differ."""
    return [words for key, words in SIGNATURE_KEYS.items() if trained.get(key) != given.get(key)]


def _same_path(a: str, b: str) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def choose_splits(values: dict[str, Any], recipe: dict[str, Any], flags: dict[str, Any]) -> list[str]:
    """When --data replaces the recipe's training split, the recipe's valid/test (not given again as flags) stay
    only if their shards' signature (parsers, BPE codes) is the new training data's; the others are dropped from
    `values`. Returns one warning line per dropped split."""
    notes: list[str] = []
    if not (recipe.get("data") and flags.get("data")) or _same_path(recipe["data"], flags["data"]):
        return notes
    try:
        trained = split_signature(flags["data"])
    except Exception:  # noqa: BLE001 (reported by the up-front split check, naming the folder)
        return notes
    for split in ("valid", "test"):
        path = recipe.get(split)
        if not path or split in flags:  # given as a flag ('' = none): the user's choice
            continue
        try:
            differ = signature_differences(trained, split_signature(path))
            reason = f"its {' and '.join(differ)} differ from those of --data {flags['data']}" if differ else ""
        except Exception as err:  # noqa: BLE001 (a missing or damaged split folder)
            reason = f"unreadable ({' '.join(str(err).split())})"
        if reason:
            values[split] = ""
            notes.append(f"warning: --data replaces the recipe's training split; its {split} split {path} is "
                         f"dropped: {reason} (give --{split} to {'validate' if split == 'valid' else 'test'})")
    return notes


def warmup_note(cfg: TrainConfig) -> str | None:
    """One warning line when the learning rate never reaches its peak within max_steps (warm-up too long)."""
    if cfg.warmup <= cfg.max_steps:
        return None
    last = cfg.lr * inverse_sqrt(cfg.warmup)(cfg.max_steps)  # the lr the progress line shows at the last step
    return (f"warning: warm-up ({cfg.warmup} steps) is longer than the run ({cfg.max_steps} steps): lr reaches "
            f"{last:.1e} at the last step, never its peak {cfg.lr:g} (lower --warmup, e.g. to "
            f"{max(1, cfg.max_steps // 10)})")


def check_model(cfg: TrainConfig, label: str) -> None:
    """The model of `cfg` (preset + [model]) builds: every value declared-valid, the switches fit the sizes
    (built on the meta device: no memory, no time); a ConfigError names the field."""
    import torch

    from ..model import Transformer
    from .checks import idle_options
    from .core import PRESETS
    from .model import ModelConfig

    try:
        if cfg.pretrained:  # its sizes and architecture from its config.json, then the switches on top
            from ..pretrained import PretrainedSource

            mcfg = PretrainedSource.read(cfg.pretrained).model_config(**cfg.language_codes(), **cfg.model)
        else:
            mcfg = ModelConfig.from_dict({**PRESETS[cfg.preset], **cfg.model, "vocab_size": 8})  # every check
        idle = idle_options(mcfg, cfg.model)
        if idle:
            raise ValueError(idle[0])
        with torch.device("meta"):
            Transformer(mcfg)
    except (ValueError, RuntimeError) as err:
        message = " ".join(str(err).split())
        raise ConfigError(f"{label} {message.removeprefix('model ')}") from None


def check_run(cfg: TrainConfig, model_label: str) -> list[str]:
    """Every check that needs no training data loaded, before anything is written: the splits are split folders,
    the model builds, the options fit each other and the machine, no earlier run is in the way. Returns the
    warning lines (warm-up longer than the run, splits of other shards)."""
    from synprep.errors import InputError

    from ..runfolder.files import existing_run_files

    check_model(cfg, model_label)
    if not cfg.data:
        raise ConfigError("no training data: give a recipe with [data] train or --data")
    signatures = {}
    for split in ("data", "valid", "test"):
        path = getattr(cfg, split)
        if path:
            try:
                signatures[split] = split_signature(path)
                empty_split(path, {"data": "training", "valid": "validation", "test": "test"}[split])
            except InputError as err:
                raise ConfigError(str(err)) from None
    from ..trackers import tensorboard_installed, wandb_installed, wandb_login_problem

    if cfg.wandb_project and not wandb_installed():
        raise ConfigError("--wandb-project needs the wandb package (pip install 'synprep[wandb]')")
    if cfg.wandb_project and (problem := wandb_login_problem()):
        raise ConfigError(f"--wandb-project {cfg.wandb_project}: {problem}")
    if cfg.attention == "flex" and cfg.device == "cpu":
        raise ConfigError("attention = 'flex' trains on CUDA only (PyTorch has no FlexAttention backward on CPU); "
                          "use 'auto' or 'math'")
    earlier = existing_run_files(cfg.out) if cfg.out else []
    if earlier and not cfg.resume and not cfg.overwrite:
        raise ConfigError(f"{cfg.out}: holds an earlier run ({', '.join(earlier)}); --resume continues it, "
                          "--overwrite deletes it, or choose another --out")
    notes = [note] if (note := warmup_note(cfg)) else []
    if cfg.tensorboard and not tensorboard_installed():
        notes.append("note: the tensorboard package is not installed: no OUT/tensorboard (pip install tensorboard)")
    for split in ("valid", "test"):
        differ = signature_differences(signatures["data"], signatures[split]) if split in signatures else []
        if differ:
            notes.append(f"warning: the {split} split {getattr(cfg, split)} was not made with the "
                         f"{' and '.join(differ)} of the training data {cfg.data} (synprep signatures differ)")
    return notes


def resolve_run(recipe: str | None, flags: dict[str, Any], model_flags: dict[str, Any],
                sets: tuple[str, ...] = ()) -> tuple[TrainConfig, list[str], str]:
    """The run's configuration: recipe (or, for `--resume --out RUN` without one, RUN/config.toml) < --set <
    flags < nothing given: the declared defaults. Returns (config, warning lines, how to name the [model] source
    in errors)."""
    flags = {key: value for key, value in flags.items() if value is not None}
    if recipe is None and flags.get("resume") and flags.get("out"):
        saved = os.path.join(flags["out"], CONFIG_FILE)
        if os.path.isfile(saved):
            recipe = saved
        elif not flags.get("data"):
            raise ConfigError(f"--resume: {flags['out']} has no {CONFIG_FILE} (a run of an older syntrain): give the "
                              "recipe and flags it was started with")
    values = load_run_config(recipe) if recipe else {"model": {}}
    from_recipe = dict(values)
    origin: dict[str, str] = {}  # a field -> how to name it where it was set (a flag, --set, the recipe)
    if recipe and not values.get("name") and os.path.basename(recipe) != CONFIG_FILE:
        values["name"] = os.path.splitext(os.path.basename(recipe))[0]
    model = dict(values["model"])
    for item in sets:
        section, name, value = parse_set(item)
        if section == "model" and name in MODEL_TABLE_KEYS:
            values[name] = value
        elif section == "model":
            model[name] = value
        else:
            values[name] = value
        origin[name] = f"--set {section}.{name}"
    values.update(flags)
    origin.update({name: "--" + name.replace("_", "-") for name in flags})
    model.update({key: value for key, value in model_flags.items() if value is not None})
    values["model"] = model
    model_label = f"{recipe}: [model]" if recipe else "[model]"
    if values.get("pretrained") and not values.get("resume"):
        check_pretrained_run(values, model_label)
    given = [key for key in LANGUAGE_KEYS if values.get(key)]
    if given and not values.get("pretrained"):
        raise ConfigError(f"{model_label} {given[0]} = {json.dumps(values[given[0]])}: a language code of a "
                          "multilingual pretrained model: it does nothing without pretrained")
    notes = choose_splits(values, from_recipe, flags)
    if values.get("resume") and not values.get("out"):
        raise ConfigError("--resume needs the run folder: --out RUN (or [train] out in the recipe)")
    try:
        check_together(TrainConfig, values, name=lambda name: origin.get(name) or recipe_key(recipe, name))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return TrainConfig.from_dict(values), notes, model_label


def recipe_key(recipe: str | None, name: str) -> str:
    """A [train] field named as a recipe sets it: `recipe.toml: [data] train`, `[model] preset`, `[train] lr`."""
    data = {field: key for key, field in DATA_KEYS.items()}
    where = f"[data] {data[name]}" if name in data else \
        f"[{'model' if name in MODEL_TABLE_KEYS else 'train'}] {name}"
    return f"{recipe}: {where}" if recipe else where


def check_pretrained_run(values: dict[str, Any], label: str) -> None:
    """A run from a pretrained model takes its sizes, sharing and architecture from the model's config: a preset or
    one of those options given too is refused (one line naming it)."""
    from .core import fixed_by_pretrained

    given = (["preset"] if "preset" in values else []) + [key for key in values["model"]
                                                          if key in fixed_by_pretrained()]
    if given:
        raise ConfigError(f"{label} {given[0]}: a run from a pretrained model ({values['pretrained']}) takes its "
                          f"sizes and architecture from the model's config.json: remove {given[0]}")
