"""OUT/config.toml: the run's resolved configuration (recipe + flags + defaults) as a recipe that `syntrain run
--resume --out OUT` reads back, with the synprep signature of its training data."""

from __future__ import annotations

import os
import shlex
import sys
import time
from typing import Any

import tomli_w

from .. import __version__
from ..config.sections import trainer_filled
from ..config.train import DATA_KEYS, TrainConfig, train_keys

SESSION_ONLY = ("overwrite",)  # [train] keys that describe one command, not the run


def toml_plain(value: Any) -> Any:
    """A value TOML can hold: None dropped from tables and lists, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): toml_plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [toml_plain(v) for v in value if v is not None]
    return value


def model_table(cfg: TrainConfig, model_config: dict[str, Any], filled: list[str]) -> dict[str, Any]:
    """config.toml's [model]: the preset and the options, or for a run from a pretrained model its folder and the
    options its config does not fix."""
    if cfg.pretrained:
        from ..config.core import fixed_by_pretrained

        fixed = set(fixed_by_pretrained())
        return {"pretrained": os.path.abspath(cfg.pretrained), **{k: v for k, v in cfg.language_codes().items() if v},
                **{k: v for k, v in model_config.items() if k not in filled and k not in fixed}}
    return {"preset": cfg.preset, **{k: v for k, v in model_config.items() if k not in filled}}


def config_text(cfg: TrainConfig, model_config: dict[str, Any], signature: dict[str, Any]) -> str:
    """config.toml: the resolved configuration as a recipe ([data], [model], [train]) and the training data's
    synprep signature ([synprep], not read back)."""
    filled = trainer_filled()
    tables = {"data": {key: os.path.abspath(getattr(cfg, name)) if getattr(cfg, name) else ""
                       for key, name in DATA_KEYS.items()},
              "model": model_table(cfg, model_config, filled),
              "train": {key: getattr(cfg, key) for key in train_keys() if key not in SESSION_ONLY} |
              {"out": os.path.abspath(cfg.out)},
              "synprep": {"signature": signature}}
    command = shlex.join(["syntrain", *sys.argv[1:]])
    header = (f"# The configuration of this run (recipe + flags + defaults), written by syntrain {__version__} on "
              f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n# command: {command}\n# `syntrain run --resume --out RUN` "
              "continues the run from it; `syntrain run RUN/config.toml --out NEW` repeats it.\n\n")
    return header + tomli_w.dumps(toml_plain(tables))
