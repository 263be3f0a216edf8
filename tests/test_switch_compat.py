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
    _same_logged(result["logged"], expected["logged"])
    _same_losses(result["final"], expected["final"])


@pytest.mark.parametrize("variant", sorted(fixtures.VARIANTS))
def test_first_losses_of_recipe_variants_are_unchanged(variant, tmp_path):
    """A recipe with a choice changed (e.g. DBSA's bi-affine scores as released, `dbsa_biaffine = "released"`)
    gives its pinned losses, and they are not the recipe's own (the choice is in effect)."""
    recipe, changed = fixtures.VARIANTS[variant]
    result = fixtures.recipe_run(REPO / "pipelines" / "train" / recipe, str(tmp_path / "run"), changed)
    expected = RECIPES["variants"][variant]
    _same_logged(result["logged"], expected["logged"])
    _same_losses(result["final"], expected["final"])
    with pytest.raises(AssertionError):
        _same_losses(result["final"], RECIPES["losses"][recipe]["final"])


# Bounds that hold on any x86-64 CPU yet catch a real change. The pinned numbers are float32 results of three
# optimizer steps; another CPU (AVX2 vs AVX-512 kernels) sums the same products in another order, which moved the
# final loss by rel 2e-6 on one 2-core machine (5.2437673 vs 5.2437568). LOSS_REL is 10x that (~170 float32 ulps);
# the smallest real change tried (learning rate x1.05, one step) moves it by rel 1e-3 (the planted test below).
# Logged losses are rounded to 4 decimals, so one rounding unit of slack (a value near a .00005 boundary).
LOSS_REL = 2e-5
LOGGED_ABS = 1.5e-4


def _same_logged(result: list[dict], expected: list[dict]) -> None:
    assert [r.keys() for r in result] == [e.keys() for e in expected]
    for got, want in zip(result, expected):
        for key, value in want.items():
            assert got[key] == pytest.approx(value, abs=LOGGED_ABS), (want["step"], key)


def _same_losses(result: dict, expected: dict) -> None:
    assert result["tokens"] == expected["tokens"]
    assert result["loss"] == pytest.approx(expected["loss"], rel=LOSS_REL)
    assert result["aux"].keys() == expected["aux"].keys()
    for key, value in expected["aux"].items():
        assert result["aux"][key] == pytest.approx(value, rel=1e-5, abs=1e-7), key


def test_a_planted_change_fails_the_pinned_losses(tmp_path):
    """The bounds are not so loose that a real change passes: the learning rate x1.05 fails both checks."""
    recipe = "multi30k-trans-gcn.toml"
    values = fixtures.recipe_model(REPO / "pipelines" / "train" / recipe)
    out = str(tmp_path / "run")
    logged = fixtures.train_run(values["model"], values["preset"], out, lr=fixtures.TRAIN["lr"] * 1.05)
    expected = RECIPES["losses"][recipe]
    with pytest.raises(AssertionError):
        _same_logged(logged, expected["logged"])
    with pytest.raises(AssertionError):
        _same_losses(fixtures.checkpoint_losses(f"{out}/last.pt")[0], expected["final"])


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
