"""The parameter names and shapes of the model of every recipe of pipelines/train/ and every pinned recipe variant
are the pinned ones (tests/data/state_dict_keys.json), and those of every registered switch's `example` model are
the ones pinned in the switch's own file (tests/data/switches/NAME.json, `syntrain.config.pins`), so that
checkpoints keep loading when modules are reorganised (the attention module's collaborators, a switch's
mechanisms). Regenerate, on purpose only: `python -m tests.test_state_dict_keys` (the recipes); a switch's file is
written by `python -m syntrain.config` when it has none."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from syntrain.config.pins import example_parameters, pinned
from syntrain.model import build_model
from syntrain.switches import registered

from .conftest import REPO
from .data import make_switch_fixtures as fixtures

PINNED = REPO / "tests" / "data" / "state_dict_keys.json"
PINS = REPO / "tests" / "data" / "switches"  # a file per switch (syntrain.config.pins)
FILLED = {"vocab_size": 10, "source_labels": ["root", "nsubj"], "arc_labels": ["nsubj", "obj"]}


def models() -> dict[str, tuple[str, dict]]:
    """Name -> (preset, [model] options at TINY sizes) of every recipe and recipe variant."""
    found = {}
    for path in sorted((REPO / "pipelines" / "train").glob("*.toml")):
        values = fixtures.recipe_model(path)
        found[path.name] = (values["preset"], values["model"])
    for variant, (recipe, changed) in fixtures.VARIANTS.items():
        values = fixtures.recipe_model(REPO / "pipelines" / "train" / recipe)
        found[variant] = (values["preset"], {**values["model"], **changed})
    return found


def parameters(preset: str, options: dict) -> list[str]:
    """The state_dict of the model of `options`, in order: "name shape" (shape as 32x64)."""
    model = build_model(preset, **{**options, **FILLED})
    return [f"{name} {'x'.join(map(str, value.shape))}" for name, value in model.state_dict().items()]


def pinned_recipe(name: str) -> list[str] | None:
    """The pinned state_dict of model `name` (None: not pinned)."""
    stored = json.loads(PINNED.read_text())
    return None if name not in stored["models"] else stored["parameter_sets"][stored["models"][name]]


MODELS = models()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_state_dict_names_and_shapes_are_the_pinned_ones(name):
    expected = pinned_recipe(name)
    assert expected is not None, "a new recipe: regenerate with python -m tests.test_state_dict_keys"
    assert parameters(*MODELS[name]) == expected


@pytest.mark.parametrize("switch", registered(), ids=lambda switch: switch.name)
def test_each_switch_example_has_its_pinned_parameters(switch):
    pin = pinned(switch.name, str(PINS))
    assert pin is not None, f"{switch.name}: a new switch: run python -m syntrain.config"
    assert example_parameters(switch) == pin["parameters"]


def test_a_changed_parameter_name_fails():
    """The check can fail: a model of another shape is not the pinned one."""
    parse_heads = next(switch for switch in registered() if switch.name == "parse_head")
    assert example_parameters(parse_heads, {"dbsa_biaffine": "released"}) != pinned("parse_head", str(PINS))[
        "parameters"]


if __name__ == "__main__":
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    sets: list[list[str]] = []
    index = {}
    for name, spec in MODELS.items():
        made = parameters(*spec)
        if made not in sets:
            sets.append(made)
        index[name] = sets.index(made)
    PINNED.write_text(json.dumps({"made_by": commit.stdout.strip(), "models": index, "parameter_sets": sets},
                                 indent=0) + "\n")
    print(f"{PINNED}: {len(MODELS)} models", file=sys.stderr)
