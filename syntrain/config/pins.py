"""What is pinned of each registered switch, in a file of its own (`PINS`/<name>.json), so that two switches
written apart add two files and edit no shared one: the layer options it declares (`*_layer`, `*_layers`,
`*_heads`: the one layer checker tries each, tests/test_layer_convention.py) and the parameter names and shapes of
its `example` model at tiny sizes (checkpoints keep loading: tests/test_state_dict_keys.py).

`python -m syntrain.config` writes the file of a registered switch that has none and never rewrites one: a pin
changes on purpose only (delete the file, then regenerate)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import MISSING, fields
from typing import Any

PINS = "tests/data/switches"  # relative to a checkout: the folder of the pin files, one per switch
TINY_SIZES = {"d_model": 32, "d_ff": 64, "vocab_size": 10}  # the example models' sizes (preset "tiny")
LAYER_OPTION = re.compile(r"_(layer|layers|heads)$")  # the options that name layers or heads per layer


def layer_options(switch: type) -> list[str]:
    """The options of `switch` that name layers or heads per layer (docs/switches-api.md, "Layers and heads")."""
    from ..switches import option_names

    return [name for name in option_names(switch) if LAYER_OPTION.search(name)]


def filled_placeholders() -> dict[str, Any]:
    """A value for every data-derived list option of the registered switches (two items: a label vocabulary of
    two labels), so that an example model is built without data."""
    from ..switches import registered

    return {spec.name: ["label_a", "label_b"] for switch in registered() for spec in fields(switch.Config)
            if spec.metadata.get("filled") and spec.default is MISSING and isinstance(spec.default_factory(), list)}


def example_parameters(switch: type, options: dict[str, Any] | None = None) -> list[str]:
    """The state_dict of `switch`'s example model (its `example` and `options` at TINY_SIZES, preset "tiny"), in
    order: "name shape" (shape as 32x64)."""
    from ..model import build_model

    model = build_model("tiny", **{**switch.example, **TINY_SIZES, **filled_placeholders(), **(options or {})})
    return [f"{name} {'x'.join(map(str, value.shape))}" for name, value in model.state_dict().items()]


def pin(switch: type) -> dict[str, Any]:
    """What is pinned of `switch`: its name, layer options and its example model's parameters."""
    return {"switch": switch.name, "layer_options": layer_options(switch), "parameters": example_parameters(switch)}


def pin_path(name: str, folder: str = PINS) -> str:
    return os.path.join(folder, f"{name}.json")


def pinned(name: str, folder: str = PINS) -> dict[str, Any] | None:
    """The pin file of switch `name` (None: it has none yet)."""
    path = pin_path(name, folder)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write_missing_pins(folder: str = PINS) -> list[str]:
    """Write the pin file of each registered switch that has none in `folder`; the names written."""
    from ..switches import registered

    written = []
    for switch in registered():
        if pinned(switch.name, folder) is None:
            with open(pin_path(switch.name, folder), "w", encoding="utf-8") as handle:
                handle.write(json.dumps(pin(switch), indent=0) + "\n")
            written.append(switch.name)
    return written
