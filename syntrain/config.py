"""syntrain's configuration, declared once: every training option with its type, allowed values, default and help
(`TrainConfig`, and the model's in `ModelConfig`), read from a recipe TOML ([data], [model], [train]), from the
`syntrain run` flags and `--set SECTION.FIELD=VALUE`, and from checkpoints alike, and checked before anything is
loaded or written. A bad value is one line naming the file or flag, the section and the field, and what is allowed:

    recipe.toml: [train] warmup must be >= 1, got 0
    --lr must be a finite number, got nan

`python -m syntrain.config docs/recipe-fields.md` rewrites the generated tables of that page.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import sys
import tomllib
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from synprep.options import BLEU_TOKENIZERS
from synprep.tables import config_from_dict, describe_option, did_you_mean, option

if TYPE_CHECKING:
    from .model import ModelConfig

PRESET_NAMES = ("cpu", "tiny", "base")  # syntrain.model.PRESETS (not imported here: that imports torch)
MAX_BEAM = 256  # the largest beam (eval_beam, test_beam, --beam); a beam is also at most the target vocabulary
SECTIONS = ("data", "model", "train", "synprep")  # [synprep]: the data's signature in a run's config.toml (read-only)
DATA_KEYS = {"train": "data", "valid": "valid", "test": "test"}  # [data] key -> TrainConfig field
NOT_IN_TRAIN = ("data", "valid", "test", "preset", "model", "resume")  # [data], [model] preset, or a flag only
CONFIG_FILE, LOG_FILE = "config.toml", "train.log"  # a run folder's resolved configuration and its log
SIGNATURE_KEYS = {  # what makes shards incompatible
    "parsers": "parsers", "bpe_codes_sha256": "BPE codes", "bpe_codes_sha256_src": "source BPE codes",
    "bpe_codes_sha256_tgt": "target BPE codes", "normalize": "normalization"}


class ConfigError(ValueError):
    """A configuration value that is not allowed; the message names the file or flag and the field."""


@dataclass
class TrainConfig:
    """Everything a run needs besides the model sizes (`model`: the [model] table over the preset)."""

    data: str = option("", help="training split folder (synprep convert output, e.g. out/x/train)")
    valid: str = option("", help="validation split folder ('': no validation)")
    test: str = option("", help="test split, scored with best.pt (beam search) at the end ('': none)")
    out: str = option("", help="run folder ('': runs/<recipe or data folder name>-<YYYYmmdd-HHMMSS>); an earlier "
                      "run there is refused unless resume or overwrite")
    overwrite: bool = option(False, help="delete an earlier run's files in the run folder first")
    name: str = option("", help="names the default run folder ('': the recipe's file name, else the data folder's)")
    preset: str = option("tiny", choices=PRESET_NAMES, help="model size preset: cpu (d_model 64, 4 heads, 2+2 "
                         "layers, d_ff 256), tiny (256, 4, 3+3, 1024) or base (512, 8, 6+6, 2048)")
    model: dict[str, Any] = option(default_factory=dict, help="model options over the preset (the [model] table)")
    max_tokens: int = option(4096, ge=1, help="tokens per batch and process: sentences x longest side (padding "
                             "included)")
    max_len: int = option(256, ge=0, help="training pairs with a longer side (sub-words) are skipped (0: none)")
    max_steps: int = option(20000, ge=1, help="optimizer steps of the run (its last step, across resumes)")
    max_minutes: float = option(0.0, ge=0, help="stop after this much training time, counted over every session of "
                                "the run (resumes included; 0: no limit)")
    lr: float = option(7e-4, gt=0, help="peak learning rate, reached at the end of warm-up")
    warmup: int = option(4000, ge=1, help="warm-up steps: lr rises linearly to its peak, then decays as "
                         "1/sqrt(step)")
    adam_betas: tuple[float, float] = option((0.9, 0.98), ge=0, lt=1, help="Adam's beta1 and beta2")
    label_smoothing: float = option(0.1, ge=0, lt=1, help="label smoothing of the cross-entropy")
    clip_norm: float = option(0.0, ge=0, help="clip the gradient norm to this (0: no clipping)")
    accum_steps: int = option(1, ge=1, help="batches per optimizer step (gradient accumulation): an update is "
                              "accum_steps x max_tokens x processes")
    eval_interval: int = option(1000, ge=1, help="steps between validations (loss + BLEU) and checkpoints")
    eval_sentences: int = option(0, ge=0, help="validation sentences decoded for BLEU (0: all)")
    eval_beam: int = option(1, ge=1, le=MAX_BEAM, help="beam of the validation decoding (1: greedy)")
    test_beam: int = option(4, ge=1, le=MAX_BEAM, help="beam of the final test decoding")
    length_penalty: float = option(0.6, ge=0, help="length penalty (alpha) of beam search")
    bleu_tokenize: str = option("auto", choices=BLEU_TOKENIZERS, help="sacrebleu tokenizer of validation and test "
                                "BLEU; auto: from the data's target language (ja-mecab for ja, zh for zh, else 13a)")
    log_interval: int = option(100, ge=1, help="steps between progress lines (the first and the last step always)")
    seed: int = option(1, ge=0, help="random seed (initialization, batch order, dropout)")
    threads: int = option(0, ge=0, help="torch CPU threads (0: torch's default)")
    device: str = option("auto", choices=("auto", "cuda", "cpu"), help="auto: CUDA when available, else CPU")
    attention: str = option("auto", choices=("auto", "math", "flex"), help="kernel of the Pascal heads: auto (= "
                            "math), math, flex (FlexAttention: CUDA training, compiled per shape)")
    precision: str = option("auto", choices=("auto", "fp32", "bf16", "fp16"), help="auto: bf16 autocast on CUDA "
                            "with bf16 support, fp16 (autocast with loss scaling) on other CUDA GPUs, else fp32")
    resume: bool = option(False, help="continue the run in the run folder from its last.pt (or newest complete "
                          "checkpoint); the data, model and optimization settings must be the run's")
    bundle: bool = option(False, help="also copy the source parser model into OUT/source/ (with the BPE codes "
                          "always there): the run folder then translates raw text on any machine")
    keep_last: int = option(0, ge=0, help="also keep the N most recent OUT/checkpoint_<step>.pt (0: only last.pt "
                            "and best.pt)")
    patience: int = option(0, ge=0, help="stop after this many validations without improvement (0: never)")
    best_metric: str = option("bleu", choices=("bleu", "loss"), help="validation metric for best.pt and patience")
    tensorboard: bool = option(True, help="also log every metric to OUT/tensorboard where the tensorboard package "
                               "is installed (--no-tensorboard: not)")
    wandb_project: str = option("", help="also log every metric and the configuration to this Weights & Biases "
                                "project ('': none; needs wandb: pip install 'synprep[wandb]'; WANDB_MODE=offline "
                                "logs without network)")
    verify_shards: bool = option(True, help="compare every shard's sha256 with its manifest before training")
    shape_ladder: str = option("auto", choices=("auto", "on", "off"), help="pad batch lengths to the shape ladder "
                               "(multiples of 8 up to 64, then of 64): auto = on CUDA and with compile, off for the "
                               "eager CPU")
    compile: bool = option(False, help="compile the model with torch.compile for training (static shapes, one "
                           "graph per batch shape; CUDA graphs on CUDA with the shape ladder)")

    def __post_init__(self) -> None:  # built in Python too, every value is checked against its declaration
        for spec in fields(self):
            if spec.name != "model":
                setattr(self, spec.name, check_value("train", spec.name, getattr(self, spec.name),
                                                     f"[train] {spec.name}"))

    @classmethod
    def from_dict(cls, values: dict, what: str = "training") -> TrainConfig:
        """Build from a dict, checked against the declarations (unknown keys are errors too)."""
        return config_from_dict(cls, values, what)


# ------------------------------------------------------------------------------------------ one value


def _model_config() -> type:
    from .model import ModelConfig  # imports torch: only when a model value is checked

    return ModelConfig


def _model_parts() -> list[type]:
    """The dataclasses ModelConfig is composed of: the sizes, then each registered switch's slice (no switch may
    declare a [train] name: `syntrain run` flags and --set are flat)."""
    from .model import config_parts

    _reserve_train_names()
    return list(config_parts().values())


@functools.cache
def _reserve_train_names() -> None:
    """The [train] names reserved against the switches' options, once per process."""
    from .switches import reserve

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


def _unknown(key: str, known: list[str], label: str, elsewhere: dict[str, list[str]] | None = None) -> ConfigError:
    """'LABEL unknown key KEY (did you mean ...?)', or '(a [train] key)' when it belongs to another section."""
    other = [section for section, keys in (elsewhere or {}).items() if key in keys]
    hint = f" (a [{other[0]}] key)" if other else did_you_mean(key, known) or f" (known: {', '.join(known)})"
    return ConfigError(f"{label} unknown key {key}{hint}")


def inverse_sqrt(warmup: int):  # noqa: ANN201 (returns the LambdaLR multiplier function)
    """Linear warm-up to 1 over `warmup` steps, then decay as sqrt(warmup / step)."""
    return lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def train_keys() -> list[str]:
    """The keys of a recipe's [train] table."""
    return [f.name for f in fields(TrainConfig) if f.name not in NOT_IN_TRAIN]


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
    from .switches import current_names

    name = next(iter(current_names({name: None}, label.rstrip(". :"))))  # an old spelling: checked as its name now
    if name in trainer_filled():
        raise ConfigError(f"{label}{name} is set by the trainer from the training data: remove it")
    if declaration("model", name) is None:
        raise _unknown(name, ["preset", *model_keys()], label.rstrip(". ") + ("" if label.endswith("] ") else ":"),
                       {"train": train_keys()})
    return check_value("model", name, value, f"{label}{name}")


def stored_model_config(ckpt: dict, path: str) -> ModelConfig:
    """The ModelConfig of a checkpoint, checked by the declarations; a bad value is a ValueError naming the file."""
    from .switches import registered

    model_config, stored = _model_config(), dict(ckpt["model_config"])
    for switch in registered():  # options added since: the value the older code had (not the new default)
        for name, value in switch.stored_defaults.items():
            stored.setdefault(name, value)
    try:
        return model_config.from_dict(stored)
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


# ------------------------------------------------------------------------------------------ recipes


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
            raise _unknown(key, list(DATA_KEYS), f"{path}: [data]")
        values[DATA_KEYS[key]] = _resolve(check_value("train", DATA_KEYS[key], value, f"{path}: [data] {key}"), here)
    known = train_keys()
    for key, value in table.get("train", {}).items():
        if key not in known:
            raise _unknown(key, known, f"{path}: [train]", {"model": ["preset", *model_keys()],
                                                              "data": ["data", "valid", "test"]})
        values[key] = check_value("train", key, value, f"{path}: [train] {key}")
    if values.get("out"):
        values["out"] = _resolve(values["out"], here)
    model = {key: check_model_value(key, value, f"{path}: [model] ") for key, value in table.get("model", {}).items()}
    if "preset" in model:
        values["preset"] = model.pop("preset")
    values["model"] = model
    return values


# ------------------------------------------------------------------------------------------ flags


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
        raise _unknown(name, train_keys(), "--set train:", {"model": model_keys()})
    return section, name, check_value("train", name, parse_value(text.strip()), f"{label}{name}")


# ------------------------------------------------------------------------------------------ a run


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

    from .model import PRESETS, ModelConfig, Transformer

    try:
        mcfg = ModelConfig.from_dict({**PRESETS[cfg.preset], **cfg.model, "vocab_size": 8})  # runs every check
        idle = mcfg.idle_options(cfg.model)
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

    from .runfolder.files import existing_run_files

    if cfg.resume and cfg.overwrite:
        raise ConfigError("--resume and --overwrite exclude each other")
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
    from .trackers import tensorboard_installed, wandb_installed

    if cfg.wandb_project and not wandb_installed():
        raise ConfigError("--wandb-project needs the wandb package (pip install 'synprep[wandb]')")
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
    if recipe and not values.get("name") and os.path.basename(recipe) != CONFIG_FILE:
        values["name"] = os.path.splitext(os.path.basename(recipe))[0]
    model = dict(values["model"])
    for item in sets:
        section, name, value = parse_set(item)
        if section == "model" and name == "preset":
            values["preset"] = value
        elif section == "model":
            model[name] = value
        else:
            values[name] = value
    values.update(flags)
    model.update({key: value for key, value in model_flags.items() if value is not None})
    values["model"] = model
    notes = choose_splits(values, from_recipe, flags)
    if values.get("resume") and not values.get("out"):
        raise ConfigError("--resume needs the run folder: --out RUN (or [train] out in the recipe)")
    model_label = f"{recipe}: [model]" if recipe else "[model]"
    return TrainConfig.from_dict(values), notes, model_label


# ------------------------------------------------------------------------------------------ documentation


def default_words(section: str, name: str) -> str:
    """A field's default as the docs and --help show it ('4000', '"auto"', 'the preset's: tiny 256, base 512')."""
    if section == "model":
        from .model import PRESETS

        by_preset = [f"{preset} {values[name]}" for preset, values in PRESETS.items() if name in values]
        if by_preset:
            return "the preset's: " + ", ".join(by_preset)
    cls, spec, _ = declaration(section, name)  # type: ignore[misc]
    default = spec.default if spec.default is not MISSING else spec.default_factory()  # type: ignore[misc]
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, str):
        return f'"{default}"'
    if isinstance(default, tuple):
        return str(list(default))
    return str(default)


def fields_markdown() -> str:
    """The tables of docs/recipe-fields.md: every recipe field with its type and allowed values, default and help,
    from the declarations (TrainConfig, ModelConfig)."""
    def row(key: str, section: str, name: str) -> str:
        cls, spec, _ = declaration(section, name)  # type: ignore[misc]
        allowed = describe_option(cls, name).replace("|", "\\|")
        return f"| `{key}` | {allowed} | {default_words(section, name)} | {spec.metadata.get('help', '')} |"

    header = ["| field | allowed values | default | meaning |", "|---|---|---|---|"]
    lines = ["### [data]", "", "Paths relative to the recipe's folder.", "", *header]
    lines += [row(key, "train", name) for key, name in DATA_KEYS.items()]
    filled = [f"`{name}`" + (" (a source vocabulary of its own: data with BPE per side)" if name == "src_vocab_size"
                             else "") for name in trainer_filled()]
    lines += ["", "### [model]", "", f"Sizes default to the preset's; {', '.join(filled[:-1])} and {filled[-1]} are "
              "set by the trainer from the data.", "", *header, row("preset", "train", "preset")]
    lines += [row(name, "model", name) for name in model_keys()]
    lines += ["", "### [train]", "", "A relative `out` resolves against the recipe's folder.", "", *header]
    lines += [row(name, "train", name) for name in train_keys()]
    return "\n".join(lines) + "\n"


def switches_markdown() -> str:
    """The switch table of docs/switches.md, from the registry in its order: each switch's name and docstring (its
    first paragraph), its `[model]` keys with their defaults, the batch columns it reads in training (from its
    `example`: name, layout, shard column and feature group) and those decoding reads."""
    from .model import ModelConfig
    from .switches import declared, option_names, registered

    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = ["| switch | what it does | `[model]` keys (defaults) | batch columns it reads in training | "
             "decoding reads |", "|---|---|---|---|---|"]
    for switch in registered():
        summary = (switch.__doc__ or "").strip().split("\n\n")[0]
        keys = ", ".join(f"`{name} = {default_words('model', name)}`" for name in option_names(switch)
                         if not declaration("model", name)[1].metadata.get("filled"))  # type: ignore[index]
        cfg = ModelConfig(**switch.example)
        instance = switch(cfg)
        reads = [declared(name) for name in {**instance.reads(True)}]
        columns = "; ".join(f"`{column.name}` ({column.layout()}" + (
            f"; shard column `{column.column}`, {column.side} `{column.group}`" if column.column else "") + (
            f"; made from {', '.join(f'`{name}`' for name in column.made_from)} when absent" if column.made_from
            else "") + ")" for column in reads)
        columns += "".join(f"{'; ' if columns else ''}decoder target `{produced.name}` (shard column "
                           f"`{produced.column}`, tgt `{produced.group}`)" for produced in switch.decoder_targets)
        decoding = [f"`{name}`" for name in instance.reads(False) if not declared(name).supervision]
        lines.append(f"| {switch.name} | {cell(summary)} | {keys or 'none'} | {columns or 'none'} | "
                     f"{', '.join(decoding) or 'nothing'} |")
    return "\n".join(lines) + "\n"


def switch_sections_markdown() -> str:
    """The switches' sections of docs/switches.md, from the registry in its order: per switch a heading (its name)
    and its class docstring, markdown (the first paragraph is also its row of the switch table)."""
    from .switches import registered

    return "\n".join(f"## {switch.name}\n\n{inspect.cleandoc(switch.__doc__ or '')}\n" for switch in registered())


BEGIN, END = "<!-- fields: generated by `python -m syntrain.config` -->", "<!-- end of the generated fields -->"
SWITCHES_BEGIN = "<!-- switches: generated by `python -m syntrain.config` from the registry -->"
SWITCHES_END = "<!-- end of the generated switches -->"
SECTIONS_BEGIN = "<!-- switch sections: generated by `python -m syntrain.config` from the switches' docstrings -->"
SECTIONS_END = "<!-- end of the generated switch sections -->"
PAGES = {"docs/recipe-fields.md": ((BEGIN, END, fields_markdown),),
         "docs/switches.md": ((SWITCHES_BEGIN, SWITCHES_END, switches_markdown),
                              (SECTIONS_BEGIN, SECTIONS_END, switch_sections_markdown))}


def docs_page(text: str, page: str = "docs/recipe-fields.md") -> str:
    """`text` (the generated page `page`: docs/recipe-fields.md, docs/switches.md) with each generated part replaced
    by the current one (`fields_markdown()`; `switches_markdown()` and `switch_sections_markdown()`)."""
    for begin, end, make in PAGES[page]:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = f"{head}{begin}\n\n{make()}\n{end}{tail}"
    return text


def main(argv: list[str] | None = None) -> None:
    """`python -m syntrain.config [PAGE ...]`: rewrite the generated tables of each PAGE (default: every generated
    page, docs/recipe-fields.md and docs/switches.md; relative to the current folder)."""
    for page in (argv if argv is not None else sys.argv[1:]) or list(PAGES):
        key = next((known for known in PAGES if os.path.normpath(page).endswith(os.path.normpath(known))), None)
        if key is None:
            raise SystemExit(f"{page}: not a generated page (one of {', '.join(PAGES)})")
        with open(page, encoding="utf-8") as handle:
            text = handle.read()
        with open(page, "w", encoding="utf-8") as handle:
            handle.write(docs_page(text, key))


if __name__ == "__main__":
    main()
