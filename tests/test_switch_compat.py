"""Recipes and checkpoints of the code before the switches became modules still give the same numbers.

The fixtures under tests/data/switches/ were written by tests/data/make_switch_fixtures.py on the older code
(commit and torch version in their "made_by"): the first steps' losses of every recipe of pipelines/train/, and
two small checkpoints with the losses and greedy outputs they gave. Here the same functions run on this code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from .conftest import REPO
from .data import make_switch_fixtures as fixtures

RECIPES = json.loads((fixtures.HERE / "recipe_losses.json").read_text())
CHECKPOINTS = json.loads((fixtures.HERE / "checkpoints.json").read_text())


def test_every_recipe_is_pinned():
    recipes = sorted(path.name for path in (REPO / "pipelines" / "train").glob("*.toml"))
    assert recipes == sorted(RECIPES["losses"]), "regenerate: python tests/data/make_switch_fixtures.py"


@pytest.mark.parametrize("recipe", sorted(RECIPES["losses"]))
def test_first_losses_of_every_recipe_are_unchanged(recipe, tmp_path):
    """Same seed, same shards, the recipe's [model] options at tiny sizes: the logged losses (translation and
    each auxiliary loss) of the first steps equal the older code's, and so do the full-precision losses of the
    model they trained."""
    result = fixtures.recipe_run(REPO / "pipelines" / "train" / recipe, str(tmp_path / "run"))
    expected = RECIPES["losses"][recipe]
    assert result["logged"] == expected["logged"]
    _same_losses(result["final"], expected["final"])


def _same_losses(result: dict, expected: dict) -> None:
    assert result["tokens"] == expected["tokens"]
    assert result["loss"] == pytest.approx(expected["loss"], rel=1e-6)
    assert result["aux"].keys() == expected["aux"].keys()
    for key, value in expected["aux"].items():
        assert result["aux"][key] == pytest.approx(value, rel=1e-5, abs=1e-7), key


@pytest.mark.parametrize("name", sorted(fixtures.CHECKPOINTS))
def test_older_checkpoint_loads_with_the_same_losses_and_outputs(name):
    """A checkpoint written by the older code loads unchanged (parameter names, config keys) and gives the
    same losses and the same greedy outputs."""
    expected = CHECKPOINTS[name]
    result = fixtures.checkpoint_results(str(fixtures.HERE / f"{name}.pt"))
    assert result["outputs"] == expected["outputs"] and result["pieces"] == expected["pieces"]
    _same_losses(result, expected)


def test_older_checkpoint_config_is_the_stored_dict():
    """The stored model_config dict reads back to the same values (flat names, every key kept; a switch
    registered since then adds its own keys with their defaults)."""
    from syntrain.model import ModelConfig

    for name in fixtures.CHECKPOINTS:
        stored = torch.load(Path(fixtures.HERE) / f"{name}.pt", map_location="cpu", weights_only=False)["model_config"]
        again = ModelConfig.from_dict(stored).to_dict()
        assert {key: again[key] for key in stored} == stored
