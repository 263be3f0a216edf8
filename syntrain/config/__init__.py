"""syntrain's configuration, one home, a module per concept. Every option is declared once, with its type,
allowed values, default and help (`option`, whose implementation `synprep.tables` also declares synprep's
pipeline files with: one checker for both command lines), read from a recipe TOML ([data], [model], [train]),
the `syntrain run` flags and `--set SECTION.FIELD=VALUE`, and checkpoints alike, and checked before anything is
loaded or written:

- `core`: the generic model's options: `ModelSizes`, `DropoutRates`, `WeightSharing`; the size `PRESETS`;
- `model`: `ModelConfig`, the model's options: those parts and one typed section per switch, under flat names;
- `checks`: the checks of a model's options across fields (`check_model_config`), the options that do nothing;
- `fill`: the model options derived from the training data, set once (`fill_from_data`);
- `train`: `TrainConfig`, the training options;
- `values`: one value checked against its declaration (`ConfigError`, `check_field`, `parse_value`);
- `sections`: a recipe's sections and their keys, each key's declaration (`declaration`, `check_value`);
- `recipe`: recipes, `--set`, the configurations a checkpoint stores;
- `resolve`: a run's configuration and the checks before anything is written (`resolve_run`, `check_run`);
- `docs`: the generated parts of the docs (the tables of docs/recipe-fields.md and docs/switches.md, the switch
  lists of README.md and docs/switches-api.md: `python -m syntrain.config`);
- `pins`: what is pinned of each switch, a file per switch (its layer options and its example's parameters).

What the switches that are on ask of the generic code is not configuration: `syntrain.switches.active`.
Importing this package imports no torch (`model`, `checks` and `fill` do)."""

from synprep.tables import option

from .core import PRESETS, DropoutRates, ModelSizes, WeightSharing
from .train import TrainConfig
from .values import ConfigError

__all__ = ["PRESETS", "ConfigError", "DropoutRates", "ModelSizes", "TrainConfig", "WeightSharing", "option"]
