"""The model's options (`ModelConfig`): the generic model's parts (syntrain.config.core) and one typed section per
registered switch, read and written under flat option names (a recipe's `[model]` keys, a checkpoint's
`model_config`). Only the options: their checks across fields are `syntrain.config.checks`, the values derived
from the training data `syntrain.config.fill`, and what the switches that are on ask of the generic code
`syntrain.switches.active.ActiveSwitches`."""

from __future__ import annotations

import functools
from dataclasses import asdict, fields
from typing import Any, TypeVar, overload

from synprep.tables import config_from_dict

from ..switches import Switch, current_names, registered, reserve
from .checks import check_model_config
from .core import CORE_PARTS, Architecture, DecoderOutput, DropoutRates, ModelSizes, WeightSharing


@functools.cache
def _reserve_core_names() -> None:
    """A switch option must not take a core name: [model] keys are one flat namespace (syntrain.config.train
    reserves the [train] names the same way)."""
    reserve("the model sizes, dropout and sharing ([model])",
            [spec.name for cls in CORE_PARTS.values() for spec in fields(cls)] + ["preset", "pretrained"])


def config_parts() -> dict[str, type]:
    """Part name -> its config dataclass: the generic model's parts, then each registered switch's section."""
    _reserve_core_names()
    return {**CORE_PARTS, **{switch.name: switch.Config for switch in registered()}}


C = TypeVar("C")


class ModelConfig:
    """The model options: typed parts read and written under flat option names.

    The parts: `sizes` (ModelSizes), `dropouts` (DropoutRates), `sharing` (WeightSharing), `architecture`
    (Architecture) and `output` (DecoderOutput: the decoder target), what the generic model reads, and one section
    per registered switch (its `Config` dataclass: `cfg.section(Pascal)`, or `self.options` inside the switch);
    recipes' `[model]` keys and checkpoints' `model_config` name their fields flat.

    Built once per run: from the recipe's values (or a checkpoint's), checked (`from_dict`); then, for a new run,
    `syntrain.config.fill.fill_from_data` sets the data-derived values (vocab_size, the switches' `filled_values`) once,
    before the model is built; nothing is set after that."""

    sizes: ModelSizes
    dropouts: DropoutRates
    sharing: WeightSharing
    architecture: Architecture
    output: DecoderOutput

    def __init__(self, **values: Any) -> None:
        values = current_names(values)  # old spellings (`Switch.renamed`) still read
        parts, owner = config_parts(), {}
        for part, cls in parts.items():
            owner.update({spec.name: part for spec in fields(cls)})
        unknown = set(values) - set(owner)
        if unknown:
            raise ValueError(f"unknown model option(s): {', '.join(sorted(unknown))}")
        built = {part: config_from_dict(cls, {k: v for k, v in values.items() if owner[k] == part}, "model")
                 for part, cls in parts.items()}
        for part in CORE_PARTS:
            object.__setattr__(self, part, built.pop(part))
        object.__setattr__(self, "_sections", built)

    @classmethod
    def from_dict(cls, values: dict) -> ModelConfig:
        """Build from a dict: unknown keys, values of the wrong type or out of range, and options that do not
        fit together (every check that needs no data: `check_model_config`) are a ValueError naming the option."""
        cfg = cls(**values)
        check_model_config(cfg)
        return cfg

    def replace(self, **changes: Any) -> ModelConfig:
        """A new config with some values changed (checked like from_dict)."""
        return ModelConfig.from_dict({**self.to_dict(), **changes})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ModelConfig is built once (from_dict); {name} cannot be set afterwards")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"

    @overload
    def section(self, switch: type[Switch[C]]) -> C: ...

    @overload
    def section(self, switch: str) -> Any: ...

    def section(self, switch: type[Switch] | str) -> Any:
        """The typed options of one registered switch (its `Config` instance), by class or name."""
        name = switch if isinstance(switch, str) else switch.name
        try:
            return self._sections[name]
        except KeyError:
            raise KeyError(f"no registered switch {name!r}") from None

    def parts(self) -> dict[str, Any]:
        """Part name (the generic model's parts, then each switch's name) -> its dataclass instance."""
        return {**{part: getattr(self, part) for part in CORE_PARTS}, **self._sections}

    def to_dict(self) -> dict:
        """Plain values under their flat names (stored in checkpoints)."""
        return {name: value for part in self.parts().values() for name, value in asdict(part).items()}
