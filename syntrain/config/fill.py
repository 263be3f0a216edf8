"""The model options derived from the training data, set once on a new run's `ModelConfig` before the model is
built: vocab_size (and src_vocab_size) from the vocabulary, then each switch's `filled_values` (its label
vocabularies): only fields declared `option(filled=True)`, each checked against its declaration."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from synprep.tables import config_from_dict

from ..switches import registered
from .checks import check_model_config
from .model import ModelConfig


def fill_from_data(cfg: ModelConfig, table: Any, manifest: Any, vocab: Any) -> None:
    """Set what comes from the training split (`table`, its `manifest`) and `vocab` on `cfg`, once: a config whose
    vocab_size is set (filled already, or a checkpoint's) is refused."""
    if cfg.sizes.vocab_size > 0:
        raise ValueError("fill_from_data: the data-derived values are set once (vocab_size is set already)")
    set_data_derived(cfg.sizes, {"vocab_size": len(vocab), **({"src_vocab_size": len(vocab.source)}
                                                               if vocab.source else {})})
    for switch in registered():
        if switch.active(cfg):
            set_data_derived(cfg.section(switch), switch.filled_values(cfg, table, manifest, vocab))
    check_model_config(cfg)


def set_data_derived(part: Any, values: dict[str, Any]) -> None:
    """Data-derived values on one part of a model config (a dataclass), each checked against its declaration; a
    field not declared `option(filled=True)` is refused."""
    declared = {spec.name: spec for spec in fields(part)}
    for name, value in values.items():
        if name not in declared or not declared[name].metadata.get("filled"):
            raise ValueError(f"{name} is not a data-derived option of {type(part).__name__}")
        checked = config_from_dict(type(part), {**asdict(part), name: value}, "model")
        setattr(part, name, getattr(checked, name))
